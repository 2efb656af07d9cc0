// Shared by the tests that write schedules by hand: short names for the
// instruction kinds and the validator's verdict as text.
#pragma once
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "core/sim/schedule.h"
#include "core/sim/simulator.h"

namespace remat::testing {

constexpr auto F = InstrKind::Fwd;
constexpr auto B = InstrKind::Bwd;
constexpr auto FA = InstrKind::FreeAct;
constexpr auto FG = InstrKind::FreeGrad;
constexpr auto OFF = InstrKind::Offload;
constexpr auto GET = InstrKind::Fetch;
constexpr auto CB = InstrKind::CompressBF16;
constexpr auto CH = InstrKind::CompressF16;
constexpr auto C8 = InstrKind::CompressInt8;
constexpr auto DEC = InstrKind::Decompress;
constexpr auto FC = InstrKind::FreePacked;

// "index: message" of the rejection, or "" when the schedule is accepted.
inline std::string reject(const Model& m, std::vector<Instr> code) {
  try {
    simulate(m, Schedule{"test", std::move(code), ""});
    return "";
  } catch (const ScheduleError& e) {
    return std::to_string(e.index()) + ": " + e.what();
  }
}

}  // namespace remat::testing
