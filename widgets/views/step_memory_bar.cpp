#include "widgets/views/step_memory_bar.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QCheckBox>
#include <QComboBox>
#include <QFontInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLegend>
#include <QLegendMarker>
#include <QGraphicsLayout>
#include <QTimer>
#include <algorithm>
#include <QHorizontalStackedBarSeries>
#include <QValueAxis>
#include <QVBoxLayout>

#include "widgets/document/comparison_model.h"
#include "widgets/views/chart_scale.h"
#include "widgets/views/chart_texts.h"

namespace remat {
namespace {

// Fixed colours for the parts (Okabe–Ito, apart from the strategies' own):
// what no strategy changes in greys and muted tones, activations in orange.
struct Part {
  const char* name;
  QColor color;
  uint64_t StepMemory::*bytes;
};
const Part kParts[] = {
    // Short names: the legend sits under a narrow chart.
    {"weights", QColor(0x99, 0x99, 0x99), &StepMemory::parameters},
    {"fp32 copy", QColor(0xcc, 0xcc, 0xcc), &StepMemory::master_weights},
    {"grads", QColor(0x56, 0xb4, 0xe9), &StepMemory::parameter_grads},
    {"optimizer", QColor(0xcc, 0x79, 0xa7), &StepMemory::optimizer_state},
    {"activations", QColor(0xe6, 0x9f, 0x00), &StepMemory::activations},
};

}  // namespace

StepMemoryBar::StepMemoryBar(QWidget* parent) : QWidget(parent) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(0, 0, 0, 0);
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("whole step, optimizer:"), this));
  choice_ = new QComboBox(this);
  choice_->setObjectName("optimizer");
  for (Optimizer o : {Optimizer::SGD, Optimizer::Momentum, Optimizer::Adam, Optimizer::AdamW})
    choice_->addItem(QString::fromUtf8(optimizer_name(o).data(), int(optimizer_name(o).size())), int(o));
  choice_->setToolTip(tr("The optimizer's state per weight: SGD none, momentum one fp32 buffer, Adam/AdamW two"));
  row->addWidget(choice_);
  // The lesson's part alone: what checkpointing changes.
  activationsOnly_ = new QCheckBox(tr("activations only"), this);
  activationsOnly_->setObjectName("activationsOnly");
  activationsOnly_->setToolTip(tr("Show only the activation peak, the part checkpointing changes"));
  row->addWidget(activationsOnly_);
  connect(activationsOnly_, &QCheckBox::toggled, this, [this] { rebuild(); });
  row->addStretch(1);
  v->addLayout(row);
  view_ = new QChartView(this);
  view_->setRenderHint(QPainter::Antialiasing);
  view_->setMinimumWidth(320);  // the four-entry legend unelided
  // Below this Qt cuts the value axis' ticks and title to "..." (a low
  // timeline tab under the side-by-side lanes).
  view_->setMinimumHeight(185);
  view_->installEventFilter(this);  // a new width may cut the strategies' names: fitNames()
  v->addWidget(view_, 1);
  note_ = new QLabel(this);
  note_->setWordWrap(true);
  v->addWidget(note_);
  micro_ = new QLabel(this);
  micro_->setWordWrap(true);
  micro_->hide();
  v->addWidget(micro_);
  choice_->setCurrentIndex(choice_->findData(int(optimizer_)));
  connect(choice_, &QComboBox::currentIndexChanged, this, [this](int i) {
    optimizer_ = Optimizer(choice_->itemData(i).toInt());
    rebuild();
    emit optimizerChanged(optimizer_);
  });
  rebuild();
}

void StepMemoryBar::setOptimizer(Optimizer o) { choice_->setCurrentIndex(choice_->findData(int(o))); }

void StepMemoryBar::setRuns(const Model& model, const RunList& runs) {
  for (Optimizer o : {Optimizer::SGD, Optimizer::Momentum, Optimizer::Adam, Optimizer::AdamW})
    baseline_[std::size_t(o)] = step_memory(model, o, 0);
  peaks_.clear();
  categories_.clear();
  for (const StrategyRun& r : runs) {
    if (!r.ok()) continue;
    categories_ << QString::fromStdString(r.name);
    peaks_.push_back(r.sim.peak_bytes);
  }
  rebuild();
}

void StepMemoryBar::setActivationsOnly(bool on) { activationsOnly_->setChecked(on); }
bool StepMemoryBar::activationsOnly() const { return activationsOnly_ && activationsOnly_->isChecked(); }

QString StepMemoryBar::note() const { return note_->text(); }

void StepMemoryBar::setMicroBatches(int k, int64_t microBatch, int64_t batch) {
  micro_->setVisible(k > 1);
  micro_->setText(k > 1 ? tr("K = %1 micro-batches of %2 (batch %3): the activations are one micro-batch's; the "
                             "gradients accumulate in place, the step runs %1 forward and backward passes.")
                              .arg(k)
                              .arg(microBatch)
                              .arg(batch)
                        : QString());
}

QString StepMemoryBar::microBatchText() const { return micro_->text(); }

bool StepMemoryBar::eventFilter(QObject* watched, QEvent* e) {
  // After the view has resized its chart (filters run before it does).
  if (watched == view_ && e->type() == QEvent::Resize) scheduleFit();
  return QWidget::eventFilter(watched, e);
}

