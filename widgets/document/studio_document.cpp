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
// A search with a time limit (optimal): never run on the GUI thread. One
// that does not parse is not: its run says why.
bool isSearch(const StrategyRequest& request) { return request.spec && strategy_info(*request.spec).search; }

bool contains(const std::vector<StrategyRequest>& list, const StrategyRequest& r) {
  return std::find(list.begin(), list.end(), r) != list.end();
}
}  // namespace

StudioDocument::StudioDocument(QObject* parent)
    : QObject(parent), model_(std::make_shared<const Model>()), loaded_(model_), specs_(strategy_requests(defaultSpecs())) {
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
  std::vector<StrategyRequest> kept;
  for (const StrategyRequest& s : specs_) {
    StrategyRequest r = s;  // one that does not parse stays, and its run says why
    if (s.spec) {
      if (names_model_ops(*s.spec) || !not_applicable(*s.spec, *model_).isEmpty()) continue;
      r = request_strategy(with_defaults(*s.spec, d));
    }
    if (!contains(kept, r)) kept.push_back(std::move(r));
  }
  specs_ = kept.empty() ? strategy_requests(defaultSpecs()) : std::move(kept);
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
        const std::optional<StrategySpec> shown = current() ? current()->parsed : std::nullopt;
        clearRuns();
        model_ = std::move(o.model);
        microBatches_ = k;
        // Same strategies, same source, same graph; the widgets take the new sizes.
        emit modelChanged();
        emit microBatchesChanged(k);
        resimulate();
        if (shown) showSpec(*shown);
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
      jobs_.cancel(job->second.id);
      jobOf_.erase(job);
    }
    it = cache_.erase(it);
  }
  emit timeModelChanged();
  if (model_->size() > 0) resimulate();
}

void StudioDocument::setSpecs(std::vector<StrategyRequest> specs) {
  specs_ = std::move(specs);
  resimulate();
}

void StudioDocument::setSpecs(const QStringList& texts) { setSpecs(strategy_requests(texts)); }

StudioDocument::Shown StudioDocument::shown() const {
  const StrategyRun* r = current();
  if (!r) return {};
  return {r->spec, r->parsed && names_model_ops(*r->parsed)};
}

std::shared_ptr<const PreparedRun> StudioDocument::compute(const StrategyRequest& spec) {
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
  jobOf_[spec.text] = {id, spec};
  return placeholder_run(model_, spec,
                         isSearch(spec) ? "searching (at most its time limit)..." : "computing...", true);
}

void StudioDocument::resimulate() {
  const Shown keep = shown();
  const double keepPhase = phase();
  std::map<std::string, std::shared_ptr<const PreparedRun>> next;
  for (const StrategyRequest& s : specs_) {
    if (next.count(s.text)) continue;
    auto it = cache_.find(s.text);
    next[s.text] = it != cache_.end() ? it->second : (model_->size() > 0 ? compute(s) : nullptr);
  }
  // A strategy no longer compared stops computing.
  for (auto it = jobOf_.begin(); it != jobOf_.end();) {
    if (next.count(it->first)) {
      ++it;
    } else {
      jobs_.cancel(it->second.id);
      it = jobOf_.erase(it);
    }
  }
  cache_ = std::move(next);
  applyEntries(keep, keepPhase);
  emit computingChanged(computing());
}

void StudioDocument::arrived(const StrategyRequest& request, std::shared_ptr<PreparedRun> run) {
  jobOf_.erase(request.text);
  cache_[request.text] = std::move(run);
  applyEntries(shown(), phase());
  if (!showWhenReady_.empty() && showWhenReady_ == request.text) {
    showWhenReady_.clear();
    if (request.spec) showSpec(*request.spec);
  }
  emit computingChanged(computing());
}

void StudioDocument::cancelComputing() {
  if (microJob_) {
    jobs_.cancel(microJob_);
    microJob_ = 0;
    emit microBatchesChanged(microBatches_);
  }
  for (const auto& [text, job] : jobOf_) {
    jobs_.cancel(job.id);
    cache_[text] = placeholder_run(model_, job.request, "cancelled (change the strategies to compute it again)", false);
  }
  jobOf_.clear();
  // A cancelled run is not kept: asking for the strategy again recomputes it.
  applyEntries(shown(), phase());
  for (auto it = cache_.begin(); it != cache_.end();)
    it = it->second && !it->second->run.ok() && !it->second->run.pending && it->second->run.error.rfind("cancelled", 0) == 0
             ? cache_.erase(it)
             : std::next(it);
  emit computingChanged(0);
}

void StudioDocument::applyEntries(const Shown& keep, double keepPhase) {
  const std::string& shown = keep.text;
  entries_.clear();
  for (const StrategyRequest& s : specs_) {
    auto it = cache_.find(s.text);
    if (it != cache_.end() && it->second) entries_.push_back(it->second);
  }
  // Keep showing the same strategy when it is still there, else the first valid one.
  int cur = -1;
  for (int i = 0; i < runCount(); ++i)
    if (entries_[std::size_t(i)]->run.spec == shown && entries_[std::size_t(i)]->run.ok()) cur = i;
  if (cur < 0 && keep.manual) cur = manualRun();
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

void StudioDocument::showSpec(const StrategySpec& spec) {
  const StrategyRequest request = request_strategy(spec);
  if (!contains(specs_, request)) {
    specs_.push_back(request);
    resimulate();
  }
  for (int i = 0; i < runCount(); ++i) {
    const StrategyRun& r = entries_[std::size_t(i)]->run;
    if (r.parsed != spec) continue;
    if (r.ok()) setCurrentRun(i);
    else if (r.pending) showWhenReady_ = r.spec;
  }
}

int StudioDocument::manualRun() const {
  for (int i = 0; i < runCount(); ++i)
    if (const auto& spec = entries_[static_cast<std::size_t>(i)]->run.parsed; spec && names_model_ops(*spec)) return i;
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
  const StrategySpec spec = op_list_spec({manual_.begin(), manual_.end()});
  std::vector<StrategyRequest> specs;
  bool replaced = false;
  for (const StrategyRequest& s : specs_) {
    if (names_model_ops(s)) {
      if (!replaced) specs.push_back(request_strategy(spec));
      replaced = true;
    } else {
      specs.push_back(s);
    }
  }
  if (!replaced) specs.push_back(request_strategy(spec));
  specs_ = std::move(specs);
  resimulate();
  showSpec(spec);
}

}  // namespace remat
