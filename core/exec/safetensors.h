// The safetensors file format (huggingface/safetensors), written and read here
// without the library: 8-byte little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {..}}
// padded with spaces to a multiple of 8, then the raw little-endian data.
//
// `remat run --dump DIR` writes DIR/tensors.safetensors with (execution_tensors):
//   input            F32  op 0's shape          the batch, A(0) (BF16/F16 or I32/I64 in op 0's dtype)
//   target           F32  loss input's shape    MSELoss and BCEWithLogitsLoss only
//   labels           I32  (rows)                SoftmaxCELoss only, class per row
//   param.<op>.<p>   F32                         initial parameters: <p> is weight
//                                                (out, in) and bias (out) for Linear
//                                                and Dense, gamma and beta for LayerNorm
//   mask.<op>        U8   the op's shape         Dropout: 1 = kept (scaled by 1/(1-p))
//   loss             F32  []                     the loss of the step
//   grad.<op>.<p>    F32                         the parameter gradients
// and metadata {"format": "remat-dump", "model", "strategy", "seed", "backend",
// "grad_hash" (hex FNV-1a 64 of the grad.* bytes in file order), "ops"}: "ops" is the graph as a JSON array [{"id","name","kind","inputs",
// "shape","activation"?,"p"?}], so the file alone rebuilds the computation.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/exec/executor.h"

namespace remat {

struct SafeTensor {
  std::string name;
  std::string dtype;  // "F32", "I32", "U8"
  std::vector<int64_t> shape;
  std::vector<unsigned char> data;
};

// Atomic (atomic_file.h); throws InputError naming the path.
void write_safetensors(const std::string& path, const std::vector<SafeTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// In file order; throws InputError for anything malformed.
std::vector<SafeTensor> read_safetensors(const std::string& path, std::map<std::string, std::string>* metadata = nullptr);

// The tensors listed above, for one executed strategy.
std::vector<SafeTensor> execution_tensors(const Model& model, const HostData& data, const ExecResult& result);

// The graph part of the metadata ("ops").
std::string dump_graph_json(const Model& model);

// DIR/tensors.safetensors and DIR/model.json (save_json_model); creates DIR.
// Returns a warning when model.json could not be written (the tensors were);
// throws InputError when the directory or the tensors cannot be written.
std::string write_execution_dump(const std::string& dir, const Model& model, const HostData& data,
                                 const ExecResult& result);

}  // namespace remat
