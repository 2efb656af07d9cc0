#include "widgets/export/export_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QSettings>
#include <QSpinBox>
#include <QStandardPaths>

namespace remat {

QString ExportDialog::startFolder() {
  const QString last = QSettings().value("exportDir").toString();
  if (!last.isEmpty() && QDir(last).exists()) return last;
  const QString pictures = QStandardPaths::writableLocation(QStandardPaths::PicturesLocation);
  if (!pictures.isEmpty() && QDir(pictures).exists()) return pictures;
  return QDir::homePath();
}

QString ExportDialog::key(const char* name) const {
  return QString("export/%1/%2").arg(kind_ == Kind::Picture ? "picture" : "animation", name);
}

ExportDialog::ExportDialog(Kind kind, QWidget* parent) : QDialog(parent), kind_(kind) {
  const bool anim = kind == Kind::Animation;
  setWindowTitle(anim ? tr("Export animation") : tr("Export picture"));
  QSettings s;
  auto* form = new QFormLayout(this);
  auto* size = new QHBoxLayout;
  width_ = new QSpinBox(this);
  height_ = new QSpinBox(this);
  for (QSpinBox* b : {width_, height_}) {
    b->setRange(64, 8192);
    b->setSuffix(" px");
  }
  width_->setValue(s.value(key("width"), anim ? 1280 : 1200).toInt());
  height_->setValue(s.value(key("height"), anim ? 720 : 600).toInt());
  size->addWidget(width_);
  size->addWidget(new QLabel("×", this));
  size->addWidget(height_);
  form->addRow(tr("Size:"), size);
  scale_ = new QComboBox(this);
  for (int k : {1, 2, 3}) scale_->addItem(tr("%1× pixels").arg(k), k);
  scale_->setCurrentIndex(scale_->findData(s.value(key("scale"), anim ? 1 : 2).toInt()));
  scale_->setToolTip(tr("Pixels per logical pixel: 2× keeps text sharp on slides and HiDPI screens"));
  form->addRow(tr("Scale:"), scale_);
  fontScale_ = new QDoubleSpinBox(this);
  fontScale_->setRange(0.5, 4);
  fontScale_->setSingleStep(0.1);
  fontScale_->setValue(s.value(key("fontScale"), anim ? 1.2 : 1.5).toDouble());
  fontScale_->setToolTip(tr("Text size relative to the window's: 1.5 reads well on a projected slide"));
  form->addRow(tr("Text size:"), fontScale_);
  if (anim) {
    fps_ = new QDoubleSpinBox(this);
    fps_->setRange(1, 60);
    fps_->setSuffix(tr(" frames/s"));
    fps_->setValue(s.value(key("fps"), 8).toDouble());
    form->addRow(tr("Frame rate:"), fps_);
    sideBySide_ = new QCheckBox(tr("The strategies side by side (up to three, as in View › Side by side)"), this);
    sideBySide_->setChecked(s.value(key("sideBySide"), true).toBool());
    form->addRow(sideBySide_);
    chart_ = new QCheckBox(tr("The memory timeline under the graph"), this);
    chart_->setChecked(s.value(key("chart"), true).toBool());
    form->addRow(chart_);
    hideFrees_ = new QCheckBox(tr("Skip free instructions (one frame per fwd/bwd step)"), this);
    hideFrees_->setChecked(s.value(key("hideFrees"), true).toBool());
    form->addRow(hideFrees_);
    inPhase_ = new QCheckBox(tr("In phase: one frame per step of the shortest strategy (tens of frames, not hundreds)"), this);
    inPhase_->setChecked(s.value(key("inPhase"), true).toBool());
    form->addRow(inPhase_);
  }
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  connect(buttons, &QDialogButtonBox::accepted, this, &ExportDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &ExportDialog::reject);
  form->addRow(buttons);
}

QSize ExportDialog::pictureSize() const { return QSize(width_->value(), height_->value()); }
double ExportDialog::scale() const { return scale_->currentData().toDouble(); }
double ExportDialog::fontScale() const { return fontScale_->value(); }
double ExportDialog::fps() const { return fps_ ? fps_->value() : 8; }
bool ExportDialog::withChart() const { return chart_ && chart_->isChecked(); }
bool ExportDialog::hideFrees() const { return hideFrees_ && hideFrees_->isChecked(); }
bool ExportDialog::inPhase() const { return inPhase_ && inPhase_->isChecked(); }
bool ExportDialog::sideBySide() const { return !sideBySide_ || sideBySide_->isChecked(); }

void ExportDialog::accept() {
  QSettings s;
  s.setValue(key("width"), width_->value());
  s.setValue(key("height"), height_->value());
  s.setValue(key("scale"), scale_->currentData());
  s.setValue(key("fontScale"), fontScale_->value());
  if (fps_) {
    s.setValue(key("fps"), fps_->value());
    s.setValue(key("chart"), chart_->isChecked());
    s.setValue(key("hideFrees"), hideFrees_->isChecked());
    s.setValue(key("inPhase"), inPhase_->isChecked());
    s.setValue(key("sideBySide"), sideBySide_->isChecked());
  }
  QDialog::accept();
}

}  // namespace remat
