// The window reads strategies from the registry's catalog, never by position
// or by spelling a spec: each row's colour is its entry's, each row's default
// spec is the entry's parameters at their per-kind defaults, an entry for
// chains only is disabled on a DAG by its flag, and a spec the window makes
// prints as the registry prints it.
#include <QTreeWidget>
#include <QTreeWidgetItem>
#include <gtest/gtest.h>

#include "core/io/model_source.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/registry.h"
#include "widgets/document/strategy_colors.h"
#include "widgets/document/strategy_defaults.h"
#include "widgets/document/studio_document.h"
#include "widgets/views/main_window.h"
#include "widgets/views/strategy_panel.h"

using namespace remat;

namespace {
enum Col { Name, Param, Status };
}

TEST(StrategyCatalog, ColoursAreTheEntriesOwn) {
  for (const StrategyInfo& info : strategy_catalog()) {
    SCOPED_TRACE(info.name);
    EXPECT_EQ(strategy_color(QString::fromStdString(info.name)).rgb(), QColor::fromRgb(info.color).rgb());
    if (info.modify) continue;
    // A spec of the entry, wrapped or modified, takes the entry's (or the wrapper's) colour.
    const StrategyDefaults d = strategy_defaults(load_model("chain:16"));
    const StrategySpec spec = default_spec(info, d);
    EXPECT_EQ(strategy_color(QString::fromStdString(spec.str())), QColor::fromRgb(info.color));
    EXPECT_EQ(strategy_color(QString::fromStdString(modified_spec(spec, "compress", "bf16").str())),
              QColor::fromRgb(info.color));
    if (!info.wrap)
      EXPECT_EQ(strategy_color(QString::fromStdString(wrapped_spec("offload", spec).str())),
                QColor::fromRgb(find_strategy("offload")->color));
  }
}

TEST(StrategyCatalog, DefaultsFollowEachParametersKind) {
  const Model m = load_model("chain:16");
  const StrategyDefaults d = strategy_defaults(m);
  EXPECT_EQ(d.k, 4);  // ceil(sqrt(16))
  for (const StrategyInfo& info : strategy_catalog()) {
    SCOPED_TRACE(info.name);
    if (info.modify) continue;
    const StrategySpec spec = default_spec(info, d);
    EXPECT_EQ(spec.name, info.name);
    ASSERT_LE(spec.parameters.size(), info.params.size());
    for (std::size_t i = 0; i < spec.parameters.size(); ++i)
      EXPECT_EQ(spec.parameters[i], default_parameter(info.params[i].kind, d));
    // It builds and recreates itself.
    EXPECT_EQ(make_strategy(spec)->name(), spec.str());
  }
  EXPECT_EQ(default_spec(*find_strategy("every-k"), d).str(), "every-k:4");
  EXPECT_EQ(default_spec(*find_strategy("offload"), d).str(), "offload:4");
  EXPECT_EQ(default_spec(*find_strategy("budget"), d).str(), "budget:" + std::to_string(d.budget));
  // Parameters of another model become this model's; wrapped ones too, the modifier stays.
  EXPECT_EQ(with_defaults(parse_strategy("offload+revolve:9+compress:int8"), d).str(), "offload+revolve:4+compress:int8");
  EXPECT_EQ(with_defaults(parse_strategy("offload+sqrt"), d).str(), "offload+sqrt");
}

// Every row of the panel is a catalog entry (modifiers aside), in the
// catalog's order; checked with nothing else chosen, a row gives its
// entry's default spec on this model; a DAG disables exactly the entries
// flagged for chains, and a model without the structure an entry needs
// (StrategyInfo::unavailable) disables that entry.
TEST(StrategyCatalog, PanelRowsAreTheCatalogs) {
  for (const char* model : {"chain:16", "transformer:1"}) {
    SCOPED_TRACE(model);
    const Model m = load_model(model);
    const StrategyDefaults d = strategy_defaults(m);
    StrategyPanel panel;
    panel.setModel(m);
    QStringList rows, expected, all;
    for (int i = 0; i < panel.tree()->topLevelItemCount(); ++i) rows << panel.tree()->topLevelItem(i)->text(Name);
    for (const StrategyInfo& info : strategy_catalog()) {
      if (info.modify) continue;
      const QString name = QString::fromStdString(info.name);
      all << name;
      const bool enabled = panel.row(name)->flags().testFlag(Qt::ItemIsEnabled);
      const bool unavailable = info.unavailable && !info.unavailable(m).empty();  // no attention core, no block
      EXPECT_EQ(enabled, !(info.chains_only && !is_chain(m)) && !unavailable) << info.name;
      EXPECT_EQ(!enabled, !not_applicable(info, m).isEmpty()) << info.name;
      if (enabled) expected << QString::fromStdString(default_spec(info, d).str());
    }
    EXPECT_EQ(rows, all);
    for (int i = 0; i < panel.tree()->topLevelItemCount(); ++i)
      panel.tree()->topLevelItem(i)->setCheckState(Name, Qt::Checked);
    EXPECT_EQ(spec_texts(panel.specs()), expected);
  }
}

// remat-studio --strategies splits its list as `remat --strategy` does:
// manual's ids stay with manual, and text that does not parse stays a row
// with the parser's reason.
TEST(StrategyCatalog, ACommandLineListSplitsAsTheCliSplitsIt) {
  const std::vector<StrategyRequest> r = strategy_requests(QString("store-all,manual:1,2,3,sqrt,every-k:2,no-such"));
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(spec_texts(r), (QStringList{"store-all", "manual:1,2,3", "sqrt", "every-k:2", "no-such"}));
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(r[i].spec.has_value()) << r[i].text;
  EXPECT_EQ(r[1].spec->str(), "manual:1,2,3");
  EXPECT_FALSE(r[4].spec.has_value());
  EXPECT_FALSE(r[4].error.empty());
}

// What the window compares (the flag's list) is what its panel checks: the
// manual row holds the list's ids, the rows the list leaves out are unchecked.
TEST(StrategyCatalog, TheWindowsListIsThePanelsChecks) {
  MainWindow w;
  ASSERT_TRUE(w.openModel("chain:16", true));
  w.setSpecs(strategy_requests(QString("store-all,manual:2,5,9,sqrt")));
  EXPECT_EQ(spec_texts(w.document()->specs()), (QStringList{"store-all", "manual:2,5,9", "sqrt"}));
  StrategyPanel* panel = w.strategyPanel();
  for (const char* row : {"store-all", "manual", "sqrt"})
    EXPECT_EQ(panel->row(row)->checkState(Name), Qt::Checked) << row;
  EXPECT_EQ(panel->row("recompute-all")->checkState(Name), Qt::Unchecked);
  EXPECT_EQ(spec_texts(panel->specs()), (QStringList{"store-all", "sqrt", "manual:2,5,9"}));
}
