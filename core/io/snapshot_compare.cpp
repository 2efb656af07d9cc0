#include "core/io/snapshot_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/exec/executor.h"
#include "core/model/model.h"

namespace remat {
namespace {

// Sizes in the unit that keeps them readable: a 100-byte rounding must not
// read "0.00 MiB" next to a 2 GiB peak.
std::string mib(int64_t b) {
  char buf[48];
  const double a = std::fabs(static_cast<double>(b));
  if (a >= 1024.0 * 1024.0) std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  else if (a >= 1024.0) std::snprintf(buf, sizeof buf, "%.2f KiB", static_cast<double>(b) / 1024.0);
  else std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(b));
  return buf;
}

}  // namespace

SnapshotComparison compare_snapshot(const Model& model, const StrategyRun& run, const SnapshotCurve& curve) {
  SnapshotComparison c;
  c.strategy = run.name;
  c.predicted = run.sim.timeline;
  c.predicted_peak = run.sim.peak_bytes;
  c.predicted_peak_index = run.sim.peak_index;
  const auto& code = run.schedule.code;
  const double n = static_cast<double>(code.size());
  c.predicted_backward = code.size();
  for (std::size_t i = 0; i < code.size(); ++i)
    if (code[i].kind == InstrKind::Bwd) {
      c.predicted_backward = i;
      break;
    }
  const double fb = static_cast<double>(c.predicted_backward);
  c.measured_start = curve.initial_active;
  const std::size_t m = curve.active.size();
  const std::size_t b = std::min(curve.backward_start, m);
  for (std::size_t i = 0; i < m; ++i) {
    const double x = i < b ? (b ? static_cast<double>(i) / static_cast<double>(b) * fb : 0.0)
                            : fb + (m - b > 1 ? static_cast<double>(i - b) / static_cast<double>(m - b - 1) : 0.0) * (n - fb);
    const uint64_t above = curve.active[i] > curve.initial_active ? curve.active[i] - curve.initial_active : 0;
    c.measured_x.push_back(x);
    c.measured.push_back(above);
    if (above > c.measured_peak) {
      c.measured_peak = above;
      c.measured_peak_x = x;
    }
  }
  c.difference = static_cast<int64_t>(c.measured_peak) - static_cast<int64_t>(c.predicted_peak);

  auto& e = c.explanation;
  const bool peak_in_bwd = curve.peak_index >= b;
  e.push_back("recorded: " + std::to_string(curve.trace_entries) + " trace entries on device " + std::to_string(curve.device) +
              "; the backward pass starts at " + curve.split + ".");
  e.push_back("already allocated when recording began: " + mib(static_cast<int64_t>(curve.initial_active)) +
              " (parameters, optimizer state, the batch: whatever lived before the step); the curves start from it.");
  e.push_back("measured peak above that level: " + mib(static_cast<int64_t>(c.measured_peak)) + ", in the " +
              (peak_in_bwd ? "backward" : "forward") + " pass; predicted peak of " + run.name + " (activations and their gradients): " +
              mib(static_cast<int64_t>(c.predicted_peak)) + " at instruction " + std::to_string(c.predicted_peak_index) + " (" +
              (code.empty() ? std::string("-") : to_string(code[c.predicted_peak_index], model)) + ").");
  const double pct = c.predicted_peak ? 100.0 * static_cast<double>(c.difference) / static_cast<double>(c.predicted_peak) : 0.0;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.1f%%", pct);
  e.push_back("difference: " + mib(c.difference) + " (" + buf + " of the prediction).");
  const uint64_t params = model.param_bytes();
  if (c.difference > 0 && params > 0)
    e.push_back("parameter gradients: " + mib(static_cast<int64_t>(params)) +
                ". remat counts them in the baseline; a step that allocates them (the first backward, or after "
                "zero_grad(set_to_none=True)) shows them above the starting level" +
                (static_cast<uint64_t>(c.difference) >= params ? ": they cover " + mib(static_cast<int64_t>(params)) + " of the difference."
                                                               : ": at most the whole difference."));
  if (c.difference > 0 && params > 0)
    e.push_back("optimizer state: Adam allocates 2 x the parameters (" + mib(2 * static_cast<int64_t>(params)) +
                ") at its first step; if the recording includes optimizer.step(), that is in the curve too (remat's baseline leaves it out).");
  if (curve.rounding_end > 0)
    e.push_back("allocator rounding: the blocks active when the snapshot was taken are " + mib(static_cast<int64_t>(curve.rounding_end)) +
                " larger than asked (512-byte blocks, 2 MiB segments); trace sizes are as asked.");
  e.push_back("reserved by the allocator when the snapshot was taken: " + mib(static_cast<int64_t>(curve.reserved_end)) +
              "; remat's baseline for this model (parameters, their gradients, target, loss): " +
              mib(static_cast<int64_t>(baseline_bytes_of(model))) + ".");
  if (c.difference < 0)
    e.push_back("a lower measured peak: the recorded step may use another batch size or checkpointing than " + run.name +
                ", or kernels that keep less than autograd's formulas (fused attention).");
  return c;
}

