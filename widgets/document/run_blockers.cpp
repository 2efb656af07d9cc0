#include "widgets/document/run_blockers.h"

#include <QStringList>
#include <algorithm>
#include <map>

#include "core/model/model.h"
#include "core/exec/run_check.h"
#include "core/model/op_rules.h"
#include "widgets/document/op_labels.h"

namespace remat {
namespace {
constexpr int kNamesPerGroup = 12;
constexpr int kShortProblem = 60;  // characters: longer ones stretch the Run menu

QString opName(const Model& m, int v) {
  const std::string& n = m.op(v).name;
  return n.empty() ? QString("op%1").arg(v) : QString::fromStdString(n);
}
QString kindName(OpKind k) {
  const std::string_view s = kind_name(k);
  return QString::fromUtf8(s.data(), qsizetype(s.size()));
}
}  // namespace

std::vector<RunBlockerGroup> blocker_groups(const Model& m) {
  std::map<std::string, std::size_t> at;
  std::vector<RunBlockerGroup> out;
  for (const RunBlocker& b : run_blockers(m)) {
    // A counting model (chain:16's one-byte tensors) has no op to blame:
    // check_executable's problem says what to load instead.
    if (b.simulate_only && !marks_simulate_only(m, b.op)) continue;
    auto [it, fresh] = at.emplace(b.why, out.size());
    if (fresh) out.push_back({QString::fromStdString(b.why), {}});
    out[it->second].ops.push_back(b.op);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const RunBlockerGroup& a, const RunBlockerGroup& b) { return a.ops.size() > b.ops.size(); });
  return out;
}

QString run_blocker_summary(const Model& m, const QString& problem) {
  std::size_t ops = 0;
  for (const RunBlockerGroup& b : blocker_groups(m)) ops += b.ops.size();
  if (ops > 0) return ops == 1 ? QString("1 op cannot run") : QString("%1 ops cannot run").arg(ops);
  return problem.size() <= kShortProblem ? problem : QString("see why");
}

QString run_blockers_html(const Model& m, const QString& problem) {
  const std::vector<RunBlockerGroup> blockers = blocker_groups(m);
  QString html;
  if (blockers.empty()) return QString("<p>%1</p>").arg(problem.toHtmlEscaped());
  std::size_t ops = 0;
  for (const RunBlockerGroup& b : blockers) ops += b.ops.size();
  html += QString("<p><b>%1 of the model's %2 ops cannot run</b>; the simulation covers them (their bytes and "
                  "FLOPs), the Run action needs every op to have a kernel. They are marked with a dark diamond in "
                  "the graph.</p><ul>")
              .arg(ops)
              .arg(m.size());
  for (const RunBlockerGroup& b : blockers) {
    QStringList names;
    for (std::size_t i = 0; i < b.ops.size() && int(i) < kNamesPerGroup; ++i)
      names << QString("%1 (%2)").arg(opName(m, b.ops[i]), kindName(m.op(b.ops[i]).kind));
    QString list = names.join(", ").toHtmlEscaped();
    if (int(b.ops.size()) > kNamesPerGroup) list += QString(" and %1 more").arg(b.ops.size() - kNamesPerGroup);
    html += QString("<li><b>%1</b> (%2 ops): %3</li>").arg(b.reason.toHtmlEscaped()).arg(b.ops.size()).arg(list);
  }
  html += "</ul>";
  if (!problem.isEmpty()) html += QString("<p>The executor says: %1</p>").arg(problem.toHtmlEscaped());
  return html;
}

}  // namespace remat
