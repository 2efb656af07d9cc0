#include "widgets/views/strategy_panel.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QStyledItemDelegate>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/strategies/registry.h"
#include "widgets/document/comparison_model.h"
#include "widgets/views/offload_editor.h"
#include "widgets/document/strategy_colors.h"

namespace remat {
namespace {
enum Col { Name, Param, Status };

// Rows as tall as their status wrapped at the Status column's width: the
// tree asks its delegate with no width, and a row holding a parameter
// editor is then one line high, which cut "no attention core (a MatMul,
// ...) in chain:16" after "(a".
class WrappedStatusDelegate : public QStyledItemDelegate {
 public:
  explicit WrappedStatusDelegate(QTreeWidget* tree) : QStyledItemDelegate(tree), tree_(tree) {}
  QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override {
    QSize s = QStyledItemDelegate::sizeHint(option, index);
    if (index.column() != Status) return s;
    const int width = tree_->columnWidth(Status) - 8;  // the item's text margins
    const QString text = index.data().toString();
    if (width <= 0 || text.isEmpty()) return s;
    const QRect need = option.fontMetrics.boundingRect(QRect(0, 0, width, 100000), Qt::TextWordWrap, text);
    return QSize(s.width(), std::max(s.height(), need.height() + 4));
  }

 private:
  QTreeWidget* tree_;
};
}  // namespace

std::optional<StrategySpec> StrategyPanel::plainSpec(const StrategyRequest& request, const QTreeWidgetItem* row) const {
  const std::optional<StrategySpec>& spec = request.spec;
  // A wrapped or modified spec belongs to no plain row (sqrt+compress:bf16 is not sqrt's).
  if (spec && spec->name == row->text(Name).toStdString() && spec->inner.empty() && spec->modifier.empty()) return spec;
  return std::nullopt;
}

StrategyPanel::StrategyPanel(QWidget* parent) : QWidget(parent) {
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(0, 0, 0, 0);
  auto* hint = new QLabel(tr("Strategies to compare:"), this);
  l->addWidget(hint);
  tree_ = new QTreeWidget(this);
  tree_->setColumnCount(3);
  // A long status ("ok, peak 714.43 MiB, host 1.2 GiB") wraps in its column
  // instead of being cut short.
  tree_->setWordWrap(true);
  tree_->setTextElideMode(Qt::ElideNone);
  tree_->setUniformRowHeights(false);
  tree_->setItemDelegate(new WrappedStatusDelegate(tree_));
  // Rows are as tall as their wrapped status at the column's current width.
  connect(tree_->header(), &QHeaderView::sectionResized, tree_, [this](int logical) {
    if (logical == Status) tree_->doItemsLayout();
  });
  tree_->setHeaderLabels({tr("Strategy"), tr("Parameter"), tr("Status")});
  tree_->setRootIsDecorated(false);
  tree_->header()->setSectionResizeMode(Status, QHeaderView::Stretch);
  tree_->setMouseTracking(true);
  for (const StrategyInfo& info : strategy_catalog()) {
    if (info.modify) continue;  // a modifier (compress) is no strategy of its own: SPEC+compress:bf16
    auto* it = new QTreeWidgetItem(tree_);
    const QString name = QString::fromStdString(info.name);
    it->setText(Name, name);
    it->setToolTip(Name, QString::fromStdString(info.help));
    it->setCheckState(Name, Qt::Unchecked);
    it->setFlags(Qt::ItemIsEnabled | Qt::ItemIsUserCheckable | Qt::ItemIsSelectable);
    // The strategy's colour, as in the charts.
    QPixmap swatch(10, 10);
    swatch.fill(strategy_color(info));
    it->setIcon(Name, QIcon(swatch));
    Editors e;
    if (info.wrap) {  // offload: its own editor of where the checkpoints come from
      auto* ed = new OffloadEditor(name, false, tree_);
      connect(ed, &OffloadEditor::changed, this, &StrategyPanel::changed);
      connect(ed, &OffloadEditor::addRequested, this, [this] { addOffloadRow(); });
      offload_.push_back({it, ed});
      tree_->setItemWidget(it, Param, ed);
      editors_[name] = e;
      continue;
    }
    // One editor per parameter, by its kind (registry.h's ParamKind).
    std::vector<QWidget*> fields;
    for (const ParamInfo& param : info.params) {
      switch (param.kind) {
        case ParamKind::Interval:
        case ParamKind::Slots: {
          const bool interval = param.kind == ParamKind::Interval;
          e.count = new QSpinBox(tree_);
          e.count->setSuffix(interval ? tr(" ops") : tr(" slots"));
          e.count->setToolTip(interval ? tr("K: a checkpoint every K ops") : tr("C: checkpoint slots, the input's included"));
          connect(e.count, &QSpinBox::valueChanged, this, &StrategyPanel::changed);
          fields.push_back(e.count);
          break;
        }
        case ParamKind::Count:
          e.count = new QSpinBox(tree_);
          e.count->setRange(0, int(std::min<int64_t>(param.hi, 1 << 20)));
          e.count->setSpecialValueText(tr("all"));  // 0: the parameter left out
          e.count->setToolTip(QString::fromStdString(param.what));
          connect(e.count, &QSpinBox::valueChanged, this, &StrategyPanel::changed);
          fields.push_back(e.count);
          break;
        case ParamKind::Bytes:
          e.budget = new QDoubleSpinBox(tree_);
          e.budget->setDecimals(2);
          e.budget->setToolTip(tr("Memory budget for activations and their gradients (half of store-all's peak by default)"));
          connect(e.budget, &QDoubleSpinBox::valueChanged, this, &StrategyPanel::changed);
          fields.push_back(e.budget);
          break;
        case ParamKind::Seconds:
          e.seconds = new QSpinBox(tree_);
          e.seconds->setRange(int(param.lo), int(param.hi));
          e.seconds->setSuffix(tr(" s"));
          e.seconds->setToolTip(tr("Time limit of the search: the best found when it runs out"));
          connect(e.seconds, &QSpinBox::valueChanged, this, &StrategyPanel::changed);
          fields.push_back(e.seconds);
          break;
        case ParamKind::Choice:
          e.choice = new QComboBox(tree_);
          for (const std::string& word : param.choices) e.choice->addItem(QString::fromStdString(word));
          e.choice->setToolTip(QString::fromStdString(param.what));
          connect(e.choice, &QComboBox::currentIndexChanged, this, &StrategyPanel::changed);
          fields.push_back(e.choice);
          break;
        case ParamKind::OpIds:
          e.list = new QLineEdit("0", tree_);
          e.list->setToolTip(tr("Checkpointed op ids, comma-separated (or click forward nodes in the graph)"));
          connect(e.list, &QLineEdit::editingFinished, this, &StrategyPanel::changed);
          fields.push_back(e.list);
          break;
      }
    }
    QWidget* editor = fields.size() == 1 ? fields.front() : nullptr;
    if (fields.size() > 1) {  // side by side in one cell
      editor = new QWidget(tree_);
      auto* h = new QHBoxLayout(editor);
      h->setContentsMargins(0, 0, 0, 0);
      h->setSpacing(2);
      for (QWidget* f : fields) {
        f->setParent(editor);
        h->addWidget(f);
      }
    }
    if (editor) {
      // One line high at the top of a row that a wrapped reason makes taller.
      editor->setMaximumHeight(editor->sizeHint().height());
      tree_->setItemWidget(it, Param, editor);
    }
    editors_[name] = e;
  }
  tree_->resizeColumnToContents(Name);
  tree_->setColumnWidth(Param, 230);
  l->addWidget(tree_);
  help_ = new QLabel(this);
  help_->setWordWrap(true);
  help_->setStyleSheet("QLabel { color: #444; padding: 4px; }");
  l->addWidget(help_);
  auto showHelp = [this](QTreeWidgetItem* it) {
    if (!it) return;
    const QString why = it->data(Status, Qt::UserRole).toString();
    help_->setText(QString("<b>%1</b>: %2%3").arg(it->text(Name), it->toolTip(Name).toHtmlEscaped(),
                                                   why.isEmpty() ? QString() : "<br><i>" + why.toHtmlEscaped() + "</i>"));
  };
  connect(tree_, &QTreeWidget::currentItemChanged, this, showHelp);
  connect(tree_, &QTreeWidget::itemEntered, this, showHelp);
  connect(tree_, &QTreeWidget::itemChanged, this, [this](QTreeWidgetItem*, int col) {
    if (col == Name) changed();
  });
}

void StrategyPanel::changed() {
  if (updating_) return;
  // A base's parameter may have changed: the offload rows name it.
  updating_ = true;
  refreshOffloadBases();
  updating_ = false;
  emit specsChanged(specs());
}

OffloadEditor* StrategyPanel::offloadOf(const QTreeWidgetItem* item) const {
  for (const OffloadRow& r : offload_)
    if (r.item == item) return r.editor;
  return nullptr;
}

std::vector<QTreeWidgetItem*> StrategyPanel::offloadRows() const {
  std::vector<QTreeWidgetItem*> out;
  for (const OffloadRow& r : offload_) out.push_back(r.item);
  return out;
}

OffloadEditor* StrategyPanel::offloadEditor(int i) const {
  return i >= 0 && i < int(offload_.size()) ? offload_[std::size_t(i)].editor : nullptr;
}

void StrategyPanel::refreshOffloadBases() {
  std::vector<OffloadEditor::Base> bases;
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) {
    const QTreeWidgetItem* it = tree_->topLevelItem(i);
    if (offloadOf(it)) continue;  // offload never wraps another offload
    QString why = it->data(Status, Qt::UserRole).toString();
    StrategyRequest spec = specOf(it);
    if (why.isEmpty() && !spec.ok()) why = QString::fromStdString(spec.error);  // its own row's parameter does not parse
    bases.push_back({it->text(Name), std::move(spec), why});
  }
  for (const OffloadRow& r : offload_) {
    r.editor->setBases(bases);
    r.editor->setKRange(defaults_.n);
  }
}

