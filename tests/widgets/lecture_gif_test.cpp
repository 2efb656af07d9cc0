// The side-by-side GIF as a lecture uses it (issue 34): with the defaults of
// the window and `remat export --animation`, free steps are skipped and the
// strategies play in phase (tens of frames, not the 304 of recompute-all's
// every instruction), each frame has a caption, and the file has one global
// palette holding the picture's exact colours (per-frame palettes tinted
// outlines and left seams); chain:16's is under 1 MB.
#include <QFileInfo>
#include <QImageReader>
#include <QTemporaryDir>
#include <gif_lib.h>
#include <gtest/gtest.h>

#include "core/analysis/comparison.h"
#include "core/io/model_source.h"
#include "widgets/export/animation_export.h"
#include "widgets/export/gif_palette.h"
#include "widgets/views/lanes_painter.h"
#include "widgets/views/node_style.h"
#include "widgets/document/step_numbering.h"
#include "widgets/document/strategy_colors.h"

using namespace remat;

TEST(LectureGif, ChainSideBySideDefaultIsTensOfFramesOnePaletteUnderAMegabyte) {
  const Model m = load_model("chain:16");
  const std::vector<StrategyRun> runs = simulate_strategies(m, {"store-all", "recompute-all", "sqrt"});
  std::vector<const StrategyRun*> ptrs;
  for (const auto& r : runs) ptrs.push_back(&r);
  QTemporaryDir dir;
  const std::string gif = dir.filePath("lecture.gif").toStdString();
  const AnimationOptions o = lecture_animation_options();
  EXPECT_TRUE(o.hideFrees && o.inPhase && o.captions);
  const int frames = export_animation(m, ptrs, gif, o);
  // One frame per fwd/bwd step of store-all, the shortest; the others in phase.
  const std::size_t shortest = StepNumbering(runs[0].schedule, true).count();
  EXPECT_EQ(frames, int(shortest));
  EXPECT_GE(frames, 20);
  EXPECT_LE(frames, 60);
  EXPECT_LT(StepNumbering(runs[0].schedule, true).count(), StepNumbering(runs[1].schedule, true).count());
  EXPECT_LE(QFileInfo(QString::fromStdString(gif)).size(), 1'000'000);

  // One global colour map, no local ones, holding the style colours exactly.
  int err = 0;
  GifFileType* g = DGifOpenFileName(gif.c_str(), &err);
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(DGifSlurp(g), GIF_OK);
  EXPECT_EQ(g->ImageCount, frames);
  ASSERT_NE(g->SColorMap, nullptr);
  for (int i = 0; i < g->ImageCount; ++i) EXPECT_EQ(g->SavedImages[i].ImageDesc.ColorMap, nullptr) << i;
  auto inMap = [&](QColor c) {
    for (int i = 0; i < g->SColorMap->ColorCount; ++i) {
      const GifColorType& e = g->SColorMap->Colors[i];
      if (e.Red == c.red() && e.Green == c.green() && e.Blue == c.blue()) return true;
    }
    return false;
  };
  for (const char* s : {"store-all", "recompute-all", "sqrt"}) EXPECT_TRUE(inMap(strategy_color(s))) << s;
  for (NodeLook look : {NodeLook::ActResident, NodeLook::BwdRunning, NodeLook::GradResident, NodeLook::ActComputing})
    EXPECT_TRUE(inMap(node_style(look).fill)) << node_style(look).legend;
  DGifCloseFile(g, &err);

  // Frames read back: the lanes' colour strips exact (no per-frame tint), a
  // caption band at the bottom.
  QImageReader reader(QString::fromStdString(gif));
  const QImage first = reader.read().convertToFormat(QImage::Format_RGB32);
  ASSERT_EQ(first.size(), o.size);
  const AnimationFrames af(m, ptrs, o);
  EXPECT_TRUE(af.caption(0).startsWith("store-all, step 1 of ")) << af.caption(0).toStdString();
  EXPECT_EQ(first.pixelColor(4, first.height() - 4), QColor(0xf1, 0xf3, 0xf6));
  for (int i = 0; i < 3; ++i) {
    bool found = false;
    for (int y = 0; y < first.height() && !found; ++y) found = first.pixelColor(2, y) == strategy_color(QString::fromStdString(runs[std::size_t(i)].name));
    EXPECT_TRUE(found) << runs[std::size_t(i)].name;
  }
}

TEST(LectureGif, ThePaletteHoldsEveryLookExactly) {
  const std::vector<QRgb>& pal = animation_palette();
  EXPECT_LE(pal.size(), 256u);
  for (int i = 0; i < int(NodeLook::Count); ++i) {
    const QRgb fill = node_style(NodeLook(i)).fill.rgb();
    EXPECT_NE(std::find(pal.begin(), pal.end(), fill), pal.end()) << node_style(NodeLook(i)).legend;
  }
}
