//===- Plot.h - training curves as a PNG for ampc-train ---------*- C++ -*-===//
//
// A self-contained plot: no gnuplot, no zlib, no font files. The PNG is
// written with stored (uncompressed) deflate blocks, CRC-32 and Adler-32.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TOOLS_AMPC_TRAIN_PLOT_H
#define AMPC_TOOLS_AMPC_TRAIN_PLOT_H

#include <cstdint>
#include <string>
#include <vector>

namespace ampc::train {

/// Writes `rgb` (width * height * 3 bytes, rows top to bottom) as an 8-bit
/// RGB PNG; false with `error` ("PATH: ...") on failure.
bool writePng(const std::string &path, int width, int height,
              const std::vector<uint8_t> &rgb, std::string &error);

/// Two panels against the global step: the loss of every step (linear axis)
/// and the loss scale (log2 axis), with tick labels. Non-finite values leave
/// gaps. `steps`, `loss` and `scale` have one entry per step.
bool writeTrainingPlot(const std::string &path,
                       const std::vector<double> &steps,
                       const std::vector<double> &loss,
                       const std::vector<double> &scale, std::string &error);

} // namespace ampc::train

#endif // AMPC_TOOLS_AMPC_TRAIN_PLOT_H