OffloadEditor* StrategyPanel::addOffloadRow(const std::optional<StrategySpec>& spec) {
  const OffloadRow& last = offload_.back();
  auto* it = new QTreeWidgetItem;
  tree_->insertTopLevelItem(tree_->indexOfTopLevelItem(last.item) + 1, it);
  it->setText(Name, last.item->text(Name));
  it->setToolTip(Name, last.item->toolTip(Name));
  it->setIcon(Name, last.item->icon(Name));
  it->setFlags(last.item->flags());
  auto* ed = new OffloadEditor(last.item->text(Name), true, tree_);
  offload_.push_back({it, ed});
  tree_->setItemWidget(it, Param, ed);
  const bool wasUpdating = updating_;
  updating_ = true;
  it->setCheckState(Name, Qt::Checked);
  refreshOffloadBases();
  ed->setKRange(defaults_.n);
  if (spec) ed->setSpec(*spec);
  else ed->kBox()->setValue(std::min(2 * defaults_.k, std::max(1, defaults_.n)));  // another K than the first row's default
  updating_ = wasUpdating;
  connect(ed, &OffloadEditor::changed, this, &StrategyPanel::changed);
  connect(ed, &OffloadEditor::removeRequested, this, [this, it] { removeOffloadRow(it); });
  changed();
  return ed;
}

