#include "app/cli/commands.h"

namespace remat::cli {

void add_max_instructions_option(CLI::App* cmd, InstructionLimit& limit) {
  limit.how_to_change = "--max-instructions N changes it";
  cmd->add_option("--max-instructions", limit.max,
                  "Refuse a strategy whose schedule is longer than N instructions, before making it (default: what "
                  "fits in a quarter of the available memory at " +
                      std::to_string(limit.bytes_per_instruction) + " bytes per instruction, here " +
                      std::to_string(limit.max) + ")")
      ->check(CLI::PositiveNumber);
}

}  // namespace remat::cli
