#include "widgets/document/prepared_run.h"

namespace remat {

std::shared_ptr<PreparedRun> prepare_run(std::shared_ptr<const Model> model, const StrategyRequest& request,
                                         const InstructionLimit& limit, const TimeModel& time,
                                         const std::atomic<bool>* cancel) {
  auto p = std::make_shared<PreparedRun>();
  p->model = std::move(model);
  p->run = std::move(simulate_requests(*p->model, {request}, {.limit = limit, .timelines = true, .time = std::nullopt}).front());
  if (p->run.ok() && !(cancel && cancel->load())) {
    const Model& m = *p->model;
    p->index = std::make_unique<ResidentIndex>(m, p->run.schedule);
    p->facts = std::make_unique<ScheduleFacts>(m, p->run);
    p->phases = PhaseMap(m, p->run.schedule);
    p->legend = legend_mask(m, p->run.schedule, *p->facts);
    // A second pass over the schedule, only where a fetch can stall.
    if (p->run.sim.transfers > 0) p->run.sim.time = predict_step_time(m, p->run.schedule, time, &p->stalls);
  }
  return p;
}

std::shared_ptr<PreparedRun> placeholder_run(std::shared_ptr<const Model> model, const StrategyRequest& request,
                                             const std::string& why, bool pending) {
  auto p = std::make_shared<PreparedRun>();
  p->model = std::move(model);
  p->run.spec = p->run.name = request.text;
  p->run.parsed = request.spec;
  p->run.error = why;
  p->run.pending = pending;
  return p;
}

}  // namespace remat
