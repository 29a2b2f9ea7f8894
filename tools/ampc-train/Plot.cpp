//===- Plot.cpp - training curves as a PNG for ampc-train ------------------===//

#include "Plot.h"

#include "ampc/Support/OutputFile.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace ampc::train {
namespace {

//===----------------------------------------------------------------------===//
// PNG encoding
//===----------------------------------------------------------------------===//

uint32_t crc32(const uint8_t *data, size_t size, uint32_t crc = 0) {
  static uint32_t table[256];
  static bool ready = false;
  if (!ready) {
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
      table[n] = c;
    }
    ready = true;
  }
  crc = ~crc;
  for (size_t i = 0; i < size; ++i)
    crc = table[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t adler32(const std::vector<uint8_t> &data) {
  uint32_t a = 1, b = 0;
  for (uint8_t byte : data) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  return b << 16 | a;
}

void putU32BigEndian(std::vector<uint8_t> &out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(uint8_t(v >> shift));
}

void putChunk(std::vector<uint8_t> &png, const char type[4],
              const std::vector<uint8_t> &payload) {
  putU32BigEndian(png, uint32_t(payload.size()));
  size_t typeAt = png.size();
  png.insert(png.end(), type, type + 4);
  png.insert(png.end(), payload.begin(), payload.end());
  putU32BigEndian(png, crc32(png.data() + typeAt, payload.size() + 4));
}

//===----------------------------------------------------------------------===//
// Drawing
//===----------------------------------------------------------------------===//

struct Color {
  uint8_t r, g, b;
};
constexpr Color kWhite{255, 255, 255}, kBlack{0, 0, 0}, kGrid{225, 225, 225},
    kLoss{31, 119, 180}, kScale{230, 120, 20};

/// 5x7 glyphs, one byte per row, bit 4 the leftmost column: digits and what
/// %g and the panel titles need.
struct Glyph {
  char c;
  uint8_t rows[7];
};
constexpr Glyph kFont[] = {
    {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}},
    {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}},
    {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
    {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}},
    {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
    {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}},
    {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
    {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}},
    {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
    {'.', {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C}},
    {'-', {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00}},
    {'+', {0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00}},
    {'e', {0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E}},
    {'l', {0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'o', {0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E}},
    {'s', {0x00, 0x00, 0x0F, 0x10, 0x0E, 0x01, 0x1E}},
    {'c', {0x00, 0x00, 0x0E, 0x10, 0x10, 0x11, 0x0E}},
    {'a', {0x00, 0x00, 0x0E, 0x01, 0x0F, 0x11, 0x0F}},
    {'t', {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06}},
    {'p', {0x00, 0x00, 0x1E, 0x11, 0x1E, 0x10, 0x10}},
    {'g', {0x00, 0x00, 0x0F, 0x11, 0x0F, 0x01, 0x0E}},
    {'(', {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}},
    {')', {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}},
    {'^', {0x04, 0x0A, 0x11, 0x00, 0x00, 0x00, 0x00}},
};
/// Glyphs are drawn at this many pixels per font pixel.
constexpr int kTextScale = 2;
constexpr int kCharWidth = 6 * kTextScale, kCharHeight = 7 * kTextScale;

class Canvas {
public:
  Canvas(int width, int height)
      : width(width), height(height),
        pixels(size_t(width) * size_t(height) * 3, 255) {}

  void set(int x, int y, Color c) {
    if (x < 0 || y < 0 || x >= width || y >= height)
      return;
    uint8_t *p = &pixels[(size_t(y) * size_t(width) + size_t(x)) * 3];
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
  }
  void fill(int x0, int y0, int x1, int y1, Color c) {
    for (int y = y0; y <= y1; ++y)
      for (int x = x0; x <= x1; ++x)
        set(x, y, c);
  }
  /// A line two pixels thick (Bresenham, each point doubled).
  void line(int x0, int y0, int x1, int y1, Color c) {
    int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, err = dx + dy;
    for (;;) {
      set(x0, y0, c);
      set(x0 + 1, y0, c);
      set(x0, y0 + 1, c);
      if (x0 == x1 && y0 == y1)
        return;
      int e2 = 2 * err;
      if (e2 >= dy)
        err += dy, x0 += sx;
      if (e2 <= dx)
        err += dx, y0 += sy;
    }
  }
  /// Draws `text` with its top-left corner at (x, y); characters outside
  /// the font are left blank.
  void text(int x, int y, const std::string &s, Color c) {
    for (char ch : s) {
      for (const Glyph &g : kFont) {
        if (g.c != ch)
          continue;
        for (int row = 0; row < 7; ++row)
          for (int col = 0; col < 5; ++col)
            if (g.rows[row] & (0x10 >> col))
              fill(x + col * kTextScale, y + row * kTextScale,
                   x + col * kTextScale + kTextScale - 1,
                   y + row * kTextScale + kTextScale - 1, c);
      }
      x += kCharWidth;
    }
  }
  static int textWidth(const std::string &s) {
    return int(s.size()) * kCharWidth;
  }

  const int width, height;
  std::vector<uint8_t> pixels;
};

std::string formatTick(double v) {
  if (std::fabs(v) < 1e-12)
    v = 0;
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", v);
  return buffer;
}

/// A tick of the log2 axis at 2^e: the integer while it stays short
/// (1 .. 2^26), "2^e" beyond, so labels fit left of the panel.
std::string formatLog2Tick(double e) {
  char buffer[32];
  if (e >= 0 && e <= 26)
    std::snprintf(buffer, sizeof(buffer), "%.0f", std::exp2(e));
  else
    std::snprintf(buffer, sizeof(buffer), "2^%d", int(e));
  return buffer;
}

/// Ticks at 1, 2 or 5 times a power of ten covering [lo, hi], about
/// `count` of them.
std::vector<double> niceTicks(double lo, double hi, int count) {
  double raw = (hi - lo) / std::max(1, count - 1);
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9;
       t += step)
    ticks.push_back(t);
  return ticks;
}

/// [lo, hi] of the finite values, widened when empty or flat.
void finiteRange(const std::vector<double> &values, double &lo, double &hi) {
  lo = INFINITY, hi = -INFINITY;
  for (double v : values)
    if (std::isfinite(v))
      lo = std::min(lo, v), hi = std::max(hi, v);
  if (!(lo <= hi))
    lo = 0, hi = 1;
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {
    double pad = std::max(1e-3, std::fabs(hi) * 0.1);
    lo -= pad, hi += pad;
  }
}

/// One panel: a frame at [left, right] x [top, bottom] with y ticks, x
/// ticks, a title, and the series. `logAxis` plots log2 of the values.
void drawPanel(Canvas &canvas, int left, int top, int right, int bottom,
               const std::string &title, const std::vector<double> &steps,
               std::vector<double> values, bool logAxis, Color color) {
  if (logAxis)
    for (double &v : values)
      v = v > 0 ? std::log2(v) : NAN;
  double x0, x1, y0, y1;
  finiteRange(steps, x0, x1);
  finiteRange(values, y0, y1);
  if (logAxis) {
    y0 = std::floor(y0), y1 = std::ceil(y1);
    if (y1 - y0 < 2)
      y0 -= 1, y1 += 1;
  } else {
    double pad = (y1 - y0) * 0.05;
    y0 -= pad, y1 += pad;
  }
  auto px = [&](double x) {
    return left + int(std::lround((x - x0) / (x1 - x0) * (right - left)));
  };
  auto py = [&](double y) {
    return bottom - int(std::lround((y - y0) / (y1 - y0) * (bottom - top)));
  };

  std::vector<double> yTicks;
  if (logAxis) {
    int stride = std::max(1, int(std::ceil((y1 - y0) / 6)));
    for (double e = y0; e <= y1; e += stride)
      yTicks.push_back(e);
  } else {
    yTicks = niceTicks(y0, y1, 6);
  }
  for (double t : yTicks) {
    int y = py(t);
    canvas.fill(left, y, right, y, kGrid);
    canvas.fill(left - 6, y, left - 1, y, kBlack);
    std::string label = logAxis ? formatLog2Tick(t) : formatTick(t);
    canvas.text(left - 10 - Canvas::textWidth(label), y - kCharHeight / 2,
                label, kBlack);
  }
  for (double t : niceTicks(x0, x1, 8)) {
    int x = px(t);
    canvas.fill(x, top, x, bottom, kGrid);
    canvas.fill(x, bottom + 1, x, bottom + 6, kBlack);
    std::string label = formatTick(t);
    canvas.text(x - Canvas::textWidth(label) / 2, bottom + 10, label, kBlack);
  }
  canvas.fill(left, top, right, top, kBlack);
  canvas.fill(left, bottom, right, bottom, kBlack);
  canvas.fill(left, top, left, bottom, kBlack);
  canvas.fill(right, top, right, bottom, kBlack);
  canvas.text(left, top - kCharHeight - 8, title, color);

  bool havePrevious = false;
  int prevX = 0, prevY = 0;
  for (size_t i = 0; i < steps.size() && i < values.size(); ++i) {
    if (!std::isfinite(values[i]) || !std::isfinite(steps[i])) {
      havePrevious = false;
      continue;
    }
    int x = px(steps[i]), y = py(values[i]);
    if (havePrevious)
      canvas.line(prevX, prevY, x, y, color);
    else
      canvas.line(x, y, x, y, color);
    prevX = x, prevY = y, havePrevious = true;
  }
}

} // namespace

