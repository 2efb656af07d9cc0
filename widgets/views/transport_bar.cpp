#include "widgets/views/transport_bar.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSlider>
#include <QStyle>
#include <QToolButton>

#include "widgets/controllers/playback_controller.h"
#include "widgets/document/studio_document.h"

namespace remat {

TransportBar::TransportBar(StudioDocument* doc, PlaybackController* player, QWidget* parent)
    : QWidget(parent), doc_(doc), player_(player) {
  auto* l = new QHBoxLayout(this);
  l->setContentsMargins(4, 2, 4, 2);
  auto button = [&](QStyle::StandardPixmap icon, const QString& tip, auto slot) {
    auto* b = new QToolButton(this);
    b->setIcon(style()->standardIcon(icon));
    b->setToolTip(tip);
    b->setFocusPolicy(Qt::NoFocus);  // Space and arrows belong to the window's shortcuts
    connect(b, &QToolButton::clicked, player_, slot);
    l->addWidget(b);
    return b;
  };
  button(QStyle::SP_MediaSkipBackward, tr("To start (Home)"), &PlaybackController::toStart);
  button(QStyle::SP_MediaSeekBackward, tr("Step back (Left)"), &PlaybackController::stepBack);
  play_ = button(QStyle::SP_MediaPlay, tr("Play/pause (Space)"), &PlaybackController::togglePlay);
  button(QStyle::SP_MediaSeekForward, tr("Step forward (Right)"), &PlaybackController::stepForward);
  button(QStyle::SP_MediaSkipForward, tr("To end (End)"), &PlaybackController::toEnd);
  peak_ = new QToolButton(this);
  peak_->setText(tr("Peak"));
  peak_->setToolTip(tr("Jump to the memory peak of the shown strategy (P)"));
  peak_->setFocusPolicy(Qt::NoFocus);
  connect(peak_, &QToolButton::clicked, player_, &PlaybackController::toPeak);
  l->addWidget(peak_);
  slider_ = new QSlider(Qt::Horizontal, this);
  slider_->setFocusPolicy(Qt::NoFocus);
  l->addWidget(slider_, 1);
  label_ = new QLabel(this);
  label_->setMinimumWidth(110);
  l->addWidget(label_);
  l->addWidget(new QLabel(tr("Speed:"), this));
  speed_ = new QComboBox(this);
  speed_->setFocusPolicy(Qt::NoFocus);
  for (double s : {1.0, 2.0, 4.0, 8.0, 16.0, 64.0, 256.0, 1024.0}) speed_->addItem(tr("%1 steps/s").arg(s), s);
  speed_->addItem(tr("full speed"), PlaybackController::kFullSpeed);
  speed_->setCurrentIndex(3);
  l->addWidget(speed_);
  connect(speed_, &QComboBox::currentIndexChanged, this,
          [this](int i) { player_->setSpeed(speed_->itemData(i).toDouble()); });
  connect(slider_, &QSlider::valueChanged, this, [this](int v) { doc_->setShownStep(std::size_t(v)); });
  connect(player_, &PlaybackController::playingChanged, this, [this](bool playing) {
    play_->setIcon(style()->standardIcon(playing ? QStyle::SP_MediaPause : QStyle::SP_MediaPlay));
  });
  connect(doc_, &StudioDocument::stepChanged, this, &TransportBar::sync);
  connect(doc_, &StudioDocument::currentRunChanged, this, &TransportBar::sync);
  sync();
}

void TransportBar::sync() {
  const int n = static_cast<int>(doc_->shownStepCount());
  const QSignalBlocker block(slider_);
  slider_->setRange(0, std::max(0, n - 1));
  slider_->setValue(static_cast<int>(doc_->shownStep()));
  label_->setText(tr("step %1 / %2").arg(n ? doc_->shownStep() + 1 : 0).arg(n));
}

}  // namespace remat
