#include "widgets/run_controller.h"

#include <algorithm>

#include "core/errors.h"
#include "core/exec/cpu_backend.h"
#include "core/exec/cuda_module.h"
#include "core/exec/executor.h"
#include "core/exec/forwarding_backend.h"
#include "core/exec/same_result.h"
#include "core/model_source.h"
#include "core/simulator.h"
#include "core/strategies/registry.h"

namespace remat {
namespace {

// Forwards to a backend and records, per strategy, the tracked bytes of each
// instruction (after its allocations; after the release for a free), as the
// simulator counts them, from the executor's per-instruction marks. The
// executor calls begin_strategy() once per strategy it starts, in order, and
// skips only a tail (after a cancel or an unusable device): the k-th recorded
// timeline belongs to the k-th schedule.
class RecordingBackend final : public ForwardingBackend {
 public:
  explicit RecordingBackend(Backend& inner) : ForwardingBackend(inner) {}
  std::vector<std::vector<uint64_t>> timelines;
  void begin_strategy() override {
    timelines.emplace_back();
    inner().begin_strategy();
  }
  void* allocate(uint64_t bytes) override {
    void* p = inner().allocate(bytes);
    allocated_ = true;
    high_ = std::max(high_, inner().live_bytes());
    return p;
  }
  void begin_marks(std::size_t count) override {
    if (!timelines.empty()) timelines.back().assign(count ? count - 1 : 0, 0);
    inner().begin_marks(count);
  }
  void mark(std::size_t index) override {
    if (!timelines.empty() && index > 0 && index - 1 < timelines.back().size())
      timelines.back()[index - 1] = allocated_ ? high_ : inner().live_bytes();
    allocated_ = false;
    high_ = 0;
    inner().mark(index);
  }

