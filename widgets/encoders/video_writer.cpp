// MP4 (H.264, or MPEG-4 part 2 when libx264 is absent) and WebM (VP9, or VP8)
// through FFmpeg's libraries: frames are converted to YUV 4:2:0 with swscale,
// encoded and muxed with one packet per frame at the chosen rate.
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}

#include <cmath>
#include <stdexcept>

#include "core/base/errors.h"
#include "widgets/export/frame_writer.h"

namespace remat::encoders {
namespace {

std::string av_error(int rc) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(rc, buf, sizeof buf);
  return buf;
}

class VideoWriter final : public FrameWriter {
 public:
  explicit VideoWriter(QSize size) : size_(size) {}
  // Outside the constructor so that the destructor cleans up a failed open.
  void open(const std::string& path, double fps, bool webm) {
    // 4:2:0 needs even sizes: the last odd row or column is dropped.
    width_ = size_.width() & ~1;
    height_ = size_.height() & ~1;
    if (avformat_alloc_output_context2(&fmt_, nullptr, webm ? "webm" : "mp4", path.c_str()) < 0 || !fmt_)
      throw InputError("cannot write '" + path + "': no " + (webm ? "WebM" : "MP4") + " muxer");
    static const char* const kWebm[] = {"libvpx-vp9", "libvpx"};
    static const char* const kMp4[] = {"libx264", "mpeg4"};
    const AVCodec* codec = nullptr;
    for (const char* name : webm ? kWebm : kMp4)
      if ((codec = avcodec_find_encoder_by_name(name))) break;
    if (!codec) throw InputError("cannot write '" + path + "': FFmpeg has no encoder for this format");
    stream_ = avformat_new_stream(fmt_, nullptr);
    ctx_ = avcodec_alloc_context3(codec);
    if (!stream_ || !ctx_) throw std::runtime_error("FFmpeg: out of memory");
    // A rational frame rate: fps in thousandths.
    const int rate = static_cast<int>(std::lround(fps * 1000));
    ctx_->width = width_;
    ctx_->height = height_;
    ctx_->time_base = AVRational{1000, rate};
    ctx_->framerate = AVRational{rate, 1000};
    ctx_->pix_fmt = AV_PIX_FMT_YUV420P;
    ctx_->gop_size = 50;
    ctx_->bit_rate = 0;
    if (std::string(codec->name) == "libx264") av_opt_set(ctx_->priv_data, "crf", "20", 0);
    if (std::string(codec->name).rfind("libvpx", 0) == 0) {
      av_opt_set(ctx_->priv_data, "crf", "30", 0);
      av_opt_set(ctx_->priv_data, "deadline", "good", 0);
      av_opt_set_int(ctx_->priv_data, "cpu-used", 4, 0);
    }
    if (std::string(codec->name) == "mpeg4") ctx_->bit_rate = 4'000'000;
    if (fmt_->oformat->flags & AVFMT_GLOBALHEADER) ctx_->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    int rc = avcodec_open2(ctx_, codec, nullptr);
    if (rc < 0) throw std::runtime_error("FFmpeg: cannot open the encoder: " + av_error(rc));
    avcodec_parameters_from_context(stream_->codecpar, ctx_);
    stream_->time_base = ctx_->time_base;
    if (!(fmt_->oformat->flags & AVFMT_NOFILE) && (rc = avio_open(&fmt_->pb, path.c_str(), AVIO_FLAG_WRITE)) < 0)
      throw InputError("cannot write '" + path + "': " + av_error(rc));
    if ((rc = avformat_write_header(fmt_, nullptr)) < 0) throw std::runtime_error("FFmpeg: header: " + av_error(rc));
    frame_ = av_frame_alloc();
    packet_ = av_packet_alloc();
    frame_->format = ctx_->pix_fmt;
    frame_->width = width_;
    frame_->height = height_;
    if (!frame_ || !packet_ || av_frame_get_buffer(frame_, 0) < 0) throw std::runtime_error("FFmpeg: out of memory");
    sws_ = sws_getContext(width_, height_, AV_PIX_FMT_BGRA, width_, height_, AV_PIX_FMT_YUV420P, SWS_BICUBIC, nullptr,
                          nullptr, nullptr);
    if (!sws_) throw std::runtime_error("FFmpeg: no colour converter");
  }

  ~VideoWriter() override {
    sws_freeContext(sws_);
    av_frame_free(&frame_);
    av_packet_free(&packet_);
    avcodec_free_context(&ctx_);
    if (fmt_ && fmt_->pb && !(fmt_->oformat->flags & AVFMT_NOFILE)) avio_closep(&fmt_->pb);
    avformat_free_context(fmt_);
  }

  void add(const QImage& image) override {
    // ARGB32 is B, G, R, A in memory on a little-endian machine: BGRA.
    const QImage img = image.convertToFormat(QImage::Format_ARGB32);
    if (img.size() != size_) throw std::runtime_error("video frame of the wrong size");
    if (av_frame_make_writable(frame_) < 0) throw std::runtime_error("FFmpeg: frame not writable");
    const uint8_t* src[1] = {img.constBits()};
    const int stride[1] = {static_cast<int>(img.bytesPerLine())};
    sws_scale(sws_, src, stride, 0, height_, frame_->data, frame_->linesize);
    frame_->pts = next_++;
    encode(frame_);
  }

  void finish() override {
    encode(nullptr);  // drain
    const int rc = av_write_trailer(fmt_);
    if (rc < 0) throw std::runtime_error("FFmpeg: trailer: " + av_error(rc));
  }

 private:
  void encode(AVFrame* f) {
    int rc = avcodec_send_frame(ctx_, f);
    if (rc < 0) throw std::runtime_error("FFmpeg: encode: " + av_error(rc));
    while ((rc = avcodec_receive_packet(ctx_, packet_)) >= 0) {
      // Every frame lasts one tick of the frame rate. Without it MP4 gives
      // the last frame no duration: the clip ends a frame early and players
      // report a wrong rate (12.52 fps for 24 frames at 12).
      if (packet_->duration == 0) packet_->duration = 1;
      av_packet_rescale_ts(packet_, ctx_->time_base, stream_->time_base);
      packet_->stream_index = stream_->index;
      rc = av_interleaved_write_frame(fmt_, packet_);
      av_packet_unref(packet_);
      if (rc < 0) throw std::runtime_error("FFmpeg: write: " + av_error(rc));
    }
    if (rc != AVERROR(EAGAIN) && rc != AVERROR_EOF) throw std::runtime_error("FFmpeg: encode: " + av_error(rc));
  }

  QSize size_;
  int width_ = 0, height_ = 0;
  AVFormatContext* fmt_ = nullptr;
  AVStream* stream_ = nullptr;
  AVCodecContext* ctx_ = nullptr;
  AVFrame* frame_ = nullptr;
  AVPacket* packet_ = nullptr;
  SwsContext* sws_ = nullptr;
  int64_t next_ = 0;
};

}  // namespace

std::unique_ptr<FrameWriter> make_video(const std::string& path, QSize pixels, double fps, bool webm) {
  auto w = std::make_unique<VideoWriter>(pixels);
  w->open(path, fps, webm);
  return w;
}

}  // namespace remat::encoders
