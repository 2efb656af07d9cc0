#include "widgets/strategy_panel.h"

#include <QHeaderView>
#include <QLabel>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "core/strategy.h"
#include "widgets/comparison_model.h"

namespace remat {
namespace {
enum Col { Name, Param, Status };
}

StrategyPanel::StrategyPanel(QWidget* parent) : QWidget(parent) {
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(0, 0, 0, 0);
  auto* hint = new QLabel(tr("Strategies to compare (double-click a parameter to edit it):"), this);
  hint->setWordWrap(true);
  l->addWidget(hint);
  tree_ = new QTreeWidget(this);
  tree_->setColumnCount(3);
  tree_->setHeaderLabels({tr("Strategy"), tr("Parameter"), tr("Status")});
  tree_->setRootIsDecorated(false);
  tree_->header()->setSectionResizeMode(Status, QHeaderView::Stretch);
  for (const StrategyInfo& info : strategy_catalog()) {
    auto* it = new QTreeWidgetItem(tree_);
    it->setText(Name, QString::fromStdString(info.name));
    it->setToolTip(Name, QString::fromStdString(info.help));
    it->setCheckState(Name, Qt::Unchecked);
    Qt::ItemFlags flags = Qt::ItemIsEnabled | Qt::ItemIsUserCheckable | Qt::ItemIsSelectable;
    if (!info.argument.empty()) {
      flags |= Qt::ItemIsEditable;
      it->setText(Param, info.argument == "K" ? "4" : info.name == "manual" ? "0" : "");
      it->setToolTip(Param, QString::fromStdString(info.argument));
    }
    it->setFlags(flags);
  }
  tree_->resizeColumnToContents(Name);
  tree_->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed);
  l->addWidget(tree_);
  connect(tree_, &QTreeWidget::itemChanged, this, [this](QTreeWidgetItem* it, int col) {
    if (updating_ || col == Status) return;
    if (col == Param && it->checkState(Name) != Qt::Checked) return;
    emit specsChanged(specs());
  });
}

QString StrategyPanel::specOf(const QTreeWidgetItem* it) const {
  const QString p = it->text(Param).trimmed();
  return p.isEmpty() ? it->text(Name) : it->text(Name) + ":" + p;
}

QStringList StrategyPanel::specs() const {
  QStringList out;
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) {
    const auto* it = tree_->topLevelItem(i);
    if (it->checkState(Name) == Qt::Checked) out << specOf(it);
  }
  return out;
}

void StrategyPanel::setSpecs(const QStringList& specs) {
  updating_ = true;
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) {
    auto* it = tree_->topLevelItem(i);
    bool on = false;
    for (const QString& s : specs) {
      const QString head = s.section(':', 0, 0);
      if (head != it->text(Name)) continue;
      on = true;
      if (s.contains(':')) it->setText(Param, s.section(':', 1));
    }
    it->setCheckState(Name, on ? Qt::Checked : Qt::Unchecked);
    if (!on) it->setText(Status, {});
  }
  updating_ = false;
}

void StrategyPanel::setRuns(const RunList& runs) {
  updating_ = true;
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) {
    auto* it = tree_->topLevelItem(i);
    it->setText(Status, {});
    it->setToolTip(Status, {});
    it->setForeground(Status, QBrush());
    for (const StrategyRun& r : runs) {
      if (QString::fromStdString(r.spec).section(':', 0, 0) != it->text(Name)) continue;
      if (r.ok()) {
        it->setText(Status, tr("ok, peak %1").arg(format_bytes(r.sim.peak_bytes)));
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
  }
  updating_ = false;
}

}  // namespace remat
