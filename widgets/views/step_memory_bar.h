// The whole training step's memory beside the timeline: one stacked bar per
// strategy, lying, its name beside it whole (parameters, fp32 master weights, parameter gradients, optimizer
// state, activations), in one byte unit with round ticks, and a one-line note
// naming the largest part when it is not the activations ("optimizer state is
// 62% of the step"): the picture that says when no checkpointing can help.
// The optimizer is chosen here (sgd, momentum, adam, adamw), as --optimizer
// does in the CLI (core/analysis/step_memory.h).
#pragma once
#include <QChartView>
#include <QWidget>
#include <array>
#include <vector>

#include "core/analysis/step_memory.h"
#include "widgets/document/run_list.h"

QT_BEGIN_NAMESPACE
class QBarSet;
class QCheckBox;
class QComboBox;
class QLabel;
QT_END_NAMESPACE

namespace remat {

class StepMemoryBar : public QWidget {
  Q_OBJECT
 public:
  explicit StepMemoryBar(QWidget* parent = nullptr);
  void setRuns(const Model& model, const RunList& runs);
  void setOptimizer(Optimizer o);
  // Only the activation peaks (the part checkpointing changes); the note
  // says what is left out.
  void setActivationsOnly(bool on);
  bool activationsOnly() const;
  // Gradient accumulation: the runs are of one micro-batch of `microBatch`
  // samples, K of them per step of `batch`; a line under the bars says so
  // (the baseline does not change with K). K = 1 hides it.
  void setMicroBatches(int k, int64_t microBatch, int64_t batch);
  QString microBatchText() const;
  Optimizer optimizer() const { return optimizer_; }

  // What is drawn: the breakdown per shown strategy (in order), and the note.
  const std::vector<StepMemory>& parts() const { return parts_; }
  const QStringList& categories() const { return categories_; }
  QString note() const;
  QChartView* view() const { return view_; }
  // The bar sets, bottom to top: parameters, master weights, parameter
  // gradients, optimizer state, activations (values in the axis' unit).
  QList<QBarSet*> sets() const;
  QString unitName() const { return unitName_; }
  // Every text the bar chart draws now, as Qt drew it (chart_texts.h).
  QStringList drawnTexts() const;

 signals:
  void optimizerChanged(Optimizer o);

 private:
  void rebuild();
  // The strategies' names beside the bars in smaller type where Qt would cut
  // them, and the value axis' short title where the long one does not fit.
  void fitNames();
  bool eventFilter(QObject* watched, QEvent* e) override;
  void scheduleFit();
  bool fitPending_ = false;
  QStringList yTitles_;  // the y axis' title, and its short form where it does not fit


  // The parts no strategy changes, per optimizer (indexed by Optimizer),
  // kept instead of the model so that a later optimizer change needs nothing
  // that may since have been replaced.
  std::array<StepMemory, 4> baseline_{};
  std::vector<uint64_t> peaks_;
  QStringList categories_;
  std::vector<StepMemory> parts_;
  Optimizer optimizer_ = Optimizer::Adam;
  QString unitName_;
  QComboBox* choice_;
  QCheckBox* activationsOnly_ = nullptr;
  QChartView* view_;
  QLabel* note_;
  QLabel* micro_;
};

}  // namespace remat
