// The options of a picture or animation export: size, scale (2x by default
// for pictures, for slides and HiDPI), text size, and for an animation the
// frame rate, the chart and the strategies side by side. Remembered between
// uses (QSettings "export/...").
#pragma once
#include <QDialog>
#include <QSize>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QSpinBox;

namespace remat {

class ExportDialog : public QDialog {
  Q_OBJECT
 public:
  enum class Kind { Picture, Animation };
  ExportDialog(Kind kind, QWidget* parent = nullptr);
  QSize pictureSize() const;
  double scale() const;
  double fontScale() const;
  double fps() const;
  bool withChart() const;
  bool hideFrees() const;
  bool inPhase() const;  // side by side: the shortest strategy drives the frames
  bool sideBySide() const;
  void accept() override;  // remembers the choices

  // The folder an export dialog starts in: the last one used, else Pictures, else home.
  static QString startFolder();

 private:
  QString key(const char* name) const;
  Kind kind_;
  QSpinBox *width_, *height_;
  QComboBox* scale_;
  QDoubleSpinBox* fontScale_;
  QDoubleSpinBox* fps_ = nullptr;
  QCheckBox *chart_ = nullptr, *hideFrees_ = nullptr, *sideBySide_ = nullptr, *inPhase_ = nullptr;
};

}  // namespace remat
