// Headless by default (hotspot's testutils.h habit): the offscreen platform
// unless the caller chose one; settings go to a test location of this run's
// own, so that no earlier run's choices (a chart axis, a run device) change
// the defaults a test reads, and parallel ctest processes share nothing.
#include <QApplication>
#include <QStandardPaths>
#include <cstdlib>
#include <filesystem>
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  if (!std::getenv("QT_QPA_PLATFORM")) setenv("QT_QPA_PLATFORM", "offscreen", 1);
  // Test mode keeps settings under $HOME/.qttest: a fresh home per run.
  char home[] = "/tmp/remat-test-widgets-XXXXXX";
  const bool own_home = mkdtemp(home) != nullptr;
  if (own_home) setenv("HOME", home, 1);
  QStandardPaths::setTestModeEnabled(true);
  int rc = 0;
  {
    QApplication app(argc, argv);
    QApplication::setOrganizationName("RematTest");
    QApplication::setApplicationName("test_widgets");
    ::testing::InitGoogleTest(&argc, argv);
    rc = RUN_ALL_TESTS();
  }
  std::error_code ignored;
  if (own_home) std::filesystem::remove_all(home, ignored);
  return rc;
}
