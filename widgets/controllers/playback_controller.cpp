#include "widgets/controllers/playback_controller.h"

#include "widgets/document/studio_document.h"

namespace remat {

PlaybackController::PlaybackController(StudioDocument* doc, QObject* parent) : QObject(parent), doc_(doc) {
  timer_.setInterval(16);
  timer_.setTimerType(Qt::PreciseTimer);
  connect(&timer_, &QTimer::timeout, this, &PlaybackController::tick);
  connect(doc_, &StudioDocument::modelChanged, this, &PlaybackController::pause);
}

void PlaybackController::setSpeed(double s) {
  speed_ = s;
  timer_.setInterval(s == kFullSpeed ? 0 : 16);
}

void PlaybackController::play() {
  if (playing()) return;
  if (doc_->shownStepCount() && doc_->shownStep() + 1 >= doc_->shownStepCount()) doc_->setShownStep(0);
  carry_ = 0;
  clock_.start();
  timer_.start();
  emit playingChanged(true);
}

void PlaybackController::pause() {
  if (!playing()) return;
  timer_.stop();
  emit playingChanged(false);
}

void PlaybackController::togglePlay() { playing() ? pause() : play(); }
void PlaybackController::stepForward() { doc_->stepForward(); }
void PlaybackController::stepBack() { doc_->stepBack(); }
void PlaybackController::toStart() { doc_->setShownStep(0); }
void PlaybackController::toEnd() { doc_->setShownStep(doc_->shownStepCount() ? doc_->shownStepCount() - 1 : 0); }
void PlaybackController::toPeak() { doc_->jumpToPeak(); }

void PlaybackController::tick() {
  std::size_t advance = 1;
  if (speed_ != kFullSpeed) {
    carry_ += speed_ * double(clock_.restart()) / 1000.0;
    advance = static_cast<std::size_t>(carry_);
    carry_ -= double(advance);
  }
  if (advance == 0) return;
  const std::size_t last = doc_->shownStepCount() ? doc_->shownStepCount() - 1 : 0;
  doc_->setShownStep(std::min(doc_->shownStep() + advance, last));
  if (doc_->shownStep() >= last) pause();
}

}  // namespace remat
