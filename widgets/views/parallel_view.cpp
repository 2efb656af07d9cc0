#include "widgets/views/parallel_view.h"

#include <QLabel>
#include <QPainter>
#include <QScrollArea>
#include <QVBoxLayout>
#include <algorithm>

#include "widgets/document/comparison_model.h"

namespace remat {

namespace {

QColor pass_colour(PassKind k, int chunk) {
  // Forward blue, backward green, weight gradient amber (the papers' figures
  // use these hues); a device's odd chunks under interleaved:V lighter.
  QColor c = k == PassKind::Forward ? QColor(0x5b, 0x8f, 0xf9) : k == PassKind::Backward ? QColor(0x4c, 0xb8, 0x7a) : QColor(0xf0, 0xb4, 0x29);
  return chunk % 2 ? c.lighter(135) : c;
}

const QColor kPeak(0xd6, 0x27, 0x28);
const QColor kActivations(0x6f, 0x8f, 0xc8);  // the micro-batches in flight

}  // namespace

// Lays the scene out once per report (or font change): what paintEvent draws
// and what the tests read are the same lists.
class ParallelCanvas : public QWidget {
 public:
  explicit ParallelCanvas(QWidget* parent) : QWidget(parent) {}

  std::optional<ParallelReport> report;
  std::vector<QRect> lanes;
  std::vector<int> peak_x;
  std::vector<QRect> peak_cells;
  std::vector<ParallelView::Cell> cells;
  std::vector<ParallelView::Text> texts;
  struct Swatch {
    QRect rect;
    QColor colour;
    bool outline;
  };
  std::vector<Swatch> swatches;
  uint64_t scale = 1;

