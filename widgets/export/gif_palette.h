// One palette for a whole GIF animation: the picture's own colours (every
// node look's fill, outline and hatching, the strategy colours, the
// backgrounds and the greys of text), each with its blends toward white and
// black for antialiased edges. Every frame maps to it (nearest colour), so a
// colour never shifts from frame to frame (per-frame palettes tinted the
// square outlines, washed out the running backward and left seams) and the
// file is smaller (no local colour maps).
#pragma once
#include <QRgb>
#include <vector>

namespace remat {

// At most 256 entries, the exact style colours among them.
const std::vector<QRgb>& animation_palette();

}  // namespace remat
