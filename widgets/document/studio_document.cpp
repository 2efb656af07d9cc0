#include "widgets/document/studio_document.h"

#include <algorithm>
#include <memory>

#include "core/base/cancel_scope.h"
#include "core/base/errors.h"
#include "core/analysis/micro_batch.h"
#include "core/io/model_source.h"
#include "widgets/document/instruction_caption.h"
#include "widgets/views/lanes_painter.h"
#include "widgets/document/prepared_run.h"
#include "widgets/document/strategy_defaults.h"

namespace remat {
namespace {
// A search with a time limit (optimal): never run on the GUI thread.
bool isSearch(const std::string& spec) {
  try {
    return strategy_info(parse_strategy(spec)).search;
  } catch (const InputError&) {
    return false;  // its run says why it does not parse
  }
}
}  // namespace

StudioDocument::StudioDocument(QObject* parent)
    : QObject(parent), model_(std::make_shared<const Model>()), loaded_(model_), specs_(defaultSpecs()) {
  limit_.max = defaultMaxInstructions();
  limit_.bytes_per_instruction = kBytesPerInstruction;
  limit_.how_to_change = "setting simulation/maxInstructions";
}

uint64_t StudioDocument::defaultMaxInstructions() {
  return std::min(kMaxWindowInstructions, default_max_instructions(kBytesPerInstruction));
}

void StudioDocument::setMaxInstructions(uint64_t max) {
  limit_.max = max;
  // Every run is judged again under the new limit.
  jobs_.cancelAll();
  jobOf_.clear();
  cache_.clear();
  if (model_->size() > 0) resimulate();
}

StudioDocument::~StudioDocument() = default;

void StudioDocument::loadModel(const QString& specOrPath) {
  Model m = load_model(specOrPath.toStdString());  // throws before anything changes
  setModel(std::move(m), specOrPath);
}

void StudioDocument::clearRuns() {
  // Jobs for the old model stop, and their results can no longer land.
  jobs_.cancelAll();
  jobOf_.clear();
  microJob_ = 0;
  cache_.clear();
  entries_.clear();
  showWhenReady_.clear();
}

void StudioDocument::setModel(Model model, const QString& source) {
  clearRuns();
  model_ = std::make_shared<const Model>(std::move(model));
  loaded_ = model_;
  microBatches_ = 1;
  source_ = source;
  manual_.clear();
  // Parameters do not carry over: a budget or a K meant for the last model
  // becomes this model's default; manual sets and strategies that cannot
  // apply here are dropped.
  const StrategyDefaults d = strategy_defaults(*model_);
  QStringList kept;
  for (const QString& s : specs_) {
    QString spec = s;  // one that does not parse stays, and its run says why
    try {
      const StrategySpec parsed = parse_strategy(s.toStdString());
      if (names_model_ops(parsed) || !not_applicable(parsed, *model_).isEmpty()) continue;
      spec = QString::fromStdString(with_defaults(parsed, d).str());
    } catch (const InputError&) {
    }
    if (!kept.contains(spec)) kept << spec;
  }
  specs_ = kept.isEmpty() ? defaultSpecs() : kept;
  step_ = 0;
  current_ = 0;
  emit modelChanged();
  resimulate();
}

void StudioDocument::setMicroBatches(int k) {
  if (k == (microJob_ ? pendingK_ : microBatches_)) return;
  if (microJob_) jobs_.cancel(microJob_);
  struct Outcome {
    std::shared_ptr<const Model> model;
    QString error;
  };
  pendingK_ = k;
  // Copying a large model and re-deriving its ops is O(model): off the GUI thread.
  microJob_ = jobs_.start(
      [loaded = loaded_, k](JobToken&) {
        Outcome o;
        try {
          o.model = k == 1 ? loaded : std::make_shared<const Model>(micro_batch(*loaded, k));
        } catch (const InputError& e) {
          o.error = QString::fromStdString(e.what());
        }
        return o;
      },
      [this, k](Outcome o) {
        microJob_ = 0;
        emit computingChanged(computing());
        if (!o.error.isEmpty()) {
          emit microBatchesFailed(o.error);
          emit microBatchesChanged(microBatches_);  // the selector goes back
          return;
        }
        const std::string shown = current() ? current()->spec : std::string();
        clearRuns();
        model_ = std::move(o.model);
        microBatches_ = k;
        // Same strategies, same source, same graph; the widgets take the new sizes.
        emit modelChanged();
        emit microBatchesChanged(k);
        resimulate();
        if (!shown.empty()) showSpec(QString::fromStdString(shown));
      });
  emit computingChanged(computing());
}

void StudioDocument::setTimeModel(const TimeModel& time) {
  time_ = time;
  // Only a run that moves tensors was timed (prepare_run): those are made
  // again, jobs still computing one included; the rest stay.
  for (auto it = cache_.begin(); it != cache_.end();) {
    const auto job = jobOf_.find(it->first);
    const bool timed = it->second && it->second->run.ok() && it->second->run.sim.transfers > 0;
    if (!timed && job == jobOf_.end()) {
      ++it;
      continue;
    }
    if (job != jobOf_.end()) {
      jobs_.cancel(job->second);
      jobOf_.erase(job);
    }
    it = cache_.erase(it);
  }
  emit timeModelChanged();
  if (model_->size() > 0) resimulate();
}

void StudioDocument::setSpecs(const QStringList& specs) {
  specs_ = specs;
  resimulate();
}

std::shared_ptr<const PreparedRun> StudioDocument::compute(const std::string& spec) {
  // A schedule longer than limit_ (its stated length, core's
  // bounded_schedule) comes back as a run marked too_large, "too large to
  // simulate (N instructions ...)", before anything is made; stating a length
  // can take O(model) (auto's articulation points), so a large model's
  // refusal is found by its worker like any other result.
  if (model_->size() <= kInlineOps && !isSearch(spec)) return prepare_run(model_, spec, limit_, time_);
  // The worker shares the (immutable) model; the result is built beside its
  // index on the heap and handed over whole.
  const int id = jobs_.start(
      [model = model_, spec, limit = limit_, time = time_](JobToken& token) {
        const CancelScope scope(token.flag());  // a search stops where its deadline would
        return prepare_run(model, spec, limit, time, token.flag());
      },
      [this, spec](std::shared_ptr<PreparedRun> run) { arrived(spec, std::move(run)); });
  jobOf_[spec] = id;
  return placeholder_run(model_, spec,
                         isSearch(spec) ? "searching (at most its time limit)..." : "computing...", true);
}

void StudioDocument::resimulate() {
  const std::string shown = current() ? current()->spec : std::string();
  const double keepPhase = phase();
  std::map<std::string, std::shared_ptr<const PreparedRun>> next;
  for (const QString& s : specs_) {
    const std::string spec = s.toStdString();
    if (next.count(spec)) continue;
    auto it = cache_.find(spec);
    next[spec] = it != cache_.end() ? it->second : (model_->size() > 0 ? compute(spec) : nullptr);
  }
  // A strategy no longer compared stops computing.
  for (auto it = jobOf_.begin(); it != jobOf_.end();) {
    if (next.count(it->first)) {
      ++it;
    } else {
      jobs_.cancel(it->second);
      it = jobOf_.erase(it);
    }
  }
  cache_ = std::move(next);
  applyEntries(shown, keepPhase);
  emit computingChanged(computing());
}

void StudioDocument::arrived(const std::string& spec, std::shared_ptr<PreparedRun> run) {
  jobOf_.erase(spec);
  cache_[spec] = std::move(run);
  const std::string shown = current() ? current()->spec : std::string();
  applyEntries(shown, phase());
  if (!showWhenReady_.empty() && showWhenReady_ == spec) {
    showWhenReady_.clear();
    showSpec(QString::fromStdString(spec));
  }
  emit computingChanged(computing());
}

void StudioDocument::cancelComputing() {
  if (microJob_) {
    jobs_.cancel(microJob_);
    microJob_ = 0;
    emit microBatchesChanged(microBatches_);
  }
  for (const auto& [spec, id] : jobOf_) {
    jobs_.cancel(id);
    cache_[spec] = placeholder_run(model_, spec, "cancelled (change the strategies to compute it again)", false);
  }
  jobOf_.clear();
  // A cancelled run is not kept: asking for the strategy again recomputes it.
  const std::string shown = current() ? current()->spec : std::string();
  applyEntries(shown, phase());
  for (auto it = cache_.begin(); it != cache_.end();)
    it = it->second && !it->second->run.ok() && !it->second->run.pending && it->second->run.error.rfind("cancelled", 0) == 0
             ? cache_.erase(it)
             : std::next(it);
  emit computingChanged(0);
}

void StudioDocument::applyEntries(const std::string& shown, double keepPhase) {
  entries_.clear();
  for (const QString& s : specs_) {
    auto it = cache_.find(s.toStdString());
    if (it != cache_.end() && it->second) entries_.push_back(it->second);
  }
  // Keep showing the same strategy when it is still there, else the first valid one.
  int cur = -1;
  for (int i = 0; i < runCount(); ++i)
    if (entries_[std::size_t(i)]->run.spec == shown && entries_[std::size_t(i)]->run.ok()) cur = i;
  if (cur < 0 && names_model_ops(shown)) cur = manualRun();
  for (int i = 0; cur < 0 && i < runCount(); ++i)
    if (entries_[std::size_t(i)]->run.ok()) cur = i;
  const bool sameRun = cur >= 0 && entries_[std::size_t(cur)]->run.spec == shown;
  current_ = std::max(cur, 0);
  rebuildNumbering();
  const PhaseMap* p = phases(current_);
  std::size_t step = sameRun || !p ? step_ : p->stepAt(keepPhase);
  step = stepCount() ? std::min(step, stepCount() - 1) : 0;
  step_ = numbering_.snap(step);
  emit runsChanged();
  emit currentRunChanged(current_);
  emit stepChanged(step_);
}

void StudioDocument::rebuildNumbering() {
  const StrategyRun* r = current();
  numbering_ = r ? StepNumbering(r->schedule, hideFrees_) : StepNumbering();
}

RunList StudioDocument::runs() const {
  std::vector<const StrategyRun*> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(&e->run);
  return RunList(std::move(out));
}

const PreparedRun* StudioDocument::entry(int run) const {
  return run >= 0 && run < runCount() ? entries_[static_cast<std::size_t>(run)].get() : nullptr;
}
std::shared_ptr<const PreparedRun> StudioDocument::prepared(int run) const {
  return run >= 0 && run < runCount() ? entries_[static_cast<std::size_t>(run)] : nullptr;
}

const ResidentIndex* StudioDocument::residentIndex(int run) const {
  const PreparedRun* e = entry(run);
  return e ? e->index.get() : nullptr;
}
const ScheduleFacts* StudioDocument::facts(int run) const {
  const PreparedRun* e = entry(run);
  return e ? e->facts.get() : nullptr;
}
const PhaseMap* StudioDocument::phases(int run) const {
  const PreparedRun* e = entry(run);
  return e && e->run.ok() ? &e->phases : nullptr;
}

void StudioDocument::setCurrentRun(int run) {
  if (run < 0 || run >= runCount() || run == current_ || !entry(run)->run.ok()) return;
  const double p = phase();
  current_ = run;
  rebuildNumbering();
  emit currentRunChanged(run);
  step_ = numbering_.snap(phases(run)->stepAt(p));
  emit stepChanged(step_);
}

const StrategyRun* StudioDocument::current() const {
  const PreparedRun* e = entry(current_);
  return e && e->run.ok() ? &e->run : nullptr;
}

std::size_t StudioDocument::stepCount() const { return current() ? current()->schedule.code.size() : 0; }

void StudioDocument::setStep(std::size_t step) {
  const std::size_t n = stepCount();
  step = n ? numbering_.snap(std::min(step, n - 1)) : 0;
  if (step == step_) return;
  step_ = step;
  emit stepChanged(step_);
}

void StudioDocument::setHideFrees(bool hide) {
  if (hide == hideFrees_) return;
  hideFrees_ = hide;
  rebuildNumbering();
  step_ = stepCount() ? numbering_.snap(step_) : 0;
  emit stepChanged(step_);
}

std::size_t StudioDocument::shownStep() const { return numbering_.rank(step_); }
std::size_t StudioDocument::shownStepCount() const { return current() ? numbering_.count() : 0; }
void StudioDocument::setShownStep(std::size_t number) {
  if (shownStepCount()) setStep(numbering_.instruction(number));
}
void StudioDocument::stepForward() { setShownStep(shownStep() + 1); }
void StudioDocument::stepBack() {
  if (shownStep() > 0) setShownStep(shownStep() - 1);
}
void StudioDocument::jumpToPeak() {
  if (const StrategyRun* r = current()) setStep(r->sim.peak_index);
}

double StudioDocument::phase() const {
  const PhaseMap* p = phases(current_);
  return p && current() ? p->phaseAt(step_) : 0;
}

std::size_t StudioDocument::stepAtPhase(int run) const {
  const PhaseMap* p = phases(run);
  return p ? p->stepAt(phase()) : 0;
}

NodeStates StudioDocument::nodeStates() const { return nodeStates(current_, step_); }

NodeStates StudioDocument::nodeStates(int run, std::size_t step) const {
  const PreparedRun* e = entry(run);
  if (!e || !e->run.ok()) {
    NodeStates s;
    const auto n = static_cast<std::size_t>(model_->size());
    s.fwd.assign(n, FwdState::NotComputed);
    s.bwd.assign(n, BwdState::Pending);
    s.checkpoint.assign(n, 0);
    s.grad_live.assign(n, 0);
    return s;
  }
  return node_states_at(*model_, e->run.schedule, *e->index, *e->facts, step);
}

QString StudioDocument::caption() const {
  const StrategyRun* r = current();
  if (!r || r->schedule.code.empty()) return {};
  std::string text = InstructionCaption(*model_, r->schedule, *facts(current_)).text(step_);
  // Where the time model says this step waits for a fetch, the caption says how long.
  const std::vector<Stall>& stalls = entry(current_)->stalls;
  const auto it = std::lower_bound(stalls.begin(), stalls.end(), step_,
                                   [](const Stall& s, std::size_t t) { return s.instruction < t; });
  if (it != stalls.end() && it->instruction == step_)
    text += " (stalls " + format_seconds(it->seconds) + " waiting for a fetch: time model, " +
            format_seconds(r->sim.time.stall_s) + " in the whole step)";
  return QString("Step %1 of %2 (%3): %4")
      .arg(shownStep() + 1)
      .arg(shownStepCount())
      .arg(QString::fromStdString(r->name), QString::fromStdString(text));
}

uint64_t StudioDocument::residentBytes() const {
  const StrategyRun* r = current();
  return r && step_ < r->sim.timeline.size() ? r->sim.timeline[step_] : 0;
}

LegendMask StudioDocument::legendMask() const {
  LegendMask mask = 0;
  for (const auto& e : entries_)
    if (e && e->facts) mask |= e->legend;
  return mask ? mask : kFullLegend;
}

QString StudioDocument::memoryReadout() const {
  const StrategyRun* r = current();
  return r ? readout_of(*r, step_) : QString();
}

void StudioDocument::showSpec(const QString& spec) {
  if (!specs_.contains(spec)) {
    specs_ << spec;
    resimulate();
  }
  for (int i = 0; i < runCount(); ++i) {
    const StrategyRun& r = entries_[std::size_t(i)]->run;
    if (QString::fromStdString(r.spec) != spec) continue;
    if (r.ok()) setCurrentRun(i);
    else if (r.pending) showWhenReady_ = spec.toStdString();
  }
}

int StudioDocument::manualRun() const {
  for (int i = 0; i < runCount(); ++i)
    if (names_model_ops(entries_[static_cast<std::size_t>(i)]->run.spec)) return i;
  return -1;
}

void StudioDocument::toggleCheckpoint(int op) {
  if (op < 0 || op >= model_->loss()) return;  // the loss is never a checkpoint
  // Start from what the shown run checkpoints (for a manual run: its own list).
  const ScheduleFacts* f = facts(current_);
  manual_ = f ? f->checkpoint_list() : std::vector<int>{};
  manual_.erase(std::remove_if(manual_.begin(), manual_.end(), [&](int v) { return v >= model_->loss(); }),
                manual_.end());
  if (op != 0) {  // the input is always resident
    auto it = std::find(manual_.begin(), manual_.end(), op);
    if (it != manual_.end()) manual_.erase(it);
    else manual_.insert(std::upper_bound(manual_.begin(), manual_.end(), op), op);
  }
  if (manual_.empty() || manual_.front() != 0) manual_.insert(manual_.begin(), 0);
  const QString spec = QString::fromStdString(op_list_spec({manual_.begin(), manual_.end()}).str());
  QStringList specs;
  bool replaced = false;
  for (const QString& s : specs_) {
    if (names_model_ops(s.toStdString())) {
      if (!replaced) specs << spec;
      replaced = true;
    } else {
      specs << s;
    }
  }
  if (!replaced) specs << spec;
  specs_ = specs;
  resimulate();
  showSpec(spec);
}

}  // namespace remat