void StrategyPanel::removeOffloadRow(QTreeWidgetItem* item) {
  for (auto r = offload_.begin() + 1; r != offload_.end(); ++r)
    if (r->item == item) {
      offload_.erase(r);
      delete item;  // and its editor with it
      changed();
      return;
    }
}

QTreeWidgetItem* StrategyPanel::row(const QString& name) const {
  for (int i = 0; i < tree_->topLevelItemCount(); ++i)
    if (tree_->topLevelItem(i)->text(Name) == name) return tree_->topLevelItem(i);
  return nullptr;
}

QSpinBox* StrategyPanel::intEditor(const QString& name) const {
  const auto it = editors_.find(name);
  return it == editors_.end() ? nullptr : it->second.count;
}
QDoubleSpinBox* StrategyPanel::budgetEditor(const QString& name) const {
  const auto it = editors_.find(name);
  return it == editors_.end() ? nullptr : it->second.budget;
}
QString StrategyPanel::helpText() const { return help_->text(); }

void StrategyPanel::setModel(const Model& model) {
  updating_ = true;
  defaults_ = strategy_defaults(model);
  for (auto& [name, e] : editors_) {
    const StrategyInfo* info = find_strategy(name.toStdString());
    if (e.count && info) {
      const ParamKind kind = info->params.front().kind;
      e.count->setRange(kind == ParamKind::Count ? 0 : 1, std::max(1, defaults_.n));  // Count's 0: "all"
      e.count->setValue(int(default_parameter(kind, defaults_)));
    }
    if (e.budget) {
      const double u = defaults_.unit.bytes;
      e.budget->setSuffix(" " + defaults_.unit.name);
      e.budget->setDecimals(u == 1 ? 0 : 2);
      e.budget->setRange(u == 1 ? 1 : 0.01, std::max(1.0, 2.0 * double(defaults_.storeAllPeak) / u));
      e.budget->setSingleStep(std::max(u == 1 ? 1.0 : 0.01, nice_scale(double(defaults_.storeAllPeak) / u, 20).step));
      e.budget->setValue(double(defaults_.budget) / u);
    }
    if (e.seconds) e.seconds->setValue(defaults_.seconds);
    if (e.list) e.list->setText("0");
    if (e.choice) e.choice->setCurrentIndex(0);
  }
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) {
    auto* it = tree_->topLevelItem(i);
    const StrategyInfo* info = find_strategy(it->text(Name).toStdString());
    const QString why = info ? not_applicable(*info, model) : QString();
    it->setData(Status, Qt::UserRole, why);
    it->setFlags(why.isEmpty() ? it->flags() | Qt::ItemIsEnabled : it->flags() & ~Qt::ItemIsEnabled);
    if (QWidget* w = tree_->itemWidget(it, Param)) w->setEnabled(why.isEmpty());
    if (!why.isEmpty()) {
      it->setCheckState(Name, Qt::Unchecked);
      it->setText(Status, why);
      it->setToolTip(Status, why);
    }
  }
  // Parameters do not carry over: one offload row, every K ops at this model's K.
  while (offload_.size() > 1) {
    delete offload_.back().item;
    offload_.pop_back();
  }
  refreshOffloadBases();
  if (!offload_.empty()) {
    const QString name = offload_.front().item->text(Name);
    offload_.front().editor->setSpec(default_spec(*find_strategy(name.toStdString()), defaults_));
  }
  updating_ = false;
  tree_->doItemsLayout();  // the rows' heights for the wrapped reasons
}

