// The Trade-off tab (when the build has widgets/tradeoff_chart.h): the sweep
// fills it in a worker, and a clicked point is shown in the graph.
#include <QTabWidget>
#include <QTest>
#include <gtest/gtest.h>

#include "widgets/main_window.h"
#include "widgets/studio_document.h"

#if __has_include("widgets/tradeoff_chart.h")
#include "widgets/tradeoff_chart.h"
#endif

using namespace remat;

TEST(StudioDocument, ShowSpecAddsAndShowsAStrategy) {
  StudioDocument doc;
  doc.loadModel("chain:16");
  doc.showSpec("every-k:3");
  ASSERT_EQ(doc.runCount(), 4);
  EXPECT_EQ(doc.current()->spec, "every-k:3");
  doc.showSpec("sqrt");  // already compared: only shown
  EXPECT_EQ(doc.runCount(), 4);
  EXPECT_EQ(doc.current()->spec, "sqrt");
}

#if __has_include("widgets/tradeoff_chart.h")
TEST(MainWindow, TradeoffTabLoadsTheClickedSpec) {
  MainWindow w;
  w.openModel("chain:16", true);
  w.document()->setSpecs(StudioDocument::defaultSpecs());
  w.show();
  auto* chart = qobject_cast<TradeoffChart*>(w.tradeoffTab());
  ASSERT_NE(chart, nullptr);
  w.tabs()->setCurrentWidget(chart);  // starts the sweep in a worker
  ASSERT_TRUE(QTest::qWaitFor([&] { return !chart->namedSpecs().empty(); }, 20000));
  ASSERT_FALSE(chart->namedSpecs().empty());
  emit chart->pointClicked("every-k:5");
  EXPECT_EQ(w.document()->current()->spec, "every-k:5");
}
#endif
