#include "widgets/views/offload_editor.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QToolButton>

#include "core/base/errors.h"
#include "core/strategies/registry.h"

namespace remat {
OffloadEditor::OffloadEditor(const QString& wrapper, bool removable, QWidget* parent)
    : QWidget(parent), wrapper_(wrapper.toStdString()) {
  auto* h = new QHBoxLayout(this);
  h->setContentsMargins(0, 0, 0, 0);
  h->setSpacing(2);
  base_ = new QComboBox(this);
  base_->setObjectName("offloadBase");
  base_->addItem(tr("every K ops"), QString());
  base_->setToolTip(tr("Which checkpoints go to the host: every K ops (offload:K), or those of another strategy "
                       "with its parameter from its own row (offload+SPEC)"));
  h->addWidget(base_, 1);
  k_ = new QSpinBox(this);
  k_->setObjectName("offloadK");
  k_->setRange(1, 1);
  k_->setSuffix(tr(" ops"));
  k_->setToolTip(tr("K: a checkpoint every K ops, offloaded after its forward"));
  h->addWidget(k_);
  button_ = new QToolButton(this);
  button_->setText(removable ? QString::fromUtf8("\u2212") : "+");
  button_->setToolTip(removable ? tr("Remove this offload row") : tr("Add another offload row (compare several)"));
  h->addWidget(button_);
  connect(base_, &QComboBox::currentIndexChanged, this, [this] {
    k_->setEnabled(baseName().isEmpty());
    emit changed();
  });
  connect(k_, &QSpinBox::valueChanged, this, &OffloadEditor::changed);
  connect(button_, &QToolButton::clicked, this, removable ? &OffloadEditor::removeRequested : &OffloadEditor::addRequested);
}

void OffloadEditor::setBases(const std::vector<Base>& bases) {
  const QSignalBlocker block(base_);
  const QString chosen = baseName();
  while (base_->count() > 1) base_->removeItem(1);
  auto* items = qobject_cast<QStandardItemModel*>(base_->model());
  int keep = 0;
  bases_ = bases;
  for (const Base& b : bases) {
    base_->addItem("+ " + QString::fromStdString(b.spec.text), b.name);
    const int i = base_->count() - 1;
    if (!b.whyNot.isEmpty()) {
      // Listed, so the user sees it exists, but not choosable: the reason says why.
      items->item(i)->setEnabled(false);
      base_->setItemData(i, b.whyNot, Qt::ToolTipRole);
    } else if (b.name == chosen) {
      keep = i;
    }
  }
  base_->setCurrentIndex(keep);
  k_->setEnabled(keep == 0);
}

void OffloadEditor::setKRange(int maxK) {
  const QSignalBlocker block(k_);
  k_->setRange(1, std::max(1, maxK));
}

bool OffloadEditor::setSpec(const StrategySpec& spec) {
  if (spec.name != wrapper_ || !spec.modifier.empty()) return false;
  int index = -1;
  int k = k_->value();
  if (!spec.inner.empty()) {
    index = base_->findData(QString::fromStdString(spec.inner.front().name));
  } else if (!spec.parameters.empty()) {
    k = static_cast<int>(spec.parameters.front());
    index = 0;
  } else {
    index = base_->findData(QString("sqrt"));  // plain offload: sqrt's checkpoints
  }
  // A base that cannot apply to this model is never chosen.
  if (index < 0 || !qobject_cast<QStandardItemModel*>(base_->model())->item(index)->isEnabled()) return false;
  if (spec.parameters.empty() && (spec.inner.empty() || spec.inner.front() == strategy_spec("sqrt")))
    sqrtSpelling_ = spec;
  const QSignalBlocker b1(base_), b2(k_);
  base_->setCurrentIndex(index);
  k_->setValue(k);
  k_->setEnabled(index == 0);
  return true;
}

QString OffloadEditor::baseName() const { return base_->currentData().toString(); }

StrategySpec OffloadEditor::baseSpec() const {
  const int i = base_->currentIndex() - 1;  // the first entry is "every K ops"
  // A base is choosable only when its spec parses (setBases disables the others).
  if (i < 0 || std::size_t(i) >= bases_.size() || !bases_[std::size_t(i)].spec.spec)
    return strategy_spec("every-k", {k_->value()});
  return *bases_[std::size_t(i)].spec.spec;
}

StrategySpec OffloadEditor::spec() const {
  if (baseName().isEmpty()) return strategy_spec(wrapper_, {k_->value()});
  if (baseName() == "sqrt") return sqrtSpelling_ ? *sqrtSpelling_ : wrapped_spec(wrapper_, strategy_spec("sqrt"));
  return wrapped_spec(wrapper_, baseSpec());
}

}  // namespace remat
