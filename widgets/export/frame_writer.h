// Animation files from rendered frames: GIF through giflib, MP4 (H.264) and
// WebM (VP9) through FFmpeg's libraries (widgets/encoders/). The writer owns the file it is given; callers write to a temporary and rename
// (core/io/atomic_file.h) so a failed or cancelled export leaves nothing.
#pragma once
#include <QImage>
#include <QSize>
#include <QString>
#include <memory>
#include <string>
#include <vector>

namespace remat {

enum class AnimationFormat { Gif, Mp4, WebM };
// From the extension (.gif, .mp4, .webm, any case); throws InputError.
AnimationFormat animation_format_of(const std::string& path);

class FrameWriter {
 public:
  virtual ~FrameWriter() = default;
  // A frame of the size given at creation (any QImage format).
  virtual void add(const QImage& frame) = 0;
  // Flushes and closes the file; throws std::runtime_error on a write failure.
  virtual void finish() = 0;
};

// Throws InputError when the file cannot be created or a parameter is out of range.
// A GIF with a `palette` (up to 256 colours) uses it as its one global colour
// map; without one each frame is quantised on its own.
std::unique_ptr<FrameWriter> make_frame_writer(AnimationFormat format, const std::string& path, QSize pixels,
                                               double fps, const std::vector<QRgb>& palette = {});

namespace encoders {
std::unique_ptr<FrameWriter> make_gif(const std::string& path, QSize pixels, double fps,
                                      const std::vector<QRgb>& palette = {});
std::unique_ptr<FrameWriter> make_video(const std::string& path, QSize pixels, double fps, bool webm);
}  // namespace encoders

}  // namespace remat
