// The window's form for `remat simulate --parallel`: a gpt: or transformer:
// preset or a model file (tp and sp too: core splits its blocks or says
// which op cannot be), the degrees (tp, sp, pp, dp), the pipeline schedule (and V for
// interleaved), the micro-batches, the ZeRO stage and the strategy, shown as
// the CLI command they make.
#pragma once
#include <QDialog>
#include <QStringList>

class QCheckBox;
class QComboBox;
class QLabel;
class QSpinBox;

namespace remat {

class ParallelDialog : public QDialog {
  Q_OBJECT
 public:
  // `model`: the window's model when it is a preset that can be split, else
  // a GPT preset is offered; `strategies`: the compared ones, the first chosen.
  ParallelDialog(const QString& model, const QStringList& strategies, QWidget* parent = nullptr);
  QString model() const;
  QString parallelSpec() const;  // the --parallel text
  QString strategy() const;
  QString command() const;  // remat simulate --model M --parallel P --strategy S
  QComboBox* modelBox() const { return model_; }
  QSpinBox* tpBox() const { return tp_; }
  QCheckBox* spBox() const { return sp_; }
  QSpinBox* ppBox() const { return pp_; }
  QComboBox* scheduleBox() const { return schedule_; }
  QSpinBox* chunksBox() const { return chunks_; }
  QSpinBox* microBatchesBox() const { return micro_; }
  QSpinBox* dpBox() const { return dp_; }
  QComboBox* zeroBox() const { return zero_; }
  QComboBox* strategyBox() const { return strategy_; }

 private:
  void update();
  QComboBox *model_, *schedule_, *zero_, *strategy_;
  QSpinBox *tp_, *pp_, *chunks_, *micro_, *dp_;
  QCheckBox* sp_;
  QLabel* command_;
};

}  // namespace remat
