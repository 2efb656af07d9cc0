// The window's Run: core's execute_strategies on the CPU with the CLI's
// equality rule, so every figure it shows is what `remat run` prints.
#include <QSignalSpy>
#include <QTest>
#include <cstdio>
#include <filesystem>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/exec/cuda_module.h"
#include "core/io/model_source.h"
#include "core/sim/simulator.h"
#include "tests/app/cli_runner.h"
#include "widgets/controllers/run_controller.h"
#include "widgets/document/comparison_model.h"

using namespace remat;

namespace {
std::map<std::string, MeasuredRun> measuredOf(const QSignalSpy& done) {
  return done.at(0).at(0).value<std::map<std::string, MeasuredRun>>();
}
std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}
}  // namespace

TEST(RunController, MeasuredEqualsPredictedOnTheCpu) {
  const Model m = load_model("chain:16:64");
  const auto runs = simulate_strategies(m, {"store-all", "sqrt", "recompute-all"});
  RunController rc;
  QSignalSpy done(&rc, &RunController::finished);
  QSignalSpy progress(&rc, &RunController::progress);
  ASSERT_TRUE(rc.start(m, runs, 1));
  EXPECT_TRUE(rc.running());
  EXPECT_FALSE(rc.start(m, runs));  // one run at a time
  ASSERT_TRUE(done.wait(30000));
  EXPECT_FALSE(rc.running());
  ASSERT_GT(progress.count(), 0);
  EXPECT_DOUBLE_EQ(progress.back().at(0).toDouble(), 1.0);
  EXPECT_TRUE(done.at(0).at(1).toString().isEmpty());
  const auto measured = measuredOf(done);
  ASSERT_EQ(measured.size(), 3u);
  for (const auto& r : runs) {
    const MeasuredRun& mr = measured.at(r.spec);
    EXPECT_EQ(mr.status, "ok");
    EXPECT_EQ(mr.tracked_peak, r.sim.peak_bytes) << r.spec;
    EXPECT_EQ(mr.timeline, r.sim.timeline) << r.spec;
    EXPECT_TRUE(mr.matches_reference) << r.spec;
  }
  // Bit-identical means the same loss and gradients as store-all.
  EXPECT_EQ(measured.at("sqrt").grad_hash, measured.at("store-all").grad_hash);
  EXPECT_EQ(measured.at("sqrt").loss, measured.at("store-all").loss);
}

// Where Run executes, as `remat run --backend`: the default is the GPU when one
// answers, else the CPU with the reason kept; the GPU only fails the run with
// that reason. Without a GPU here (CI), both fall to their no-GPU behaviour.
TEST(RunController, WithoutAGpuAutoRunsOnTheCpuAndGpuOnlySaysWhy) {
  std::string why;
  if (load_cuda_backend(&why)) GTEST_SKIP() << "a GPU answers here";
  const Model m = load_model("chain:8:64");
  const auto runs = simulate_strategies(m, {"store-all", "sqrt"});
  RunController rc;
  EXPECT_EQ(rc.device(), RunDevice::Auto);
  QSignalSpy done(&rc, &RunController::finished);
  ASSERT_TRUE(rc.start(m, runs, 1));
  ASSERT_TRUE(done.wait(30000));
  EXPECT_TRUE(done.at(0).at(1).toString().isEmpty());
  EXPECT_EQ(measuredOf(done).at("sqrt").status, "ok");
  EXPECT_EQ(measuredOf(done).at("sqrt").backend, "cpu");
  EXPECT_EQ(rc.lastBackend(), "cpu");
  EXPECT_EQ(rc.lastNoGpu().toStdString(), why);
  EXPECT_EQ(RunController::backendLabel(rc.lastBackend()), "the CPU");

  rc.setDevice(RunDevice::Gpu);
  ASSERT_TRUE(rc.start(m, runs, 1));
  ASSERT_TRUE(done.wait(30000));
  EXPECT_EQ(done.at(1).at(1).toString().toStdString(), "no usable GPU: " + why);
  EXPECT_TRUE((done.at(1).at(0).value<std::map<std::string, MeasuredRun>>().empty()));

  rc.setDevice(RunDevice::Cpu);
  ASSERT_TRUE(rc.start(m, runs, 1));
  ASSERT_TRUE(done.wait(30000));
  EXPECT_EQ(rc.lastBackend(), "cpu");
  EXPECT_TRUE(rc.lastNoGpu().isEmpty());  // the CPU was asked for: nothing to explain
  EXPECT_EQ(RunController::backendLabel("cuda: NVIDIA H100 80GB HBM3"), "the GPU (NVIDIA H100 80GB HBM3)");
}

