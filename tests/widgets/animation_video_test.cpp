// MP4 and WebM animation export, read back with FFmpeg's own decoders: the
// container holds one video stream of the asked codec family, size and frame
// count, and its first frame shows each lane's strip in its strategy's colour
// (within what 4:2:0 colour and lossy coding keep).
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libswscale/swscale.h>
}

#include <QColor>
#include <QTemporaryDir>
#include <filesystem>
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "core/analysis/comparison.h"
#include "core/io/model_source.h"
#include "widgets/export/animation_export.h"
#include "widgets/views/lanes_painter.h"
#include "widgets/document/strategy_colors.h"

using namespace remat;

namespace {

struct Decoded {
  std::string codec;
  int width = 0, height = 0, frames = 0;
  double fps = 0;
  std::vector<uint8_t> firstRgb;  // width x height x 3
  QColor at(int x, int y) const {
    const std::size_t i = (std::size_t(y) * std::size_t(width) + std::size_t(x)) * 3;
    return QColor(firstRgb[i], firstRgb[i + 1], firstRgb[i + 2]);
  }
};

// Every frame of the file's one video stream, decoded; the first kept as RGB.
Decoded decode(const std::string& path) {
  Decoded d;
  AVFormatContext* fmt = nullptr;
  if (avformat_open_input(&fmt, path.c_str(), nullptr, nullptr) < 0) return d;
  avformat_find_stream_info(fmt, nullptr);
  const int si = av_find_best_stream(fmt, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
  if (si < 0 || fmt->nb_streams != 1) {
    avformat_close_input(&fmt);
    return d;
  }
  const AVStream* st = fmt->streams[si];
  const AVCodec* codec = avcodec_find_decoder(st->codecpar->codec_id);
  AVCodecContext* ctx = avcodec_alloc_context3(codec);
  avcodec_parameters_to_context(ctx, st->codecpar);
  avcodec_open2(ctx, codec, nullptr);
  d.codec = avcodec_get_name(st->codecpar->codec_id);
  d.fps = av_q2d(st->avg_frame_rate);
  AVPacket* pkt = av_packet_alloc();
  AVFrame* frame = av_frame_alloc();
  auto drain = [&] {
    while (avcodec_receive_frame(ctx, frame) == 0) {
      if (d.frames++ == 0) {
        d.width = frame->width;
        d.height = frame->height;
        d.firstRgb.resize(std::size_t(d.width) * std::size_t(d.height) * 3);
        SwsContext* sws = sws_getContext(d.width, d.height, AVPixelFormat(frame->format), d.width, d.height,
                                         AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr);
        uint8_t* dst[1] = {d.firstRgb.data()};
        const int stride[1] = {3 * d.width};
        sws_scale(sws, frame->data, frame->linesize, 0, d.height, dst, stride);
        sws_freeContext(sws);
      }
      av_frame_unref(frame);
    }
  };
  while (av_read_frame(fmt, pkt) >= 0) {
    if (pkt->stream_index == si && avcodec_send_packet(ctx, pkt) == 0) drain();
    av_packet_unref(pkt);
  }
  avcodec_send_packet(ctx, nullptr);  // flush the frames the encoder delayed
  drain();
  av_frame_free(&frame);
  av_packet_free(&pkt);
  avcodec_free_context(&ctx);
  avformat_close_input(&fmt);
  return d;
}

bool near(QColor a, QColor b, int tol) {
  return std::abs(a.red() - b.red()) <= tol && std::abs(a.green() - b.green()) <= tol &&
         std::abs(a.blue() - b.blue()) <= tol;
}

void expectVideo(const char* file, const std::vector<std::string>& codecs) {
  const Model model = load_model("chain:16");
  const std::vector<StrategyRun> runs = simulate_strategies(model, {"store-all", "recompute-all", "sqrt"});
  QTemporaryDir dir;
  const std::string path = dir.filePath(file).toStdString();
  AnimationOptions o;
  o.size = QSize(480, 360);
  o.fps = 12;
  o.maxFrames = 24;
  ASSERT_EQ(export_animation(model, {&runs[0], &runs[1], &runs[2]}, path, o), 24);
  const Decoded d = decode(path);
  EXPECT_NE(std::find(codecs.begin(), codecs.end(), d.codec), codecs.end()) << d.codec;
  EXPECT_EQ(d.frames, 24);
  EXPECT_EQ(d.width, 480);
  EXPECT_EQ(d.height, 360);
  EXPECT_DOUBLE_EQ(d.fps, 12);
  ASSERT_FALSE(d.firstRgb.empty());
  for (int i = 0; i < 3; ++i) {
    const QRectF lane = lane_rect(QRectF(0, 0, 480, 360), i, 3, o.fontScale, true);
    const QColor want = strategy_color(QString::fromStdString(runs[std::size_t(i)].name));
    // The strip is a few pixels wide: sample its middle, away from the
    // blocks whose chroma 4:2:0 shares with the white beside it.
    const QColor got = d.at(2, int(lane.center().y()));
    EXPECT_TRUE(near(got, want, 40)) << runs[std::size_t(i)].name << ": " << got.name().toStdString() << " want "
                                     << want.name().toStdString();
  }
}

}  // namespace

TEST(AnimationVideo, Mp4DecodesFrameForFrame) { expectVideo("three.mp4", {"h264", "mpeg4"}); }

TEST(AnimationVideo, WebmDecodesFrameForFrame) { expectVideo("three.webm", {"vp9", "vp8"}); }
