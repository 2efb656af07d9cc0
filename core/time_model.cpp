#include "core/time_model.h"

#include <algorithm>
#include <vector>

#include "core/instr_reads.h"
#include "core/model.h"

namespace remat {

StepTime predict_step_time(const Model& model, const Schedule& schedule, const TimeModel& time) {
  StepTime st;
  st.predicted = true;
  double compute = 0, copy = 0;  // when each stream is free
  // When the latest fetch of A(v) lands; 0 for tensors never fetched (always there).
  std::vector<double> arrives(static_cast<std::size_t>(model.size()), 0.0);
  for (const Instr& ins : schedule.code) {
    const Op& op = model.op(ins.op);
    switch (ins.kind) {
      case InstrKind::Fwd:
      case InstrKind::Bwd: {
        double ready = compute;
        for (int u : *activation_reads(model, ins)) ready = std::max(ready, arrives[static_cast<std::size_t>(u)]);
        st.stall_s += ready - compute;
        const double d = (ins.kind == InstrKind::Fwd ? op.fwd_flops : op.bwd_flops) / time.device_flops;
        st.compute_s += d;
        compute = ready + d;
        break;
      }
      case InstrKind::Offload:
      case InstrKind::Fetch: {
        const double d = static_cast<double>(op.bytes) / time.link_bandwidth;
        st.transfer_s += d;
        copy = std::max(copy, compute) + d;
        if (ins.kind == InstrKind::Fetch) arrives[static_cast<std::size_t>(ins.op)] = copy;
        break;
      }
      case InstrKind::FreeAct:
      case InstrKind::FreeGrad:
      case InstrKind::FreeAux:
        break;
    }
  }
  st.step_s = std::max(compute, copy);
  return st;
}

}  // namespace remat
