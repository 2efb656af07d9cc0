// Host values of a run (make_host_data), the parameter tensors of a model and
// the check that it can run at all: what every backend loads, whichever it is.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/base/errors.h"
#include "core/exec/exec_kinds.h"
#include "core/exec/executor.h"
#include "core/base/work_counters.h"
#include "core/exec/op_exec.h"
#include "core/exec/run_check.h"
#include "core/kernels/convert.h"
#include "core/kernels/rng.h"
#include "core/model/op_layout.h"
#include "core/model/op_rules.h"

namespace remat {
namespace {

// Uniform in [-1, 1) from 24 random bits: exact in float32, the same on every
// machine. Streams keep the input, target, labels and each parameter apart.
float uniform(uint64_t seed, uint64_t stream, uint64_t i) {
  const uint64_t h = mix64(mix64(seed ^ (stream * 0xD1B54A32D192ED03ull)) + i);
  return static_cast<float>(static_cast<double>(h >> 40) * (2.0 / 16777216.0) - 1.0);
}

enum Stream : uint64_t { kInput = 1, kTarget = 2, kLabels = 3, kParams = 16 };

}  // namespace

int64_t ParamTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<ParamTensor> parameter_tensors(const Model& model) {
  std::vector<ParamTensor> out;
  for (int v = 0; v < model.size(); ++v) {
    int slot = 0;
    for (ParamSpec& p : op_params(model, v))
      out.push_back({v, slot++, std::to_string(v) + "." + p.name, std::move(p.shape)});
  }
  return out;
}

static std::string executable_kinds_list() {
  std::string out = "Input";
  std::vector<std::string_view> seen;
#define REMAT_LIST_KIND(Kind, ...) seen.push_back(kind_name(OpKind::Kind));
  REMAT_EXEC_KINDS(REMAT_LIST_KIND)
#undef REMAT_LIST_KIND
  for (std::size_t i = 0; i < seen.size(); ++i) out += (i + 1 == seen.size() ? " and " : ", ") + std::string(seen[i]);
  return out;
}

void check_executable(const Model& model) {
  work_counter::count(work_counter::executability_checks);
  const std::vector<RunBlocker> blockers = run_blockers(model);
  std::string list, why;
  int bad = 0;
  std::vector<std::string> reasons;  // "Kind: reason", each once
  for (const RunBlocker& b : blockers) {
    if (!b.simulate_only) continue;
    const Op& op = model.op(b.op);
    const std::string name = op.name.empty() ? std::string(kind_name(op.kind)) : op.name;
    if (++bad <= 5) list += (bad > 1 ? ", " : "") + name + " (op " + std::to_string(b.op) + ", " + std::string(kind_name(op.kind)) + ")";
    const std::string reason = std::string(kind_name(op.kind)) + ": " + b.why;
    if (reasons.size() < 5 && std::find(reasons.begin(), reasons.end(), reason) == reasons.end()) {
      reasons.push_back(reason);
      why += (why.empty() ? "" : "; ") + reason + " (" + name + ")";
    }
  }
  if (bad > 5) list += " and " + std::to_string(bad - 5) + " more";
  if (bad)
    throw InputError("model " + model.name + " has simulate-only ops: " + list + " (only f32, bf16 or f16 " +
                     executable_kinds_list() + " with whole-float sizes can be executed); why: " + why);
  if (!blockers.empty()) throw InputError("model " + model.name + ": " + blockers.front().why);
}

uint64_t baseline_bytes_of(const Model& model) {
  uint64_t bytes = 4;  // the loss
  for (const ParamTensor& p : parameter_tensors(model)) bytes += 8 * static_cast<uint64_t>(p.numel());
  const Op& loss = model.op(model.loss());
  if (loss.inputs.empty()) return bytes;
  const Op& logits = model.op(loss.inputs.at(0));
  if (has_target(loss.kind)) bytes += 4 * static_cast<uint64_t>(logits.numel());
  if (loss.kind == OpKind::SoftmaxCELoss) bytes += 4 * static_cast<uint64_t>(logits.rows());
  for (int v = 0; v < model.size(); ++v) bytes += constant_bytes(model.op(v)).size();
  return bytes;
}

HostData make_host_data(const Model& model, uint64_t seed) {
  check_executable(model);
  return make_host_data_unchecked(model, seed);
}

HostData make_host_data_unchecked(const Model& model, uint64_t seed) {
  HostData d;
  d.seed = seed;
  const Op& in = model.op(0);
  if (is_integer(in.dtype)) {
    // Token ids, uniform over the smallest table that looks them up.
    int64_t vocab = std::numeric_limits<int64_t>::max();
    for (int v = 1; v < model.size(); ++v)
      if (model.op(v).kind == OpKind::Embedding) vocab = std::min(vocab, model.op(v).attrs->vocab);
    d.ids.resize(static_cast<std::size_t>(in.numel()));
    for (std::size_t i = 0; i < d.ids.size(); ++i)
      d.ids[i] = static_cast<int64_t>(mix64(mix64(seed ^ (kInput * 0xD1B54A32D192ED03ull)) + i) % static_cast<uint64_t>(vocab));
  } else {
    d.input.resize(static_cast<std::size_t>(in.numel()));
    for (std::size_t i = 0; i < d.input.size(); ++i) d.input[i] = uniform(seed, kInput, i);
  }
  const Op& loss = model.op(model.loss());
  const Op& logits = model.op(loss.inputs.at(0));
  if (loss.kind == OpKind::MSELoss) {
    d.target.resize(static_cast<std::size_t>(logits.numel()));
    for (std::size_t i = 0; i < d.target.size(); ++i) d.target[i] = uniform(seed, kTarget, i);
  } else if (loss.kind == OpKind::BCEWithLogitsLoss) {
    // Binary labels, 0 or 1, as a multi-label head or a mask is trained on.
    d.target.resize(static_cast<std::size_t>(logits.numel()));
    for (std::size_t i = 0; i < d.target.size(); ++i) d.target[i] = uniform(seed, kTarget, i) < 0.0f ? 0.0f : 1.0f;
  } else if (loss.kind == OpKind::SoftmaxCELoss) {
    d.labels.resize(static_cast<std::size_t>(logits.rows()));
    for (std::size_t i = 0; i < d.labels.size(); ++i)
      d.labels[i] = static_cast<int32_t>(mix64(mix64(seed ^ (kLabels * 0xD1B54A32D192ED03ull)) + i) %
                                         static_cast<uint64_t>(logits.cols()));
  }
  const auto tensors = parameter_tensors(model);
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const ParamTensor& p = tensors[k];
    const Op& op = model.op(p.op);
    std::vector<float> values(static_cast<std::size_t>(p.numel()));
    if ((op.kind == OpKind::AddConst || op.kind == OpKind::Pointwise || op.kind == OpKind::Concat) && !op.attrs->values.empty()) {  // a learned constant's initial values
      values.assign(op.attrs->values.data(), op.attrs->values.data() + op.attrs->values.size());
    } else if (!op.param_init->empty()) {
      if (op.param_init->size() <= static_cast<std::size_t>(p.slot) || !(*op.param_init)[static_cast<std::size_t>(p.slot)] ||
          (*op.param_init)[static_cast<std::size_t>(p.slot)]->size() != values.size())
        throw InputError("model " + model.name + ": initial values of op " + std::to_string(p.op) + " ('" + op.name +
                         "') do not match parameter " + p.name + " (" + std::to_string(values.size()) +
                         " floats expected)");
      values = *(*op.param_init)[static_cast<std::size_t>(p.slot)];
    } else {
      const uint64_t stream = kParams + k;
      const ParamInit init = op_params(model, p.op).at(static_cast<std::size_t>(p.slot)).init;
      float scale = 0.1f, base = 0.0f;
      if (init == ParamInit::FanIn) {
        const std::vector<int64_t> w = op_params(model, p.op).at(0).shape;  // (out, in...) of slot 0
        int64_t fan_in = 1;
        for (std::size_t i = 1; i < w.size(); ++i) fan_in *= w[i];
        scale = 1.0f / std::sqrt(static_cast<float>(fan_in));
      }
      if (init == ParamInit::NearOne) base = 1.0f;
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = base + scale * uniform(seed, stream, i);
    }
    d.params.push_back(std::move(values));
  }
  return d;
}

