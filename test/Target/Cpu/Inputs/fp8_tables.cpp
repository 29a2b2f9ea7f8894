//===- fp8_tables.cpp - Float8.h's conversions and recipe as tables ------===//
//
// Compiled by the FP8 lit tests (fp8-numerics.test, fp8-delayed-scaling.test)
// against include/ampc/Kernels/Common/Float8.h; fp8_reference.py compares
// what it prints with its NumPy reference. Values travel as FP32 bit
// patterns in hex, so nothing is lost in printing.
//
//   fp8_tables decode                  one line per code: CODE E4M3 E5M2
//   fp8_tables encode < values         one line per value (FP32 bits in):
//                                      E4M3-sat E4M3 E5M2-sat E5M2
//   fp8_tables recipe LENGTH MARGIN max|most_recent FORMAT < amaxes
//                                      one line per amax: SCALE SCALE_INV
//                                      HISTORY... (FORMAT e4m3|e5m2)
//
//===----------------------------------------------------------------------===//

#include "ampc/Kernels/Common/Float8.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace ampc::fp8;

int main(int argc, char **argv) {
  if (argc >= 2 && !std::strcmp(argv[1], "decode")) {
    for (unsigned code = 0; code < 256; ++code)
      std::printf("%02x %08x %08x\n", code,
                  bitsOf(decodeE4M3(static_cast<uint8_t>(code))),
                  bitsOf(decodeE5M2(static_cast<uint8_t>(code))));
    return 0;
  }
  if (argc >= 2 && !std::strcmp(argv[1], "encode")) {
    unsigned bits;
    while (std::scanf("%x", &bits) == 1) {
      const float v = fromBits(bits);
      std::printf("%02x %02x %02x %02x\n", encodeE4M3(v, true),
                  encodeE4M3(v, false), encodeE5M2(v, true),
                  encodeE5M2(v, false));
    }
    return 0;
  }
  if (argc == 6 && !std::strcmp(argv[1], "recipe")) {
    std::vector<float> history(std::strtoul(argv[2], nullptr, 10), 0.0f);
    const int margin = std::atoi(argv[3]);
    const AmaxAlgo algo =
        !std::strcmp(argv[4], "max") ? AmaxAlgo::Max : AmaxAlgo::MostRecent;
    const float fp8Max =
        !std::strcmp(argv[5], "e4m3") ? e4m3().maxValue : e5m2().maxValue;
    ScalingState state{history.data(), static_cast<int64_t>(history.size()),
                       1.0f, 1.0f};
    unsigned bits;
    while (std::scanf("%x", &bits) == 1) {
      updateDelayedScaling(state, fromBits(bits), fp8Max, margin, algo);
      std::printf("%08x %08x", bitsOf(state.scale), bitsOf(state.scaleInv));
      for (float h : history)
        std::printf(" %08x", bitsOf(h));
      std::printf("\n");
    }
    return 0;
  }
  std::fprintf(stderr, "usage: fp8_tables decode | encode | recipe LENGTH "
                       "MARGIN max|most_recent e4m3|e5m2\n");
  return 1;
}
