// Colour-vision-deficiency simulation for the tests: Machado, Oliveira &
// Fernandes (2009), severity 1.0 matrices on linear RGB, and CIE76 colour
// differences in L*a*b* (D65). Written from the paper's tables, independent of
// the code under test.
#pragma once
#include <QColor>
#include <array>
#include <cmath>

namespace cvd {

enum class Kind { Normal, Protanopia, Deuteranopia, Tritanopia };

inline double toLinear(double c) { return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4); }
inline double toSrgb(double c) {
  c = std::clamp(c, 0.0, 1.0);
  return c <= 0.0031308 ? 12.92 * c : 1.055 * std::pow(c, 1 / 2.4) - 0.055;
}

inline std::array<double, 3> simulate(const QColor& c, Kind k) {
  static const double P[3][3] = {{0.152286, 1.052583, -0.204868}, {0.114503, 0.786281, 0.099216},
                                 {-0.003882, -0.048116, 1.051998}};
  static const double D[3][3] = {{0.367322, 0.860646, -0.227968}, {0.280085, 0.672501, 0.047413},
                                 {-0.011820, 0.042940, 0.968881}};
  static const double T[3][3] = {{1.255528, -0.076749, -0.178779}, {-0.078411, 0.930809, 0.147602},
                                 {0.004733, 0.691367, 0.303900}};
  const double rgb[3] = {toLinear(c.redF()), toLinear(c.greenF()), toLinear(c.blueF())};
  if (k == Kind::Normal) return {rgb[0], rgb[1], rgb[2]};
  const double(*m)[3] = k == Kind::Protanopia ? P : k == Kind::Deuteranopia ? D : T;
  std::array<double, 3> out{};
  for (int i = 0; i < 3; ++i) out[i] = std::clamp(m[i][0] * rgb[0] + m[i][1] * rgb[1] + m[i][2] * rgb[2], 0.0, 1.0);
  return out;
}

// Linear RGB -> L*a*b* (D65 white).
inline std::array<double, 3> lab(const std::array<double, 3>& lin) {
  const double x = (0.4124 * lin[0] + 0.3576 * lin[1] + 0.1805 * lin[2]) / 0.95047;
  const double y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2];
  const double z = (0.0193 * lin[0] + 0.1192 * lin[1] + 0.9505 * lin[2]) / 1.08883;
  auto f = [](double t) { return t > 216.0 / 24389 ? std::cbrt(t) : (24389.0 / 27 * t + 16) / 116; };
  return {116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))};
}

inline double deltaE(const QColor& a, const QColor& b, Kind k) {
  const auto la = lab(simulate(a, k)), lb = lab(simulate(b, k));
  return std::sqrt((la[0] - lb[0]) * (la[0] - lb[0]) + (la[1] - lb[1]) * (la[1] - lb[1]) +
                   (la[2] - lb[2]) * (la[2] - lb[2]));
}

}  // namespace cvd
