// The pictures of `remat export` and `remat sweep --plot` are drawn by the
// window's widgets (Qt). They live in a module, libremat_render.so, that only
// those two open (core/base/module_loader.h): linking Qt into remat made every
// command load some forty libraries first. This is remat's side of the
// contract: no Qt type crosses it.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "core/analysis/comparison.h"
#include "core/model/model.h"
#include "core/analysis/sweep.h"

namespace remat::cli {

// What `remat export` writes; an empty path is not wanted.
struct ExportFiles {
  std::string timeline, graph, csv, json, animation;
  std::string size = "1200x600";  // WIDTHxHEIGHT, logical pixels
  double scale = 2;               // pictures: twice the pixels (slides, HiDPI)
  double fontScale = 1.5;         // pictures: text sized for slides
  long long step = 0;             // the graph's step
  // The animation (.gif/.mp4/.webm) keeps its own defaults (1280x720, scale 1,
  // font 1.2) for what the user did not give.
  bool sizeSet = false, scaleSet = false, fontScaleSet = false;
  double fps = 8;
  bool withChart = false, hideFrees = false;
  // The longest strategy drives the frames, one per instruction (frees too
  // unless hideFrees); by default frees are skipped, the shortest drives (the
  // others in phase) and each frame has a caption.
  bool everyStep = false;
  int maxFrames = 1500;
};

// The module's functions. Each throws InputError for the user's mistakes (a
// path that is neither .png nor .svg, an animation that is not .gif, .mp4 or
// .webm, a bad size, a file that cannot be written) and writes a "wrote PATH"
// line per file on `out`.
struct RenderModule {
  void (*check_export)(const ExportFiles& files);  // before any work
  void (*write_export)(const Model& model, const std::vector<StrategyRun>& runs, const ExportFiles& files,
                       std::ostream& out);
  void (*write_plot)(const Model& model, const SweepResult& sweep, const std::string& path, std::ostream& out);
};

// The module's one exported symbol; nullptr when `abi` is not its own.
inline constexpr const char* kRenderModuleFile = "libremat_render.so";
inline constexpr const char* kRenderModuleEntry = "remat_render_module";
using RenderModuleEntry = const RenderModule* (*)(const char* abi);

// Both sides compile it; classes laid out differently (another build) refuse.
inline std::string render_module_abi() {
  return "remat-render-module 2 Model " + std::to_string(sizeof(Model)) + " Op " + std::to_string(sizeof(Op)) +
         " StrategyRun " + std::to_string(sizeof(StrategyRun)) + " SweepResult " + std::to_string(sizeof(SweepResult)) +
         " ExportFiles " + std::to_string(sizeof(ExportFiles));
}

// The module, loaded on first use; InputError when this remat was built
// without the GUI or the module cannot be opened.
const RenderModule& render_module();

}  // namespace remat::cli
