// The schedule IR: the whole program of one training step under a strategy.
// Frees are explicit, so the simulator, the executor and the GUI replay the
// same instructions and agree on memory to the byte.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/sim/instr.h"

namespace remat {

struct Model;

struct Schedule {
  std::string strategy;
  std::vector<Instr> code;
  // What a user should know about how it was made (a search that ran out of
  // time); empty for most strategies.
  std::string note;
  // Where the strategy decides while the step runs (dtr), why it freed
  // activations or aux it may recompute later, for captions: the indices
  // (ascending) of its heuristic's evictions and of the frees of its
  // recompute-all fallback. Empty for the static strategies.
  std::vector<std::size_t> evictions, fallback_frees;
};

// How long a schedule will be, stated before it is made (Strategy::size), so
// that one that would not fit in memory is refused instead of exhausting it.
struct ScheduleSize {
  enum class Bound : uint8_t {
    Exact,
    AtMost,   // an upper bound (a search's result is not known before it runs)
    AtLeast,  // counting stopped once past the limit it was given
  };
  uint64_t instructions = 0;
  Bound bound = Bound::Exact;
};

// Instructions of with_frees(model, compute) for a valid compute program with
// `forward_steps` fwd, `aux_forward_steps` of them of ops with aux(v): n-1
// bwd, a free of A after every fwd and of the input, a free of G after the
// bwd of every op with a gradient tensor (all but the input, the loss and
// integer outputs), a free of aux per fwd of such an op (after its bwd or at
// once): 2F + F_aux + n + grads (n = model.size(); 2F + 2n - 2 on a chain).
uint64_t instructions_with_frees(const Model& model, uint64_t forward_steps, uint64_t aux_forward_steps);

// "fwd a3", "free A(a3)", "offload A(a3)", "compress A(a3) to bf16" style text for logs, captions and the CLI.
std::string to_string(const Instr& instr, const Model& model);
std::string_view instr_kind_name(InstrKind k);

// Turns a compute-only program (Fwd/Bwd) into a full schedule: each tensor is
// freed right after its last read before it is next recomputed (or ever), and
// G(v) right after bwd v. aux(v) is read by bwd v only, so it is freed right
// after bwd v, or right after a fwd v whose aux no backward reads before v is
// computed again (a forward pass whose segment will be recomputed). A view's
// alias is freed like any tensor; its storage stays while any alias is held.
// Strategies only decide what to compute and when.
// Memory: the result (4 bytes per instruction) while `compute` is still held
// (4 bytes per compute instruction, about half of them).
Schedule with_frees(const Model& model, std::vector<Instr> compute, std::string strategy);

}  // namespace remat
