// Headless by default (hotspot's testutils.h habit): the offscreen platform
// unless the caller chose one; settings go to a test location.
#include <QApplication>
#include <QStandardPaths>
#include <cstdlib>
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  if (!std::getenv("QT_QPA_PLATFORM")) setenv("QT_QPA_PLATFORM", "offscreen", 1);
  QStandardPaths::setTestModeEnabled(true);
  QApplication app(argc, argv);
  QApplication::setOrganizationName("RematTest");
  QApplication::setApplicationName("test_widgets");
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