StrategyRequest StrategyPanel::specOf(const QTreeWidgetItem* it) const {
  if (const OffloadEditor* ed = offloadOf(it)) return request_strategy(ed->spec());
  const QString name = it->text(Name);
  const StrategyRequest bare = request_strategy(name.toStdString());
  const auto found = editors_.find(name);
  const StrategyInfo* info = find_strategy(name.toStdString());
  if (found == editors_.end() || !info || info->params.empty()) return bare;
  const Editors& e = found->second;
  // The list of op ids is typed: text that does not parse stays as typed, so
  // that its run says why.
  if (e.list) {
    StrategyRequest typed = request_strategy(strategy_text(info->name, e.list->text().trimmed().toStdString()));
    return typed.spec ? request_strategy(*typed.spec) : typed;  // printed canonically when it parses
  }
  std::vector<int64_t> p;
  for (const ParamInfo& param : info->params) {
    // A row without the editor (an offload row being added) is its name.
    switch (param.kind) {
      case ParamKind::Interval:
      case ParamKind::Slots:
        if (!e.count) return bare;
        p.push_back(e.count->value());
        break;
      case ParamKind::Bytes:
        if (!e.budget) return bare;
        p.push_back(std::llround(e.budget->value() * defaults_.unit.bytes));
        break;
      case ParamKind::Seconds:
        if (!e.seconds) return bare;
        p.push_back(e.seconds->value());
        break;
      case ParamKind::Choice:
        if (!e.choice) return bare;
        p.push_back(e.choice->currentIndex());
        break;
      case ParamKind::OpIds: return bare;  // e.list, above
      case ParamKind::Count:
        if (!e.count) return bare;
        if (e.count->value() > 0) p.push_back(e.count->value());  // 0 ("all"): left out
        break;
    }
  }
  try {
    return request_strategy(strategy_spec(info->name, std::move(p)));
  } catch (const InputError&) {  // an editor's range wider than the entry's: the run says why
    return bare;
  }
}

