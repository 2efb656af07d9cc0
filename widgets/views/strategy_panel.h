// Chooses the strategies to compare: one row per entry of strategy_catalog(),
// a check box, its parameters as editors chosen by each parameter's kind in
// the entry (K ops, C slots, a budget in the model's byte unit, a time
// limit, a list of op ids) defaulting per model (strategy_defaults.h), the
// wrapping entry (offload) with its own editor (offload_editor.h), and whether it applies to this model (disabled with
// the reason when it cannot, the run's error when it did not). The strategy's
// one-line help shows under the list.
#pragma once
#include <QStringList>
#include <QWidget>
#include <map>
#include <optional>
#include <vector>

#include "core/analysis/comparison.h"
#include "widgets/document/run_list.h"
#include "widgets/document/strategy_defaults.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QSpinBox;
class QTreeWidget;
class QTreeWidgetItem;

namespace remat {
class OffloadEditor;
struct Model;

class StrategyPanel : public QWidget {
  Q_OBJECT
 public:
  explicit StrategyPanel(QWidget* parent = nullptr);
  // New defaults for this model's parameters; the strategies that cannot
  // apply are disabled. Does not emit.
  void setModel(const Model& model);
  // The checked rows' strategies, each once; a row whose typed list does
  // not parse gives its text, so that its run says why.
  std::vector<StrategyRequest> specs() const;
  // Checks the rows of `specs` and fills their parameters, without emitting;
  // from text (a test's list), each parsed once.
  void setSpecs(const std::vector<StrategyRequest>& specs);
  void setSpecs(const QStringList& texts) { setSpecs(strategy_requests(texts)); }
  void setSpecs(std::initializer_list<QString> texts) { setSpecs(QStringList(texts)); }
  void setRuns(const RunList& runs);
  QTreeWidget* tree() const { return tree_; }
  QTreeWidgetItem* row(const QString& name) const;
  // The editors, for tests: K / C as spin boxes, budgets in the unit shown.
  QSpinBox* intEditor(const QString& name) const;
  QDoubleSpinBox* budgetEditor(const QString& name) const;
  QString helpText() const;
  // The offload rows in order (the catalog's first) and their editors.
  std::vector<QTreeWidgetItem*> offloadRows() const;
  OffloadEditor* offloadEditor(int i) const;
  // Adds an offload row after the last one, checked, with `spec` (or every K
  // ops); emits unless called from setSpecs.
  OffloadEditor* addOffloadRow(const std::optional<StrategySpec>& spec = std::nullopt);

 signals:
  void specsChanged(const std::vector<StrategyRequest>& specs);

 private:
  struct Editors {
    QSpinBox* count = nullptr;         // every-k K, revolve C
    QDoubleSpinBox* budget = nullptr;  // budget, optimal: in unit_
    QSpinBox* seconds = nullptr;       // optimal
    QLineEdit* list = nullptr;         // manual
    QComboBox* choice = nullptr;       // dtr's heuristic
  };
  StrategyRequest specOf(const QTreeWidgetItem* item) const;
  // Sets the editors of `spec`'s row to its parameters.
  void applyParameters(const StrategySpec& spec);
  // `request`'s spec, when it names `row`'s strategy without wrapper or modifier.
  std::optional<StrategySpec> plainSpec(const StrategyRequest& request, const QTreeWidgetItem* row) const;
  void changed();
  OffloadEditor* offloadOf(const QTreeWidgetItem* item) const;
  void removeOffloadRow(QTreeWidgetItem* item);
  // Every offload editor's list of bases: the other rows with their current specs.
  void refreshOffloadBases();
  void setOffloadSpecs(const std::vector<StrategyRequest>& specs);
  QTreeWidget* tree_;
  QLabel* help_;
  std::map<QString, Editors> editors_;
  struct OffloadRow {
    QTreeWidgetItem* item;
    OffloadEditor* editor;
  };
  std::vector<OffloadRow> offload_;
  StrategyDefaults defaults_;
  bool updating_ = false;
};

}  // namespace remat
