// The strategy interface: each strategy turns a model into an ordinary
// schedule, so the simulator, executor and GUI need no special cases. The
// strategies themselves live in core/strategies/; registry.h names them
// ("sqrt", "every-k:4", "manual:3,7,11").
#pragma once
#include <string>

#include "core/schedule.h"

namespace remat {

struct Model;

class Strategy {
 public:
  virtual ~Strategy() = default;
  // The spec that recreates this strategy ("every-k:4").
  virtual std::string name() const = 0;
  // Throws InputError when the strategy cannot apply to this model (e.g. a
  // checkpoint index out of range).
  virtual Schedule schedule(const Model& model) const = 0;
};

}  // namespace remat
