// The Trade-off tab's sweep as the window runs it (SweepController: named
// points, automatic budgets, optimal per budget, the other families), on the
// presets of issue 29: wall seconds from start() to ready(), and how long the
// GUI thread's event loop went without turning meanwhile (a 5 ms timer; its
// longest gap is what a user would feel as a freeze).
#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QTimer>
#include <benchmark/benchmark.h>
#include <cstdlib>
#include <memory>

#include "core/model/presets.h"
#include "widgets/controllers/sweep_controller.h"

using namespace remat;

namespace {

void sweepInWindow(benchmark::State& state, const char* preset) {
  const auto model = std::make_shared<const Model>(make_preset(preset));
  for (auto _ : state) {
    SweepController sweep;
    QEventLoop loop;
    QElapsedTimer wall, tick;
    qint64 longestGap = 0;
    std::size_t budgets = 0, named = 0;
    QTimer beat;
    beat.setInterval(5);
    QObject::connect(&beat, &QTimer::timeout, [&] {
      longestGap = std::max(longestGap, tick.restart());
    });
    QObject::connect(&sweep, &SweepController::ready,
                     [&](const QString&, const SweepResult& r, const std::vector<FamilyPoint>&) {
                       budgets = r.budgets.size();
                       named = r.named.size();
                       loop.quit();
                     });
    QObject::connect(&sweep, &SweepController::failed, [&](const QString& m) {
      state.SkipWithError(m.toStdString().c_str());
      loop.quit();
    });
    wall.start();
    tick.start();
    beat.start();
    sweep.start(model, InstructionLimit{}.max);
    loop.exec();
    state.counters["wall_s"] = static_cast<double>(wall.elapsed()) / 1000.0;
    state.counters["longest_gui_gap_ms"] = static_cast<double>(longestGap);
    state.counters["budgets"] = static_cast<double>(budgets);
    state.counters["named"] = static_cast<double>(named);
  }
}

void BM_SweepGpt12(benchmark::State& s) { sweepInWindow(s, "gpt:12"); }
void BM_SweepTransformer12(benchmark::State& s) { sweepInWindow(s, "transformer:12"); }
void BM_SweepResnet50(benchmark::State& s) { sweepInWindow(s, "resnet:50"); }

}  // namespace

BENCHMARK(BM_SweepGpt12)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();
BENCHMARK(BM_SweepTransformer12)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();
BENCHMARK(BM_SweepResnet50)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

int main(int argc, char** argv) {
  if (!std::getenv("QT_QPA_PLATFORM")) setenv("QT_QPA_PLATFORM", "offscreen", 1);
  QApplication app(argc, argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
