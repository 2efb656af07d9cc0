// resnet:DEPTH[:WIDTH[:IMAGE[:BATCH[:CLASSES[:DTYPE]]]]]: torchvision's ResNet,
// op for op: the 7x7/2 stem convolution, batch norm, ReLU, 3x3/2 max pooling,
// four stages of widths WIDTH·(1, 2, 4, 8) (the first block of stages 2-4
// halves the image, its shortcut a 1x1 convolution with batch norm wherever
// the shape changes), global average pooling, flatten, a Linear classifier,
// cross-entropy. DEPTH 10, 18, 34: basic blocks (two 3x3 convolutions);
// DEPTH 50, 101, 152: bottlenecks (1x1 down to the stage width, 3x3 carrying
// the stride as torchvision's v1.5 does, 1x1 up to four times the width).
// resnet:18 is torchvision's resnet18(num_classes=10) on 32x32 images, 8 of them.
#include "core/base/errors.h"
#include "core/model/preset_models.h"
#include "core/base/spec_parse.h"

namespace remat {

Model resnet_preset(const std::vector<std::string>& f, const std::string& spec) {
  if (f.size() < 2 || f.size() > 7)
    throw InputError("model spec '" + spec + "': expected resnet:DEPTH[:WIDTH[:IMAGE[:BATCH[:CLASSES[:DTYPE]]]]]");
  auto field = [&](std::size_t i, int64_t fallback, const char* what, int64_t hi) {
    return spec_field(f, i, fallback, what, hi, spec);
  };
  const int64_t depth = field(1, 0, "DEPTH", 1000);
  std::vector<int> blocks;
  bool bottleneck = depth >= 50;
  if (depth == 10) blocks = {1, 1, 1, 1};
  else if (depth == 18) blocks = {2, 2, 2, 2};
  else if (depth == 34 || depth == 50) blocks = {3, 4, 6, 3};
  else if (depth == 101) blocks = {3, 4, 23, 3};
  else if (depth == 152) blocks = {3, 8, 36, 3};
  else
    throw InputError("DEPTH in '" + spec + "' must be 10, 18, 34 (basic blocks), 50, 101 or 152 (bottlenecks), got " +
                     f[1]);
  const int64_t width = field(2, 64, "WIDTH", 1 << 14);
  const int64_t image = field(3, 32, "IMAGE", 1 << 14);
  const int64_t batch = field(4, 8, "BATCH", 1 << 16);
  const int64_t classes = field(5, 10, "CLASSES", 1 << 20);
  const PresetPrecision precision = spec_precision(f, 6, spec);
  const DType dtype = precision.dtype;

  Model m;
  m.name = spec;
  auto add = [&](Op o) {
    precision.apply(o, m);
    return m.add(std::move(o));
  };
  auto op = [&](OpKind k, std::string name, std::vector<int> in) {
    Op o;
    o.kind = k;
    o.name = std::move(name);
    o.inputs = std::move(in);
    o.dtype = dtype;
    return o;
  };
  auto conv = [&](const std::string& name, int x, int64_t out, int64_t k, int64_t stride) {
    Op c = op(OpKind::Conv, name, {x});
    c.attrs.edit().channels = out;
    c.attrs.edit().kernel = {k, k};
    c.attrs.edit().stride = {stride, stride};
    c.attrs.edit().pads.assign(4, k / 2);
    c.attrs.edit().bias = false;
    return add(std::move(c));
  };
  auto simple = [&](OpKind k, const std::string& name, std::vector<int> in) { return add(op(k, name, std::move(in))); };
  Op input = op(OpKind::Input, "x", {});
  input.shape = {batch, 3, image, image};
  int x = add(std::move(input));
  if (image < 32) throw InputError("IMAGE in '" + spec + "' must be at least 32 (five halvings)");
  x = conv("conv1", x, width, 7, 2);
  x = simple(OpKind::BatchNorm, "bn1", {x});
  x = simple(OpKind::ReLU, "relu", {x});
  Op pool = op(OpKind::MaxPool, "maxpool", {x});
  pool.attrs.edit().kernel = {3, 3};
  pool.attrs.edit().stride = {2, 2};
  pool.attrs.edit().pads = {1, 1, 1, 1};
  x = add(std::move(pool));
  int64_t channels = width;
  for (int s = 0; s < 4; ++s) {
    const int64_t w = width << s;
    for (int b = 0; b < blocks[static_cast<std::size_t>(s)]; ++b) {
      const std::string p = "layer" + std::to_string(s + 1) + "." + std::to_string(b) + ".";
      const int64_t stride = s > 0 && b == 0 ? 2 : 1;
      // A bottleneck's output has four times the stage width.
      const int64_t out = bottleneck ? 4 * w : w;
      int h = conv(p + "conv1", x, w, bottleneck ? 1 : 3, bottleneck ? 1 : stride);
      h = simple(OpKind::BatchNorm, p + "bn1", {h});
      h = simple(OpKind::ReLU, p + "relu1", {h});
      h = conv(p + "conv2", h, w, 3, bottleneck ? stride : 1);
      h = simple(OpKind::BatchNorm, p + "bn2", {h});
      if (bottleneck) {
        h = simple(OpKind::ReLU, p + "relu2", {h});
        h = conv(p + "conv3", h, out, 1, 1);
        h = simple(OpKind::BatchNorm, p + "bn3", {h});
      }
      int shortcut = x;
      if (stride != 1 || channels != out) {
        shortcut = conv(p + "downsample.0", x, out, 1, stride);
        shortcut = simple(OpKind::BatchNorm, p + "downsample.1", {shortcut});
      }
      h = simple(OpKind::Add, p + "add", {h, shortcut});
      x = simple(OpKind::ReLU, p + (bottleneck ? "relu3" : "relu2"), {h});
      channels = out;
    }
  }
  x = simple(OpKind::GlobalAvgPool, "avgpool", {x});
  Op flat = op(OpKind::Reshape, "flatten", {x});
  flat.shape = {batch, channels};
  x = add(std::move(flat));
  Op fc = op(OpKind::Linear, "fc", {x});
  fc.shape = {batch, classes};
  x = add(std::move(fc));
  add(op(OpKind::SoftmaxCELoss, "loss", {x}));
  m.finalize();
  return m;
}

}  // namespace remat
