// The window the window tests drive: a model opened, its strategies set, shown
// at a size and exposed (offscreen in CI).
#pragma once
#include <QStringList>
#include <QTest>
#include <gtest/gtest.h>

#include "widgets/views/main_window.h"
#include "widgets/document/studio_document.h"

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

}  // namespace remat::testing
