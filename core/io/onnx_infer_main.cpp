// remat-onnx-infer FILE: runs libonnx's shape inference on the ModelProto in
// FILE and writes "1" + the inferred model, or "0" + the error, to stdout.
// Started by core/io/onnx_shape_inference.cpp, which survives its crashes.
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>

int main(int argc, char** argv) {
  std::string out;
  if (argc != 2) {
    out = "0usage: remat-onnx-infer MODEL.onnx";
  } else {
    std::ifstream f(argv[1], std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    onnx::ModelProto proto;
    if (!f.good() && !f.eof()) {
      out = "0cannot read the model handed over";
    } else if (!proto.ParseFromString(bytes)) {
      out = "0the model handed over could not be parsed";
    } else {
      try {
        // Data propagation computes Reshape targets made of shape arithmetic
        // (torch's view(B, T, H, -1)); without it those shapes stay unknown.
        try {
          onnx::ModelProto copy = proto;
          onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(),
                                             onnx::ShapeInferenceOptions(false, 0, true));
          proto = std::move(copy);
        } catch (const std::exception&) {
          onnx::shape_inference::InferShapes(proto);
        }
        out = "1" + proto.SerializeAsString();
      } catch (const std::exception& e) {
        out = std::string("0") + e.what();
      } catch (...) {
        out = "0unknown exception";
      }
    }
  }
  for (std::size_t at = 0; at < out.size();) {
    const ssize_t n = write(STDOUT_FILENO, out.data() + at, out.size() - at);
    if (n <= 0) return 1;
    at += static_cast<std::size_t>(n);
  }
  return 0;
}