  void layOut() {
    lanes.clear(), peak_x.clear(), peak_cells.clear(), cells.clear(), texts.clear(), swatches.clear();
    if (!report) return;
    const ParallelReport& r = *report;
    const QFontMetrics fm(font());
    const int line = fm.height(), pad = 8;
    const int stages = static_cast<int>(r.stages.size());
    // The lanes draw what the schedule moves, the activations above each
    // stage's model states, on one scale: the states (which differ between
    // stages by the embedding and the head) are in the labels.
    scale = 1;
    for (const StageTimeline& t : r.timelines) scale = std::max(scale, t.peak_bytes - t.baseline);
    // The left column: each stage's name, peak and states, as long as the longest needs.
    std::vector<QString> lane_labels, state_labels, row_labels;
    int left = 0;
    for (const StageTimeline& t : r.timelines) {
      lane_labels.push_back(QString("stage %1 · peak %2 at slot %3").arg(t.stage).arg(format_bytes(t.peak_bytes)).arg(t.peak_slot));
      state_labels.push_back(QString("model states and buffers %1").arg(format_bytes(t.baseline)));
      row_labels.push_back(QString("stage %1").arg(t.stage));
      left = std::max({left, fm.horizontalAdvance(lane_labels.back()), fm.horizontalAdvance(state_labels.back())});
    }
    left += 2 * pad;
    int widest = 0;
    for (int i = 0; i < r.spec.micro_batches; ++i) widest = std::max(widest, fm.horizontalAdvance(QString::number(i)));
    const int cw = std::max(widest + 6, 14), ch = line + 6, lane_h = 2 * line + 12;
    const int n_slots = r.grid.length;
    auto slot_x = [&](int s) { return left + s * cw; };
    int y = pad;
    auto text = [&](const QString& t, QRect box) { texts.push_back({t, box}); };
    const QString lanes_title = QString("activations per stage over the schedule, above its model states (one scale, top %1); "
                                        "the line: the stage's peak").arg(format_bytes(scale));
    const int title_w = std::max(fm.horizontalAdvance(lanes_title), 1);
    text(lanes_title, QRect(pad, y, title_w, line));
    y += line + pad / 2;
    for (int s = 0; s < stages; ++s) {
      const StageTimeline& t = r.timelines[static_cast<std::size_t>(s)];
      const QRect lane(slot_x(0), y, n_slots * cw, lane_h);
      lanes.push_back(lane);
      text(lane_labels[static_cast<std::size_t>(s)], QRect(pad, y + 4, left - 2 * pad, line));
      text(state_labels[static_cast<std::size_t>(s)], QRect(pad, y + 4 + line, left - 2 * pad, line));
      peak_x.push_back(slot_x(t.peak_slot) + cw / 2);
      y += lane_h + 4;
    }
    y += pad;
    const QString grid_title = QString("schedule %1, %2 micro-batches: a cell per pass (stage x slot), the micro-batch's number inside")
                                   .arg(QString::fromStdString(schedule_name(r.spec)))
                                   .arg(r.spec.micro_batches);
    text(grid_title, QRect(pad, y, std::max(fm.horizontalAdvance(grid_title), 1), line));
    y += line + pad / 2;
    for (int s = 0; s < stages; ++s) {
      text(row_labels[static_cast<std::size_t>(s)], QRect(pad, y, left - 2 * pad, ch));
      for (const PipelinePass& p : r.grid.passes[static_cast<std::size_t>(s)]) {
        const QRect cell(slot_x(p.slot), y, cw, ch);
        cells.push_back({s, p.slot, p.kind, p.micro_batch, p.chunk, cell, pass_colour(p.kind, p.chunk)});
        text(QString::number(p.micro_batch), cell);
      }
      peak_cells.push_back(QRect(slot_x(r.timelines[static_cast<std::size_t>(s)].peak_slot), y, cw, ch));
      y += ch;
    }
    // The slot axis: a number every `every` slots, in the room of `every` cells.
    int every = 1;
    while (fm.horizontalAdvance(QString::number(n_slots)) + 4 > every * cw) every *= 2;
    y += 2;
    for (int s = 0; s < n_slots; s += every) text(QString::number(s), QRect(slot_x(s), y, every * cw, line));
    y += line + pad;
    // The legend.
    int x = pad;
    const bool split = r.spec.schedule == PipelineSchedule::ZbH1 || r.spec.schedule == PipelineSchedule::ZbH2;
    std::vector<std::pair<QString, QColor>> keys{{"F forward", pass_colour(PassKind::Forward, 0)},
                                                 {split ? "B backward (input gradients)" : "B backward", pass_colour(PassKind::Backward, 0)}};
    if (split) keys.push_back({"W weight gradients", pass_colour(PassKind::WeightGrad, 0)});
    if (r.spec.chunks > 1) keys.push_back({"lighter: the device's odd chunks", pass_colour(PassKind::Forward, 1)});
    for (const auto& [label, colour] : keys) {
      swatches.push_back({QRect(x, y, line, line), colour, false});
      x += line + 4;
      const int w = fm.horizontalAdvance(label);
      text(label, QRect(x, y, w, line));
      x += w + 2 * pad;
    }
    swatches.push_back({QRect(x, y, line, line), kPeak, true});
    x += line + 4;
    const QString peak = "each stage's peak slot";
    text(peak, QRect(x, y, fm.horizontalAdvance(peak), line));
    x += fm.horizontalAdvance(peak) + pad;
    y += line + pad;
    int width = std::max(slot_x(n_slots) + pad, x);
    for (const auto& t : texts) width = std::max(width, t.box.right() + pad);
    setMinimumSize(width, y);
    resize(width, y);
  }