 private:
  bool allocated_ = false;
  uint64_t high_ = 0;
};

struct RunOutcome {
  std::map<std::string, MeasuredRun> measured;
  QString error;
  QString backend;  // Backend::name() of what measured: "cpu", "cuda: <device>"
  QString noGpu;    // Auto fell back to the CPU: why (the loader's or runtime's reason)
};

// The backend a run asks for (as `remat run --backend auto|cpu|cuda`): the
// CUDA module is opened only here, so the window pays for cuBLAS only when a
// run wants a GPU. Gpu without one is an InputError naming why.
std::unique_ptr<Backend> backend_for(RunDevice device, QString* no_gpu) {
  if (device == RunDevice::Cpu) return std::make_unique<CpuBackend>();
  std::string why;
  if (auto b = load_cuda_backend(&why)) return b;
  if (device == RunDevice::Gpu) throw InputError("no usable GPU: " + why);
  *no_gpu = QString::fromStdString(why);
  return std::make_unique<CpuBackend>();
}

MeasuredRun measured_of(const Model& model, const ExecResult& r, const ExecResult& reference) {
  MeasuredRun m;
  m.backend = QString::fromStdString(r.backend);
  m.status = QString::fromStdString(std::string(exec_status_name(r.status)));
  m.message = QString::fromStdString(r.message);
  m.tracked_peak = r.tracked_peak_bytes;
  m.allocator_peak = r.memory.allocator_peak;
  m.reserved_peak = r.memory.reserved_peak;
  m.baseline = r.baseline_bytes;
  m.time_ms = r.time_ms;
  m.run_ms = r.run_ms;
  m.loss = r.loss;
  m.grad_hash = r.grad_hash;
  m.matches_reference = same_loss_and_grads(r, reference);
  m.compressed = r.compressed;
  if (r.compressed && r.ok() && reference.ok()) {
    const ResultError e = relative_error(r, reference);
    m.loss_error = e.loss;
    m.grad_error = e.grad;
    m.worst_param = QString::fromStdString(parameter_tensors(model).at(e.worst).name);
  }
  return m;
}

RunOutcome execute_runs(const Model& model, const std::vector<Schedule>& schedules,
                        const std::vector<std::string>& specs, int repeat, RunDevice device, JobToken& token) {
  RunOutcome out;
  try {
    check_executable(model);
    // store-all is the reference of the equality rule, as in `remat run`:
    // added first when it was not chosen.
    std::vector<Schedule> all = schedules;
    auto ref = std::find(specs.begin(), specs.end(), "store-all");
    std::size_t refIndex = static_cast<std::size_t>(ref - specs.begin());
    const bool added = ref == specs.end();
    if (added) {
      all.insert(all.begin(), make_strategy("store-all")->schedule(model));
      refIndex = 0;
    }
    // Made and destroyed in this job, so no CUDA object outlives it.
    const std::unique_ptr<Backend> backend = backend_for(device, &out.noGpu);
    out.backend = QString::fromStdString(backend->name());
    RecordingBackend rec(*backend);
    ExecOptions o;
    o.repeat = std::max(1, repeat);
    o.cancel = token.flag();
    o.progress = [&token](double f) { return token.progress(f); };
    const std::vector<ExecResult> results = execute_strategies(model, all, rec, o);
    for (std::size_t i = added ? 1 : 0; i < results.size(); ++i) {
      MeasuredRun m = measured_of(model, results[i], results[refIndex]);
      if (results[i].ok() && i < rec.timelines.size() && rec.timelines[i].size() == all[i].code.size())
        m.timeline = rec.timelines[i];
      out.measured[specs[i - (added ? 1 : 0)]] = std::move(m);
    }
  } catch (const InputError& e) {
    out.error = QString::fromStdString(e.what());
  }
  return out;
}

}  // namespace

RunController::RunController(QObject* parent) : QObject(parent) {
  connect(&jobs_, &JobTracker::progress, this, [this](int id, double f) {
    if (id == job_) emit progress(f);
  });
  connect(&jobs_, &JobTracker::failed, this, [this](int id, const QString& message) {
    if (id != job_) return;
    job_ = 0;
    emit finished({}, message);
  });
}

QString RunController::cannotRun(const Model& model) {
  try {
    check_executable(model);
    return {};
  } catch (const InputError& e) {
    // The teaching presets count in 1-byte tensors, which hold no float: say
    // that briefly, with the same chain in 4-byte (one float) tensors.
    const uint64_t unit = model.uniform_bytes();
    if (unit == 0 || unit % 4 == 0) return QString::fromStdString(e.what());
    QString why = QString("%1-byte tensors cannot run").arg(unit);
    const std::string& name = model.name;
    if (name.rfind("chain:", 0) == 0 && name.find(':', 6) == std::string::npos)
      why += QString(": try %1:4").arg(QString::fromStdString(name));
    return why;
  }
}

bool RunController::start(const Model& model, const RunList& runs, int repeat) {
  if (running()) return false;
  std::vector<Schedule> schedules;
  std::vector<std::string> specs;
  for (const StrategyRun& r : runs)
    if (r.ok()) {
      schedules.push_back(r.schedule);
      specs.push_back(r.spec);
    }
  job_ = jobs_.start(
      [model, schedules = std::move(schedules), specs = std::move(specs), repeat, device = device_](JobToken& token) {
        return execute_runs(model, schedules, specs, repeat, device, token);
      },
      [this](RunOutcome o) {
        job_ = 0;
        lastBackend_ = o.backend;
        lastNoGpu_ = o.noGpu;
        emit finished(o.measured, o.error);
      });
  return true;
}

bool RunController::gpuBuilt() { return cuda_module_built(); }

QString RunController::backendLabel(const QString& backend) {
  if (backend.isEmpty() || backend == "cpu") return tr("the CPU");
  return backend.startsWith("cuda: ") ? tr("the GPU (%1)").arg(backend.mid(6)) : backend;
}

void RunController::cancel() {
  if (!running()) return;
  jobs_.cancel(job_);
  job_ = 0;
  emit cancelled();
}

}  // namespace remat
