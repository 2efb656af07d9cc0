// `remat run` as a user runs it: JSON keys, measured == predicted, exit codes,
// one notice for the CPU fallback, out-of-memory rows, dumps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/support/scoped_env.h"
#include "tests/app/cli_runner.h"

namespace {

int count_of(const std::string& s, const std::string& what) {
  int n = 0;
  for (std::size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(CliRun, JsonMeasuredEqualsPredictedForAll) {
  const CliResult r = run_cli("run --model transformer:2:32:8:2 --strategy all --backend cpu --repeat 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["backend"], "cpu");
  ASSERT_GE(j["strategies"].size(), 3u);
  EXPECT_EQ(j["strategies"][0]["name"], "store-all");
  const std::string hash = j["strategies"][0]["grad_hash"];
  EXPECT_EQ(hash.size(), 16u);
  for (const auto& s : j["strategies"]) {
    for (const char* key : {"predicted_peak_bytes", "tracked_peak_bytes", "allocator_peak_bytes",
                            "reserved_peak_bytes", "device_used_bytes", "allocator_parts", "baseline_bytes", "time_ms",
                            "loss", "grad_hash", "backend", "matches_store_all", "instr_ms", "overhead_vs_store_all"})
      EXPECT_TRUE(s.contains(key)) << key;
    EXPECT_EQ(s["status"], "ok");
    EXPECT_EQ(s["tracked_peak_bytes"], s["predicted_peak_bytes"]) << s["name"];
    // The allocator's peak is the sum of its parts, each field as reported.
    const auto& parts = s["allocator_parts"];
    uint64_t sum = 0;
    for (const char* part : {"baseline_bytes", "tensor_bytes", "scratch_bytes", "workspace_bytes", "rounding_bytes"})
      sum += parts[part].get<uint64_t>();
    EXPECT_EQ(s["allocator_peak_bytes"].get<uint64_t>(), sum) << s["name"];
    EXPECT_EQ(parts["baseline_bytes"], s["baseline_bytes"]);
    EXPECT_GE(s["reserved_peak_bytes"].get<uint64_t>(), s["allocator_peak_bytes"].get<uint64_t>());
    EXPECT_GT(s["device_used_bytes"].get<uint64_t>(), 0u);  // the process's resident set on the CPU
    EXPECT_EQ(s["grad_hash"], hash);
    EXPECT_EQ(s["loss"], j["strategies"][0]["loss"]);
    EXPECT_EQ(s["matches_store_all"], true);
    EXPECT_EQ(s["run_ms"].size(), 2u);
    EXPECT_GE(s["issue_ms"].get<double>(), s["time_ms"].get<double>());  // the CPU issues as it runs
  }
}

// The presets in bf16 and f16 run under every strategy, bit for bit
// equal; f16 says its loss scale (GradScaler's 2^16, halved while gradients
// overflow in the warm-up), bf16 runs without one.
TEST(CliRun, MixedPrecisionPresetsRunEveryStrategyEqual) {
  for (const char* spec : {"gpt:1:64:4:16:1:bf16:256", "resnet:18:8:32:2:10:f16"}) {
    const CliResult r = run_cli(std::string("run --model ") + spec + " --strategy all --backend cpu --repeat 1 --json");
    ASSERT_EQ(r.code, 0) << spec << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    const bool f16 = std::string(spec).ends_with("f16");
    for (const auto& s : j["strategies"]) {
      EXPECT_EQ(s["status"], "ok") << spec << " " << s["name"];
      EXPECT_EQ(s["matches_store_all"], true) << spec << " " << s["name"];
      EXPECT_EQ(s["tracked_peak_bytes"], s["predicted_peak_bytes"]) << spec << " " << s["name"];
      EXPECT_EQ(s["step_skipped"], false) << spec;
      const int backoffs = s["loss_scale_backoffs"];
      EXPECT_EQ(s["loss_scale"].get<double>(), f16 ? std::ldexp(65536.0, -backoffs) : 1.0) << spec;
      if (!f16) EXPECT_EQ(backoffs, 0);
    }
  }
  const CliResult table = run_cli("run --model resnet:18:8:32:2:10:f16 --strategy sqrt --backend cpu --repeat 1");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("GradScaler's 65536 for f16, halved "), std::string::npos) << table.out;
}

// The presets under autocast's dtype policies (DTYPE bf16@cuda, f16@cpu):
// every strategy from the command line, bit for bit equal, tracked peaks the
// predicted ones; a device autocast has no lists for is refused with exit 2.
TEST(CliRun, AutocastPresetsRunEveryStrategyEqual) {
  for (const char* spec : {"gpt:1:64:4:16:1:bf16@cuda:256", "resnet:18:8:32:2:10:f16@cpu"}) {
    const CliResult r = run_cli(std::string("run --model ") + spec + " --strategy all --backend cpu --repeat 1 --json");
    ASSERT_EQ(r.code, 0) << spec << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_GE(j["strategies"].size(), 3u) << spec;
    for (const auto& s : j["strategies"]) {
      EXPECT_EQ(s["status"], "ok") << spec << " " << s["name"];
      EXPECT_EQ(s["matches_store_all"], true) << spec << " " << s["name"];
      EXPECT_EQ(s["tracked_peak_bytes"], s["predicted_peak_bytes"]) << spec << " " << s["name"];
    }
  }
  const CliResult bad = run_cli("simulate --model gpt:1:64:4:16:1:bf16@tpu:256");
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err, "remat: error: DTYPE in 'gpt:1:64:4:16:1:bf16@tpu:256': the autocast device after '@' must be cpu or cuda, got 'tpu'\n");
}

TEST(CliRun, TableAddsStoreAllAsReference) {
  const CliResult r = run_cli("run --model mlp:3:32:4 --strategy every-k:2 --backend cpu --repeat 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("store-all*"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("every-k:2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("yes"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");  // --backend cpu: no notice; not a terminal and short: no progress
}

// 'all' inside a list: the argument-free strategies and the others named,
// each run once in the order first named.
TEST(CliRun, AllInsideAListAddsTheNamedOnes) {
  const CliResult r = run_cli("run --model mlp:2:16:4 --strategy sqrt,all,offload,sqrt --backend cpu --repeat 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::vector<std::string> names;
  for (const auto& s : j["strategies"]) names.push_back(s["name"].get<std::string>());
  EXPECT_EQ(names, (std::vector<std::string>{"sqrt", "store-all", "recompute-all", "auto", "selective", "offload"}));
}

TEST(CliRun, AutoFallsBackToCpuWithOneNotice) {
  const CliResult r = run_cli("run --model mlp:2:16:4 --strategy store-all,sqrt --repeat 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  if (j["backend"] == "cpu") {
    EXPECT_EQ(count_of(r.err, "no GPU"), 1) << r.err;
    EXPECT_EQ(count_of(r.err, "\n"), 1) << r.err;
  } else {
    EXPECT_EQ(r.err, "");
  }
}

// With a device: it runs there and every strategy matches store-all; without
// one: one error line, nothing on stdout.
TEST(CliRun, ExplicitCudaRunsThereOrIsOneError) {
  const CliResult r = run_cli("run --model mlp:2:16:4 --backend cuda --repeat 1 --json");
  if (r.code == 0) {
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["backend"].get<std::string>().rfind("cuda: ", 0), 0u) << j["backend"];
    for (const auto& s : j["strategies"]) {
      EXPECT_EQ(s["status"], "ok") << s.dump();
      EXPECT_EQ(s["matches_store_all"], true) << s.dump();
    }
    EXPECT_EQ(r.err, "");
    return;
  }
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(count_of(r.err, "\n"), 1) << r.err;
  EXPECT_EQ(r.err.rfind("remat: error: --backend cuda: ", 0), 0u) << r.err;
  EXPECT_EQ(r.out, "");
}

// A CUDA switch's bad value: refused before any work where the run may use
// CUDA (exit 2, the one message, nothing on stdout) and ignored with
// --backend cpu, whose run it returns (run with `cpu_flags`). The variable is
// put back as it was: a device session bisecting may have set it.
CliResult expect_refused_unless_cpu(const char* var, const char* bad_value, const std::string& model,
                                    const std::string& refusal, const std::string& cpu_flags = "--json") {
  const remat::testing::ScopedEnv env(var);
  env.set(bad_value);
  const CliResult bad = run_cli(model + "--backend auto");
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err, std::string("remat: error: ") + var + ": '" + bad_value + "' " + refusal + "\n");
  EXPECT_EQ(bad.out, "");
  return run_cli(model + "--backend cpu " + cpu_flags);
}

// REMAT_CUDA_GEMM (docs/gpu.md#mixed-precision-on-tensor-cores): a value
// other than tensor or f32 is refused before any work where the run may use
// CUDA, and ignored with --backend cpu; the JSON's cuda_gemm says which path
// ran the bf16 products: null on the CPU; on a GPU (the environment's path,
// tensor cores unless set) all 7 lowered ops of a GPT block: 5 Linears, 2 MatMuls.
TEST(CliRun, CudaGemmSwitch) {
  const std::string model = "run --model gpt:1:32:4:16:2:bf16:64 --strategy store-all --repeat 1 ";
  const char* set = std::getenv("REMAT_CUDA_GEMM");  // a device session bisecting may have set it
  const std::string path = set && *set ? set : "tensor";
  const CliResult ignored = expect_refused_unless_cpu(
      "REMAT_CUDA_GEMM", "fast", model,
      "is not a GEMM path (tensor: tensor cores on 16-bit operands, the default; f32: f32 GEMMs)");
  ASSERT_EQ(ignored.code, 0) << ignored.err;
  EXPECT_TRUE(nlohmann::json::parse(ignored.out)["cuda_gemm"].is_null());
  const CliResult r = run_cli(model + "--backend auto --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  if (j["backend"] == "cpu") {
    EXPECT_TRUE(j["cuda_gemm"].is_null());
    return;
  }
  EXPECT_EQ(j["cuda_gemm"]["path"], path);
  EXPECT_EQ(j["cuda_gemm"]["lowered_ops"], 7);
  EXPECT_EQ(j["cuda_gemm"]["tensor_core_ops"], path == "f32" ? 0 : 7);
}

// REMAT_CUDA_POINTWISE (docs/gpu.md#16-bit-loads-and-stores): as
// REMAT_CUDA_GEMM, refused before any work where the run may use CUDA,
// ignored with --backend cpu; the JSON's cuda_pointwise: null on the CPU; on
// a GPU the environment's path (16-bit loads and stores unless set), all 10
// ops of a GPT block under CUDA autocast that widen (PointwisePath.CountsForTheRunReport).
TEST(CliRun, CudaPointwiseSwitch) {
  const std::string model = "run --model gpt:1:32:4:16:2:bf16@cuda:64 --strategy store-all --repeat 1 ";
  const char* set = std::getenv("REMAT_CUDA_POINTWISE");  // a device session bisecting may have set it
  const std::string path = set && *set ? set : "16bit";
  const CliResult ignored = expect_refused_unless_cpu(
      "REMAT_CUDA_POINTWISE", "fast", model,
      "is not a pointwise path (16bit: kernels load and store bf16/f16 tensors as stored, the default; f32: on "
      "widened f32 copies)");
  ASSERT_EQ(ignored.code, 0) << ignored.err;
  EXPECT_TRUE(nlohmann::json::parse(ignored.out)["cuda_pointwise"].is_null());
  const CliResult r = run_cli(model + "--backend auto --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  if (j["backend"] == "cpu") {
    EXPECT_TRUE(j["cuda_pointwise"].is_null());
    return;
  }
  EXPECT_EQ(j["cuda_pointwise"]["path"], path);
  EXPECT_EQ(j["cuda_pointwise"]["widening_ops"], 10);
  EXPECT_EQ(j["cuda_pointwise"]["direct_ops"], path == "f32" ? 0 : 10);
  const CliResult table = run_cli(model + "--backend auto");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find(path == "f32" ? "widened to f32 copies for all 10 ops"
                                         : "loaded and stored as stored for all 10 ops"),
            std::string::npos)
      << table.out;
}

// REMAT_CUDA_GATE (docs/gpu.md, "Is a step waiting for the host?"): a value
// other than 0 or 1 is refused before any work where the run may use CUDA,
// and ignored with --backend cpu, whose times it does not concern.
TEST(CliRun, CudaGateSwitch) {
  const std::string model = "run --model mlp:2:16:4 --strategy store-all --repeat 1 ";
  const CliResult ignored = expect_refused_unless_cpu(
      "REMAT_CUDA_GATE", "on", model,
      "is not 0 or 1 (1: each instruction's kernels timed alone, to see whether a step waits for the host)", "");
  EXPECT_EQ(ignored.code, 0) << ignored.err;
}

// REMAT_CUDA_CONV, the same for the convolutions: refused before any work
// where the run may use CUDA, ignored on the CPU; the JSON's cuda_conv says
// which path ran a bf16 ResNet-10's 12 convolutions (null on the CPU, and
// for a model without convolutions).
TEST(CliRun, CudaConvSwitch) {
  const std::string model = "run --model resnet:10:4:32:2:5:bf16@cuda --strategy store-all --repeat 1 ";
  const char* set = std::getenv("REMAT_CUDA_CONV");  // a device session bisecting may have set it
  const std::string path = set && *set ? set : "tensor";
  const CliResult ignored = expect_refused_unless_cpu(
      "REMAT_CUDA_CONV", "fast", model,
      "is not a convolution path (tensor: cuDNN on 16-bit operands with tensor-op math, the default; f32: f32 "
      "convolutions)");
  ASSERT_EQ(ignored.code, 0) << ignored.err;
  EXPECT_TRUE(nlohmann::json::parse(ignored.out)["cuda_conv"].is_null());
  const CliResult r = run_cli(model + "--backend auto --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  if (j["backend"] == "cpu") {
    EXPECT_TRUE(j["cuda_conv"].is_null());
    return;
  }
  EXPECT_EQ(j["cuda_conv"]["path"], path);
  EXPECT_EQ(j["cuda_conv"]["lowered_ops"], 12);
  EXPECT_EQ(j["cuda_conv"]["tensor_core_ops"], path == "f32" ? 0 : 12);
  const CliResult gpt = run_cli("run --model gpt:1:32:4:16:2:bf16:64 --strategy store-all --repeat 1 --backend auto --json");
  ASSERT_EQ(gpt.code, 0) << gpt.err;
  EXPECT_TRUE(nlohmann::json::parse(gpt.out)["cuda_conv"].is_null());
}

TEST(CliRun, OutOfMemoryIsARowNotAFailure) {
  const CliResult sim = run_cli("simulate --model chain:16:64 --strategy store-all,sqrt --json");
  ASSERT_EQ(sim.code, 0) << sim.err;
  const auto s = nlohmann::json::parse(sim.out);
  const uint64_t sqrt_peak = s["strategies"][1]["peak_bytes"];
  const auto timeline = s["strategies"][0]["timeline"].get<std::vector<uint64_t>>();
  const auto first_over = std::find_if(timeline.begin(), timeline.end(), [&](uint64_t b) { return b > sqrt_peak; });
  const CliResult r = run_cli("run --model chain:16:64 --strategy store-all,sqrt --backend cpu --repeat 1 --json "
                              "--memory-limit " + std::to_string(sqrt_peak));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["strategies"][0]["status"], "out-of-memory");
  EXPECT_EQ(j["strategies"][0]["oom"]["instruction"], first_over - timeline.begin());
  EXPECT_EQ(j["strategies"][1]["status"], "ok");
  EXPECT_EQ(j["strategies"][1]["tracked_peak_bytes"], sqrt_peak);
}

// --memory-limit as a share is of store-all's predicted peak: 100% lets
// store-all run to exactly it, 50% stops it where half its bytes in bytes do.
TEST(CliRun, AMemoryLimitShareIsOfStoreAllsPeak) {
  const CliResult sim = run_cli("simulate --model chain:16:64 --strategy store-all --json");
  ASSERT_EQ(sim.code, 0) << sim.err;
  const uint64_t peak = nlohmann::json::parse(sim.out)["strategies"][0]["peak_bytes"];
  ASSERT_EQ(peak % 2, 0u);
  const auto run = [](const std::string& limit) {
    const CliResult r = run_cli("run --model chain:16:64 --strategy store-all --backend cpu --repeat 1 --json "
                                "--memory-limit " + limit);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? nlohmann::json::parse(r.out)["strategies"][0] : nlohmann::json();
  };
  const auto all = run("100%");
  EXPECT_EQ(all["status"], "ok");
  EXPECT_EQ(all["tracked_peak_bytes"], peak);
  const auto half = run("50%");
  EXPECT_EQ(half["status"], "out-of-memory");
  EXPECT_EQ(half["oom"], run(std::to_string(peak / 2))["oom"]);
}

TEST(CliRun, BadInputIsOneMessageAndExit2) {
  for (const char* args : {"run --model chain:8 --backend cpu", "run --model mlp:2 --strategy nope",
                           "run --model mlp:2 --backend tpu", "run --model mlp:2 --repeat 0",
                           "run --model mlp:2 --memory-limit lots", "run --model nosuch.json",
                           "run --model mlp:2 --seed 4294967296", "run --model mlp:2 --memory-limit x%",
                           "run --model mlp:2 --memory-limit 0%", "run --model mlp:2 --strategy dtr:-1%"}) {
    SCOPED_TRACE(args);
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(count_of(r.err, "\n"), 1) << r.err;
    EXPECT_EQ(r.err.rfind("remat: error: ", 0), 0u) << r.err;
    EXPECT_EQ(r.out, "");
  }
  const CliResult r = run_cli("run --model chain:8 --backend cpu");
  EXPECT_NE(r.err.find("model chain:8 has simulate-only ops: "), std::string::npos) << r.err;
}

TEST(CliRun, DumpWritesTheTensors) {
  const std::string dir = temp_path("dump");
  std::filesystem::remove_all(dir);
  const CliResult r = run_cli("run --model mlp:2:8:2 --strategy sqrt --backend cpu --repeat 1 --dump " + dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir + "/tensors.safetensors"));
  const std::string file = temp_path("a_file");
  { std::ofstream(file) << "x"; }
  const CliResult bad = run_cli("run --model mlp:2:8:2 --backend cpu --repeat 1 --dump " + file + "/sub");
  EXPECT_EQ(bad.code, 2) << bad.err;
  std::filesystem::remove_all(dir);
}

}  // namespace

