#include "widgets/views/offload_editor.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QToolButton>

namespace remat {

OffloadEditor::OffloadEditor(bool removable, QWidget* parent) : QWidget(parent) {
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
  for (const Base& b : bases) {
    base_->addItem("+ " + b.spec, b.name);
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

bool OffloadEditor::setSpec(const QString& spec) {
  int index = -1;
  int k = k_->value();
  if (spec == "offload") {
    index = base_->findData(QString("sqrt"));
  } else if (spec.startsWith("offload:")) {
    bool ok = false;
    k = spec.mid(8).toInt(&ok);
    if (ok) index = 0;
  } else if (spec.startsWith("offload+")) {
    index = base_->findData(spec.mid(8).section(':', 0, 0));
  }
  // A base that cannot apply to this model is never chosen.
  if (index < 0 || !qobject_cast<QStandardItemModel*>(base_->model())->item(index)->isEnabled()) return false;
  if (spec == "offload" || spec == "offload+sqrt") sqrtSpelling_ = spec;
  const QSignalBlocker b1(base_), b2(k_);
  base_->setCurrentIndex(index);
  k_->setValue(k);
  k_->setEnabled(index == 0);
  return true;
}

QString OffloadEditor::baseName() const { return base_->currentData().toString(); }

QString OffloadEditor::spec() const {
  if (baseName().isEmpty()) return QString("offload:%1").arg(k_->value());
  if (baseName() == "sqrt") return sqrtSpelling_;
  return "offload+" + base_->currentText().mid(2);  // the item reads "+ SPEC"
}

}  // namespace remat
