// GIF frames through giflib: after the first, each frame stores only the
// rectangle that changed since the previous one (left in place: disposal
// "do not dispose"); the animation loops forever (the NETSCAPE2.0 extension).
// Given a palette, it is the file's one global colour map and every pixel
// maps to its nearest entry (colours stay put from frame to frame); without
// one, each frame gets its own 256-colour map from giflib's quantizer.
#include <fcntl.h>
#include <gif_lib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <cmath>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "core/base/errors.h"
#include "widgets/export/frame_writer.h"

namespace remat::encoders {
namespace {

class GifWriter final : public FrameWriter {
 public:
  GifWriter(QSize size, std::vector<QRgb> palette) : size_(size), palette_(std::move(palette)) {
    if (palette_.size() > kTransparent) palette_.resize(kTransparent);
  }
  // Outside the constructor so that the destructor closes a failed open.
  void open(const std::string& path, double fps) {
    int err = 0;
    // Opened here rather than by giflib, which creates files readable by their
    // owner only: this one gets the usual 0666 less the umask.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0) throw InputError("cannot write '" + path + "': " + std::strerror(errno));
    gif_ = EGifOpenFileHandle(fd, &err);
    if (!gif_) {
      ::close(fd);
      throw InputError("cannot write '" + path + "': " + GifErrorString(err));
    }
    const QSize size = size_;
    EGifSetGifVersion(gif_, true);
    ColorMapObject* global = nullptr;
    if (!palette_.empty()) {
      GifColorType map[256] = {};
      for (std::size_t i = 0; i < palette_.size(); ++i)
        map[i] = {GifByteType(qRed(palette_[i])), GifByteType(qGreen(palette_[i])), GifByteType(qBlue(palette_[i]))};
      global = GifMakeMapObject(256, map);
    }
    const int rc = EGifPutScreenDesc(gif_, size.width(), size.height(), 8, 0, global);
    if (global) GifFreeMapObject(global);
    check(rc, "screen");
    // Loop forever.
    check(EGifPutExtensionLeader(gif_, APPLICATION_EXT_FUNC_CODE), "loop");
    check(EGifPutExtensionBlock(gif_, 11, "NETSCAPE2.0"), "loop");
    const unsigned char loop[3] = {1, 0, 0};
    check(EGifPutExtensionBlock(gif_, 3, loop), "loop");
    check(EGifPutExtensionTrailer(gif_), "loop");
    // Hundredths of a second; viewers treat less than 2 as 10.
    delay_ = std::max(2, static_cast<int>(std::lround(100.0 / fps)));
  }
  ~GifWriter() override {
    if (gif_) EGifCloseFile(gif_, nullptr);
  }

  void add(const QImage& frame) override {
    const QImage img = frame.convertToFormat(QImage::Format_RGB32);
    if (img.size() != size_) throw std::runtime_error("GIF frame of the wrong size");
    QRect r = changed(img);
    prev_ = img;
    // An unchanged frame still holds its time: one pixel is written.
    if (r.isEmpty()) r = QRect(0, 0, 1, 1);
    const int w = r.width(), h = r.height();
    if (!palette_.empty()) return addMapped(img, r);
    std::vector<GifByteType> red(std::size_t(w) * h), green(red.size()), blue(red.size()), out(red.size());
    for (int y = 0; y < h; ++y) {
      const auto* line = reinterpret_cast<const QRgb*>(img.constScanLine(r.top() + y));
      for (int x = 0; x < w; ++x) {
        const QRgb c = line[r.left() + x];
        const std::size_t i = std::size_t(y) * w + x;
        red[i] = GifByteType(qRed(c));
        green[i] = GifByteType(qGreen(c));
        blue[i] = GifByteType(qBlue(c));
      }
    }
    int colors = 256;
    GifColorType map[256];
    check(GifQuantizeBuffer(unsigned(w), unsigned(h), &colors, red.data(), green.data(), blue.data(), out.data(), map),
          "quantize");
    ColorMapObject* cmap = GifMakeMapObject(256, map);
    GraphicsControlBlock gcb{};
    gcb.DisposalMode = DISPOSE_DO_NOT;
    gcb.DelayTime = delay_;
    gcb.TransparentColor = NO_TRANSPARENT_COLOR;
    GifByteType ext[4];
    const std::size_t n = EGifGCBToExtension(&gcb, ext);
    const int ok = EGifPutExtension(gif_, GRAPHICS_EXT_FUNC_CODE, int(n), ext) != GIF_ERROR &&
                   EGifPutImageDesc(gif_, r.left(), r.top(), w, h, false, cmap) != GIF_ERROR;
    for (int y = 0; ok && y < h; ++y) check(EGifPutLine(gif_, out.data() + std::size_t(y) * w, w), "frame");
    GifFreeMapObject(cmap);
    if (!ok) check(GIF_ERROR, "frame");
  }