bool writePng(const std::string &path, int width, int height,
              const std::vector<uint8_t> &rgb, std::string &error) {
  std::vector<uint8_t> raw;
  raw.reserve(size_t(height) * (size_t(width) * 3 + 1));
  for (int y = 0; y < height; ++y) {
    raw.push_back(0); // filter: none
    auto row = rgb.begin() + std::ptrdiff_t(size_t(y) * size_t(width) * 3);
    raw.insert(raw.end(), row, row + width * 3);
  }
  // zlib: CMF/FLG for deflate with a 32K window and no dictionary, then
  // stored blocks of at most 65535 bytes, then Adler-32.
  std::vector<uint8_t> zlib{0x78, 0x01};
  for (size_t at = 0; at < raw.size() || at == 0;) {
    size_t n = std::min<size_t>(65535, raw.size() - at);
    bool last = at + n == raw.size();
    zlib.push_back(last ? 1 : 0);
    zlib.push_back(uint8_t(n)), zlib.push_back(uint8_t(n >> 8));
    zlib.push_back(uint8_t(~n)), zlib.push_back(uint8_t(~n >> 8));
    zlib.insert(zlib.end(), raw.begin() + std::ptrdiff_t(at),
                raw.begin() + std::ptrdiff_t(at + n));
    at += n;
    if (last)
      break;
  }
  putU32BigEndian(zlib, adler32(raw));

  std::vector<uint8_t> png{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> header;
  putU32BigEndian(header, uint32_t(width));
  putU32BigEndian(header, uint32_t(height));
  header.insert(header.end(), {8, 2, 0, 0, 0}); // 8-bit RGB, no interlace
  putChunk(png, "IHDR", header);
  putChunk(png, "IDAT", zlib);
  putChunk(png, "IEND", {});

  std::string why;
  if (!ampc::writeOutputFile(path, {{png.data(), png.size()}}, {}, why)) {
    error = path + ": cannot write: " + why;
    return false;
  }
  return true;
}

bool writeTrainingPlot(const std::string &path,
                       const std::vector<double> &steps,
                       const std::vector<double> &loss,
                       const std::vector<double> &scale, std::string &error) {
  constexpr int kWidth = 900, kHeight = 680;
  constexpr int kLeft = 130, kRight = kWidth - 30;
  Canvas canvas(kWidth, kHeight);
  canvas.fill(0, 0, kWidth - 1, kHeight - 1, kWhite);
  drawPanel(canvas, kLeft, 40, kRight, 330, "loss", steps, loss,
            /*logAxis=*/false, kLoss);
  drawPanel(canvas, kLeft, 400, kRight, 600, "loss scale (log)", steps, scale,
            /*logAxis=*/true, kScale);
  canvas.text((kLeft + kRight - Canvas::textWidth("step")) / 2, 645, "step",
              kBlack);
  return writePng(path, kWidth, kHeight, canvas.pixels, error);
}

} // namespace ampc::train