void StepMemoryBar::scheduleFit() {
  if (fitPending_) return;
  fitPending_ = true;
  QTimer::singleShot(0, this, [this] {
    fitPending_ = false;
    fitNames();
  });
}

QStringList StepMemoryBar::drawnTexts() const { return drawn_texts(view_->chart()); }

void StepMemoryBar::fitNames() {
  QChart* c = view_->chart();
  const auto names = c->axes(Qt::Vertical), values = c->axes(Qt::Horizontal);
  if (names.isEmpty() || values.isEmpty()) return;
  // The names in the window's type where Qt draws them whole beside the
  // bars, else smaller; the value axis' title whole, or its unit alone.
  QFont f = font();
  f.setPixelSize(QFontInfo(font()).pixelSize());
  names.front()->setLabelsFont(f);
  set_fitting_title(c, values.front(), yTitles_);
  auto namesCut = [&] {
    lay_out_now(c);
    const QStringList drawn = drawnTexts();
    return std::any_of(drawn.begin(), drawn.end(), [&](const QString& t) {
      return is_cut(t) && std::any_of(categories_.begin(), categories_.end(),
                                      [&](const QString& n) { return n.startsWith(t.chopped(3)); });
    });
  };
  while (f.pixelSize() > 7 && namesCut()) {
    f.setPixelSize(f.pixelSize() - 1);
    names.front()->setLabelsFont(f);
  }
}

QList<QBarSet*> StepMemoryBar::sets() const {
  for (QAbstractSeries* s : view_->chart()->series())
    if (auto* bars = qobject_cast<QHorizontalStackedBarSeries*>(s)) return bars->barSets();
  return {};
}

void StepMemoryBar::rebuild() {
  parts_.clear();
  uint64_t most = 1;
  const bool only = activationsOnly();
  for (uint64_t peak : peaks_) {
    StepMemory m = only ? StepMemory{} : baseline_[std::size_t(optimizer_)];
    m.activations = peak;
    parts_.push_back(m);
    most = std::max(most, m.total());
  }
  const ByteUnit unit = byte_unit(most);
  unitName_ = unit.name;
  auto* chart = new QChart;
  chart->setMargins(QMargins(2, 2, 2, 2));
  chart->legend()->setAlignment(Qt::AlignBottom);
  // Lying bars: each strategy's name beside its bar, on one line (upright
  // under a standing bar, "sqrt+compress:bf16" found no room and Qt cut it).
  auto* series = new QHorizontalStackedBarSeries;
  for (const Part& p : kParts) {
    auto* set = new QBarSet(tr(p.name));
    set->setColor(p.color);
    set->setBorderColor(p.color.darker(130));
    for (const StepMemory& m : parts_) set->append(double(m.*p.bytes) / unit.bytes);
    series->append(set);
  }
  chart->addSeries(series);
  // A part that is zero everywhere (no master weights in f32, no state for
  // SGD) stays out of the legend.
  for (QBarSet* set : series->barSets()) {
    double sum = 0;
    for (int i = 0; i < set->count(); ++i) sum += set->at(i);
    if (sum == 0)
      for (QLegendMarker* m : chart->legend()->markers(series))
        if (m->label() == set->label()) m->setVisible(false);
  }
  auto* names = new QBarCategoryAxis;
  names->append(categories_);
  chart->addAxis(names, Qt::AlignLeft);
  series->attachAxis(names);
  auto* y = new QValueAxis;
  const NiceScale ys = nice_scale(double(most) / unit.bytes, 6);
  y->setTickType(QValueAxis::TicksDynamic);
  y->setTickAnchor(0);
  y->setTickInterval(ys.step);
  y->setRange(0, ys.top);
  y->setLabelFormat("%g");
  yTitles_ = {only ? tr("activation peak (%1)").arg(unit.name) : tr("step memory (%1)").arg(unit.name), unit.name};
  y->setTitleText(yTitles_.front());
  chart->addAxis(y, Qt::AlignBottom);
  series->attachAxis(y);
  QChart* old = view_->chart();
  view_->setChart(chart);
  delete old;
  fitNames();
  scheduleFit();  // again once the view has sized the new chart
  // The note speaks of the strategy with the least activations: if even there
  // another part is the largest, no strategy will change that.
  std::size_t least = 0;
  for (std::size_t i = 1; i < parts_.size(); ++i)
    if (parts_[i].activations < parts_[least].activations) least = i;
  if (only) {
    // Says what is left out, so that the bars are not read as the whole step.
    const StepMemory& rest = baseline_[std::size_t(optimizer_)];
    note_->setText(tr("Activations only: the part checkpointing changes. Left out: weights, their gradients and "
                      "%1's state, %2 in every strategy.")
                       .arg(QString::fromUtf8(optimizer_name(optimizer_).data(), int(optimizer_name(optimizer_).size())),
                            format_bytes(rest.total())));
    return;
  }
  const std::string n = parts_.empty() ? std::string() : dominant_part_note(parts_[least]);
  note_->setText(n.empty() ? QString() : tr("At %1's peak, %2.").arg(categories_[qsizetype(least)], QString::fromStdString(n)));
}

}  // namespace remat