  // A frame's rectangle through the global palette; after the first, a
  // pixel that did not change is transparent (the previous frame shows
  // through), which compresses to almost nothing.
  void addMapped(const QImage& img, QRect r) {
    const int w = r.width(), h = r.height();
    std::vector<GifByteType> out(std::size_t(w) * h);
    for (int y = 0; y < h; ++y) {
      const auto* line = reinterpret_cast<const QRgb*>(img.constScanLine(r.top() + y));
      const auto* before = shown_.isNull() ? nullptr : reinterpret_cast<const QRgb*>(shown_.constScanLine(r.top() + y));
      for (int x = 0; x < w; ++x) {
        const QRgb c = line[r.left() + x];
        out[std::size_t(y) * w + x] = before && before[r.left() + x] == c ? kTransparent : nearest(c);
      }
    }
    shown_ = img;
    putFrame(r, nullptr, out, !first_);
    first_ = false;
  }

  GifByteType nearest(QRgb c) {
    c |= 0xff000000u;
    if (const auto it = cache_.find(c); it != cache_.end()) return it->second;
    // Distance weighted as the eye sees it (green most, blue least).
    long best = -1;
    GifByteType at = 0;
    for (std::size_t i = 0; i < palette_.size(); ++i) {
      const long dr = qRed(c) - qRed(palette_[i]), dg = qGreen(c) - qGreen(palette_[i]), db = qBlue(c) - qBlue(palette_[i]);
      const long d = 3 * dr * dr + 4 * dg * dg + 2 * db * db;
      if (best < 0 || d < best) {
        best = d;
        at = GifByteType(i);
      }
    }
    cache_.emplace(c, at);
    return at;
  }

  void putFrame(QRect r, ColorMapObject* cmap, const std::vector<GifByteType>& out, bool transparent) {
    const int w = r.width(), h = r.height();
    GraphicsControlBlock gcb{};
    gcb.DisposalMode = DISPOSE_DO_NOT;
    gcb.DelayTime = delay_;
    gcb.TransparentColor = transparent ? kTransparent : NO_TRANSPARENT_COLOR;
    GifByteType ext[4];
    const std::size_t n = EGifGCBToExtension(&gcb, ext);
    const bool ok = EGifPutExtension(gif_, GRAPHICS_EXT_FUNC_CODE, int(n), ext) != GIF_ERROR &&
                    EGifPutImageDesc(gif_, r.left(), r.top(), w, h, false, cmap) != GIF_ERROR;
    if (!ok) check(GIF_ERROR, "frame");
    for (int y = 0; y < h; ++y) check(EGifPutLine(gif_, const_cast<GifByteType*>(out.data()) + std::size_t(y) * w, w), "frame");
  }

  void finish() override {
    int err = 0;
    GifFileType* g = gif_;
    gif_ = nullptr;
    if (EGifCloseFile(g, &err) == GIF_ERROR) throw std::runtime_error(std::string("GIF: ") + GifErrorString(err));
  }

 private:
  void check(int rc, const char* what) {
    if (rc == GIF_ERROR) throw std::runtime_error(std::string("GIF ") + what + ": " + GifErrorString(gif_ ? gif_->Error : 0));
  }
  // The bounding box of the pixels that differ from the previous frame.
  QRect changed(const QImage& img) const {
    if (prev_.isNull()) return img.rect();
    int x0 = img.width(), y0 = img.height(), x1 = -1, y1 = -1;
    for (int y = 0; y < img.height(); ++y) {
      const auto* a = reinterpret_cast<const QRgb*>(img.constScanLine(y));
      const auto* b = reinterpret_cast<const QRgb*>(prev_.constScanLine(y));
      for (int x = 0; x < img.width(); ++x)
        if (a[x] != b[x]) {
          x0 = std::min(x0, x), x1 = std::max(x1, x);
          y0 = std::min(y0, y), y1 = std::max(y1, y);
        }
    }
    return x1 < 0 ? QRect() : QRect(QPoint(x0, y0), QPoint(x1, y1));
  }

  GifFileType* gif_ = nullptr;
  static constexpr int kTransparent = 255;  // the palette's last index: "unchanged"
  QSize size_;
  std::vector<QRgb> palette_;
  QImage shown_;  // what the file shows after the frames so far (palette colours aside: the source pixels)
  bool first_ = true;
  std::unordered_map<QRgb, GifByteType> cache_;
  int delay_ = 10;
  QImage prev_;
};

}  // namespace

std::unique_ptr<FrameWriter> make_gif(const std::string& path, QSize pixels, double fps,
                                      const std::vector<QRgb>& palette) {
  auto w = std::make_unique<GifWriter>(pixels, palette);
  w->open(path, fps);
  return w;
}

}  // namespace remat::encoders
