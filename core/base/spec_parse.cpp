#include "core/base/spec_parse.h"

#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "core/base/errors.h"

namespace remat {

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = s.find(sep, start);
    parts.emplace_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

int64_t parse_int(std::string_view s, const std::string& what, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size())
    throw InputError(what + " must be an integer, got '" + std::string(s) + "'");
  if (v < lo || v > hi)
    throw InputError(what + " must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                     ", got " + std::to_string(v));
  return v;
}

uint64_t parse_bytes(std::string_view s, const std::string& what) {
  std::size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  std::string num(s.substr(0, i));
  std::string unit(s.substr(i));
  for (auto& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();
  if (unit.size() > 1 && unit.back() == 'I') unit.pop_back();
  double scale = 1;
  if (unit == "K") scale = 1024.0;
  else if (unit == "M") scale = 1024.0 * 1024;
  else if (unit == "G") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty() && unit != "B") num.clear();
  char* end = nullptr;
  const double v = num.empty() ? -1 : std::strtod(num.c_str(), &end);
  if (num.empty() || end != num.c_str() + num.size() || !(v >= 0) || !std::isfinite(v * scale) ||
      v * scale >= 9.0e18)
    throw InputError(what + " must be a byte count like 4096, 64K, 1.5M or 2G, got '" + std::string(s) + "'");
  return static_cast<uint64_t>(std::llround(v * scale));
}

double parse_rate(std::string_view s, const std::string& what) {
  std::string num(s);
  double scale = 1;
  if (!num.empty()) {
    // Decimal prefixes, as rates are quoted (25 GB/s is 25e9 bytes a second).
    switch (std::toupper(static_cast<unsigned char>(num.back()))) {
      case 'K': scale = 1e3; break;
      case 'M': scale = 1e6; break;
      case 'G': scale = 1e9; break;
      case 'T': scale = 1e12; break;
      case 'P': scale = 1e15; break;
      default: break;
    }
    if (scale != 1) num.pop_back();
  }
  char* end = nullptr;
  const double v = num.empty() ? 0 : std::strtod(num.c_str(), &end);
  if (num.empty() || end != num.c_str() + num.size() || !(v > 0) || !std::isfinite(v * scale))
    throw InputError(what + " must be a positive number like 25e9, 25G or 1.5T, got '" + std::string(s) + "'");
  return v * scale;
}

}  // namespace remat
