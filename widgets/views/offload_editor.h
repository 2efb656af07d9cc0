// The strategy panel's editor of one offload row, so that `offload:K` and
// `offload+BASE` are chosen, not typed: where the checkpoints come from (every
// K ops with K in a spin box, or another strategy of the panel, with that
// row's current parameter: "+ revolve:4"), and buttons to add another offload
// row or remove this one. A base that cannot apply to the model is listed but
// disabled, with the reason as its tooltip; offload never wraps another offload.
#pragma once
#include <QString>
#include <QWidget>
#include <optional>
#include <string>
#include <vector>

#include "core/strategies/registry.h"

class QComboBox;
class QSpinBox;
class QToolButton;

namespace remat {

class OffloadEditor : public QWidget {
  Q_OBJECT
 public:
  // A strategy offload can take its checkpoints from: its catalog name, the
  // spec its panel row gives now, and why it cannot apply (empty: it can; a
  // base whose spec does not parse cannot). Specs are values made by the
  // registry (wrapped_spec), never spelled here.
  struct Base {
    QString name;
    StrategyRequest spec;
    QString whyNot;
  };
  // `wrapper`: the catalog entry that wraps (offload), whose optional
  // parameter is the interval K; `removable`: the extra rows; the catalog's
  // own row adds them.
  OffloadEditor(const QString& wrapper, bool removable, QWidget* parent = nullptr);

  // Refreshes the list, keeping the chosen base (back to "every K" when it
  // is gone or cannot apply any more). Does not emit.
  void setBases(const std::vector<Base>& bases);
  void setKRange(int maxK);
  // Does not emit. "offload" takes sqrt as its base (the same schedule);
  // false, and nothing changed, for a spec this editor cannot show.
  bool setSpec(const StrategySpec& spec);
  // "offload:K" or "offload+SPEC" ("offload" when set so with sqrt as base).
  StrategySpec spec() const;
  // The chosen base's name, empty for "every K ops".
  QString baseName() const;
  // The strategy whose checkpoints go to the host: every-k:K or the base's spec.
  StrategySpec baseSpec() const;

  QComboBox* baseBox() const { return base_; }
  QSpinBox* kBox() const { return k_; }
  QToolButton* button() const { return button_; }

 signals:
  void changed();
  void addRequested();
  void removeRequested();

 private:
  QComboBox* base_;
  QSpinBox* k_;
  QToolButton* button_;
  std::string wrapper_;
  std::vector<Base> bases_;  // the list's entries after "every K ops", in order
  // "offload" and "offload+sqrt" are one schedule: spec() gives back the
  // spelling setSpec() was given, so the row finds its run by spec.
  std::optional<StrategySpec> sqrtSpelling_;
};

}  // namespace remat
