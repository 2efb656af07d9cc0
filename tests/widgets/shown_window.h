// The window the window tests drive: a model opened, its strategies set, shown
// at a size and exposed (offscreen in CI).
#pragma once
#include <QImage>
#include <QPainter>
#include <QStringList>
#include <QTest>
#include <gtest/gtest.h>
#include <vector>

#include "widgets/document/studio_document.h"
#include "widgets/views/graph_layout.h"
#include "widgets/views/lanes_painter.h"
#include "widgets/views/main_window.h"
#include "widgets/views/side_by_side_view.h"

namespace remat::testing {

struct ShownWindow {
  MainWindow w;
  explicit ShownWindow(const char* model = "chain:16", const QStringList& specs = StudioDocument::defaultSpecs(),
                       QSize size = {1400, 900}) {
    w.openModel(model, true);
    w.document()->setSpecs(specs);
    w.resize(size);
    w.show();
    w.activateWindow();
    EXPECT_TRUE(QTest::qWaitForWindowExposed(&w));
  }
};

// The side-by-side view's lanes painted at its size as the view paints
// them (at `fontScale`, with `mask`'s legend), and what each lane drew.
inline std::vector<GraphPaintReport> painted_lanes(const SideBySideView& view, const StudioDocument& doc,
                                                   double fontScale = 1, LegendMask mask = kFullLegend) {
  QImage img(view.size(), QImage::Format_RGB32);
  QPainter p(&img);
  std::vector<GraphPaintReport> reports;
  paint_lanes(p, doc.model(), GraphLayout(doc.model()), view.lanes(), QRectF(QPointF(0, 0), QSizeF(view.size())),
              fontScale, true, &reports, mask);
  return reports;
}

}  // namespace remat::testing