namespace {

// chain:10:16 with offload:3: device 7 x 16 bytes, host 3 x 16
// (tests/strategies/test_offload.cpp derives the tensor counts).
TEST(CliRun, OffloadMeasuredTiersEqualPredicted) {
  const CliResult r = run_cli("run --model chain:10:16 --strategy offload:3 --backend cpu --repeat 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& s = j["strategies"][1];
  EXPECT_EQ(s["name"], "offload:3");
  EXPECT_EQ(s["predicted_peak_bytes"], 7 * 16);
  EXPECT_EQ(s["tracked_peak_bytes"], 7 * 16);
  EXPECT_EQ(s["predicted_peak_host_bytes"], 3 * 16);
  EXPECT_EQ(s["tracked_peak_host_bytes"], 3 * 16);
  EXPECT_GE(s["host_allocator_peak_bytes"].get<uint64_t>(), 3u * 16);
  EXPECT_EQ(s["transfers"], 6);
  EXPECT_EQ(s["matches_store_all"], true);
  EXPECT_EQ(s["grad_hash"], j["strategies"][0]["grad_hash"]);

  const CliResult t = run_cli("run --model chain:10:16 --strategy offload:3 --backend cpu --repeat 1");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("host tier (offload)"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("offload:3                 112 B          112 B           48 B           48 B"), std::string::npos)
      << t.out;
}

// A compressed strategy: measured == predicted at the stored sizes (chain:7:64
// under sqrt+compress:bf16: 6 tensors of 64 bytes and C(x) of 32, derived in
// tests/strategies/test_compress.cpp), not bitwise equal and that is no
// failure, the relative error in the JSON and under the table; an
// uncompressed strategy in the same run still must match and says so.
TEST(CliRun, CompressedStrategiesReportTheirErrorInsteadOfBitwiseEquality) {
  const CliResult r =
      run_cli("run --model chain:7:64 --strategy sqrt,sqrt+compress:bf16 --backend cpu --repeat 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["strategies"].size(), 3u);  // store-all added as the reference
  const auto& plain = j["strategies"][1];
  const auto& bf16 = j["strategies"][2];
  EXPECT_EQ(plain["name"], "sqrt");
  EXPECT_EQ(plain["compressed"], false);
  EXPECT_EQ(plain["matches_store_all"], true);
  EXPECT_TRUE(plain["relative_error"].is_null());
  EXPECT_EQ(bf16["name"], "sqrt+compress:bf16");
  EXPECT_EQ(bf16["compressed"], true);
  EXPECT_EQ(bf16["predicted_peak_bytes"], 6 * 64 + 32);
  EXPECT_EQ(bf16["tracked_peak_bytes"], 6 * 64 + 32);
  EXPECT_EQ(bf16["matches_store_all"], false);
  EXPECT_EQ(bf16["loss"], j["strategies"][0]["loss"]);  // the forward pass reads nothing decompressed
  const auto& e = bf16["relative_error"];
  EXPECT_EQ(e["loss"].get<double>(), 0.0);
  EXPECT_GT(e["grad"].get<double>(), 0.0);
  EXPECT_LT(e["grad"].get<double>(), 1e-2);
  EXPECT_EQ(e["grad_norm"], "l2");
  EXPECT_TRUE(e["worst_parameter"].is_string());

  // Run to run: the same bits.
  const CliResult again =
      run_cli("run --model chain:7:64 --strategy sqrt,sqrt+compress:bf16 --backend cpu --repeat 1 --json");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out)["strategies"][2]["grad_hash"], bf16["grad_hash"]);

  const CliResult t = run_cli("run --model chain:7:64 --strategy sqrt,sqrt+compress:int8 --backend cpu --repeat 1");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("compressed checkpoints: relative error against store-all"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("sqrt+compress:int8       0.000e+00"), std::string::npos) << t.out;
  EXPECT_EQ(count_of(t.out, "   yes\n"), 2) << t.out;  // store-all and sqrt
  EXPECT_EQ(count_of(t.out, "     ~\n"), 1) << t.out;
}

// --nondeterministic-backward on the CPU: accepted, nothing changes (the CPU
// has no non-deterministic backward), and the run says so once, in the table
// and in the JSON; the gradients are bitwise those of a run without it.
// Without the option the table says nothing of it and the JSON's field says
// it was not asked for.
TEST(CliRun, NondeterministicBackwardOnTheCpuChangesNothingAndSaysSo) {
  const std::string base = "run --model resnet:10:2:32:2:5 --strategy store-all,sqrt --backend cpu --repeat 1";
  const CliResult plain = run_cli(base + " --json");
  const CliResult asked = run_cli(base + " --json --nondeterministic-backward");
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(asked.code, 0) << asked.err;
  const auto p = nlohmann::json::parse(plain.out), a = nlohmann::json::parse(asked.out);
  const std::string note = "the CPU backend has no non-deterministic backward; gradients stay bitwise reproducible";
  EXPECT_EQ(a["nondeterministic_backward"],
            nlohmann::json({{"requested", true},
                            {"algorithms", nlohmann::json::array()},
                            {"dropped_guarantees", nlohmann::json::array()},
                            {"kept_guarantees", nlohmann::json::array()},
                            {"note", note}}));
  EXPECT_EQ(p["nondeterministic_backward"]["requested"], false);
  EXPECT_TRUE(p["nondeterministic_backward"]["note"].is_null());
  EXPECT_TRUE(p["nondeterministic_backward"]["algorithms"].empty());
  ASSERT_EQ(a["strategies"].size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& s = a["strategies"][i];
    EXPECT_EQ(s["matches_store_all"], true) << s["name"];
    EXPECT_EQ(s["loss_matches_store_all"], true) << s["name"];
    EXPECT_TRUE(s["relative_error"].is_null()) << s["name"];
    EXPECT_EQ(s["grad_hash"], p["strategies"][i]["grad_hash"]) << s["name"];
    EXPECT_EQ(s["loss"], p["strategies"][i]["loss"]) << s["name"];
  }

  const CliResult table = run_cli(base + " --nondeterministic-backward");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_EQ(count_of(table.out, "--nondeterministic-backward: " + note + "\n"), 1) << table.out;
  EXPECT_EQ(count_of(table.out, "--nondeterministic-backward"), 1) << table.out;
  EXPECT_EQ(count_of(table.out, "   yes\n"), 2) << table.out;  // store-all and sqrt, bit for bit
  EXPECT_EQ(table.out.find("non-deterministic backward: gradients against store-all"), std::string::npos);
  const CliResult off = run_cli(base);
  ASSERT_EQ(off.code, 0) << off.err;
  EXPECT_EQ(off.out.find("nondeterministic"), std::string::npos) << off.out;
  EXPECT_EQ(off.out.find("non-deterministic"), std::string::npos) << off.out;

  // A flag: it takes no value.
  const CliResult bad = run_cli(base + " --nondeterministic-backward=maybe");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.err.find("--nondeterministic-backward"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.out, "");
  EXPECT_NE(run_cli("run --help").out.find("--nondeterministic-backward"), std::string::npos);
}

// With a device (--backend cuda), a ResNet's convolutions take cuDNN's
// first-ranked backward algorithms: the JSON names what ran that way and the
// guarantees dropped, every strategy keeps store-all's loss bits and reports
// its gradients' relative error where they differ, within the bound
// tests/gpu/test_cuda_backend.cpp's CudaNondeterministicBackward derives:
// convolutions · 2γ_K, here 20 convolutions and K at most n·h·w = 8·32·32
// (every output position of the largest image). Without a device: the one
// error of ExplicitCudaRunsThereOrIsOneError.
TEST(CliRun, NondeterministicBackwardOnCudaNamesWhatItDropped) {
  const CliResult r = run_cli("run --model resnet:18:8:32:2:10 --strategy store-all,sqrt,recompute-all --backend cuda "
                              "--repeat 1 --json --nondeterministic-backward");
  if (r.code != 0) {  // no device: the one error, nothing written (a pass, not a skip: CI has no GPU)
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("remat: error: "), std::string::npos) << r.err;
    EXPECT_EQ(count_of(r.err, "\n"), 1) << r.err;
    return;
  }
  const auto j = nlohmann::json::parse(r.out);
  const auto& nd = j["nondeterministic_backward"];
  EXPECT_EQ(nd["requested"], true);
  if (nd["algorithms"].empty()) {  // cuDNN ranked a deterministic algorithm first everywhere: nothing dropped
    EXPECT_TRUE(nd["dropped_guarantees"].empty()) << nd.dump();
    EXPECT_FALSE(nd["note"].is_null()) << nd.dump();
    for (const auto& s : j["strategies"]) EXPECT_EQ(s["matches_store_all"], true) << s["name"];
    return;
  }
  ASSERT_EQ(nd["algorithms"].size(), 1u) << nd.dump();
  EXPECT_EQ(nd["algorithms"][0].get<std::string>().rfind("cuDNN convolution backward: ", 0), 0u) << nd.dump();
  EXPECT_EQ(nd["dropped_guarantees"],
            nlohmann::json::array({"parameter gradients bitwise equal across strategies",
                                   "parameter gradients bitwise equal from run to run"}));
  EXPECT_TRUE(nd["note"].is_null());
  for (const auto& s : j["strategies"]) {
    EXPECT_EQ(s["status"], "ok") << s["name"];
    EXPECT_EQ(s["loss_matches_store_all"], true) << s["name"];
    EXPECT_EQ(s["tracked_peak_bytes"], s["predicted_peak_bytes"]) << s["name"];
    EXPECT_FALSE(s["relative_error"].is_null()) << s["name"];
    EXPECT_EQ(s["relative_error"]["loss"].get<double>(), 0.0) << s["name"];
    const double k = 8 * 32 * 32, gamma = k * 0x1p-24 / (1 - k * 0x1p-24);
    EXPECT_LE(s["relative_error"]["grad"].get<double>(), 20 * 2 * gamma) << s["name"];
  }
}