nlohmann::json snapshot_comparison_json(const SnapshotComparison& c) {
  return {{"strategy", c.strategy},
          {"predicted_peak_bytes", c.predicted_peak},
          {"predicted_peak_instruction", c.predicted_peak_index},
          {"predicted_backward_instruction", c.predicted_backward},
          {"measured_start_bytes", c.measured_start},
          {"measured_peak_bytes", c.measured_peak},
          {"measured_peak_x", c.measured_peak_x},
          {"difference_bytes", c.difference},
          {"explanation", c.explanation},
          {"predicted", c.predicted},
          {"measured_x", c.measured_x},
          {"measured", c.measured}};
}

std::string snapshot_comparison_svg(const SnapshotComparison& c, const std::string& title, int width, int height) {
  const double left = 80, right = 20, top = 40, bottom = 50;
  const double w = width - left - right, h = height - top - bottom;
  const double n = std::max<double>(1.0, static_cast<double>(c.predicted.size()));
  const double ymax = static_cast<double>(std::max<uint64_t>({c.predicted_peak, c.measured_peak, 1}));
  auto X = [&](double x) { return left + x / n * w; };
  auto Y = [&](double y) { return top + h - y / ymax * h; };
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height << "\" viewBox=\"0 0 "
    << width << ' ' << height << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  auto esc = [](std::string t) {
    std::string o;
    for (char ch : t) o += ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : ch == '&' ? "&amp;" : std::string(1, ch);
    return o;
  };
  s << "<text x=\"" << left << "\" y=\"20\" font-size=\"14\">" << esc(title) << "</text>\n";
  s << "<line x1=\"" << left << "\" y1=\"" << top + h << "\" x2=\"" << left + w << "\" y2=\"" << top + h << "\" stroke=\"black\"/>\n"
    << "<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\"" << top + h << "\" stroke=\"black\"/>\n";
  for (int k = 0; k <= 4; ++k) {
    const double v = ymax * k / 4;
    s << "<text x=\"" << left - 6 << "\" y=\"" << Y(v) + 4 << "\" text-anchor=\"end\">" << mib(static_cast<int64_t>(v)) << "</text>\n";
  }
  const double bx = X(static_cast<double>(c.predicted_backward));
  s << "<line x1=\"" << bx << "\" y1=\"" << top << "\" x2=\"" << bx << "\" y2=\"" << top + h
    << "\" stroke=\"gray\" stroke-dasharray=\"4 3\"/>\n"
    << "<text x=\"" << (left + bx) / 2 << "\" y=\"" << top + h + 18 << "\" text-anchor=\"middle\">forward</text>\n"
    << "<text x=\"" << (bx + left + w) / 2 << "\" y=\"" << top + h + 18 << "\" text-anchor=\"middle\">backward</text>\n"
    << "<text x=\"" << left + w / 2 << "\" y=\"" << top + h + 38 << "\" text-anchor=\"middle\">instruction of " << esc(c.strategy)
    << " (the recording stretched to its phases)</text>\n";
  // Steps for the prediction; the recording reduced to min and max per pixel
  // column so that no peak disappears.
  s << "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"";
  for (std::size_t i = 0; i < c.predicted.size(); ++i)
    s << X(static_cast<double>(i)) << ',' << Y(static_cast<double>(c.predicted[i])) << ' ' << X(static_cast<double>(i + 1)) << ','
      << Y(static_cast<double>(c.predicted[i])) << ' ';
  s << "\"/>\n<polyline fill=\"none\" stroke=\"#ff7f0e\" stroke-width=\"1.5\" points=\"";
  const int cols = static_cast<int>(w);
  std::vector<uint64_t> lo(static_cast<std::size_t>(cols) + 1, UINT64_MAX), hi(static_cast<std::size_t>(cols) + 1, 0);
  for (std::size_t i = 0; i < c.measured.size(); ++i) {
    const auto col = static_cast<std::size_t>(std::clamp(c.measured_x[i] / n * w, 0.0, static_cast<double>(cols)));
    lo[col] = std::min(lo[col], c.measured[i]);
    hi[col] = std::max(hi[col], c.measured[i]);
  }
  for (int col = 0; col <= cols; ++col) {
    if (hi[static_cast<std::size_t>(col)] == 0 && lo[static_cast<std::size_t>(col)] == UINT64_MAX) continue;
    s << left + col << ',' << Y(static_cast<double>(lo[static_cast<std::size_t>(col)])) << ' ' << left + col << ','
      << Y(static_cast<double>(hi[static_cast<std::size_t>(col)])) << ' ';
  }
  s << "\"/>\n<text x=\"" << left + w - 300 << "\" y=\"" << top + 14 << "\" fill=\"#1f77b4\">predicted (" << esc(c.strategy)
    << "): peak " << mib(static_cast<int64_t>(c.predicted_peak)) << "</text>\n"
    << "<text x=\"" << left + w - 300 << "\" y=\"" << top + 30 << "\" fill=\"#ff7f0e\">recorded, above its start: peak "
    << mib(static_cast<int64_t>(c.measured_peak)) << "</text>\n</svg>\n";
  return s.str();
}

}  // namespace remat
