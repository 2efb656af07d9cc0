// The safetensors writer and reader, and what a dump holds.
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/base/errors.h"
#include "core/exec/safetensors.h"
#include "core/kernels/convert.h"
#include "tests/exec/exec_test_util.h"

namespace remat {
namespace {

std::filesystem::path temp_dir(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("remat_exec_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

TEST(Safetensors, RoundTripAndLayout) {
  const auto dir = temp_dir("st");
  const std::string path = (dir / "t.safetensors").string();
  std::vector<SafeTensor> in = {{"a", "F32", {2, 3}, std::vector<unsigned char>(24, 7)},
                                {"s", "F32", {}, {0, 0, 128, 63}},
                                {"m", "U8", {5}, {1, 0, 1, 1, 0}}};
  write_safetensors(path, in, {{"k", "v"}});
  std::map<std::string, std::string> meta;
  const auto out = read_safetensors(path, &meta);
  ASSERT_EQ(out.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].name, in[i].name);
    EXPECT_EQ(out[i].dtype, in[i].dtype);
    EXPECT_EQ(out[i].shape, in[i].shape);
    EXPECT_EQ(out[i].data, in[i].data);
  }
  EXPECT_EQ(meta.at("k"), "v");
  // Header length: 8 bytes little-endian, header padded to a multiple of 8,
  // file = 8 + header + 24 + 4 + 5 bytes.
  std::ifstream f(path, std::ios::binary);
  unsigned char len[8];
  f.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(std::filesystem::file_size(path), 8 + n + 33);
  std::filesystem::remove_all(dir);
}

TEST(Safetensors, MalformedFilesAreInputErrors) {
  const auto dir = temp_dir("bad");
  const std::string path = (dir / "bad.safetensors").string();
  auto write = [&](const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; };
  write("abc");
  EXPECT_THROW(read_safetensors(path), InputError);
  write(std::string("\xff\0\0\0\0\0\0\0", 8) + "{}");
  EXPECT_THROW(read_safetensors(path), InputError);
  const std::string h = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})";
  std::string len(8, '\0');
  len[0] = static_cast<char>(h.size());
  write(len + h + "1234");  // 4 bytes where a [2] F32 needs 8
  EXPECT_THROW(read_safetensors(path), InputError);
  EXPECT_THROW(read_safetensors((dir / "missing").string()), InputError);
  std::filesystem::remove_all(dir);
}

TEST(Safetensors, DumpHoldsEverythingToRebuildTheStep) {
  const Model m = make_preset("transformer:1:8:3:1");
  CpuBackend cpu;
  const ExecOptions o = testing::quick(5);
  const HostData data = make_host_data(m, o.seed);
  cpu.load(m, data);
  const ExecResult r = execute_loaded(m, testing::schedule_of(m, "sqrt"), cpu, data, o);
  ASSERT_TRUE(r.ok());
  const auto dir = temp_dir("dump");
  (void)write_execution_dump((dir / "d").string(), m, data, r);
  std::map<std::string, std::string> meta;
  const auto tensors = read_safetensors((dir / "d" / "tensors.safetensors").string(), &meta);
  std::map<std::string, const SafeTensor*> by;
  for (const auto& t : tensors) by[t.name] = &t;
  ASSERT_TRUE(by.count("input") && by.count("labels") && by.count("loss"));
  EXPECT_FALSE(by.count("target"));
  EXPECT_EQ(by["labels"]->dtype, "I32");
  float loss;
  std::memcpy(&loss, by["loss"]->data.data(), 4);
  EXPECT_EQ(std::memcmp(&loss, &r.loss, 4), 0);
  const auto params = parameter_tensors(m);
  for (std::size_t k = 0; k < params.size(); ++k) {
    ASSERT_TRUE(by.count("param." + params[k].name)) << params[k].name;
    ASSERT_TRUE(by.count("grad." + params[k].name)) << params[k].name;
    EXPECT_EQ(std::memcmp(by["grad." + params[k].name]->data.data(), r.param_grads[k].data(), 4 * r.param_grads[k].size()), 0);
  }
  int masks = 0;
  for (int v = 0; v < m.size(); ++v) masks += m.op(v).kind == OpKind::Dropout && by.count("mask." + std::to_string(v));
  EXPECT_EQ(masks, 2);
  EXPECT_EQ(meta.at("strategy"), "sqrt");
  EXPECT_EQ(meta.at("seed"), "5");
  const auto ops = nlohmann::json::parse(meta.at("ops"));
  EXPECT_EQ(static_cast<int>(ops.size()), m.size());
  std::filesystem::remove_all(dir);
}

// An f16 model's input goes into the dump as it was uploaded: F16 codes of
// the f32 values rounded to nearest even.
TEST(Safetensors, DumpHoldsAnF16InputInItsDtype) {
  const Model m = make_preset("resnet:10:4:32:2:5:f16");
  CpuBackend cpu;
  const HostData data = make_host_data(m, 3);
  cpu.load(m, data);
  const ExecResult r = execute_loaded(m, testing::schedule_of(m, "store-all"), cpu, data, testing::quick(3));
  ASSERT_TRUE(r.ok()) << r.message;
  for (const SafeTensor& t : execution_tensors(m, data, r)) {
    if (t.name != "input") continue;
    EXPECT_EQ(t.dtype, "F16");
    ASSERT_EQ(t.data.size(), 2 * data.input.size());
    std::vector<uint16_t> codes(data.input.size());
    cpu::f32_to_f16(data.input.data(), codes.data(), static_cast<int64_t>(codes.size()));
    EXPECT_EQ(std::memcmp(t.data.data(), codes.data(), t.data.size()), 0);
    return;
  }
  FAIL() << "no input tensor";
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// The documented hash: FNV-1a 64 over the float32 bytes in order (what a
// Python script over the dump's grad.* tensors reproduces).
TEST(GradHash, IsFnv1a64OverTheRawBytes) {
  EXPECT_EQ(fnv1a64({}), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64({{1.0f, -2.5f}, {}, {0.125f}}), 0x00f39769ef34f0e2ull);
}

}  // namespace
}  // namespace remat
