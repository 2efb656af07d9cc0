// Remat Studio's responsiveness, offscreen: frames per second while playing a
// 1,000+ op transformer at full speed (each frame: next step, node states from
// the resident index, caption, chart cursor, a synchronous repaint of the whole
// window), zoomed out (level of detail) and zoomed in; and the time to open a
// 10,000-op chain (load, simulate, index, first paint).
#include <QApplication>
#include <QElapsedTimer>
#include <QThread>
#include <benchmark/benchmark.h>
#include <cstdlib>

#include "widgets/views/graph_view.h"
#include "widgets/views/main_window.h"
#include "widgets/document/studio_document.h"

using namespace remat;

namespace {

// Large models are computed in the background: wait until every run is in,
// so the frames play on the finished document (stepCount() is 0 before).
void waitForRuns(StudioDocument* doc) {
  while (doc->computing() > 0) {
    QApplication::processEvents(QEventLoop::AllEvents, 5);
    QThread::msleep(1);
  }
  QApplication::processEvents();
}

void playFrames(benchmark::State& state, const char* spec, double zoom) {
  MainWindow w;
  w.resize(1600, 1000);
  w.document()->setSpecs({"store-all", "recompute-all", "sqrt"});
  w.openModel(spec, true);
  w.show();
  waitForRuns(w.document());
  if (zoom != 1) w.graphView()->zoomBy(zoom, QPointF(0, w.graphView()->height() / 2.0));
  StudioDocument* doc = w.document();
  doc->setCurrentRun(2);  // sqrt: recomputation in the picture
  std::size_t step = 0;
  int64_t frames = 0;
  for (auto _ : state) {
    step = (step + 1) % doc->stepCount();
    doc->setStep(step);
    w.repaint();
    QApplication::processEvents();
    ++frames;
  }
  state.counters["ops"] = doc->model().size();
  state.counters["steps"] = double(doc->stepCount());
  state.counters["fps"] = benchmark::Counter(double(frames), benchmark::Counter::kIsRate);
}

void BM_PlayTransformerFitAll(benchmark::State& state) { playFrames(state, "transformer:84", 1); }
void BM_PlayTransformerZoomedIn(benchmark::State& state) { playFrames(state, "transformer:84", 20); }

void BM_OpenChain10000(benchmark::State& state) {
  MainWindow w;
  w.resize(1600, 1000);
  w.show();
  // The demo's strategies; recompute-all (50M forward steps here) is refused
  // by the window with its reason, so opening stays fast.
  w.document()->setSpecs(StudioDocument::defaultSpecs());
  QApplication::processEvents();
  bool big = false;
  for (auto _ : state) {
    w.openModel(big ? "chain:10000" : "chain:10001", true);  // alternate so each iteration really reloads
    big = !big;
    w.repaint();
    QApplication::processEvents();
  }
  state.counters["ops"] = w.document()->model().size();
}

}  // namespace

BENCHMARK(BM_PlayTransformerFitAll)->Unit(benchmark::kMillisecond)->MinTime(3)->UseRealTime();
BENCHMARK(BM_PlayTransformerZoomedIn)->Unit(benchmark::kMillisecond)->MinTime(3)->UseRealTime();
BENCHMARK(BM_OpenChain10000)->Unit(benchmark::kMillisecond)->Iterations(4)->UseRealTime();

int main(int argc, char** argv) {
  if (!std::getenv("QT_QPA_PLATFORM")) setenv("QT_QPA_PLATFORM", "offscreen", 1);
  QApplication app(argc, argv);
  QApplication::setOrganizationName("RematBench");
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
