#include "core/exec/same_result.h"

#include <cstring>

namespace remat {

bool same_loss_and_grads(const ExecResult& a, const ExecResult& ref) {
  if (!a.ok() || !ref.ok() || std::memcmp(&a.loss, &ref.loss, sizeof a.loss) != 0) return false;
  if (a.param_grads.size() != ref.param_grads.size()) return false;
  for (std::size_t k = 0; k < a.param_grads.size(); ++k) {
    if (a.param_grads[k].size() != ref.param_grads[k].size() ||
        std::memcmp(a.param_grads[k].data(), ref.param_grads[k].data(), sizeof(float) * a.param_grads[k].size()) != 0)
      return false;
  }
  return true;
}

}  // namespace remat