std::vector<StrategyRequest> StrategyPanel::specs() const {
  std::vector<StrategyRequest> out;
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) {
    const auto* it = tree_->topLevelItem(i);
    if (it->checkState(Name) != Qt::Checked || !(it->flags() & Qt::ItemIsEnabled)) continue;
    // Two offload rows may name the same spec: compared once.
    StrategyRequest spec = specOf(it);
    if (std::find(out.begin(), out.end(), spec) == out.end()) out.push_back(std::move(spec));
  }
  return out;
}

void StrategyPanel::applyParameters(const StrategySpec& spec) {
  const auto found = editors_.find(QString::fromStdString(spec.name));
  if (found == editors_.end()) return;
  Editors& e = found->second;
  const StrategyInfo& info = strategy_info(spec);
  for (std::size_t i = 0; i < info.params.size(); ++i) {
    const ParamInfo& param = info.params[i];
    // A parameter left out has its omitted value (optimal's default time limit).
    const int64_t v = i < spec.parameters.size() ? spec.parameters[i] : param.omitted_value;
    if (param.kind == ParamKind::OpIds) {
      if (e.list) e.list->setText(QString::fromStdString(parameter_text(spec)));
    } else if (param.kind == ParamKind::Count && e.count) {
      e.count->setValue(int(std::max<int64_t>(v, 0)));  // left out: 0, "all"
    } else if (v < 0) {
      continue;
    } else if ((param.kind == ParamKind::Interval || param.kind == ParamKind::Slots) && e.count) {
      e.count->setValue(int(v));
    } else if (param.kind == ParamKind::Bytes && e.budget) {
      e.budget->setValue(double(v) / defaults_.unit.bytes);
    } else if (param.kind == ParamKind::Seconds && e.seconds) {
      e.seconds->setValue(int(v));
    } else if (param.kind == ParamKind::Choice && e.choice) {
      e.choice->setCurrentIndex(int(v));
    }
  }
}

void StrategyPanel::setSpecs(const std::vector<StrategyRequest>& specs) {
  updating_ = true;
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) {
    auto* it = tree_->topLevelItem(i);
    if (offloadOf(it)) continue;  // below, once the bases have their parameters
    bool on = false;
    for (const StrategyRequest& s : specs) {
      const std::optional<StrategySpec> spec = plainSpec(s, it);
      if (!spec) continue;
      on = true;
      applyParameters(*spec);
    }
    it->setCheckState(Name, on ? Qt::Checked : Qt::Unchecked);
    if (!on && it->data(Status, Qt::UserRole).toString().isEmpty()) it->setText(Status, {});
  }
  setOffloadSpecs(specs);
  updating_ = false;
}

