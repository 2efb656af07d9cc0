#include "core/sim/time_model.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/sim/compression.h"
#include "core/sim/instr_reads.h"
#include "core/model/model.h"

namespace remat {

StepTime predict_step_time(const Model& model, const Schedule& schedule, const TimeModel& time,
                           std::vector<Stall>* stalls) {
  StepTime st;
  st.predicted = true;
  double compute = 0, copy = 0;  // when each stream is free
  // When the latest fetch of A(v) lands; 0 for tensors never fetched (always there).
  std::vector<double> arrives(static_cast<std::size_t>(model.size()), 0.0);
  // The Packing of C(v) wherever it is (device or host), 0 while none: what an
  // offload or fetch of v moves.
  std::vector<uint8_t> packed(static_cast<std::size_t>(model.size()), 0);
  auto wait_for = [&](double ready, int u) { return std::max(ready, arrives[static_cast<std::size_t>(u)]); };
  for (std::size_t i = 0; i < schedule.code.size(); ++i) {
    const Instr ins = schedule.code[i];
    const Op& op = model.op(ins.op);
    switch (ins.kind) {
      case InstrKind::Fwd:
      case InstrKind::Bwd: {
        double ready = compute;
        for (int u : *activation_reads(model, ins)) ready = wait_for(ready, u);
        st.stall_s += ready - compute;
        if (stalls && ready > compute) stalls->push_back({i, ready - compute});
        const double d = (ins.kind == InstrKind::Fwd ? op.fwd_flops : op.bwd_flops) / time.device_flops;
        st.compute_s += d;
        compute = ready + d;
        break;
      }
      case InstrKind::CompressBF16:
      case InstrKind::CompressF16:
      case InstrKind::CompressInt8:
      case InstrKind::Decompress: {
        const auto v = static_cast<std::size_t>(ins.op);
        if (is_compress(ins.kind)) packed[v] = static_cast<uint8_t>(packing_of(ins.kind));
        const double ready = wait_for(compute, ins.op);
        st.stall_s += ready - compute;
        if (stalls && ready > compute) stalls->push_back({i, ready - compute});
        const uint64_t moved = op.bytes + packed_bytes(op.bytes, static_cast<Packing>(packed[v]));
        const double d = static_cast<double>(moved) / time.device_bandwidth;
        st.convert_s += d;
        compute = ready + d;
        break;
      }
      case InstrKind::FreePacked:
        packed[static_cast<std::size_t>(ins.op)] = 0;
        break;
      case InstrKind::Offload:
      case InstrKind::Fetch: {
        // While C(op) exists A(op) is off the device but for the compress or
        // decompress beside it, when no offload may run (the validator): C moves.
        const auto v = static_cast<std::size_t>(ins.op);
        const uint64_t b = packed[v] ? packed_bytes(op.bytes, static_cast<Packing>(packed[v])) : op.bytes;
        const double d = static_cast<double>(b) / time.link_bandwidth;
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

std::string format_seconds(double s) {
  char buf[32];
  if (s == 0) std::snprintf(buf, sizeof buf, "0");
  else if (s < 1e-6) std::snprintf(buf, sizeof buf, "%.1f ns", s * 1e9);
  else if (s < 1e-3) std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  else if (s < 1) std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
  else std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

}  // namespace remat