// The same model and strategies through `remat run --json` and through the
// window: every figure the table shows agrees. store-all is not chosen, so
// both add it as the reference of the equality rule and do not report it.
TEST(RunController, TheWindowsRunEqualsTheClis) {
  if (!std::filesystem::exists(REMAT_CLI)) GTEST_SKIP() << "build the remat target first";
  const Model m = load_model("mlp:4:64:8");
  const auto runs = simulate_strategies(m, {"sqrt", "recompute-all"});
  RunController rc;
  QSignalSpy done(&rc, &RunController::finished);
  ASSERT_TRUE(rc.start(m, runs, 1));
  ASSERT_TRUE(done.wait(60000));
  const auto measured = measuredOf(done);
  ASSERT_EQ(measured.size(), 2u);  // the reference is not a row

  const CliResult cli = run_cli("run --model mlp:4:64:8 --strategy sqrt,recompute-all --backend cpu --repeat 1 --json");
  ASSERT_EQ(cli.code, 0) << cli.err;
  const auto j = nlohmann::json::parse(cli.out);
  int compared = 0;
  for (const auto& s : j["strategies"]) {
    if (s["reference_only"].get<bool>()) {
      EXPECT_EQ(s["name"], "store-all");
      continue;
    }
    const std::string name = s["name"];
    SCOPED_TRACE(name);
    const MeasuredRun& w = measured.at(name);
    EXPECT_EQ(w.status.toStdString(), s["status"].get<std::string>());
    EXPECT_EQ(w.tracked_peak, s["tracked_peak_bytes"].get<uint64_t>());
    EXPECT_EQ(w.allocator_peak, s["allocator_peak_bytes"].get<uint64_t>());
    EXPECT_EQ(w.reserved_peak, s["reserved_peak_bytes"].get<uint64_t>());
    EXPECT_EQ(w.baseline, s["baseline_bytes"].get<uint64_t>());
    EXPECT_EQ(w.loss, s["loss"].get<float>());
    EXPECT_EQ(hex64(w.grad_hash), s["grad_hash"].get<std::string>());
    EXPECT_EQ(w.matches_reference, s["matches_store_all"].get<bool>());
    EXPECT_TRUE(w.matches_reference);
    ++compared;
  }
  EXPECT_EQ(compared, 2);
}

TEST(RunController, CancelDeliversNothing) {
  const Model m = load_model("mlp:16:512:64");
  const auto runs = simulate_strategies(m, {"store-all", "sqrt", "recompute-all"});
  RunController rc;
  QSignalSpy done(&rc, &RunController::finished);
  QSignalSpy progress(&rc, &RunController::progress);
  QSignalSpy cancelled(&rc, &RunController::cancelled);
  ASSERT_TRUE(rc.start(m, runs, /*repeat=*/200));
  ASSERT_TRUE(progress.wait(30000));
  rc.cancel();
  EXPECT_EQ(cancelled.count(), 1);
  EXPECT_FALSE(rc.running());
  ASSERT_TRUE(rc.jobs()->wait(30000));  // the executor saw the flag and returned
  QTest::qWait(100);
  EXPECT_EQ(done.count(), 0);
  const int reports = progress.count();
  QTest::qWait(100);
  EXPECT_EQ(progress.count(), reports);  // nothing after the cancel either
  EXPECT_TRUE(QTest::qWaitFor([&] { return !rc.jobs()->busy(); }, 10000));
}