void StrategyPanel::setOffloadSpecs(const std::vector<StrategyRequest>& specs) {
  std::vector<StrategySpec> mine;
  for (const StrategyRequest& s : specs) {
    if (!s.spec) continue;  // not shown in a row; its run says why
    const StrategySpec& spec = *s.spec;
    if (!strategy_info(spec).wrap || !spec.modifier.empty()) continue;
    mine.push_back(spec);
    // offload+BASE:P takes P from BASE's row: set it there first.
    if (!spec.inner.empty()) applyParameters(spec.inner.front());
  }
  while (offload_.size() > std::max<std::size_t>(1, std::size_t(mine.size()))) {
    delete offload_.back().item;
    offload_.pop_back();
  }
  refreshOffloadBases();
  while (offload_.size() < mine.size()) addOffloadRow();
  for (std::size_t i = 0; i < offload_.size(); ++i) {
    const bool on = i < mine.size() && offload_[i].editor->setSpec(mine[i]);
    offload_[i].item->setCheckState(Name, on ? Qt::Checked : Qt::Unchecked);
    if (!on && offload_[i].item->data(Status, Qt::UserRole).toString().isEmpty()) offload_[i].item->setText(Status, {});
  }
}

void StrategyPanel::setRuns(const RunList& runs) {
  updating_ = true;
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) {
    auto* it = tree_->topLevelItem(i);
    const QString why = it->data(Status, Qt::UserRole).toString();
    if (!why.isEmpty()) continue;  // says why it cannot apply
    it->setText(Status, {});
    it->setToolTip(Status, {});
    it->setForeground(Status, QBrush());
    const OffloadEditor* offload = offloadOf(it);
    for (const StrategyRun& r : runs) {
      // A row's run: its spec (or its text as the row wrote it, when it does not parse).
      const bool mine = offload ? r.parsed == offload->spec()
                                : plainSpec({r.parsed, r.spec, {}}, it) || (!r.parsed && r.spec == specOf(it).text);
      if (!mine) continue;
      if (r.ok() && offload && r.sim.transfers == 0) {
        // Valid, but not what the user meant: say why nothing went to the host.
        const QString why = tr("moves nothing: every checkpoint it keeps is read as soon as the backward reaches it, "
                               "none waits through a recompute (the same schedule as %1)")
                                .arg(QString::fromStdString(offload->baseSpec().str()));
        it->setText(Status, why);
        it->setToolTip(Status, why);
        it->setForeground(Status, QBrush(QColor(150, 90, 0)));
      } else if (r.ok()) {
        it->setText(Status, tr("ok, peak %1").arg(format_bytes(r.sim.peak_bytes)));
        if (r.sim.transfers > 0)
          it->setText(Status, tr("ok, peak %1, host %2").arg(format_bytes(r.sim.peak_bytes), format_bytes(r.sim.peak_host_bytes)));
        if (!r.schedule.note.empty()) {
          it->setText(Status, it->text(Status) + tr(" (best found, not proven)"));
          it->setToolTip(Status, QString::fromStdString(r.schedule.note));
        }
      } else if (r.pending) {
        it->setText(Status, QString::fromStdString(r.error));
      } else {
        it->setText(Status, tr("invalid: %1").arg(QString::fromStdString(r.error)));
        it->setToolTip(Status, QString::fromStdString(r.error));
        it->setForeground(Status, QBrush(QColor(170, 30, 30)));
      }
    }
    // The column is narrow in a narrow dock: the whole status on hover.
    if (it->toolTip(Status).isEmpty()) it->setToolTip(Status, it->text(Status));
  }
  updating_ = false;
  tree_->doItemsLayout();  // the rows' heights for the wrapped statuses
}

}  // namespace remat
