// Play/pause, step, start/end, jump to the memory peak, speed and a slider to
// scrub to any step (steps as the user counts them: frees hidden or not).
#pragma once
#include <QWidget>

class QComboBox;
class QLabel;
class QSlider;
class QToolButton;

namespace remat {
class PlaybackController;
class StudioDocument;

class TransportBar : public QWidget {
  Q_OBJECT
 public:
  TransportBar(StudioDocument* doc, PlaybackController* player, QWidget* parent = nullptr);
  QSlider* slider() const { return slider_; }
  QToolButton* peakButton() const { return peak_; }

 private:
  void sync();
  StudioDocument* doc_;
  PlaybackController* player_;
  QToolButton* play_;
  QToolButton* peak_;
  QSlider* slider_;
  QLabel* label_;
  QComboBox* speed_;
};

}  // namespace remat
