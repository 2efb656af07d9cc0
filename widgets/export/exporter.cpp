#include "widgets/export/exporter.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QGraphicsLayout>
#include <QLineSeries>
#include <functional>
#include <QFontMetricsF>
#include <QImage>
#include <QPainter>
#include <QSvgGenerator>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/io/atomic_file.h"
#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/sim/resident_index.h"
#include "widgets/views/graph_layout.h"
#include "widgets/views/graph_painter.h"
#include "widgets/document/instruction_caption.h"
#include "widgets/views/lanes_painter.h"
#include "widgets/document/node_states.h"
#include "widgets/views/timeline_chart.h"

namespace remat {
namespace {

bool endsWith(std::string s, const std::string& suffix) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void checkSize(QSize size, const std::string& path) {
  if (size.width() < 16 || size.height() < 16 || size.width() > 16384 || size.height() > 16384)
    throw InputError("'" + path + "': picture size " + std::to_string(size.width()) + "x" +
                     std::to_string(size.height()) + " is outside 16..16384 pixels");
}

// Renders with `paint(painter, logical rect)` into `path` as PNG or SVG.
void writePicture(const std::string& path, QSize size, double dpr, const QString& title,
                  const std::function<void(QPainter&, const QRectF&)>& paint) {
  const ImageFormat format = image_format_of(path);
  checkSize(size, path);
  if (dpr <= 0 || dpr > 8) throw InputError("'" + path + "': device pixel ratio must be in (0, 8]");
  const QFileInfo target(QString::fromStdString(path));
  if (!target.absoluteDir().exists())
    throw InputError("cannot write '" + path + "': directory '" + target.absolutePath().toStdString() +
                     "' does not exist");
  replace_file_atomically(path, [&](const std::string& tmp) {
    const QString file = QString::fromStdString(tmp);
    if (format == ImageFormat::Png) {
      QImage img(size * dpr, QImage::Format_ARGB32_Premultiplied);
      img.setDevicePixelRatio(dpr);
      img.fill(Qt::white);
      {
        QPainter p(&img);
        paint(p, QRectF(QPointF(0, 0), QSizeF(size)));
      }
      return img.save(file, "PNG");
    }
    QSvgGenerator gen;
    gen.setFileName(file);
    gen.setSize(size);
    gen.setViewBox(QRect(QPoint(0, 0), size));
    gen.setTitle(title);
    gen.setDescription(QStringLiteral("Remat Studio"));
    QPainter p;
    if (!p.begin(&gen)) return false;
    p.fillRect(QRectF(QPointF(0, 0), QSizeF(size)), Qt::white);
    paint(p, QRectF(QPointF(0, 0), QSizeF(size)));
    if (!p.end()) return false;
    return QFile(file).size() > 0;
  });
}

}  // namespace

ImageFormat image_format_of(const std::string& path) {
  if (endsWith(path, ".png")) return ImageFormat::Png;
  if (endsWith(path, ".svg")) return ImageFormat::Svg;
  throw InputError("'" + path + "': picture must be .png or .svg");
}

QSize parse_size(const std::string& text) {
  const auto x = text.find_first_of("xX");
  try {
    if (x == std::string::npos) throw std::invalid_argument("x");
    std::size_t a = 0, b = 0;
    const int w = std::stoi(text.substr(0, x), &a);
    const int h = std::stoi(text.substr(x + 1), &b);
    if (a != x || b != text.size() - x - 1) throw std::invalid_argument("x");
    return QSize(w, h);
  } catch (const std::exception&) {
    throw InputError("--size '" + text + "': expected WIDTHxHEIGHT, e.g. 1200x600");
  }
}

void prepare_timeline_chart(TimelineChart& chart, const RunList& runs, const TimelineExport& o) {
  chart.setAttribute(Qt::WA_DontShowOnScreen);
  chart.resize(o.size);
  chart.setRuns(runs, o.title);
  chart.setXMode(o.ownLength ? TimelineChart::XMode::OwnLength : TimelineChart::XMode::Steps);
  chart.setFontScale(o.fontScale);
  if (!o.measured.empty()) chart.setMeasured(o.measured);
  if (o.cursor >= 0) chart.setCursor(std::size_t(o.cursor));
  else if (chart.cursorSeries()) chart.cursorSeries()->setVisible(false);
  chart.show();  // lays the chart out at this size (offscreen: nothing appears); places the legend
  chart.chart()->resize(QSizeF(o.size));
  chart.chart()->layout()->activate();
}

void export_timeline(const RunList& runs, const std::string& path, const TimelineExport& o) {
  checkSize(o.size, path);
  TimelineChart chart;
  prepare_timeline_chart(chart, runs, o);
  writePicture(path, o.size, o.devicePixelRatio, o.title, [&](QPainter& p, const QRectF& r) {
    p.setRenderHint(QPainter::Antialiasing);
    chart.scene()->render(&p, r, QRectF(QPointF(0, 0), QSizeF(o.size)));
  });
}

void export_graph(const Model& model, const StrategyRun& run, std::size_t step, const std::string& path, QSize size,
                  double dpr, double fontScale) {
  if (!run.ok()) throw InputError("strategy '" + run.spec + "' does not apply: " + run.error);
  const ResidentIndex index(model, run.schedule);
  const ScheduleFacts facts(model, run);
  if (!run.schedule.code.empty() && step >= run.schedule.code.size())
    throw InputError("--step " + std::to_string(step) + " is beyond the last step " +
                     std::to_string(run.schedule.code.size() - 1) + " of " + run.name);
  const NodeStates states = node_states_at(model, run.schedule, index, facts, step);
  const GraphLayout layout(model);
  const QString caption = QString("%1, step %2 of %3: %4")
                              .arg(QString::fromStdString(run.name))
                              .arg(step + 1)
                              .arg(run.schedule.code.size())
                              .arg(QString::fromStdString(InstructionCaption(model, run.schedule, facts).text(step)));
  writePicture(path, size, dpr, caption, [&](QPainter& p, const QRectF& r) {
    // The caption whole: on as many lines as it needs at slide size (it was
    // cut with "…" on a narrow picture), the graph above it.
    QFont f = p.font();
    f.setPixelSize(int(13 * fontScale));
    const QFontMetricsF fm(f);
    const QRectF textBox(r.left() + 8, 0, r.width() - 16, r.height() / 3);
    const double captionH =
        std::max(28 * fontScale, fm.boundingRect(textBox, Qt::TextWordWrap, caption).height() + 8 * fontScale);
    const QRectF area = r.adjusted(0, 0, 0, -captionH);
    GraphPaintOptions go;
    go.fontScale = fontScale;
    go.readout = readout_of(run, step);
    go.atPeak = run.sim.timeline[step] == run.sim.peak_bytes;
    paint_graph(p, model, layout, states, fit_transform(layout, graph_area(area, go)), area, go);
    p.setFont(f);
    p.setPen(QColor(30, 30, 30));
    p.drawText(QRectF(r.left() + 8, r.bottom() - captionH + 2, r.width() - 16, captionH - 4),
               Qt::AlignLeft | Qt::AlignVCenter | Qt::TextWordWrap, caption);
  });
}

void export_json(const Model& model, const std::vector<StrategyRun>& runs, const std::string& path) {
  write_file_atomically(path, [&](std::ostream& out) { out << comparison_json(model, runs).dump(2) << "\n"; });
}

void export_csv(const Model& model, const std::vector<StrategyRun>& runs, const std::string& path) {
  write_file_atomically(path, [&](std::ostream& out) { write_timelines_csv(out, model, runs); });
}

}  // namespace remat
