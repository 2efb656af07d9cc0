#include "core/exec/same_result.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace remat {

bool same_loss(const ExecResult& a, const ExecResult& ref) {
  return a.ok() && ref.ok() && std::memcmp(&a.loss, &ref.loss, sizeof a.loss) == 0;
}

bool same_loss_and_grads(const ExecResult& a, const ExecResult& ref) {
  if (!same_loss(a, ref)) return false;
  if (a.param_grads.size() != ref.param_grads.size()) return false;
  for (std::size_t k = 0; k < a.param_grads.size(); ++k) {
    if (a.param_grads[k].size() != ref.param_grads[k].size() ||
        std::memcmp(a.param_grads[k].data(), ref.param_grads[k].data(), sizeof(float) * a.param_grads[k].size()) != 0)
      return false;
  }
  return true;
}

Sameness sameness(const ExecResult& a, const ExecResult& ref) {
  if (!ref.ok()) return Sameness::NoReference;
  if (!a.ok()) return Sameness::Differs;
  if (a.compressed) return Sameness::Compressed;
  if (same_loss_and_grads(a, ref)) return Sameness::Bitwise;
  const bool nondeterministic = !a.nondeterministic.empty() || !ref.nondeterministic.empty();
  return nondeterministic && same_loss(a, ref) ? Sameness::LossOnly : Sameness::Differs;
}

ResultError relative_error(const ExecResult& a, const ExecResult& ref) {
  if (!a.ok() || !ref.ok() || a.param_grads.size() != ref.param_grads.size())
    throw std::logic_error("relative_error: both results must have completed, with the same parameters");
  auto rel = [](double diff, double norm) { return diff / (norm > 0 ? norm : 1.0); };
  ResultError e;
  e.loss = rel(std::fabs(static_cast<double>(a.loss) - ref.loss), std::fabs(static_cast<double>(ref.loss)));
  for (std::size_t k = 0; k < a.param_grads.size(); ++k) {
    const auto& g = a.param_grads[k];
    const auto& r = ref.param_grads[k];
    if (g.size() != r.size()) throw std::logic_error("relative_error: parameter tensors of different sizes");
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      const double d = static_cast<double>(g[i]) - r[i];
      diff += d * d;
      norm += static_cast<double>(r[i]) * r[i];
    }
    const double err = rel(std::sqrt(diff), std::sqrt(norm));
    if (k == 0 || err > e.grad) {
      e.grad = err;
      e.worst = k;
    }
  }
  return e;
}

}  // namespace remat