  void paintEvent(QPaintEvent*) override {
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    if (!report) return;
    const ParallelReport& r = *report;
    for (std::size_t s = 0; s < lanes.size(); ++s) {
      const QRect& lane = lanes[s];
      const StageTimeline& t = r.timelines[s];
      p.fillRect(lane, palette().alternateBase());
      const double k = static_cast<double>(lane.height()) / static_cast<double>(scale);
      const int cw = r.grid.length ? lane.width() / r.grid.length : 1;
      for (int i = 0; i < r.grid.length; ++i) {
        const int h = static_cast<int>(static_cast<double>(t.bytes[static_cast<std::size_t>(i)] - t.baseline) * k);
        if (h > 0) p.fillRect(QRect(lane.left() + i * cw, lane.bottom() - h + 1, cw, h), kActivations);
      }
      p.setPen(QPen(kPeak, 2));
      p.drawLine(peak_x[s], lane.top(), peak_x[s], lane.bottom());
    }
    p.setPen(palette().color(QPalette::Mid));
    for (const auto& c : cells) {
      p.fillRect(c.rect, c.fill);
      p.drawRect(c.rect.adjusted(0, 0, -1, -1));
    }
    p.setPen(QPen(kPeak, 2));
    p.setBrush(Qt::NoBrush);
    for (const QRect& c : peak_cells) p.drawRect(c.adjusted(1, 1, -1, -1));
    for (const auto& s : swatches) {
      if (s.outline) {
        p.setPen(QPen(s.colour, 2));
        p.setBrush(Qt::NoBrush);
        p.drawRect(s.rect.adjusted(1, 1, -1, -1));
      } else {
        p.fillRect(s.rect, s.colour);
      }
    }
    p.setPen(palette().color(QPalette::Text));
    for (const auto& t : texts) {
      const bool in_cell = std::any_of(cells.begin(), cells.end(), [&](const auto& c) { return c.rect == t.box; });
      p.setPen(in_cell ? QColor(Qt::black) : palette().color(QPalette::Text));
      p.drawText(t.box, (in_cell ? Qt::AlignCenter : Qt::AlignLeft | Qt::AlignVCenter) | Qt::TextSingleLine, t.text);
    }
  }
};

ParallelView::ParallelView(QWidget* parent) : QWidget(parent) {
  auto* v = new QVBoxLayout(this);
  header_ = new QLabel(tr("Parallel: choose Run > Parallel... to split a gpt: or transformer: preset over devices."), this);
  header_->setObjectName("parallelHeader");
  header_->setWordWrap(true);
  header_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  v->addWidget(header_);
  scroll_ = new QScrollArea(this);
  canvas_ = new ParallelCanvas(scroll_);
  scroll_->setWidget(canvas_);
  scroll_->setWidgetResizable(false);
  v->addWidget(scroll_, 1);
}

void ParallelView::setReport(const ParallelReport& r) {
  uint64_t worst = 0;
  int worst_stage = 0;
  for (const StageTimeline& t : r.timelines)
    if (t.peak_bytes > worst) worst = t.peak_bytes, worst_stage = t.stage;
  header_->setText(tr("%1, %2, strategy %3: step %4 s, bubble %5% of it. Highest peak: stage %6, %7 (remat simulate --model %1 "
                      "--parallel %2 --strategy %3)")
                       .arg(QString::fromStdString(r.model), QString::fromStdString(parallel_spec_text(r.spec)),
                            QString::fromStdString(r.strategy))
                       .arg(r.step_s, 0, 'g', 4)
                       .arg(100.0 * r.bubble_fraction, 0, 'f', 1)
                       .arg(worst_stage)
                       .arg(format_bytes(worst)));
  header_->setStyleSheet({});
  canvas_->report = r;
  canvas_->layOut();
  canvas_->update();
}

void ParallelView::setError(const QString& why) {
  header_->setText(why);
  header_->setStyleSheet("color: #b00020");
}

const std::optional<ParallelReport>& ParallelView::report() const { return canvas_->report; }
int ParallelView::laneCount() const { return static_cast<int>(canvas_->lanes.size()); }
QRect ParallelView::laneRect(int stage) const { return canvas_->lanes[static_cast<std::size_t>(stage)]; }
const std::vector<ParallelView::Cell>& ParallelView::cells() const { return canvas_->cells; }
const std::vector<ParallelView::Text>& ParallelView::texts() const { return canvas_->texts; }
int ParallelView::lanePeakX(int stage) const { return canvas_->peak_x[static_cast<std::size_t>(stage)]; }
QRect ParallelView::gridPeakRect(int stage) const { return canvas_->peak_cells[static_cast<std::size_t>(stage)]; }
QWidget* ParallelView::canvas() const { return canvas_; }

}  // namespace remat
