// The schedule IR: the whole program of one training step under a strategy.
// Frees are explicit, so the simulator, the executor and the GUI replay the
// same instructions and agree on memory to the byte.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace remat {

struct Model;

enum class InstrKind : uint8_t {
  Fwd,       // compute (or recompute) A(op)
  Bwd,       // backward of op: reads G(op) and saved(op), writes G of its inputs
  FreeAct,   // release A(op)
  FreeGrad,  // release G(op)
  FreeAux,   // release aux(op), the op's private saved tensors (made by fwd op)
};

struct Instr {
  InstrKind kind;
  int32_t op;
  bool operator==(const Instr&) const = default;
};

struct Schedule {
  std::string strategy;
  std::vector<Instr> code;
  // What a user should know about how it was made (a search that ran out of
  // time); empty for most strategies.
  std::string note;
};

// "fwd a3 (op 3)" style text for logs, captions and the CLI.
std::string to_string(const Instr& instr, const Model& model);
std::string_view instr_kind_name(InstrKind k);

// Turns a compute-only program (Fwd/Bwd) into a full schedule: each tensor is
// freed right after its last read before it is next recomputed (or ever), and
// G(v) right after bwd v. aux(v) is read by bwd v only, so it is freed right
// after bwd v, or right after a fwd v whose aux no backward reads before v is
// computed again (a forward pass whose segment will be recomputed). A view's
// alias is freed like any tensor; its storage stays while any alias is held.
// Strategies only decide what to compute and when.
Schedule with_frees(const Model& model, std::vector<Instr> compute, std::string strategy);

}  // namespace remat
