#include "widgets/export/animation_export.h"

#include <QDir>
#include <QFontMetricsF>
#include <QFileInfo>
#include <QGraphicsLayout>
#include <QLineSeries>
#include <QPainter>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "core/analysis/comparison.h"
#include "core/base/errors.h"
#include "core/io/atomic_file.h"
#include "core/model/model.h"
#include "core/sim/resident_index.h"
#include "widgets/document/instruction_caption.h"
#include "widgets/document/strategy_colors.h"
#include "widgets/export/gif_palette.h"
#include "widgets/views/lanes_painter.h"
#include "widgets/views/timeline_chart.h"

namespace remat {

struct AnimationFrames::Track {
  const StrategyRun* run;
  ResidentIndex index;
  ScheduleFacts facts;
  PhaseMap phases;
  StepNumbering numbering;
  Track(const Model& m, const StrategyRun* r, bool hideFrees)
      : run(r),
        index(m, r->schedule),
        facts(m, *r),
        phases(m, r->schedule),
        numbering(r->schedule, hideFrees) {}
};

AnimationOptions lecture_animation_options() {
  AnimationOptions o;
  o.hideFrees = true;
  o.inPhase = true;
  o.captions = true;
  return o;
}

QRectF chart_band(QSize frame, bool withChart) {
  if (!withChart) return {};
  const double h = std::round(frame.height() * 0.38);
  return QRectF(0, frame.height() - h, frame.width(), h);
}

ChartBackdrop render_chart_backdrop(const std::vector<const StrategyRun*>& runs, QSize band, double scale,
                                    double fontScale, const QString& title, bool ownLength) {
  TimelineChart chart;
  chart.setAttribute(Qt::WA_DontShowOnScreen);
  chart.resize(band);
  chart.setRuns(RunList(runs), title);
  if (ownLength) chart.setXMode(TimelineChart::XMode::OwnLength);
  chart.cursorSeries()->setVisible(false);
  chart.setFontScale(fontScale);
  chart.show();  // lays the chart out at this size (offscreen: nothing appears)
  chart.chart()->resize(QSizeF(band));
  chart.chart()->layout()->activate();
  ChartBackdrop b;
  b.image = QImage(band * scale, QImage::Format_RGB32);
  b.image.setDevicePixelRatio(scale);
  b.image.fill(Qt::white);
  {
    QPainter p(&b.image);
    p.setRenderHint(QPainter::Antialiasing);
    chart.scene()->render(&p, QRectF(QPointF(0, 0), QSizeF(band)), QRectF(QPointF(0, 0), QSizeF(band)));
  }
  b.plot = chart.chart()->plotArea();
  b.xMax = chart.axisX()->max();
  b.yTop = chart.axisY()->max();
  b.unit = chart.unitBytes();
  b.ownLength = ownLength;
  return b;
}

AnimationFrames::AnimationFrames(const Model& model, std::vector<const StrategyRun*> runs, AnimationOptions o,
                                 ChartBackdrop backdrop)
    : model_(&model), options_(o), backdrop_(std::move(backdrop)), layout_(model) {
  for (const StrategyRun* r : runs) tracks_.push_back(std::make_unique<Track>(model, r, o.hideFrees));
  // The run with the most steps drives the frames (in phase: the fewest);
  // the others follow by phase.
  for (std::size_t i = 0; i < tracks_.size(); ++i) {
    const std::size_t a = tracks_[i]->numbering.count(), d = tracks_[std::size_t(driver_)]->numbering.count();
    if (o.inPhase ? a < d : a > d) driver_ = int(i);
  }
  for (const auto& t : tracks_) legend_ |= legend_mask(model, t->run->schedule, t->facts);
  const StepNumbering& num = tracks_[std::size_t(driver_)]->numbering;
  const std::size_t shown = num.count();
  const std::size_t frames = std::min<std::size_t>(shown, std::size_t(std::max(2, o.maxFrames)));
  for (std::size_t k = 0; k < frames; ++k) {
    const std::size_t n = frames > 1 ? (k * (shown - 1) + (frames - 1) / 2) / (frames - 1) : 0;
    driverSteps_.push_back(num.instruction(n));
  }
}

AnimationFrames::~AnimationFrames() = default;

QSize AnimationFrames::pixels() const {
  return QSize(int(std::lround(options_.size.width() * options_.scale)),
               int(std::lround(options_.size.height() * options_.scale)));
}

std::vector<std::size_t> AnimationFrames::steps(int i) const {
  const std::size_t d = driverSteps_[std::size_t(i)];
  const double phase = tracks_[std::size_t(driver_)]->phases.phaseAt(d);
  std::vector<std::size_t> out;
  for (std::size_t k = 0; k < tracks_.size(); ++k)
    out.push_back(int(k) == driver_ ? d : tracks_[k]->numbering.snap(tracks_[k]->phases.stepAt(phase)));
  return out;
}

QImage AnimationFrames::frame(int i) const {
  QImage img(pixels(), QImage::Format_RGB32);
  img.setDevicePixelRatio(options_.scale);
  img.fill(Qt::white);
  QPainter p(&img);
  p.setRenderHint(QPainter::Antialiasing);
  const QRectF whole(QPointF(0, 0), QSizeF(options_.size));
  const QRectF band = chart_band(options_.size, options_.withChart && backdrop_.valid());
  QRectF lanesArea = band.isEmpty() ? whole : QRectF(0, 0, whole.width(), band.top());
  const std::vector<std::size_t> st = steps(i);
  if (options_.captions) {
    // The caption under the lanes, wrapped (never cut short) in two lines' room.
    QFont f = p.font();
    f.setPixelSize(std::max(8, int(std::lround(12 * options_.fontScale))));
    p.setFont(f);
    const QString text = caption(i);
    const double lineH = QFontMetricsF(f).height();
    const QRectF box(lanesArea.left() + 8, 0, lanesArea.width() - 16, 0);
    const QRectF need = QFontMetricsF(f).boundingRect(box.adjusted(0, 0, 0, 10000), Qt::TextWordWrap, text);
    const double h = std::max(lineH, need.height()) + 8;
    const QRectF bandRect(lanesArea.left(), lanesArea.bottom() - h, lanesArea.width(), h);
    p.fillRect(bandRect, QColor(0xf1, 0xf3, 0xf6));
    p.setPen(QColor(30, 30, 30));
    p.drawText(bandRect.adjusted(8, 4, -8, -4), Qt::AlignLeft | Qt::AlignVCenter | Qt::TextWordWrap, text);
    lanesArea.setBottom(bandRect.top());
  }
  std::vector<Lane> lanes;
  for (std::size_t k = 0; k < tracks_.size(); ++k) {
    const Track& t = *tracks_[k];
    lanes.push_back({t.run, st[k], node_states_at(*model_, t.run->schedule, t.index, t.facts, st[k])});
  }
  paint_lanes(p, *model_, layout_, lanes, lanesArea, options_.fontScale, true, nullptr, legend_, true);
  if (!band.isEmpty()) {
    p.drawImage(band.topLeft(), backdrop_.image);
    const QRectF plot = backdrop_.plot.translated(band.topLeft());
    auto at = [&](double x, double y) {
      return QPointF(plot.left() + x / backdrop_.xMax * plot.width(), plot.bottom() - y / backdrop_.yTop * plot.height());
    };
    // x of run k's step: the instruction, or percent of its own length.
    auto xOf = [&](std::size_t k) {
      const double len = double(tracks_[k]->run->schedule.code.size());
      return backdrop_.ownLength ? (len > 1 ? 100.0 * double(st[k]) / (len - 1) : 0) : double(st[k]);
    };
    const double xd = xOf(std::size_t(driver_));
    p.setPen(QPen(QColor(60, 60, 60), 1.5, Qt::DashLine));
    p.drawLine(at(xd, 0), at(xd, backdrop_.yTop));
    for (std::size_t k = 0; k < tracks_.size(); ++k) {
      const StrategyRun& r = *tracks_[k]->run;
      const QPointF c = at(xOf(k), double(r.sim.timeline[st[k]]) / backdrop_.unit);
      p.setPen(QPen(Qt::black, 1.2));
      p.setBrush(strategy_color(r));
      p.drawEllipse(c, 5.5, 5.5);
    }
  }
  return img;
}

QString AnimationFrames::caption(int i) const {
  if (!options_.captions) return {};
  const Track& t = *tracks_[std::size_t(driver_)];
  const std::size_t step = steps(i)[std::size_t(driver_)];
  const std::size_t shown = t.numbering.count();
  return QString("%1, step %2 of %3: %4")
      .arg(QString::fromStdString(t.run->name))
      .arg(t.numbering.rank(step) + 1)
      .arg(shown)
      .arg(QString::fromStdString(InstructionCaption(*model_, t.run->schedule, t.facts).text(step)));
}

AnimationFormat check_animation(const std::string& path, const AnimationOptions& o) {
  const AnimationFormat format = animation_format_of(path);
  if (o.size.width() < 64 || o.size.height() < 64 || o.size.width() > 8192 || o.size.height() > 8192)
    throw InputError("'" + path + "': frame size must be within 64..8192 pixels");
  if (!(o.scale > 0 && o.scale <= 4)) throw InputError("'" + path + "': scale must be in (0, 4]");
  if (!(o.fps > 0 && o.fps <= 60)) throw InputError("'" + path + "': frame rate must be in (0, 60]");
  if (o.maxFrames < 2) throw InputError("'" + path + "': an animation needs at least 2 frames");
  const QFileInfo target(QString::fromStdString(path));
  if (!target.absoluteDir().exists())
    throw InputError("cannot write '" + path + "': directory '" + target.absolutePath().toStdString() +
                     "' does not exist");
  return format;
}

int export_animation(const Model& model, const std::vector<const StrategyRun*>& runs, const std::string& path,
                      const AnimationOptions& o, const ChartBackdrop& backdrop,
                      const std::function<bool(double)>& progress) {
  const AnimationFormat format = check_animation(path, o);
  if (runs.empty() || runs.size() > 3) throw InputError("an animation shows 1 to 3 strategies side by side");
  for (const StrategyRun* r : runs)
    if (!r->ok()) throw InputError("strategy '" + r->spec + "' does not apply: " + r->error);
  const AnimationFrames frames(model, runs, o, backdrop);
  bool cancelled = false;
  try {
    replace_file_atomically(path, [&](const std::string& tmp) {
      // GIF: the picture's own colours as the one palette of every frame.
      auto writer = make_frame_writer(format, tmp, frames.pixels(), o.fps, animation_palette());
      for (int i = 0; i < frames.count(); ++i) {
        writer->add(frames.frame(i));
        if (progress && !progress(double(i + 1) / frames.count())) {
          cancelled = true;
          return false;
        }
      }
      writer->finish();
      return true;
    });
  } catch (const InputError&) {
    if (!cancelled) throw;
  }
  return cancelled ? 0 : frames.count();
}

}  // namespace remat