// The conversions' time, measured beside the time model's: chain:7:64 under
// sqrt+compress:bf16 compresses and decompresses x and a3 (4 conversions),
// each reading or writing A(v) of 64 bytes and C(v) of 32: predicted
// 4 (64 + 32) bytes over the device memory's bandwidth. Measured times are
// only checked to be there and non-negative.
TEST(CliRun, ConversionsAreMeasuredBesideThePrediction) {
  const CliResult r = run_cli(
      "run --model chain:7:64 --strategy sqrt,sqrt+compress:bf16 --backend cpu --repeat 2 --device-bandwidth 1T --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["strategies"].size(), 3u);
  const auto& plain = j["strategies"][1];
  const auto& bf16 = j["strategies"][2];
  EXPECT_EQ(plain["conversions"], 0);
  EXPECT_EQ(plain["convert_ms"].get<double>(), 0.0);
  EXPECT_EQ(plain["predicted_time"]["convert_s"].get<double>(), 0.0);
  EXPECT_EQ(bf16["conversions"], 4);
  ASSERT_TRUE(bf16["convert_ms"].is_number());
  EXPECT_GE(bf16["convert_ms"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(bf16["predicted_time"]["convert_s"].get<double>(), 4.0 * (64 + 32) / 1e12);

  const CliResult t = run_cli("run --model chain:7:64 --strategy sqrt+compress:int8 --backend cpu --repeat 1");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("conversions pred. convert     measured"), std::string::npos) << t.out;
  // int8: 4 (64 + 20) bytes over the default 2e12 bytes/s = 0.168 ns, printed
  // to one decimal below a microsecond.
  const auto row = t.out.find("sqrt+compress:int8       0.000e+00");
  ASSERT_NE(row, std::string::npos) << t.out;
  const std::string line = t.out.substr(row, t.out.find('\n', row) - row);
  EXPECT_NE(line.find("           4 "), std::string::npos) << line;
  EXPECT_NE(line.find(" 0.2 ns "), std::string::npos) << line;
  EXPECT_NE(line.find(" ms "), std::string::npos) << line;
}

TEST(CliRun, BadCompressSpecIsOneMessageAndExit2) {
  for (const char* spec : {"sqrt+compress:fp8", "compress:bf16", "sqrt+compress:bf16+compress:int8"}) {
    SCOPED_TRACE(spec);
    const CliResult r = run_cli(std::string("run --model chain:7:64 --backend cpu --strategy ") + spec);
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(count_of(r.err, "\n"), 1) << r.err;
    EXPECT_NE(r.err.find(std::string("strategy '") + spec + "'"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

}  // namespace

namespace remat {
namespace {

// dtr decides inside the run (docs/run.md); --replay-decisions replays its
// simulated schedule. Either way: store-all's gradients, under the budget.
TEST(CliRun, DtrDecidesAtRunTimeUnlessReplayed) {
  for (const char* extra : {"", " --replay-decisions"}) {
    const CliResult r = run_cli(std::string("run --model mlp:4:16:4 --strategy dtr:1.5K --backend cpu --json") + extra);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["strategies"].size(), 2u);
    const auto& dtr = j["strategies"][1];
    EXPECT_EQ(dtr["name"], "dtr:1536");
    EXPECT_EQ(dtr["status"], "ok");
    EXPECT_EQ(dtr["decided_at_run_time"], std::string(extra).empty());
    EXPECT_FALSE(j["strategies"][0]["decided_at_run_time"].get<bool>());
    EXPECT_EQ(dtr["tracked_peak_bytes"], dtr["predicted_peak_bytes"]);
    EXPECT_LE(dtr["tracked_peak_bytes"].get<uint64_t>(), 1536u);
    EXPECT_EQ(dtr["matches_store_all"], true);
  }
  // The table says which strategies decided inside the run.
  const CliResult table = run_cli("run --model mlp:4:16:4 --strategy dtr:1.5K --backend cpu");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("dtr:1536: decided inside the run from the allocator's count, as simulated"),
            std::string::npos)
      << table.out;
}

}  // namespace
}  // namespace remat
