// The strategy panel's offload rows: offload:K and offload+BASE chosen with
// the mouse, several rows at once, bases that cannot apply disabled with the
// reason, and a combination that moves nothing explained on its row.
#include <QComboBox>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QTest>
#include <QToolButton>
#include <QTreeWidget>
#include <gtest/gtest.h>

#include "core/analysis/comparison.h"
#include "core/io/model_source.h"
#include "widgets/document/comparison_model.h"
#include "widgets/views/offload_editor.h"
#include "widgets/views/strategy_panel.h"

using namespace remat;

namespace {
enum Col { Name, Param, Status };

struct Panel {
  Model model;
  StrategyPanel panel;
  explicit Panel(const char* spec = "chain:16") : model(load_model(spec)) {
    panel.setModel(model);
    panel.setSpecs({"sqrt"});
    panel.resize(700, 600);
    panel.show();
    EXPECT_TRUE(QTest::qWaitForWindowExposed(&panel));
  }
  OffloadEditor* editor(int i = 0) const { return panel.offloadEditor(i); }
  QStringList lastEmitted(QSignalSpy& spy) const {
    return spec_texts(spy.last().at(0).value<std::vector<StrategyRequest>>());
  }
};

// Chooses a base by its catalog name, as a user picks it in the list.
void chooseBase(OffloadEditor* e, const QString& name) {
  const int i = e->baseBox()->findData(name);
  ASSERT_GE(i, 0) << name.toStdString();
  e->baseBox()->setCurrentIndex(i);
}
}  // namespace

TEST(OffloadPanel, EveryKOpsWithTheSpinBox) {
  Panel p;
  QSignalSpy spy(&p.panel, &StrategyPanel::specsChanged);
  ASSERT_EQ(p.panel.offloadRows().size(), 1u);
  QTreeWidgetItem* row = p.panel.offloadRows().front();
  EXPECT_EQ(row, p.panel.row("offload"));
  // The model's K: ceil(sqrt(16)) = 4, and at most the model's ops.
  EXPECT_EQ(p.editor()->kBox()->value(), 4);
  EXPECT_EQ(p.editor()->kBox()->maximum(), p.model.size());
  row->setCheckState(Name, Qt::Checked);
  ASSERT_FALSE(spy.isEmpty());
  EXPECT_EQ(p.lastEmitted(spy), (QStringList{"sqrt", "offload:4"}));
  p.editor()->kBox()->setFocus();
  QTest::keyClick(p.editor()->kBox(), Qt::Key_Down);  // 4 -> 3
  EXPECT_EQ(p.lastEmitted(spy), (QStringList{"sqrt", "offload:3"}));
}

TEST(OffloadPanel, BaseFromAnotherRowFollowsItsParameter) {
  Panel p;
  QSignalSpy spy(&p.panel, &StrategyPanel::specsChanged);
  p.panel.offloadRows().front()->setCheckState(Name, Qt::Checked);
  // Every strategy but offload itself can be the base.
  EXPECT_LT(p.editor()->baseBox()->findData(QString("offload")), 0);
  EXPECT_GE(p.editor()->baseBox()->findData(QString("store-all")), 0);
  chooseBase(p.editor(), "revolve");
  EXPECT_FALSE(p.editor()->kBox()->isEnabled());  // K is every-k's, not revolve's
  EXPECT_EQ(p.lastEmitted(spy), (QStringList{"sqrt", "offload+revolve:4"}));
  // revolve's own row sets C: the offload row follows.
  p.panel.intEditor("revolve")->setValue(6);
  EXPECT_EQ(p.lastEmitted(spy), (QStringList{"sqrt", "offload+revolve:6"}));
  EXPECT_EQ(p.editor()->baseBox()->currentText(), "+ revolve:6");
  chooseBase(p.editor(), "sqrt");
  EXPECT_EQ(p.lastEmitted(spy), (QStringList{"sqrt", "offload+sqrt"}));
}

