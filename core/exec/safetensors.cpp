#include "core/exec/safetensors.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "core/io/atomic_file.h"
#include "core/base/errors.h"
#include "core/exec/executor.h"
#include "core/exec/op_exec.h"
#include "core/kernels/cpu_kernels.h"
#include "core/io/model_source.h"

namespace remat {
namespace {

uint64_t dtype_bytes(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "U8" || dtype == "BOOL") return 1;
  if (dtype == "F16" || dtype == "BF16") return 2;
  if (dtype == "F64" || dtype == "I64") return 8;
  return 0;
}

template <typename T>
SafeTensor tensor(std::string name, std::string dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  SafeTensor t{std::move(name), std::move(dtype), std::move(shape), {}};
  t.data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

std::string hash_hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<SafeTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // nlohmann::ordered_json keeps the file order readable; readers go by offsets.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t n = dtype_bytes(t.dtype);
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    if (n != t.data.size()) throw std::logic_error("safetensors: " + t.name + " has the wrong number of bytes");
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  write_file_atomically(path, [&](std::ostream& out) {
    unsigned char len[8];
    uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& t : tensors) out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
  });
}

std::vector<SafeTensor> read_safetensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open '" + path + "'");
  const std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto bad = [&](const std::string& why) { return InputError("'" + path + "' is not a valid safetensors file: " + why); };
  if (bytes.size() < 8) throw bad("shorter than its 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[static_cast<std::size_t>(i)];
  if (n > bytes.size() - 8) throw bad("header length " + std::to_string(n) + " exceeds the file");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("header is not JSON: ") + e.what());
  }
  if (!header.is_object()) throw bad("header is not a JSON object");
  const uint64_t data_size = bytes.size() - 8 - n;
  std::vector<std::pair<uint64_t, SafeTensor>> out;
  try {
    for (const auto& [name, v] : header.items()) {
      if (name == "__metadata__") {
        if (metadata) *metadata = v.get<std::map<std::string, std::string>>();
        continue;
      }
      SafeTensor t{name, v.at("dtype").get<std::string>(), v.at("shape").get<std::vector<int64_t>>(), {}};
      const auto off = v.at("data_offsets").get<std::vector<uint64_t>>();
      uint64_t expect = dtype_bytes(t.dtype);
      if (!expect) throw bad(name + ": unknown dtype " + t.dtype);
      for (int64_t d : t.shape) {
        if (d < 0) throw bad(name + ": negative dimension");
        expect *= static_cast<uint64_t>(d);
      }
      if (off.size() != 2 || off[0] > off[1] || off[1] > data_size || off[1] - off[0] != expect)
        throw bad(name + ": data offsets do not match its shape or the file");
      const auto* base = bytes.data() + 8 + n;
      t.data.assign(base + off[0], base + off[1]);
      out.emplace_back(off[0], std::move(t));
    }
  } catch (const nlohmann::json::exception& e) {
    throw bad(e.what());
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<SafeTensor> tensors;
  for (auto& [off, t] : out) tensors.push_back(std::move(t));
  return tensors;
}

std::vector<SafeTensor> execution_tensors(const Model& model, const HostData& data, const ExecResult& result) {
  std::vector<SafeTensor> out;
  const DType in_dtype = model.op(0).dtype;
  // The input as uploaded: a bf16/f16 batch in its dtype (the f32 values rounded).
  out.push_back(tensor("input",
                       in_dtype == DType::I64    ? "I64"
                       : in_dtype == DType::I32  ? "I32"
                       : in_dtype == DType::BF16 ? "BF16"
                       : in_dtype == DType::F16  ? "F16"
                                                 : "F32",
                       model.op(0).shape, input_bytes(model, data)));
  const Op& logits = model.op(model.op(model.loss()).inputs.at(0));
  if (!data.target.empty()) out.push_back(tensor("target", "F32", logits.shape, data.target));
  if (!data.labels.empty()) out.push_back(tensor("labels", "I32", {logits.rows()}, data.labels));
  const auto params = parameter_tensors(model);
  for (std::size_t k = 0; k < params.size(); ++k)
    out.push_back(tensor("param." + params[k].name, "F32", params[k].shape, data.params[k]));
  for (int v = 0; v < model.size(); ++v) {
    const Op& op = model.op(v);
    if (op.kind != OpKind::Dropout) continue;
    std::vector<uint8_t> mask(static_cast<std::size_t>(op.numel()));
    for (std::size_t i = 0; i < mask.size(); ++i)
      mask[i] = cpu::dropout_keep(data.seed, static_cast<uint32_t>(v), i, op.dropout_p) ? 1 : 0;
    out.push_back(tensor("mask." + std::to_string(v), "U8", op.shape, mask));
  }
  // Fixed constants as the kernels read them (a learned one is a parameter above).
  for (int v = 0; v < model.size(); ++v) {
    const Op& op = model.op(v);
    const std::vector<uint8_t> c = constant_bytes(op);
    // A Pointwise op's: its constant's values, then its scalar, flat.
    const std::vector<int64_t> shape =
        op.kind == OpKind::Pointwise ? std::vector<int64_t>{static_cast<int64_t>(c.size() / 4)} : op.attrs->const_shape;
    if (!c.empty()) out.push_back(tensor("const." + std::to_string(v), op.kind == OpKind::MaskedFill ? "U8" : "F32", shape, c));
  }
  out.push_back(tensor("loss", "F32", {}, std::vector<float>{result.loss}));
  for (std::size_t k = 0; k < params.size() && k < result.param_grads.size(); ++k)
    out.push_back(tensor("grad." + params[k].name, "F32", params[k].shape, result.param_grads[k]));
  return out;
}

std::string dump_graph_json(const Model& model) {
  nlohmann::ordered_json ops = nlohmann::ordered_json::array();
  for (int v = 0; v < model.size(); ++v) {
    const Op& op = model.op(v);
    nlohmann::ordered_json j = {{"id", v}, {"name", op.name}, {"kind", kind_name(op.kind)}, {"inputs", op.inputs},
                                {"shape", op.shape}};
    if (op.kind == OpKind::Dense) j["activation"] = activation_name(op.act);
    if (op.kind == OpKind::Dropout) j["p"] = op.dropout_p;
    if (op.kind == OpKind::Embedding) j["vocab"] = op.attrs->vocab;
    if (!op.attrs->const_shape.empty()) j["const_shape"] = op.attrs->const_shape;
    if (op.kind == OpKind::MaskedFill) j["fill"] = op.attrs->fill;  // -inf dumps as null: the default
    if (op.attrs->learned) j["learned"] = true;
    ops.push_back(std::move(j));
  }
  return ops.dump();
}

std::string write_execution_dump(const std::string& dir, const Model& model, const HostData& data,
                                 const ExecResult& result) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) throw InputError("cannot create dump directory '" + dir + "'");
  write_safetensors((std::filesystem::path(dir) / "tensors.safetensors").string(), execution_tensors(model, data, result),
                    {{"format", "remat-dump"},
                     {"model", model.name},
                     {"strategy", result.strategy},
                     {"seed", std::to_string(data.seed)},
                     {"backend", result.backend},
                     {"grad_hash", hash_hex(result.grad_hash)},
                     {"ops", dump_graph_json(model)}});
  try {
    save_json_model(model, (std::filesystem::path(dir) / "model.json").string());
  } catch (const InputError& e) {
    return std::string("model.json not written: ") + e.what() + " (tensors.safetensors carries the graph in its metadata \"ops\")";
  }
  return {};
}

}  // namespace remat
