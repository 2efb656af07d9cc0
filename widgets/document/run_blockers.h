// What keeps a model from running, in words: core's one answer
// (core/exec/run_check.h's run_blockers) grouped by why, or the model-wide
// problem that check_executable reports. The Run menu's short text, and the list that
// Ctrl+R shows on such a model instead of doing nothing.
#pragma once
#include <QString>
#include <vector>

namespace remat {
struct Model;

struct RunBlockerGroup {
  QString reason;
  std::vector<int> ops;  // in op order
};

// The ops that cannot run, grouped by reason, the largest group first.
std::vector<RunBlockerGroup> blocker_groups(const Model& model);
// A short phrase for the Run item ("3 simulate-only ops"), or `problem`
// (RunController::cannotRun) when it is short, else "see why".
QString run_blocker_summary(const Model& model, const QString& problem);
// The readable list (HTML): each reason with the ops it blocks, names in
// full (the first 12 of a group, then how many more), and `problem`.
QString run_blockers_html(const Model& model, const QString& problem);

}  // namespace remat
