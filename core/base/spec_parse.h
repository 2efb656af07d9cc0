// Parsing of the small "name:a:b" specs used for presets and strategies.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace remat {

std::vector<std::string> split(std::string_view s, char sep);
// A whole-string integer in [lo, hi]; throws InputError "<what> must be ...".
int64_t parse_int(std::string_view s, const std::string& what, int64_t lo, int64_t hi);
// Byte counts accept suffixes: 512, 64K, 1.5M, 2G, 1GiB (powers of 1024).
uint64_t parse_bytes(std::string_view s, const std::string& what);
// A positive rate (FLOP/s, bytes/s): 25e9, 25G, 1.5T (powers of 1000, as rates are quoted).
double parse_rate(std::string_view s, const std::string& what);

}  // namespace remat
