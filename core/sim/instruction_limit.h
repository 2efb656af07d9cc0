// How long a schedule may be before it is refused. recompute-all is quadratic:
// on chain:50000 it has 1.25·10⁹ instructions, and making and simulating it
// used to grow past 12 GB with no warning. Every strategy states its length
// first (Strategy::size); above the limit the run is refused with that length
// and the memory it would take, before anything is allocated.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "core/sim/schedule.h"

namespace remat {

class Strategy;
struct Model;
struct SolverRecord;

// Bytes a simulated strategy holds per instruction: the schedule (4) and its
// timeline (8), plus the compute-only program while it is made (4 per compute
// instruction, under half of all). Measured: tests/bench/commands.sh.
inline constexpr uint64_t kSimulationBytesPerInstruction = 16;

// MemAvailable from /proc/meminfo (what can be allocated without swapping);
// 0 when unknown.
uint64_t available_memory_bytes();

// The default limit: schedules whose simulation takes at most a quarter of
// the available memory at `bytes_per_instruction` (4 GiB assumed when the
// memory is unknown).
uint64_t default_max_instructions(uint64_t bytes_per_instruction = kSimulationBytesPerInstruction);

struct InstructionLimit {
  uint64_t max = default_max_instructions();
  uint64_t bytes_per_instruction = kSimulationBytesPerInstruction;  // for the estimate in the message
  std::string how_to_change;  // appended to refusals: "--max-instructions N changes it"
};

// A schedule refused for its length: an InputError (the user asked for it, and
// can ask for a smaller model, another strategy or a higher limit).
class ScheduleTooLarge : public InputError {
 public:
  ScheduleTooLarge(const ScheduleSize& size, const InstructionLimit& limit);
  const ScheduleSize& size() const { return size_; }

 private:
  ScheduleSize size_;
};

// "1250124998 instructions", "up to ...", "at least ...".
std::string describe(const ScheduleSize& size);

// strategy.size(model), and strategy.schedule(model) when that is within the
// limit; throws ScheduleTooLarge when not, InputError when the strategy does
// not apply to the model. With `records`, what the solvers behind it proved is
// appended there (Strategy::schedule_with_record).
Schedule bounded_schedule(const Strategy& strategy, const Model& model, const InstructionLimit& limit,
                          std::vector<SolverRecord>* records = nullptr);

}  // namespace remat
