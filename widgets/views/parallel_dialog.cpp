#include "widgets/views/parallel_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QSpinBox>
#include <QVBoxLayout>

#include "core/parallel/parallel_plan.h"

namespace remat {

namespace {

QSpinBox* spin(QWidget* parent, int lo, int hi, int value) {
  auto* s = new QSpinBox(parent);
  s->setRange(lo, hi);
  s->setValue(value);
  return s;
}

}  // namespace

ParallelDialog::ParallelDialog(const QString& model, const QStringList& strategies, QWidget* parent) : QDialog(parent) {
  setWindowTitle(tr("Parallel: per-stage memory"));
  auto* v = new QVBoxLayout(this);
  auto* intro = new QLabel(tr("Split the training step over devices: each pipeline stage's memory over the schedule, "
                              "and the schedule as a grid (docs/parallel.md). The preset's BATCH is one micro-batch."),
                           this);
  intro->setWordWrap(true);
  v->addWidget(intro);
  auto* form = new QFormLayout;
  model_ = new QComboBox(this);
  model_->setEditable(true);
  // Presets whose blocks can be split: the window's own model first when it
  // is one, or a model file (split into pipeline stages by its repeated blocks).
  QStringList models{"gpt:8:512:8:256:1:bf16", "gpt:12:768:12:1024:1:bf16", "gpt:96:12288:96:2048:1:bf16",
                     "transformer:8"};
  if ((model.startsWith("gpt:") || model.startsWith("transformer:") || names_a_model_file(model.toStdString())) &&
      !models.contains(model))
    models.prepend(model);
  model_->addItems(models);
  if (models.contains(model)) model_->setCurrentText(model);
  form->addRow(tr("Model (gpt:, transformer: or a file)"), model_);
  tp_ = spin(this, 1, 4096, 1);
  form->addRow(tr("Tensor parallel (tp)"), tp_);
  sp_ = new QCheckBox(tr("Sequence parallel (sp)"), this);
  form->addRow(QString(), sp_);
  pp_ = spin(this, 1, 4096, 4);
  form->addRow(tr("Pipeline stages (pp)"), pp_);
  schedule_ = new QComboBox(this);
  schedule_->addItems({"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2"});
  schedule_->setCurrentText("1f1b");
  form->addRow(tr("Schedule"), schedule_);
  chunks_ = spin(this, 2, 1024, 2);
  form->addRow(tr("Interleaved chunks (V)"), chunks_);
  micro_ = spin(this, 1, 1 << 20, 8);
  form->addRow(tr("Micro-batches (M)"), micro_);
  dp_ = spin(this, 1, 1 << 20, 1);
  form->addRow(tr("Data parallel (dp)"), dp_);
  zero_ = new QComboBox(this);
  zero_->addItems({"0", "1", "2", "3"});
  form->addRow(tr("ZeRO stage"), zero_);
  strategy_ = new QComboBox(this);
  strategy_->setEditable(true);
  strategy_->addItems(strategies.isEmpty() ? QStringList{"store-all"} : strategies);
  form->addRow(tr("Strategy (every stage)"), strategy_);
  v->addLayout(form);
  command_ = new QLabel(this);
  command_->setObjectName("command");
  command_->setWordWrap(true);
  command_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  v->addWidget(command_);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  v->addWidget(buttons);
  for (QSpinBox* s : {tp_, pp_, chunks_, micro_, dp_}) connect(s, &QSpinBox::valueChanged, this, &ParallelDialog::update);
  for (QComboBox* c : {model_, schedule_, zero_, strategy_}) connect(c, &QComboBox::currentTextChanged, this, &ParallelDialog::update);
  connect(sp_, &QCheckBox::toggled, this, &ParallelDialog::update);
  update();
}

void ParallelDialog::update() {
  sp_->setEnabled(tp_->value() > 1);
  chunks_->setEnabled(schedule_->currentText() == "interleaved");
  command_->setText(command());
}

QString ParallelDialog::model() const { return model_->currentText().trimmed(); }
QString ParallelDialog::strategy() const { return strategy_->currentText().trimmed(); }

QString ParallelDialog::parallelSpec() const {
  QString s = QString("tp=%1").arg(tp_->value());
  if (sp_->isChecked() && tp_->value() > 1) s += ",sp";
  s += QString(",pp=%1,schedule=").arg(pp_->value());
  s += schedule_->currentText() == "interleaved" ? QString("interleaved:%1").arg(chunks_->value()) : schedule_->currentText();
  s += QString(",micro-batches=%1").arg(micro_->value());
  if (dp_->value() > 1 || zero_->currentIndex() > 0) s += QString(",dp=%1,zero=%2").arg(dp_->value()).arg(zero_->currentText());
  return s;
}

QString ParallelDialog::command() const {
  return QString("remat simulate --model %1 --parallel %2 --strategy %3").arg(model(), parallelSpec(), strategy());
}

}  // namespace remat
