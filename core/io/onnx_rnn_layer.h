// What an ONNX LSTM and GRU node share on their way to the cell ops PyTorch's
// CPU RNNs run (onnx_rnn.cpp, onnx_gru.cpp): the node's checks, its weights
// in PyTorch's gate order, and the ops it becomes, each named after the node
// ("NODE.what.k").
#pragma once
#ifdef REMAT_HAVE_ONNX
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/io/onnx_importer.h"
#include "core/kernels/pointwise_fns.h"

namespace remat::onnx_import {

class RnnLayer {
 public:
  // `from[k]`: the ONNX gate block that is PyTorch's gate k; `activations`:
  // the only list the node may name; `states`: the inputs that must be
  // absent or zero (initial_h, initial_c); `refused`: inputs it must not have
  // (sequence_lens, peepholes). ok() is false for any other form (another
  // direction, a layout, a clip, a size past the importer's limits).
  RnnLayer(Importer& im, const onnx::NodeProto& n, int x, std::vector<int> from, std::vector<std::string> activations,
           std::vector<int> states, std::vector<int> refused);
  bool ok() const { return ok_; }

  int64_t t_len = 0, batch = 0, feat = 0, h = 0;
  std::shared_ptr<const std::vector<float>> w_ih, w_hh, b_hh;  // PyTorch's order
  std::vector<float> b_ih;
  uint64_t state_bytes() const { return static_cast<uint64_t>(batch * h) * 4; }
  bool has_bias() const;

  int add(Op op, const char* what);
  int reshape(int of, std::vector<int64_t> shape, bool copy = false);  // copy: a clone
  int slice(int of, int64_t axis, int64_t start, int64_t end);
  int pointwise(pw::Fn fn, std::vector<int> inputs, const char* what, uint64_t aux = 0);
  int simple(OpKind kind, std::vector<int> inputs, const char* what);
  // The input's gates of every step, (T·B, I) · W_ihᵀ + b_ih as (T, B, G·H);
  // PyTorch copies a strided input (batch_first's transpose) dense first.
  int input_gates();
  // Whether the graph reads the node's output k (every op must reach the loss).
  bool reads(int k) const;
  // The steps' h stacked (Concat along a new first axis), as (T, 1, B, H).
  int stack(const std::vector<int>& hs);
  // Output k is `v` reshaped to `shape`.
  void set_output(int k, int v, std::vector<int64_t> shape);

 private:
  Importer& im_;
  const onnx::NodeProto& n_;
  int x_;
  std::string base_;
  int step_ = 0;  // ops added, for their names
  bool ok_ = false;
};

}  // namespace remat::onnx_import
#endif
