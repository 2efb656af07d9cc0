#include "widgets/studio_document.h"

#include <QThread>
#include <algorithm>
#include <memory>

#include "core/model_source.h"
#include "widgets/instruction_caption.h"

namespace remat {

StudioDocument::StudioDocument(QObject* parent) : QObject(parent), specs_(defaultSpecs()) {
  limit_.max = defaultMaxInstructions();
  limit_.bytes_per_instruction = kBytesPerInstruction;
  limit_.how_to_change = "setting simulation/maxInstructions";
}

uint64_t StudioDocument::defaultMaxInstructions() {
  return std::min(kMaxWindowInstructions, default_max_instructions(kBytesPerInstruction));
}

void StudioDocument::setMaxInstructions(uint64_t max) {
  limit_.max = max;
  if (model_.size() > 0) resimulate();
}
StudioDocument::~StudioDocument() = default;

void StudioDocument::loadModel(const QString& specOrPath) {
  Model m = load_model(specOrPath.toStdString());  // throws before anything changes
  setModel(std::move(m), specOrPath);
}

void StudioDocument::setModel(Model model, const QString& source) {
  model_ = std::move(model);
  source_ = source;
  ++generation_;
  searched_.clear();
  searching_.clear();
  manual_.clear();
  QStringList kept;
  for (const QString& s : specs_)
    if (!s.startsWith("manual:")) kept << s;
  specs_ = kept.isEmpty() ? defaultSpecs() : kept;
  step_ = 0;
  emit modelChanged();
  resimulate();
}

void StudioDocument::setSpecs(const QStringList& specs) {
  specs_ = specs;
  resimulate();
}

void StudioDocument::resimulate() {
  const std::string shownName = current() ? current()->spec : std::string();
  // A strategy longer than the limit (recompute-all is quadratic) comes back
  // as a run saying "too large to simulate (N instructions ...)", unmade.
  auto isSearch = [](const QString& s) { return s.startsWith("optimal:"); };
  std::vector<std::string> specs;
  for (const QString& s : specs_)
    if (!isSearch(s)) specs.push_back(s.toStdString());
  std::vector<StrategyRun> runs =
      model_.size() > 0 ? simulate_strategies(model_, specs, {.limit = limit_}) : std::vector<StrategyRun>{};
  runs_.clear();
  std::size_t next = 0;
  for (const QString& s : specs_) {
    if (isSearch(s) && model_.size() > 0) {
      runs_.push_back(searched(s));
    } else if (next < runs.size()) {
      runs_.push_back(std::move(runs[next++]));
    }
  }
  indexes_.clear();
  facts_.clear();
  for (const StrategyRun& r : runs_) {
    indexes_.push_back(r.ok() ? std::make_unique<ResidentIndex>(model_, r.schedule) : nullptr);
    facts_.push_back(r.ok() ? std::make_unique<ScheduleFacts>(model_, r.schedule, declared_checkpoints(model_, r.name))
                            : nullptr);
  }
  // Keep showing the same strategy when it is still there, else the first valid one.
  int cur = -1;
  for (int i = 0; i < runCount(); ++i)
    if (runs_[i].spec == shownName && runs_[i].ok()) cur = i;
  if (cur < 0 && shownName.rfind("manual:", 0) == 0) cur = manualRun();
  for (int i = 0; cur < 0 && i < runCount(); ++i)
    if (runs_[i].ok()) cur = i;
  current_ = std::max(cur, 0);
  emit runsChanged();
  emit currentRunChanged(current_);
  setStep(std::min(step_, stepCount() ? stepCount() - 1 : 0));
  emit stepChanged(step_);
}

StrategyRun StudioDocument::searched(const QString& spec) {
  if (auto it = searched_.find(spec); it != searched_.end()) return it.value();
  StrategyRun pending;
  pending.spec = pending.name = spec.toStdString();
  pending.pending = true;
  pending.error = "searching (at most its time limit)...";
  if (searching_.contains(spec)) return pending;
  searching_.insert(spec);
  // The worker owns copies only; the result comes back through `finished`,
  // queued to this object and dropped with it (or when the model changed).
  auto result = std::make_shared<std::vector<StrategyRun>>();
  QThread* t = QThread::create([model = model_, s = spec.toStdString(), result, limit = limit_] {
    *result = simulate_strategies(model, {s}, {.limit = limit});
  });
  connect(t, &QThread::finished, this, [this, spec, result, generation = generation_] {
    if (generation != generation_ || result->empty()) return;
    searching_.remove(spec);
    searched_.insert(spec, result->front());
    if (specs_.contains(spec)) resimulate();
  });
  connect(t, &QThread::finished, t, &QObject::deleteLater);
  t->start();
  return pending;
}

const ResidentIndex* StudioDocument::residentIndex(int run) const {
  return run >= 0 && run < runCount() ? indexes_[static_cast<std::size_t>(run)].get() : nullptr;
}
const ScheduleFacts* StudioDocument::facts(int run) const {
  return run >= 0 && run < runCount() ? facts_[static_cast<std::size_t>(run)].get() : nullptr;
}

void StudioDocument::setCurrentRun(int run) {
  if (run < 0 || run >= runCount() || run == current_) return;
  current_ = run;
  emit currentRunChanged(run);
  setStep(std::min(step_, stepCount() ? stepCount() - 1 : 0));
  emit stepChanged(step_);
}

const StrategyRun* StudioDocument::current() const {
  return current_ >= 0 && current_ < runCount() && runs_[static_cast<std::size_t>(current_)].ok()
             ? &runs_[static_cast<std::size_t>(current_)]
             : nullptr;
}

std::size_t StudioDocument::stepCount() const { return current() ? current()->schedule.code.size() : 0; }

void StudioDocument::setStep(std::size_t step) {
  const std::size_t n = stepCount();
  step = n ? std::min(step, n - 1) : 0;
  if (step == step_) return;
  step_ = step;
  emit stepChanged(step_);
}

NodeStates StudioDocument::nodeStates() const {
  const StrategyRun* r = current();
  if (!r) {
    NodeStates s;
    const auto n = static_cast<std::size_t>(model_.size());
    s.fwd.assign(n, FwdState::NotComputed);
    s.bwd.assign(n, BwdState::Pending);
    s.checkpoint.assign(n, 0);
    s.grad_live.assign(n, 0);
    return s;
  }
  return node_states_at(model_, r->schedule, *residentIndex(current_), *facts(current_), step_);
}

QString StudioDocument::caption() const {
  const StrategyRun* r = current();
  if (!r || r->schedule.code.empty()) return {};
  const std::string text = InstructionCaption(model_, r->schedule, *facts(current_)).text(step_);
  return QString("Step %1 of %2 (%3): %4")
      .arg(step_ + 1)
      .arg(r->schedule.code.size())
      .arg(QString::fromStdString(r->name), QString::fromStdString(text));
}

void StudioDocument::showSpec(const QString& spec) {
  if (!specs_.contains(spec)) {
    specs_ << spec;
    resimulate();
  }
  for (int i = 0; i < runCount(); ++i)
    if (QString::fromStdString(runs_[std::size_t(i)].spec) == spec && runs_[std::size_t(i)].ok()) setCurrentRun(i);
}

int StudioDocument::manualRun() const {
  for (int i = 0; i < runCount(); ++i)
    if (runs_[static_cast<std::size_t>(i)].spec.rfind("manual:", 0) == 0) return i;
  return -1;
}

void StudioDocument::toggleCheckpoint(int op) {
  if (op < 0 || op >= model_.loss()) return;  // the loss is never a checkpoint
  // Start from what the shown run checkpoints (for a manual run: its own list).
  const ScheduleFacts* f = facts(current_);
  manual_ = f ? f->checkpoint_list() : std::vector<int>{};
  manual_.erase(std::remove_if(manual_.begin(), manual_.end(), [&](int v) { return v >= model_.loss(); }),
                manual_.end());
  if (op != 0) {  // the input is always resident
    auto it = std::find(manual_.begin(), manual_.end(), op);
    if (it != manual_.end()) manual_.erase(it);
    else manual_.insert(std::upper_bound(manual_.begin(), manual_.end(), op), op);
  }
  if (manual_.empty() || manual_.front() != 0) manual_.insert(manual_.begin(), 0);
  QString spec = "manual:";
  for (std::size_t i = 0; i < manual_.size(); ++i) spec += (i ? "," : "") + QString::number(manual_[i]);
  QStringList specs;
  bool replaced = false;
  for (const QString& s : specs_) {
    if (s.startsWith("manual:")) {
      if (!replaced) specs << spec;
      replaced = true;
    } else {
      specs << s;
    }
  }
  if (!replaced) specs << spec;
  specs_ = specs;
  // Show the manual run after resimulating.
  current_ = -1;
  resimulate();
  const int m = manualRun();
  if (m >= 0 && m != current_) setCurrentRun(m);
}

}  // namespace remat
