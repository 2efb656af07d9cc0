// The window's menus and modes: View restores a closed Strategies panel, the
// Help menu, presentation mode, and the strategy parameters' per-model
// defaults with inapplicable strategies disabled and saying why.
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QMenuBar>
#include <QSpinBox>
#include <QTest>
#include <QTreeWidget>
#include <cmath>
#include <gtest/gtest.h>

#include "core/analysis/comparison.h"
#include "core/io/model_source.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"
#include "widgets/views/graph_view.h"
#include "tests/widgets/shown_window.h"
#include "widgets/views/main_window.h"
#include "widgets/views/strategy_panel.h"
#include "widgets/document/studio_document.h"

using namespace remat;

namespace {
using Window = remat::testing::ShownWindow;
QStringList menu_titles(QMenuBar* bar) {
  QStringList out;
  for (QAction* a : bar->actions()) out << a->text().remove('&');
  return out;
}
}  // namespace

TEST(MainWindow, ViewRestoresAClosedStrategiesPanelAndHelpExists) {
  Window t;
  EXPECT_EQ(menu_titles(t.w.menuBar()), (QStringList{"File", "Playback", "View", "Run", "Help"}));
  QDockWidget* dock = t.w.strategyDock();
  ASSERT_TRUE(dock->isVisible());
  dock->close();
  EXPECT_FALSE(dock->isVisible());
  QAction* panel = t.w.action("Strategies panel");
  ASSERT_NE(panel, nullptr);
  EXPECT_FALSE(panel->isChecked());
  panel->trigger();
  EXPECT_TRUE(dock->isVisible());
  for (const char* help : {"What the picture shows", "Keyboard shortcuts", "About Remat Studio"})
    EXPECT_NE(t.w.action(help), nullptr) << help;
  EXPECT_NE(t.w.action("Export animation..."), nullptr);
}

TEST(MainWindow, PresentationModeShowsOnlyTheGraphAndStepsByKeys) {
  Window t;
  t.w.setPresentation(true);
  QTest::qWait(50);
  EXPECT_TRUE(t.w.presenting());
  EXPECT_FALSE(t.w.menuBar()->isVisible());
  EXPECT_FALSE(t.w.tabs()->isVisible());
  EXPECT_FALSE(t.w.strategyDock()->isVisible());
  EXPECT_TRUE(t.w.graphView()->isVisible());
  // The graph takes (nearly) the whole window.
  EXPECT_GT(t.w.graphView()->height(), t.w.height() * 3 / 4);
  const std::size_t s = t.w.document()->step();
  QTest::keyClick(t.w.graphView(), Qt::Key_Right);
  EXPECT_EQ(t.w.document()->step(), s + 1);
  QTest::keyClick(t.w.graphView(), Qt::Key_Escape);
  EXPECT_FALSE(t.w.presenting());
  EXPECT_TRUE(t.w.menuBar()->isVisible());
  EXPECT_TRUE(t.w.tabs()->isVisible());
  EXPECT_TRUE(t.w.strategyDock()->isVisible());
}

TEST(StrategyPanel, PerModelDefaultsAndInapplicableStrategiesSayWhy) {
  Window t;
  StrategyPanel* panel = t.w.strategyPanel();
  // chain:16: ceil(sqrt(16)) = 4 for every-k's K and revolve's slots (16 ops
  // after the input, as sqrt counts them).
  ASSERT_NE(panel->intEditor("every-k"), nullptr);
  EXPECT_EQ(panel->intEditor("every-k")->value(), 4);
  EXPECT_EQ(panel->intEditor("revolve")->value(), 4);
  // Budgets: half of store-all's peak, in the model's unit.
  const Model chain = load_model("chain:16");
  const uint64_t peak = simulate(chain, make_strategy("store-all")->schedule(chain)).peak_bytes;
  QDoubleSpinBox* budget = panel->budgetEditor("budget");
  ASSERT_NE(budget, nullptr);
  EXPECT_EQ(budget->value(), double(peak) / 2);  // bytes: chain:16's tensors are 1 B
  EXPECT_EQ(budget->suffix(), " B");

  // A DAG: revolve and budget cannot apply (the engine refuses them too);
  // their rows are disabled with the reason, and K follows the new size.
  t.w.openModel("transformer:2:8:2:1", true);
  const Model dag = load_model("transformer:2:8:2:1");
  EXPECT_FALSE(simulate_strategies(dag, {"revolve:4"})[0].ok());
  for (const char* name : {"revolve", "budget"}) {
    QTreeWidgetItem* row = panel->row(name);
    ASSERT_NE(row, nullptr);
    EXPECT_FALSE(row->flags() & Qt::ItemIsEnabled) << name;
    EXPECT_TRUE(row->text(2).contains("chains only")) << name << ": " << row->text(2).toStdString();
  }
  EXPECT_TRUE(panel->row("sqrt")->flags() & Qt::ItemIsEnabled);
  // A modifier has no row of its own (its spec alone, compress:bf16, is no strategy).
  EXPECT_EQ(panel->row("compress"), nullptr);
  EXPECT_EQ(panel->intEditor("every-k")->value(), int(std::ceil(std::sqrt(double(dag.loss())))));
  // The budget now in the DAG's unit.
  const uint64_t dagPeak = simulate(dag, make_strategy("store-all")->schedule(dag)).peak_bytes;
  EXPECT_NEAR(budget->value() * std::pow(1024.0, budget->suffix() == " KiB" ? 1 : budget->suffix() == " MiB" ? 2 : 0),
              double(dagPeak) / 2, double(dagPeak) * 0.01);
}
