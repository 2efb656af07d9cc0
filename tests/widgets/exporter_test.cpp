#include <QImage>
#include <QPainter>
#include <QSet>
#include <QSvgRenderer>
#include <QTemporaryDir>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/base/errors.h"
#include "core/io/model_source.h"
#include "widgets/export/exporter.h"

using namespace remat;

namespace {
struct Pixels {
  int distinct = 0;
  double nonWhite = 0;  // share of pixels that are not the background
};
Pixels pixels(const QImage& img) {
  QSet<QRgb> colours;
  qint64 nonWhite = 0;
  for (int y = 0; y < img.height(); ++y)
    for (int x = 0; x < img.width(); ++x) {
      const QRgb c = img.pixel(x, y);
      colours.insert(c);
      if (qRed(c) < 245 || qGreen(c) < 245 || qBlue(c) < 245) ++nonWhite;
    }
  return {int(colours.size()), double(nonWhite) / double(img.width() * img.height())};
}
struct Data {
  Model model = load_model("chain:16");
  std::vector<StrategyRun> runs = simulate_strategies(model, {"store-all", "recompute-all", "sqrt"});
  QTemporaryDir dir;
  std::string path(const char* name) const { return dir.filePath(name).toStdString(); }
};
}  // namespace

TEST(Exporter, TimelinePngHasTheRequestedSizeAndIsNotBlank) {
  Data d;
  TimelineExport o;
  o.size = QSize(640, 360);
  o.devicePixelRatio = 1;
  export_timeline(d.runs, d.path("t.png"), o);
  QImage img(QString::fromStdString(d.path("t.png")));
  ASSERT_FALSE(img.isNull());
  EXPECT_EQ(img.size(), QSize(640, 360));
  const Pixels p = pixels(img);
  EXPECT_GT(p.distinct, 20);
  EXPECT_GT(p.nonWhite, 0.01);
  // Slides and HiDPI, the default: twice the pixels.
  EXPECT_EQ(TimelineExport{}.devicePixelRatio, 2);
  o.devicePixelRatio = TimelineExport{}.devicePixelRatio;
  export_timeline(d.runs, d.path("t2.png"), o);
  EXPECT_EQ(QImage(QString::fromStdString(d.path("t2.png"))).size(), QSize(1280, 720));
}

TEST(Exporter, TimelineSvgParsesWithTheRightViewBox) {
  Data d;
  TimelineExport o;
  o.size = QSize(800, 400);
  export_timeline(d.runs, d.path("t.svg"), o);
  QSvgRenderer r(QString::fromStdString(d.path("t.svg")));
  ASSERT_TRUE(r.isValid());
  EXPECT_EQ(r.viewBox(), QRect(0, 0, 800, 400));
  QImage img(800, 400, QImage::Format_ARGB32);
  img.fill(Qt::white);
  QPainter p(&img);
  r.render(&p);
  p.end();
  EXPECT_GT(pixels(img).nonWhite, 0.01);
}

TEST(Exporter, GraphPngAndSvgAtAStep) {
  Data d;
  export_graph(d.model, d.runs[2], 30, d.path("g.png"), QSize(900, 300));  // 2x by default
  QImage img(QString::fromStdString(d.path("g.png")));
  EXPECT_EQ(img.size(), QSize(1800, 600));
  const Pixels px = pixels(img);
  EXPECT_GT(px.distinct, 10);
  EXPECT_GT(px.nonWhite, 0.05);
  export_graph(d.model, d.runs[2], 30, d.path("g.svg"), QSize(900, 300));
  QSvgRenderer r(QString::fromStdString(d.path("g.svg")));
  ASSERT_TRUE(r.isValid());
  EXPECT_EQ(r.viewBox(), QRect(0, 0, 900, 300));
  EXPECT_THROW(export_graph(d.model, d.runs[2], 100000, d.path("g3.png"), QSize(900, 300)), InputError);
}

TEST(Exporter, FailuresLeaveNoFile) {
  Data d;
  const std::string missing = d.path("no/such/dir/t.png");
  TimelineExport o;
  EXPECT_THROW(export_timeline(d.runs, missing, o), InputError);
  EXPECT_FALSE(std::filesystem::exists(missing));
  EXPECT_THROW(export_graph(d.model, d.runs[0], 0, d.path("no/such/g.svg"), QSize(400, 200)), InputError);
  EXPECT_THROW(export_json(d.model, d.runs, d.path("no/such/c.json")), InputError);
  EXPECT_THROW(export_timeline(d.runs, d.path("t.gif"), o), InputError);
  o.size = QSize(0, 10);
  EXPECT_THROW(export_timeline(d.runs, d.path("t.png"), o), InputError);
  // Nothing at all was left in the directory (no temporaries either).
  EXPECT_TRUE(std::filesystem::is_empty(d.dir.path().toStdString()));
  EXPECT_EQ(parse_size("1200x600"), QSize(1200, 600));
  EXPECT_THROW(parse_size("1200"), InputError);
}

TEST(Exporter, JsonAndCsvData) {
  Data d;
  export_json(d.model, d.runs, d.path("c.json"));
  std::ifstream in(d.path("c.json"));
  const auto j = nlohmann::json::parse(in);
  ASSERT_EQ(j["strategies"].size(), 3u);
  EXPECT_EQ(j["strategies"][2]["peak_bytes"], d.runs[2].sim.peak_bytes);
  export_csv(d.model, d.runs, d.path("t.csv"));
  std::ifstream csv(d.path("t.csv"));
  std::string line;
  std::size_t lines = 0;
  while (std::getline(csv, line)) ++lines;
  std::size_t total = 0;
  for (const auto& r : d.runs) total += r.sim.timeline.size();
  EXPECT_GE(lines, total);
}

TEST(Exporter, ZoomedOutGraphOfAThousandOpsIsNotBlank) {
  const Model m = load_model("transformer:84");
  ASSERT_GE(m.size(), 1000);
  const auto runs = simulate_strategies(m, {"sqrt"});
  QTemporaryDir dir;
  const std::string path = dir.filePath("g.png").toStdString();
  export_graph(m, runs[0], runs[0].schedule.code.size() / 2, path, QSize(1200, 300));
  const Pixels p = pixels(QImage(QString::fromStdString(path)));
  EXPECT_GT(p.distinct, 5);
  EXPECT_GT(p.nonWhite, 0.1);  // grey forward band, green done band, checkpoint marks
}
