// Plays the document's steps (as the user counts them: frees hidden or not):
// a timer advances the step at `speed` steps per
// second (fractional steps accumulate; "full speed" advances one step per
// frame), stopping at the end. Transport buttons and shortcuts call its slots.
#pragma once
#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

namespace remat {
class StudioDocument;

class PlaybackController : public QObject {
  Q_OBJECT
 public:
  static constexpr double kFullSpeed = 0;  // one step per frame, as fast as frames come
  explicit PlaybackController(StudioDocument* doc, QObject* parent = nullptr);
  bool playing() const { return timer_.isActive(); }
  double speed() const { return speed_; }
  void setSpeed(double stepsPerSecond);

 public slots:
  void play();
  void pause();
  void togglePlay();
  void stepForward();
  void stepBack();
  void toStart();
  void toEnd();
  void toPeak();  // the shown strategy's memory peak

 signals:
  void playingChanged(bool playing);

 private:
  void tick();
  StudioDocument* doc_;
  QTimer timer_;
  QElapsedTimer clock_;
  double speed_ = 8;
  double carry_ = 0;
};

}  // namespace remat
