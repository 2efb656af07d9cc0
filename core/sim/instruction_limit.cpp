#include "core/sim/instruction_limit.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/strategies/strategy.h"

namespace remat {
namespace {

std::string approx_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= 1024 && u < 5) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

std::string refusal(const ScheduleSize& size, const InstructionLimit& limit) {
  const double bytes = static_cast<double>(size.instructions) * static_cast<double>(limit.bytes_per_instruction);
  std::string s = "too large to simulate (" + describe(size) + ", about " + approx_bytes(bytes) +
                  "; the limit is " + std::to_string(limit.max) + " instructions";
  if (!limit.how_to_change.empty()) s += ": " + limit.how_to_change;
  return s + ")";
}

}  // namespace

uint64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    uint64_t kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  return 0;
}

uint64_t default_max_instructions(uint64_t bytes_per_instruction) {
  uint64_t avail = available_memory_bytes();
  if (avail == 0) avail = uint64_t{4} << 30;
  return avail / 4 / (bytes_per_instruction ? bytes_per_instruction : 1);
}

std::string describe(const ScheduleSize& size) {
  const std::string n = std::to_string(size.instructions) + " instructions";
  switch (size.bound) {
    case ScheduleSize::Bound::Exact: return n;
    case ScheduleSize::Bound::AtMost: return "up to " + n;
    case ScheduleSize::Bound::AtLeast: return "at least " + n;
  }
  return n;
}

ScheduleTooLarge::ScheduleTooLarge(const ScheduleSize& size, const InstructionLimit& limit)
    : InputError(refusal(size, limit)), size_(size) {}

Schedule bounded_schedule(const Strategy& strategy, const Model& model, const InstructionLimit& limit,
                          std::vector<SolverRecord>* records) {
  const ScheduleSize size = strategy.size(model, limit.max);
  if (size.instructions > limit.max) throw ScheduleTooLarge(size, limit);
  return records ? strategy.schedule_with_record(model, *records) : strategy.schedule(model);
}

}  // namespace remat
