// remat sweep: the memory–time trade-off. For each budget, the least recompute
// overhead any strategy reaches within it (chains: the exact DP; DAGs: the
// checkpoint-set search with a time limit per budget), and the named strategies;
// with --compress DTYPE, every one of them with compressed checkpoints.
#include <cctype>
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "core/analysis/comparison.h"
#include "core/base/errors.h"
#include "core/io/model_source.h"
#include "core/analysis/sweep.h"

// --plot renders with Qt Charts in the picture module (render_module.h): only
// in the GUI build (REMAT_HAVE_GUI, defined by app/CMakeLists.txt).
#include "app/cli/render_module.h"

namespace remat::cli {
namespace {

struct SweepOptions_ {
  std::string model;
  std::string budgets = "auto";
  bool json = false;
  std::string plot;
  std::string compress;  // empty: none
  int seconds = 1;
  InstructionLimit limit;
};

void print_table(const Model& model, const SweepResult& r) {
  // With compressed checkpoints a column gives what their copies C(v) hold.
  const bool packed = r.compress != Packing::None;
  auto stored = [&](const std::string& text) {
    char col[32];
    std::snprintf(col, sizeof col, " %14s", text.c_str());
    return packed ? std::string(col) : std::string();
  };
  if (packed)
    std::printf("model %s: best recompute overhead per memory budget, checkpoints compressed to %s\n",
                model.name.c_str(), std::string(packing_name(r.compress)).c_str());
  else
    std::printf("model %s: best recompute overhead per memory budget\n", model.name.c_str());
  std::printf("%14s %14s%s %10s  %s\n", "budget", "peak", stored("compressed").c_str(), "overhead", "strategy");
  for (const auto& p : r.budgets) {
    if (!p.feasible) {
      std::printf("%14s %14s%s %10s  %s\n", format_bytes(p.budget).c_str(), "-", stored("-").c_str(), "-", "infeasible");
      continue;
    }
    std::printf("%14s %14s%s %9.1f%%  %s\n", format_bytes(p.budget).c_str(), format_bytes(p.peak).c_str(),
                stored(format_bytes(p.compressed_bytes)).c_str(), 100.0 * p.overhead, p.spec.str().c_str());
  }
  std::printf("named strategies:\n");
  for (const auto& n : r.named)
    std::printf("%14s %14s%s %9.1f%%  %s\n", "", format_bytes(n.peak).c_str(), stored(format_bytes(n.compressed_bytes)).c_str(),
                100.0 * n.overhead, n.spec.str().c_str());
  if (packed)
    std::printf("compressed: what the compressed checkpoints C(v) hold (the peak counts them at that size)\n");
  for (const auto& note : r.notes) std::printf("note: %s\n", note.c_str());
}

void run_sweep(const SweepOptions_& o) {
#ifndef REMAT_HAVE_GUI
  if (!o.plot.empty()) throw InputError("--plot needs the GUI build (Qt Charts); this remat was built without it");
#endif
  if (!o.plot.empty()) {  // before any work or output
    const auto dot = o.plot.rfind('.');
    std::string ext = dot == std::string::npos ? "" : o.plot.substr(dot);
    for (auto& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (ext != ".png" && ext != ".svg") throw InputError("--plot: '" + o.plot + "' must end in .png or .svg");
    (void)render_module();  // a missing picture module is said before any work
  }
  Packing compress = Packing::None;
  if (!o.compress.empty() && !parse_packing(o.compress, compress))
    throw InputError("--compress: unknown compression type '" + o.compress + "' (known: " +
                     std::string(packing_names()) + ")");
  const Model model = load_model(o.model);
  SweepOptions so;
  so.limit = o.limit;
  so.compress = compress;
  if (o.budgets == "auto") so.named = named_points(model, so.limit, &so.notes, compress);  // a list is checked before any simulation
  (void)parse_budgets({}, o.budgets == "auto" ? "0" : o.budgets);  // a bad list fails before store-all is simulated
  const bool shares = o.budgets.find('%') != std::string::npos;
  const auto budgets = parse_budgets(so.named, o.budgets, shares ? store_all_peak(model) : 0);
  so.optimal_seconds = o.seconds;
  const SweepResult r = sweep(model, budgets, so);
  if (o.json) std::cout << sweep_json(model, r).dump() << "\n";
  else print_table(model, r);
  if (!o.plot.empty()) render_module().write_plot(model, r, o.plot, std::cerr);
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto o = std::make_shared<SweepOptions_>();
  auto* cmd = app.add_subcommand("sweep", "Best recompute overhead for each memory budget (the memory-time trade-off)");
  cmd->add_option("-m,--model", o->model, "Model: a preset spec or a .json/.onnx file")->required();
  cmd->add_option("--budgets", o->budgets, "'auto' (12 budgets from recompute-all's peak to store-all's) or B1,B2,... (512, 64K, 1.5M, or shares of store-all's peak: 90%,50%)")
      ->capture_default_str();
  cmd->add_option("--compress", o->compress,
                  "Compressed checkpoints on every point: bf16, f16 or int8 (each strategy as SPEC+compress:DTYPE; "
                  "peaks at the stored sizes)");
  cmd->add_option("--seconds", o->seconds, "DAGs: search time per budget in seconds")->check(CLI::Range(1, 3600))->capture_default_str();
  cmd->add_flag("--json", o->json, "Print JSON {model, compress, budgets:[{budget_bytes, feasible, spec, peak_bytes, overhead, compressed_bytes}], strategies:[...]}");
  cmd->add_option("--plot", o->plot, "Also draw the trade-off to this .png or .svg (GUI build only)");
  add_max_instructions_option(cmd, o->limit);
  cmd->callback([o] { run_sweep(*o); });
}

}  // namespace remat::cli
