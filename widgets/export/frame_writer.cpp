#include "widgets/export/frame_writer.h"

#include <algorithm>
#include <cctype>

#include "core/base/errors.h"

namespace remat {

AnimationFormat animation_format_of(const std::string& path) {
  std::string p = path;
  std::transform(p.begin(), p.end(), p.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  auto ends = [&](const std::string& s) { return p.size() >= s.size() && p.compare(p.size() - s.size(), s.size(), s) == 0; };
  if (ends(".gif")) return AnimationFormat::Gif;
  if (ends(".mp4")) return AnimationFormat::Mp4;
  if (ends(".webm")) return AnimationFormat::WebM;
  throw InputError("'" + path + "': an animation must be .gif, .mp4 or .webm");
}

std::unique_ptr<FrameWriter> make_frame_writer(AnimationFormat f, const std::string& path, QSize pixels, double fps,
                                               const std::vector<QRgb>& palette) {
  if (pixels.width() < 16 || pixels.height() < 16) throw InputError("'" + path + "': frames must be at least 16x16 pixels");
  if (!(fps > 0 && fps <= 60)) throw InputError("'" + path + "': the frame rate must be in (0, 60]");
  if (f == AnimationFormat::Gif) return encoders::make_gif(path, pixels, fps, palette);
  return encoders::make_video(path, pixels, fps, f == AnimationFormat::WebM);
}

}  // namespace remat
