#include "widgets/run_controller.h"

#include <QMetaObject>

#ifdef REMAT_HAVE_EXECUTOR
#include "core/exec/cpu_backend.h"
#include "core/exec/executor.h"
#include "core/exec/forwarding_backend.h"
#endif

namespace remat {
#ifdef REMAT_HAVE_EXECUTOR
namespace {

// Forwards to a backend and records the tracked bytes of each instruction
// (after its allocations; after the release for a free), as the simulator
// counts them, from the executor's per-instruction marks.
class RecordingBackend final : public ForwardingBackend {
 public:
  explicit RecordingBackend(Backend& inner) : ForwardingBackend(inner) {}
  std::vector<uint64_t> timeline;
  void* allocate(uint64_t bytes) override {
    void* p = inner().allocate(bytes);
    allocated_ = true;
    high_ = std::max(high_, inner().live_bytes());
    return p;
  }
  void begin_marks(std::size_t count) override {
    timeline.assign(count ? count - 1 : 0, 0);
    inner().begin_marks(count);
  }
  void mark(std::size_t index) override {
    if (index > 0 && index - 1 < timeline.size()) timeline[index - 1] = allocated_ ? high_ : inner().live_bytes();
    allocated_ = false;
    high_ = 0;
    inner().mark(index);
  }

 private:
  bool allocated_ = false;
  uint64_t high_ = 0;
};

}  // namespace
#endif

RunController::RunController(QObject* parent) : QObject(parent) {}

RunController::~RunController() {
  cancel_ = true;
  if (thread_) thread_->wait();
}

bool RunController::available() {
#ifdef REMAT_HAVE_EXECUTOR
  return true;
#else
  return false;
#endif
}

bool RunController::start(const Model& model, const std::vector<StrategyRun>& runs, int repeat) {
  if (thread_) return false;
  cancel_ = false;
#ifdef REMAT_HAVE_EXECUTOR
  std::vector<Schedule> schedules;
  std::vector<std::string> specs;
  for (const StrategyRun& r : runs)
    if (r.ok()) {
      schedules.push_back(r.schedule);
      specs.push_back(r.spec);
    }
  threadHolder_.reset(QThread::create([this, model, schedules, specs, repeat] {
    std::map<std::string, MeasuredRun> out;
    QString error;
    try {
      check_executable(model);
      CpuBackend cpu;
      RecordingBackend rec(cpu);
      ExecOptions o;
      o.repeat = std::max(1, repeat);
      o.cancel = &cancel_;
      const HostData data = make_host_data(model, o.seed);
      rec.load(model, data);
      const double share = schedules.empty() ? 1.0 : 1.0 / double(schedules.size());
      const ExecResult* reference = nullptr;
      std::vector<ExecResult> results;
      results.reserve(schedules.size());
      for (std::size_t i = 0; i < schedules.size(); ++i) {
        o.progress = [this, i, share](double f) {
          const double total = share * (double(i) + f);
          QMetaObject::invokeMethod(this, [this, total] { emit progress(total); }, Qt::QueuedConnection);
          return !cancel_.load();
        };
        results.push_back(cancel_ ? ExecResult{} : execute_loaded(model, schedules[i], rec, data, o));
        ExecResult& r = results.back();
        if (cancel_ && r.ok() && r.time_ms == 0) r.status = ExecStatus::Cancelled;
        MeasuredRun m;
        m.status = QString::fromStdString(std::string(exec_status_name(r.status)));
        m.message = QString::fromStdString(r.message);
        m.tracked_peak = r.tracked_peak_bytes;
        m.allocator_peak = r.memory.allocator_peak;
        m.reserved_peak = r.memory.reserved_peak;
        m.baseline = r.baseline_bytes;
        m.time_ms = r.time_ms;
        if (r.ok()) {
          m.timeline = rec.timeline;
          if (!reference) reference = &r;
          m.matches_reference = r.loss == reference->loss && r.grad_hash == reference->grad_hash;
        }
        out[specs[i]] = std::move(m);
      }
    } catch (const std::exception& e) {
      error = QString::fromStdString(e.what());
    }
    QMetaObject::invokeMethod(
        this,
        [this, out, error] {
          thread_->wait();
          thread_ = nullptr;
          emit finished(out, error);
        },
        Qt::QueuedConnection);
  }));
  thread_ = threadHolder_.get();
  thread_->start();
  return true;
#else
  (void)model;
  (void)runs;
  (void)repeat;
  return false;
#endif
}

}  // namespace remat
