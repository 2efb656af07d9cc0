#include "widgets/controllers/run_controller.h"

#include <algorithm>

#include "core/base/errors.h"
#include "core/exec/cpu_backend.h"
#include "core/exec/cuda_module.h"
#include "core/exec/executor.h"
#include "core/exec/run_session.h"
#include "core/exec/same_result.h"
#include "core/io/model_source.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"

namespace remat {
namespace {

struct RunOutcome {
  std::map<std::string, MeasuredRun> measured;
  QString error;
  QString backend;  // Backend::name() of what measured: "cpu", "cuda: <device>"
  QString noGpu;    // Auto fell back to the CPU: why (the loader's or runtime's reason)
};

BackendKind kind_of(RunDevice device) {
  switch (device) {
    case RunDevice::Cpu: return BackendKind::Cpu;
    case RunDevice::Gpu: return BackendKind::Cuda;
    case RunDevice::Auto: break;
  }
  return BackendKind::Auto;
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

// The same session as `remat run` (core's RunSession): the model checked
// once, the reference added when not chosen, the backend chosen as --backend
// would, the tracked bytes per instruction recorded for the chart.
RunOutcome execute_runs(const Model& model, std::vector<StrategyRun> runs, int repeat, RunDevice device,
                        const InstructionLimit& limit, JobToken& token) {
  RunOutcome out;
  try {
    RunSessionOptions so;
    so.backend = kind_of(device);
    so.limit = limit;
    so.record_tracked = true;
    RunSession session = RunSession::of_simulated(model, std::move(runs), so);
    // Opened and closed in this job, so no CUDA object outlives it.
    out.backend = QString::fromStdString(session.open_backend().name());
    out.noGpu = QString::fromStdString(session.no_gpu());
    ExecOptions o;
    o.repeat = std::max(1, repeat);
    o.cancel = token.flag();
    o.progress = [&token](double f) { return token.progress(f); };
    RunSessionResult r = session.run(o);
    for (std::size_t i = r.reference_added ? 1 : 0; i < r.results.size(); ++i) {
      MeasuredRun m = measured_of(model, r.results[i], r.reference_result());
      m.timeline = std::move(r.tracked[i]);
      out.measured[r.plans[i].spec] = std::move(m);
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

bool RunController::start(const Model& model, const RunList& runs, int repeat, const InstructionLimit& limit) {
  if (running()) return false;
  // The job's own copies (the document may change while it runs), without
  // the timelines: the session needs each schedule and its simulated counts.
  std::vector<StrategyRun> planned;
  for (const StrategyRun& r : runs) {
    if (!r.ok()) continue;
    StrategyRun copy;
    copy.spec = r.spec;
    copy.name = r.name;
    copy.schedule = r.schedule;
    copy.sim = r.sim;
    copy.sim.timeline = {};
    copy.sim.host_timeline = {};
    planned.push_back(std::move(copy));
  }
  job_ = jobs_.start(
      [model, planned = std::move(planned), repeat, device = device_, limit](JobToken& token) mutable {
        return execute_runs(model, std::move(planned), repeat, device, limit, token);
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

QString RunController::backendLabel(const QString& backend) { return backend_label(backend); }

void RunController::cancel() {
  if (!running()) return;
  jobs_.cancel(job_);
  job_ = 0;
  emit cancelled();
}

}  // namespace remat
