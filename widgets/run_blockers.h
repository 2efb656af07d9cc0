// What keeps a model from running, in words: its ops that no backend can run,
// grouped by why (core's why_not_executable), or the model-wide problem that
// check_executable reports. The Run menu's short text, and the list that
// Ctrl+R shows on such a model instead of doing nothing.
#pragma once
#include <QString>
#include <vector>

namespace remat {
struct Model;

struct RunBlocker {
  QString reason;
  std::vector<int> ops;  // in op order
};

// The ops that cannot run, grouped by reason, the largest group first.
std::vector<RunBlocker> run_blockers(const Model& model);
// A short phrase for the Run item ("3 simulate-only ops"), or `problem`
// (RunController::cannotRun) when it is short, else "see why".
QString run_blocker_summary(const Model& model, const QString& problem);
// The readable list (HTML): each reason with the ops it blocks, names in
// full (the first 12 of a group, then how many more), and `problem`.
QString run_blockers_html(const Model& model, const QString& problem);

}  // namespace remat