std::vector<uint8_t> input_bytes(const Model& model, const HostData& data) {
  std::vector<uint8_t> out;
  const auto put = [&](const void* p, std::size_t bytes) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + bytes);
  };
  if (model.op(0).dtype == DType::BF16 || model.op(0).dtype == DType::F16) {
    // A low-precision input batch is the f32 values rounded to its dtype.
    std::vector<uint16_t> narrow(data.input.size());
    if (model.op(0).dtype == DType::BF16) cpu::f32_to_bf16(data.input.data(), narrow.data(), static_cast<int64_t>(narrow.size()));
    else cpu::f32_to_f16(data.input.data(), narrow.data(), static_cast<int64_t>(narrow.size()));
    put(narrow.data(), 2 * narrow.size());
  } else if (!is_integer(model.op(0).dtype)) {
    put(data.input.data(), 4 * data.input.size());
  } else if (model.op(0).dtype == DType::I64) {
    put(data.ids.data(), 8 * data.ids.size());
  } else {
    for (const int64_t id : data.ids) {
      const auto narrow = static_cast<int32_t>(id);
      put(&narrow, 4);
    }
  }
  return out;
}

uint64_t fnv1a64(const std::vector<std::vector<float>>& tensors) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& t : tensors) {
    const auto* p = reinterpret_cast<const unsigned char*>(t.data());
    for (std::size_t i = 0; i < t.size() * sizeof(float); ++i) {
      h ^= p[i];
      h *= 0x100000001b3ull;
    }
  }
  return h;
}


}  // namespace remat