TEST(RunController, ASimulateOnlyModelSaysWhyBeforeAndAfter) {
  const Model m = load_model("chain:16");  // 1-byte activations: simulate only
  EXPECT_EQ(RunController::cannotRun(m), "1-byte tensors cannot run: try chain:16:4");
  EXPECT_TRUE(RunController::cannotRun(load_model("chain:16:4")).isEmpty());
  RunController rc;
  QSignalSpy done(&rc, &RunController::finished);
  ASSERT_TRUE(rc.start(m, simulate_strategies(m, {"sqrt"})));
  ASSERT_TRUE(done.wait(30000));
  EXPECT_TRUE(done.at(0).at(1).toString().contains("simulate-only ops"));
}

// A compressed strategy in the window: not bit-identical, and the Comparison
// tab shows its relative error, the same figures `remat run --json` prints.
TEST(RunController, CompressedStrategyShowsItsErrorInTheComparisonTab) {
  if (!std::filesystem::exists(REMAT_CLI)) GTEST_SKIP() << "build the remat target first";
  const Model m = load_model("chain:12:256");
  const auto runs = simulate_strategies(m, {"sqrt", "sqrt+compress:bf16"});
  RunController rc;
  QSignalSpy done(&rc, &RunController::finished);
  ASSERT_TRUE(rc.start(m, runs, 1));
  ASSERT_TRUE(done.wait(60000));
  const auto measured = measuredOf(done);
  const MeasuredRun& plain = measured.at("sqrt");
  const MeasuredRun& bf16 = measured.at("sqrt+compress:bf16");
  EXPECT_FALSE(plain.compressed);
  EXPECT_TRUE(plain.matches_reference);
  EXPECT_TRUE(bf16.compressed);
  EXPECT_FALSE(bf16.matches_reference);
  EXPECT_GT(bf16.grad_error, 0.0);
  EXPECT_LT(bf16.grad_error, 1e-2);
  EXPECT_EQ(bf16.loss_error, 0.0);  // the forward pass reads no decompressed tensor

  const CliResult cli =
      run_cli("run --model chain:12:256 --strategy sqrt,sqrt+compress:bf16 --backend cpu --repeat 1 --json");
  ASSERT_EQ(cli.code, 0) << cli.err;
  const auto j = nlohmann::json::parse(cli.out);
  bool found = false;
  for (const auto& s : j["strategies"]) {
    if (s["name"] != "sqrt+compress:bf16") continue;
    found = true;
    EXPECT_TRUE(s["compressed"].get<bool>());
    EXPECT_EQ(bf16.grad_error, s["relative_error"]["grad"].get<double>());
    EXPECT_EQ(bf16.loss_error, s["relative_error"]["loss"].get<double>());
    EXPECT_EQ(bf16.worst_param.toStdString(), s["relative_error"]["worst_parameter"].get<std::string>());
  }
  EXPECT_TRUE(found);

  ComparisonModel model;
  model.setRuns(&m, &runs);
  model.setMeasured(measured);
  EXPECT_EQ(model.data(model.index(0, ComparisonModel::Match)).toString(), "bit-identical");
  const QString cell = model.data(model.index(1, ComparisonModel::Match)).toString();
  EXPECT_EQ(cell, QString("grad error %1, loss error 0.00e+00").arg(bf16.grad_error, 0, 'e', 2));
  EXPECT_EQ(model.data(model.index(1, ComparisonModel::Match), Qt::EditRole).toDouble(), bf16.grad_error);
  EXPECT_TRUE(model.data(model.index(1, ComparisonModel::Match), Qt::ToolTipRole).toString().contains(bf16.worst_param));
}
