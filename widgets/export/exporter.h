// Pictures and data for slides and reports: the memory timeline and the graph
// at a step as PNG (HiDPI through devicePixelRatio) or SVG, the comparison as
// JSON and the timelines as CSV. Every file is written to a temporary and
// renamed (core/io/atomic_file.h): a failure throws InputError naming the path
// and leaves no file. Used by the window and by `remat export`.
#pragma once
#include <QSize>
#include <map>
#include <string>
#include <vector>

#include "core/analysis/comparison.h"
#include "widgets/document/run_list.h"

namespace remat {
struct Model;
class TimelineChart;

enum class ImageFormat { Png, Svg };
// From the extension (.png / .svg, any case); throws InputError otherwise.
ImageFormat image_format_of(const std::string& path);
// "1200x600" -> QSize; throws InputError.
QSize parse_size(const std::string& text);

struct TimelineExport {
  QSize size{1200, 600};  // logical pixels (the SVG's viewBox)
  double devicePixelRatio = 2;  // PNG: pixels = size * ratio (2: slides, HiDPI)
  double fontScale = 1.5;       // text relative to the window's (slides)
  QString title;
  long long cursor = -1;  // step to mark; -1: none
  std::map<std::string, std::vector<uint64_t>> measured;
  // x axis: each strategy scaled to its own length (the window's default),
  // or instructions.
  bool ownLength = true;
};
void export_timeline(const RunList& runs, const std::string& path, const TimelineExport& options);
// The chart export_timeline renders, laid out at options.size (tests read
// its legend as drawn).
void prepare_timeline_chart(TimelineChart& chart, const RunList& runs, const TimelineExport& options);

// The graph of `run` at `step` with its memory readout and caption, text
// scaled by `fontScale` (1.5: readable on slides).
void export_graph(const Model& model, const StrategyRun& run, std::size_t step, const std::string& path, QSize size,
                  double devicePixelRatio = 2, double fontScale = 1.5);

void export_json(const Model& model, const std::vector<StrategyRun>& runs, const std::string& path);
void export_csv(const Model& model, const std::vector<StrategyRun>& runs, const std::string& path);

}  // namespace remat