TEST(OffloadPanel, PlusAddsARowMinusRemovesIt) {
  Panel p;
  QSignalSpy spy(&p.panel, &StrategyPanel::specsChanged);
  p.panel.offloadRows().front()->setCheckState(Name, Qt::Checked);
  chooseBase(p.editor(), "sqrt");
  QTest::mouseClick(p.editor()->button(), Qt::LeftButton);
  ASSERT_EQ(p.panel.offloadRows().size(), 2u);
  // The new row sits right under the first, checked, every 2K ops (another
  // schedule than the first row's default).
  QTreeWidget* tree = p.panel.tree();
  EXPECT_EQ(tree->indexOfTopLevelItem(p.panel.offloadRows()[1]), tree->indexOfTopLevelItem(p.panel.offloadRows()[0]) + 1);
  EXPECT_EQ(p.lastEmitted(spy), (QStringList{"sqrt", "offload+sqrt", "offload:8"}));
  p.editor(1)->kBox()->setValue(2);
  EXPECT_EQ(p.lastEmitted(spy), (QStringList{"sqrt", "offload+sqrt", "offload:2"}));
  QTest::mouseClick(p.editor(1)->button(), Qt::LeftButton);
  ASSERT_EQ(p.panel.offloadRows().size(), 1u);
  EXPECT_EQ(p.lastEmitted(spy), (QStringList{"sqrt", "offload+sqrt"}));
}

TEST(OffloadPanel, SetSpecsMakesTheRowsAndRoundTrips) {
  Panel p;
  const QStringList specs{"store-all", "offload+revolve:3", "offload:2", "offload+budget:9"};
  p.panel.setSpecs(specs);
  ASSERT_EQ(p.panel.offloadRows().size(), 3u);
  EXPECT_EQ(p.panel.intEditor("revolve")->value(), 3);
  EXPECT_EQ(p.editor(0)->spec().str(), "offload+revolve:3");
  EXPECT_EQ(p.editor(1)->spec().str(), "offload:2");
  EXPECT_EQ(p.editor(2)->spec().str(), "offload+budget:9");
  EXPECT_EQ(spec_texts(p.panel.specs()), (QStringList{"store-all", "offload+revolve:3", "offload:2", "offload+budget:9"}));
  // Plain "offload" is sqrt's checkpoints: shown with sqrt as the base, and
  // given back as it was written, so that the row finds its run.
  p.panel.setSpecs({"offload"});
  EXPECT_EQ(p.editor(0)->baseName(), "sqrt");
  EXPECT_EQ(spec_texts(p.panel.specs()), QStringList{"offload"});
  p.panel.setSpecs({"offload+sqrt"});
  EXPECT_EQ(spec_texts(p.panel.specs()), QStringList{"offload+sqrt"});
  // Fewer offloads: the extra rows go, the catalog's row stays.
  p.panel.setSpecs({"sqrt"});
  ASSERT_EQ(p.panel.offloadRows().size(), 1u);
  EXPECT_EQ(spec_texts(p.panel.specs()), QStringList{"sqrt"});
}

TEST(OffloadPanel, ABaseThatCannotApplyIsDisabledWithTheReason) {
  Panel p("transformer:1");  // a DAG: revolve and budget are for chains
  auto* items = qobject_cast<QStandardItemModel*>(p.editor()->baseBox()->model());
  const int revolve = p.editor()->baseBox()->findData(QString("revolve"));
  ASSERT_GE(revolve, 0);
  EXPECT_FALSE(items->item(revolve)->isEnabled());
  EXPECT_TRUE(p.editor()->baseBox()->itemData(revolve, Qt::ToolTipRole).toString().startsWith("chains only"));
  const int sqrt = p.editor()->baseBox()->findData(QString("sqrt"));
  EXPECT_TRUE(items->item(sqrt)->isEnabled());
  // A spec naming it is not shown as chosen.
  p.panel.setSpecs({"offload+revolve:4"});
  EXPECT_EQ(p.panel.offloadRows().front()->checkState(Name), Qt::Unchecked);
}

TEST(OffloadPanel, ACombinationThatMovesNothingSaysWhyInline) {
  Panel p;
  p.panel.setSpecs({"offload+store-all", "offload+sqrt"});
  const std::vector<StrategyRun> runs = simulate_strategies(p.model, {"offload+store-all", "offload+sqrt"});
  ASSERT_EQ(runs[0].sim.transfers, 0);  // store-all reads every tensor as soon as the backward reaches it
  ASSERT_GT(runs[1].sim.transfers, 0);
  p.panel.setRuns(runs);
  const QString nothing = p.panel.offloadRows()[0]->text(Status);
  EXPECT_TRUE(nothing.startsWith("moves nothing")) << nothing.toStdString();
  EXPECT_TRUE(nothing.contains("the same schedule as store-all")) << nothing.toStdString();
  EXPECT_EQ(p.panel.offloadRows()[1]->text(Status),
            QString("ok, peak %1, host %2").arg(format_bytes(runs[1].sim.peak_bytes), format_bytes(runs[1].sim.peak_host_bytes)));
  // A narrow dock cuts the column short: the whole status shows on hover.
  EXPECT_EQ(p.panel.offloadRows()[1]->toolTip(Status), p.panel.offloadRows()[1]->text(Status));
}
