#include "widgets/views/activity_bar.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QStringList>

namespace remat {

ActivityBar::ActivityBar(QWidget* parent) : QWidget(parent) {
  auto* l = new QHBoxLayout(this);
  l->setContentsMargins(0, 0, 0, 0);
  label_ = new QLabel(this);
  bar_ = new QProgressBar(this);
  bar_->setMaximumWidth(200);
  bar_->setTextVisible(false);
  cancel_ = new QPushButton(tr("Cancel"), this);
  cancel_->setToolTip(tr("Stop everything that is computing (Esc)"));
  l->addWidget(label_);
  l->addWidget(bar_);
  l->addWidget(cancel_);
  connect(cancel_, &QPushButton::clicked, this, &ActivityBar::cancelRequested);
  refresh();
}

void ActivityBar::set(const QString& key, const QString& text, double fraction) {
  items_[key] = {text, fraction};
  refresh();
}

void ActivityBar::clear(const QString& key) {
  if (items_.erase(key)) refresh();
}

QString ActivityBar::text() const { return label_->text(); }

void ActivityBar::refresh() {
  setVisible(!items_.empty());
  QStringList parts;
  double fraction = -1;
  for (const auto& [key, it] : items_) {
    parts << (it.fraction >= 0 ? QString("%1 %2%").arg(it.text).arg(int(it.fraction * 100)) : it.text);
    if (fraction < 0 && it.fraction >= 0) fraction = it.fraction;
  }
  label_->setText(parts.join(" · "));
  if (fraction < 0) {
    bar_->setRange(0, 0);  // busy indicator
  } else {
    bar_->setRange(0, 1000);
    bar_->setValue(int(fraction * 1000));
  }
}

}  // namespace remat
