// Animation export (File > Export animation, `remat export --animation`): the
// graph through every step of one strategy, or two or three side by side on
// one phase axis (the longest one drives the frames, the others follow by
// phase), optionally above the memory timeline with its cursor, at a chosen
// size, scale and frame rate. Frames are painted on QImages, so the export
// runs off the GUI thread; only the chart's backdrop is made beforehand on the
// GUI thread (Qt Charts are widgets).
#pragma once
#include <QImage>
#include <QRectF>
#include <QSize>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "widgets/document/node_states.h"
#include "widgets/document/phase_map.h"
#include "widgets/document/step_numbering.h"
#include "widgets/export/frame_writer.h"
#include "widgets/views/legend_looks.h"
#include "widgets/views/graph_layout.h"

namespace remat {
struct Model;
struct StrategyRun;
class ResidentIndex;

struct AnimationOptions {
  QSize size{1280, 720};   // logical pixels of a frame
  double scale = 1;        // frame pixels = size x scale
  double fps = 8;
  double fontScale = 1.2;  // slides
  bool withChart = false;
  bool hideFrees = false;  // one frame per fwd/bwd step only
  int maxFrames = 1500;    // longer schedules are sampled evenly
  // Side by side: one frame per step of the strategy with the fewest steps,
  // the others at the same phase (tens of frames for chain:16, where the
  // longest, recompute-all, drove hundreds); false: the longest drives.
  bool inPhase = false;
  // A caption band at the bottom of each frame: the driving strategy's step
  // and its instruction in words (as the window's caption).
  bool captions = false;
};
// The window's and `remat export --animation`'s defaults: frees skipped, in
// phase, captions (AnimationOptions{} keeps every instruction of the longest).
AnimationOptions lecture_animation_options();

// The memory timeline of the animated runs, without a cursor, and where its
// plot sits in the frame, so each frame only draws the cursor and dots.
struct ChartBackdrop {
  QImage image;      // logical size: the chart band of a frame
  QRectF plot;       // plot area in logical pixels of the band
  double xMax = 1;   // x axis: instructions 0..xMax
  double yTop = 1;   // y axis top, in `unit` bytes
  double unit = 1;
  bool ownLength = false;  // x: each run's own length in percent (xMax 100)
  bool valid() const { return !image.isNull(); }
};
// Made on the GUI thread. `band` is the chart's logical size.
ChartBackdrop render_chart_backdrop(const std::vector<const StrategyRun*>& runs, QSize band, double scale,
                                    double fontScale, const QString& title, bool ownLength = false);
// The part of a frame the chart gets (the lanes take the rest).
QRectF chart_band(QSize frame, bool withChart);

class AnimationFrames {
 public:
  // `runs` (1 to 3, valid) and `model` must outlive the frames.
  AnimationFrames(const Model& model, std::vector<const StrategyRun*> runs, AnimationOptions options,
                  ChartBackdrop backdrop = {});
  ~AnimationFrames();
  int count() const { return static_cast<int>(driverSteps_.size()); }
  // Each run's instruction at frame i.
  std::vector<std::size_t> steps(int i) const;
  // Frame i at size x scale pixels (thread-safe: paints on a QImage).
  QImage frame(int i) const;
  // Frame i's caption (empty without options.captions).
  QString caption(int i) const;
  // The run whose steps drive the frames.
  int driver() const { return driver_; }
  QSize pixels() const;

 private:
  struct Track;
  const Model* model_;
  std::vector<std::unique_ptr<Track>> tracks_;
  AnimationOptions options_;
  ChartBackdrop backdrop_;
  GraphLayout layout_;
  int driver_ = 0;
  LegendMask legend_ = 0;
  std::vector<std::size_t> driverSteps_;
};

// The checks of `path` (format, directory) and `options` that need no run,
// so a caller can make them before any work (remat export does); throws
// InputError. export_animation makes them again.
AnimationFormat check_animation(const std::string& path, const AnimationOptions& options);

// Renders every frame and writes `path` (whole or not at all: a cancel, via
// `progress` returning false, or a failure leaves no file). Returns the frames
// written, 0 when cancelled. Throws InputError for a bad path, format or option.
int export_animation(const Model& model, const std::vector<const StrategyRun*>& runs, const std::string& path,
                      const AnimationOptions& options, const ChartBackdrop& backdrop = {},
                      const std::function<bool(double)>& progress = {});

}  // namespace remat
