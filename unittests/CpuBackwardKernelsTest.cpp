//===- CpuBackwardKernelsTest.cpp - backward CPU kernels vs naive loops ---===//
//
// Each kernel of include/ampc/Kernels/Cpu/CpuBackwardKernels.h against a
// hand-computed tiny case and against a naive loop reference written here
// in double (straight from the op definitions in AMPCGradOps.td) on small
// random shapes and attribute combinations. The adjoint kernels are also
// checked against the forward kernels of CpuKernels.h (the inner-product
// identity <f(x), g> = <x, f'ᵀ(g)> for the linear ops, central differences
// for the normalisations), and the 16-bit paths against the FP32 path
// rounded once when stored.
//
//===----------------------------------------------------------------------===//

#include "ampc/Kernels/Cpu/CpuBackwardKernels.h"
#include "ampc/Kernels/Cpu/CpuTrainKernels.h"

#include <gtest/gtest.h>

#include <map>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace ampc::cpu;

namespace {

/// The scratch the kernels take (a block of the memory plan's arena in a
/// library): ample for the small shapes of these tests, one buffer per
/// slot index so that two slots of one call never alias.
int64_t *scratchIndices(int slot) {
  static std::vector<int64_t> buffers[2] = {std::vector<int64_t>(1 << 16),
                                            std::vector<int64_t>(1 << 16)};
  return buffers[slot].data();
}
template <typename T>
T *scratchValues(int slot) {
  static std::vector<T> buffers[2] = {std::vector<T>(1 << 16),
                                      std::vector<T>(1 << 16)};
  return buffers[slot].data();
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

using Dims = std::vector<int64_t>;

int64_t product(const Dims &dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

/// One spatial output size as the dialect's shape rule computes it.
int64_t outputSize(int64_t in, int64_t kernel, int64_t stride,
                   int64_t padBegin, int64_t padEnd, int64_t dilation,
                   bool ceilMode) {
  const int64_t span = (kernel - 1) * dilation + 1;
  const int64_t numerator = in + padBegin + padEnd - span;
  if (numerator < 0)
    return 0;
  int64_t out = (ceilMode ? (numerator + stride - 1) / stride
                          : numerator / stride) +
                1;
  if (ceilMode && (out - 1) * stride >= in + padBegin)
    --out;
  return out;
}

/// A Window; empty strides/pads/dilations mean 1/0/1.
Window makeWindow(const Dims &in, const Dims &kernel, Dims stride = {},
                  Dims padBegin = {}, Dims padEnd = {}, Dims dilation = {},
                  bool ceilMode = false) {
  const size_t rank = in.size();
  if (stride.empty())
    stride.assign(rank, 1);
  if (padBegin.empty())
    padBegin.assign(rank, 0);
  if (padEnd.empty())
    padEnd.assign(rank, 0);
  if (dilation.empty())
    dilation.assign(rank, 1);
  Window w{};
  w.rank = static_cast<int>(rank);
  for (size_t d = 0; d < rank; ++d) {
    w.in[d] = in[d];
    w.kernel[d] = kernel[d];
    w.stride[d] = stride[d];
    w.padBegin[d] = padBegin[d];
    w.padEnd[d] = padEnd[d];
    w.dilation[d] = dilation[d];
    w.out[d] = outputSize(in[d], kernel[d], stride[d], padBegin[d], padEnd[d],
                          dilation[d], ceilMode);
  }
  return w;
}

/// Row-major multi-index of `flat` over `rank` dimensions `dims`.
void unravel(int64_t flat, int rank, const int64_t *dims, int64_t *index) {
  for (int d = rank - 1; d >= 0; --d) {
    index[d] = flat % dims[d];
    flat /= dims[d];
  }
}

enum Where { Inside, InPadding, BeyondPadding };

/// Where kernel position `k` of output position `o` (both flat, row-major)
/// reads, straight from i[d] = o[d]·stride − padBegin + k[d]·dilation;
/// `flat` receives the row-major input offset when it is inside.
Where classify(const Window &w, int64_t o, int64_t k, int64_t &flat) {
  int64_t oi[8], ki[8];
  unravel(o, w.rank, w.out, oi);
  unravel(k, w.rank, w.kernel, ki);
  bool inside = true, padded = true;
  flat = 0;
  for (int d = 0; d < w.rank; ++d) {
    const int64_t i = oi[d] * w.stride[d] - w.padBegin[d] + ki[d] * w.dilation[d];
    inside = inside && i >= 0 && i < w.in[d];
    padded = padded && i >= -w.padBegin[d] && i < w.in[d] + w.padEnd[d];
    flat = flat * w.in[d] + i;
  }
  return inside ? Inside : padded ? InPadding : BeyondPadding;
}

template <typename T> std::vector<T> randomVector(std::mt19937 &rng, size_t n,
                                                  double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(n);
  for (auto &x : v)
    x = static_cast<T>(dist(rng));
  return v;
}

std::vector<uint16_t> randomF16(std::mt19937 &rng, size_t n, double lo = -2,
                                double hi = 2) {
  std::vector<uint16_t> v(n);
  std::uniform_real_distribution<float> dist(static_cast<float>(lo),
                                             static_cast<float>(hi));
  for (auto &x : v)
    x = storeF16(dist(rng));
  return v;
}

std::vector<uint16_t> randomBf16(std::mt19937 &rng, size_t n) {
  std::vector<uint16_t> v(n);
  std::uniform_real_distribution<float> dist(-2, 2);
  for (auto &x : v)
    x = storeBf16(dist(rng));
  return v;
}

template <typename T, typename Load>
std::vector<float> widened(const std::vector<T> &v, Load load) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = load(v[i]);
  return out;
}

/// got[i] within tol·(1 + |ref[i]|) of ref[i] for every i (and same size).
template <typename T>
::testing::AssertionResult allClose(const std::vector<T> &got,
                                    const std::vector<double> &ref,
                                    double tol) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure()
           << "size " << got.size() << " != " << ref.size();
  int bad = 0;
  std::ostringstream os;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = static_cast<double>(got[i]);
    if (!(std::fabs(g - ref[i]) <= tol * (1 + std::fabs(ref[i])))) {
      if (bad < 5)
        os << " [" << i << "] got " << g << " want " << ref[i] << ";";
      ++bad;
    }
  }
  if (bad)
    return ::testing::AssertionFailure() << bad << " mismatches:" << os.str();
  return ::testing::AssertionSuccess();
}

/// The 16-bit result is the FP32 result rounded once: bit equality.
template <typename Store>
::testing::AssertionResult roundedOnce(const std::vector<uint16_t> &got,
                                       const std::vector<float> &wide,
                                       Store store) {
  if (got.size() != wide.size())
    return ::testing::AssertionFailure() << "size mismatch";
  int bad = 0;
  std::ostringstream os;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != store(wide[i])) {
      if (bad < 5)
        os << " [" << i << "] got 0x" << std::hex << got[i] << " want 0x"
           << store(wide[i]) << std::dec << " (" << wide[i] << ");";
      ++bad;
    }
  if (bad)
    return ::testing::AssertionFailure() << bad << " mismatches:" << os.str();
  return ::testing::AssertionSuccess();
}

template <typename A, typename B> double dot(const A &a, const B &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return s;
}

template <typename T> std::vector<double> toDouble(const std::vector<T> &v) {
  return std::vector<double>(v.begin(), v.end());
}

template <typename T> constexpr double tolerance() {
  return std::is_same_v<T, double> ? 1e-11 : 2e-5;
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

struct ConvCase {
  int64_t n, c, m, group;
  Dims in, kernel, stride, padBegin, padEnd, dilation;
};

std::vector<ConvCase> convCases() {
  return {
      {2, 3, 4, 1, {7}, {3}, {2}, {1}, {0}, {1}},
      {2, 4, 6, 2, {6, 5}, {3, 2}, {1, 2}, {1, 0}, {2, 1}, {2, 1}},
      {2, 3, 5, 1, {4, 3}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}}, // direct
      {1, 2, 2, 2, {4, 5, 3}, {2, 3, 1}, {2, 1, 1}, {0, 1, 0}, {1, 1, 0},
       {1, 2, 1}},
      {3, 4, 8, 4, {5, 5}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}}, // depthwise
      {1, 3, 2, 1, {5, 4}, {1, 1}, {2, 2}, {0, 0}, {0, 0}, {1, 1}},
      {2, 2, 3, 1, {7}, {2}, {3}, {0}, {0}, {1}}, // positions nobody reads
      {1, 6, 6, 3, {3, 4}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {1, 2}},
      // 1x1, stride 1, no begin padding, but end padding: not the identity.
      {2, 2, 3, 1, {3, 4}, {1, 1}, {1, 1}, {0, 0}, {1, 0}, {1, 1}},
  };
}

Window convWindow(const ConvCase &cc) {
  return makeWindow(cc.in, cc.kernel, cc.stride, cc.padBegin, cc.padEnd,
                    cc.dilation);
}

template <typename T>
std::vector<double> convDataReference(const std::vector<T> &grad,
                                      const std::vector<T> &weight,
                                      const ConvCase &cc, const Window &w) {
  const int64_t inSize = w.inSize(), outSize = w.outSize(),
                kernelSize = w.kernelSize();
  const int64_t cg = cc.c / cc.group, mg = cc.m / cc.group;
  std::vector<double> dx(static_cast<size_t>(cc.n * cc.c * inSize), 0.0);
  for (int64_t b = 0; b < cc.n; ++b)
    for (int64_t f = 0; f < cc.m; ++f)
      for (int64_t o = 0; o < outSize; ++o)
        for (int64_t ci = 0; ci < cg; ++ci)
          for (int64_t k = 0; k < kernelSize; ++k) {
            int64_t i;
            if (classify(w, o, k, i) != Inside)
              continue;
            const int64_t g = f / mg;
            dx[(b * cc.c + g * cg + ci) * inSize + i] +=
                double(grad[(b * cc.m + f) * outSize + o]) *
                double(weight[(f * cg + ci) * kernelSize + k]);
          }
  return dx;
}

template <typename T>
std::vector<double> convWeightReference(const std::vector<T> &x,
                                        const std::vector<T> &grad,
                                        const ConvCase &cc, const Window &w) {
  const int64_t inSize = w.inSize(), outSize = w.outSize(),
                kernelSize = w.kernelSize();
  const int64_t cg = cc.c / cc.group, mg = cc.m / cc.group;
  std::vector<double> dw(static_cast<size_t>(cc.m * cg * kernelSize), 0.0);
  for (int64_t f = 0; f < cc.m; ++f)
    for (int64_t ci = 0; ci < cg; ++ci)
      for (int64_t k = 0; k < kernelSize; ++k)
        for (int64_t b = 0; b < cc.n; ++b)
          for (int64_t o = 0; o < outSize; ++o) {
            int64_t i;
            if (classify(w, o, k, i) != Inside)
              continue;
            const int64_t g = f / mg;
            dw[(f * cg + ci) * kernelSize + k] +=
                double(grad[(b * cc.m + f) * outSize + o]) *
                double(x[(b * cc.c + g * cg + ci) * inSize + i]);
          }
  return dw;
}

TEST(ConvBackwardDataTest, HandComputed) {
  // 1-D, kernel 2: dx[i] = Σ_o grad[o]·w[i − o].
  {
    const Window w = makeWindow({3}, {2});
    ASSERT_EQ(w.out[0], 2);
    const float grad[] = {1, 2}, weight[] = {3, 4};
    float dx[3] = {-7, -7, -7};
    convBackwardData<float>(grad, weight, dx, 1, 1, 1, 1, w, 1, scratchValues<float>(0), scratchValues<float>(1));
    EXPECT_EQ(dx[0], 3);
    EXPECT_EQ(dx[1], 10);
    EXPECT_EQ(dx[2], 8);
  }
  // Kernel 3, stride 2, pads 1/1 over 5 inputs: windows at -1, 1, 3.
  {
    const Window w = makeWindow({5}, {3}, {2}, {1}, {1});
    ASSERT_EQ(w.out[0], 3);
    const double grad[] = {1, 2, 3}, weight[] = {1, 10, 100};
    double dx[5] = {-7, -7, -7, -7, -7};
    convBackwardData<double>(grad, weight, dx, 1, 1, 1, 1, w, 1, scratchValues<double>(0), scratchValues<double>(1));
    const double want[] = {10, 102, 20, 203, 30};
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ(dx[i], want[i]) << i;
  }
  // Stride 3 > kernel 2: input 2 and 5 are read by no window and get 0.
  {
    const Window w = makeWindow({6}, {2}, {3});
    ASSERT_EQ(w.out[0], 2);
    const float grad[] = {1, 2}, weight[] = {5, 7};
    float dx[6] = {9, 9, 9, 9, 9, 9};
    convBackwardData<float>(grad, weight, dx, 1, 1, 1, 1, w, 1, scratchValues<float>(0), scratchValues<float>(1));
    const float want[] = {5, 7, 0, 10, 14, 0};
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(dx[i], want[i]) << i;
  }
}

template <typename T> void checkConvBackwardDataRandom() {
  std::mt19937 rng(1234);
  for (const ConvCase &cc : convCases()) {
    SCOPED_TRACE(testing::Message() << "case with c=" << cc.c << " m=" << cc.m
                                    << " group=" << cc.group << " rank="
                                    << cc.in.size());
    const Window w = convWindow(cc);
    ASSERT_GT(w.outSize(), 0);
    const int64_t cg = cc.c / cc.group;
    auto grad = randomVector<T>(rng, cc.n * cc.m * w.outSize());
    auto weight = randomVector<T>(rng, cc.m * cg * w.kernelSize());
    std::vector<T> dx(cc.n * cc.c * w.inSize(), T(123));
    convBackwardData<T>(grad.data(), weight.data(), dx.data(), cc.n, cc.c,
                        cc.m, cc.group, w, 1, scratchValues<T>(0),
                        scratchValues<T>(1));
    EXPECT_TRUE(allClose(dx, convDataReference(grad, weight, cc, w),
                         tolerance<T>()));
    // Adjoint of the forward conv: <conv(x, W), grad> = <x, dx>.
    auto x = randomVector<T>(rng, cc.n * cc.c * w.inSize());
    std::vector<T> y(grad.size());
    conv<T>(x.data(), weight.data(), nullptr, y.data(), cc.n, cc.c, cc.m,
            cc.group, w, 1, scratchValues<T>(0), scratchValues<T>(1));
    EXPECT_NEAR(dot(y, grad), dot(x, dx), 100 * tolerance<T>());
  }
}

TEST(ConvBackwardDataTest, RandomFloat) { checkConvBackwardDataRandom<float>(); }
TEST(ConvBackwardDataTest, RandomDouble) {
  checkConvBackwardDataRandom<double>();
}

TEST(ConvBackwardWeightTest, HandComputed) {
  // dW[k] = Σ_{b,o} grad[b, o]·x[b, o + k], accumulated over two images.
  const Window w = makeWindow({3}, {2});
  const float x[] = {1, 2, 3, 1, 1, 1}, grad[] = {1, 2, 1, 1};
  float dw[2] = {-9, -9};
  convBackwardWeight<float>(x, grad, dw, 2, 1, 1, 1, w, scratchValues<float>(0));
  EXPECT_EQ(dw[0], 5 + 2);
  EXPECT_EQ(dw[1], 8 + 2);
  // Padding contributes nothing: pads 1/1, kernel 3 over 2 inputs.
  const Window p = makeWindow({2}, {3}, {1}, {1}, {1});
  ASSERT_EQ(p.out[0], 2);
  const double xp[] = {10, 100}, gp[] = {1, 2};
  double dwp[3] = {-9, -9, -9};
  convBackwardWeight<double>(xp, gp, dwp, 1, 1, 1, 1, p, scratchValues<double>(0));
  EXPECT_EQ(dwp[0], 2 * 10);         // o=1 reads x[0] at k=0
  EXPECT_EQ(dwp[1], 10 + 2 * 100);   // k=1 reads x[o]
  EXPECT_EQ(dwp[2], 100);            // o=0 reads x[1] at k=2
  // No images: zeros.
  float none[2] = {5, 5};
  convBackwardWeight<float>(x, grad, none, 0, 1, 1, 1, w, scratchValues<float>(0));
  EXPECT_EQ(none[0], 0);
  EXPECT_EQ(none[1], 0);
}

template <typename T> void checkConvBackwardWeightRandom() {
  std::mt19937 rng(99);
  for (const ConvCase &cc : convCases()) {
    SCOPED_TRACE(testing::Message() << "case with c=" << cc.c << " m=" << cc.m
                                    << " group=" << cc.group << " rank="
                                    << cc.in.size());
    const Window w = convWindow(cc);
    const int64_t cg = cc.c / cc.group;
    auto x = randomVector<T>(rng, cc.n * cc.c * w.inSize());
    auto grad = randomVector<T>(rng, cc.n * cc.m * w.outSize());
    std::vector<T> dw(cc.m * cg * w.kernelSize(), T(55));
    convBackwardWeight<T>(x.data(), grad.data(), dw.data(), cc.n, cc.c, cc.m,
                          cc.group, w, scratchValues<T>(0));
    EXPECT_TRUE(
        allClose(dw, convWeightReference(x, grad, cc, w), tolerance<T>()));
    // Adjoint of the forward conv in W: <conv(x, W), grad> = <W, dW>.
    auto weight = randomVector<T>(rng, dw.size());
    std::vector<T> y(grad.size());
    conv<T>(x.data(), weight.data(), nullptr, y.data(), cc.n, cc.c, cc.m,
            cc.group, w, 1, scratchValues<T>(0), scratchValues<T>(1));
    EXPECT_NEAR(dot(y, grad), dot(weight, dw), 100 * tolerance<T>());
  }
}

TEST(ConvBackwardWeightTest, RandomFloat) {
  checkConvBackwardWeightRandom<float>();
}
TEST(ConvBackwardWeightTest, RandomDouble) {
  checkConvBackwardWeightRandom<double>();
}

/// conv's forward by definition, in double: y[b, f, o] = bias[f] +
/// Σ weight[f, ci, k] · x[b, g·Cg + ci, i] over the window's inside.
template <typename T>
std::vector<double> convReference(const std::vector<T> &x,
                                  const std::vector<T> &weight,
                                  const std::vector<T> &bias,
                                  const ConvCase &cc, const Window &w) {
  const int64_t inSize = w.inSize(), outSize = w.outSize(),
                kernelSize = w.kernelSize();
  const int64_t cg = cc.c / cc.group, mg = cc.m / cc.group;
  std::vector<double> y(static_cast<size_t>(cc.n * cc.m * outSize));
  for (int64_t b = 0; b < cc.n; ++b)
    for (int64_t f = 0; f < cc.m; ++f)
      for (int64_t o = 0; o < outSize; ++o) {
        double sum = bias[f];
        for (int64_t ci = 0; ci < cg; ++ci)
          for (int64_t k = 0; k < kernelSize; ++k) {
            int64_t i;
            if (classify(w, o, k, i) == Inside)
              sum += double(weight[(f * cg + ci) * kernelSize + k]) *
                     double(x[(b * cc.c + f / mg * cg + ci) * inSize + i]);
          }
        y[(b * cc.m + f) * outSize + o] = sum;
      }
  return y;
}

// conv and conv_backward_data with 1, 2 and 3 images per GEMM (the last
// chunk short where n is not a multiple; cpuConvImagesPerGemm picks the
// count in a library): the row-by-row im2col and col2im against the
// definitions, the chunk's columns, product and grad side by side, direct
// windows copied when more than one image shares a GEMM. Each count is
// checked against the definitions, not against the others' bits: OpenBLAS's
// edge kernels sum an element's K terms in another order than its main
// kernel, so an image's columns moved within a wider GEMM may round
// differently (docs/design.md, "OpenBLAS's kernel set").
template <typename T> void checkConvChunksOfImages() {
  std::mt19937 rng(4321);
  for (const ConvCase &cc : convCases()) {
    SCOPED_TRACE(testing::Message() << "case with n=" << cc.n << " c=" << cc.c
                                    << " m=" << cc.m << " group=" << cc.group
                                    << " rank=" << cc.in.size());
    const Window w = convWindow(cc);
    const int64_t cg = cc.c / cc.group;
    auto x = randomVector<T>(rng, cc.n * cc.c * w.inSize());
    auto weight = randomVector<T>(rng, cc.m * cg * w.kernelSize());
    auto bias = randomVector<T>(rng, cc.m);
    auto grad = randomVector<T>(rng, cc.n * cc.m * w.outSize());
    const std::vector<double> wantY = convReference(x, weight, bias, cc, w);
    const std::vector<double> wantDx = convDataReference(grad, weight, cc, w);
    for (int64_t images : {1, 2, 3}) {
      SCOPED_TRACE(testing::Message() << images << " images per GEMM");
      std::vector<T> y(cc.n * cc.m * w.outSize(), T(77));
      std::vector<T> dx(cc.n * cc.c * w.inSize(), T(123));
      conv<T>(x.data(), weight.data(), bias.data(), y.data(), cc.n, cc.c,
              cc.m, cc.group, w, images, scratchValues<T>(0),
              scratchValues<T>(1));
      convBackwardData<T>(grad.data(), weight.data(), dx.data(), cc.n, cc.c,
                          cc.m, cc.group, w, images, scratchValues<T>(0),
                          scratchValues<T>(1));
      EXPECT_TRUE(allClose(y, wantY, tolerance<T>()));
      EXPECT_TRUE(allClose(dx, wantDx, tolerance<T>()));
    }
  }
}

TEST(ConvTest, ChunksOfImagesFloat) { checkConvChunksOfImages<float>(); }
TEST(ConvTest, ChunksOfImagesDouble) { checkConvChunksOfImages<double>(); }

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

struct PoolCase {
  Dims in, kernel, stride, padBegin, padEnd, dilation;
  bool ceilMode;
};

std::vector<PoolCase> poolCases() {
  return {
      {{8}, {3}, {2}, {1}, {1}, {1}, false},
      {{7}, {2}, {2}, {0}, {0}, {1}, true}, // ceil: last window half outside
      {{6, 5}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, false},
      {{6, 5}, {2, 3}, {1, 2}, {0, 1}, {1, 0}, {2, 1}, true},
      {{5, 6}, {3, 2}, {2, 3}, {1, 0}, {0, 0}, {1, 1}, true},
      {{4, 3, 5}, {2, 2, 3}, {2, 1, 2}, {1, 0, 1}, {0, 1, 1}, {1, 1, 1}, true},
      {{5, 5}, {5, 5}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, false}, // global
      {{9, 4}, {3, 2}, {1, 1}, {2, 1}, {2, 1}, {3, 1}, false},
  };
}

Window poolWindow(const PoolCase &pc) {
  return makeWindow(pc.in, pc.kernel, pc.stride, pc.padBegin, pc.padEnd,
                    pc.dilation, pc.ceilMode);
}

/// Column-major (first spatial dimension fastest) offset of row-major
/// `offset` over the spatial dims of `w`.
int64_t columnMajorOffset(const Window &w, int64_t offset) {
  int64_t index[8];
  unravel(offset, w.rank, w.in, index);
  int64_t c = 0;
  for (int d = w.rank - 1; d >= 0; --d)
    c = c * w.in[d] + index[d];
  return c;
}

TEST(MaxPoolGradTest, HandComputed) {
  // x = [1, 3, 2, 0], kernel 2: windows choose inputs 1, 1, 2.
  const Window w = makeWindow({4}, {2});
  const float grad[] = {1, 2, 4};
  const int64_t indices[] = {1, 1, 2};
  float dx[4] = {9, 9, 9, 9};
  maxPoolGrad<float, As<float>, As<float>>(grad, indices, dx, 1, w, false, scratchValues<float>(0));
  const float want[] = {0, 3, 4, 0};
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(dx[i], want[i]) << i;
  // -1 (a window wholly in the padding) adds nothing.
  const int64_t withHole[] = {1, -1, 2};
  maxPoolGrad<float, As<float>, As<float>>(grad, withHole, dx, 1, w, false, scratchValues<float>(0));
  const float want2[] = {0, 1, 4, 0};
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(dx[i], want2[i]) << i;
}

TEST(MaxPoolGradTest, ColumnMajorIndicesHandComputed) {
  // Two planes of 2 x 3; kernel 1x1 so that there are six gradients per
  // plane. Column-major offset 1 is (row 1, col 0) = row-major 3; offset 2
  // is (row 0, col 1) = row-major 1.
  const Window w = makeWindow({2, 3}, {1, 1});
  std::vector<double> grad(12, 0.0);
  std::vector<int64_t> indices(12, -1);
  grad[0] = 1;
  indices[0] = 1; // plane 0, column-major 1
  grad[1] = 10;
  indices[1] = 2; // plane 0, column-major 2
  grad[7] = 100;
  indices[7] = 6 + 1; // plane 1, column-major 1
  std::vector<double> dx(12, -1);
  maxPoolGrad<double, As<double>, As<double>>(grad.data(), indices.data(), dx.data(), 2, w, true, scratchValues<double>(0));
  std::vector<double> want(12, 0.0);
  want[3] = 1;
  want[1] = 10;
  want[6 + 3] = 100;
  EXPECT_EQ(dx, want);
}

template <typename T> void checkMaxPoolGradRandomIndices(bool columnMajor) {
  // Arbitrary (repeated, -1) indices: the kernel must add each gradient at
  // the row-major position its index names.
  std::mt19937 rng(columnMajor ? 7 : 8);
  for (const PoolCase &pc : poolCases()) {
    const Window w = poolWindow(pc);
    const int64_t planes = 3, inSize = w.inSize(), outSize = w.outSize();
    auto grad = randomVector<T>(rng, planes * outSize);
    std::vector<int64_t> indices(grad.size());
    std::vector<double> want(planes * inSize, 0.0);
    std::uniform_int_distribution<int64_t> plane(0, planes - 1),
        offset(0, std::min<int64_t>(inSize - 1, 3)), hole(0, 5);
    for (size_t p = 0; p < grad.size(); ++p) {
      if (hole(rng) == 0) {
        indices[p] = -1;
        continue;
      }
      const int64_t q = plane(rng), o = offset(rng); // few targets: repeats
      indices[p] = q * inSize + (columnMajor ? columnMajorOffset(w, o) : o);
      want[q * inSize + o] += double(grad[p]);
    }
    std::vector<T> dx(want.size(), T(-5));
    maxPoolGrad<T, As<T>, As<T>>(grad.data(), indices.data(), dx.data(),
                                 planes, w, columnMajor, scratchValues<T>(0));
    EXPECT_TRUE(allClose(dx, want, tolerance<T>()));
  }
}

TEST(MaxPoolGradTest, RandomIndicesRowMajorFloat) {
  checkMaxPoolGradRandomIndices<float>(false);
}
TEST(MaxPoolGradTest, RandomIndicesColumnMajorFloat) {
  checkMaxPoolGradRandomIndices<float>(true);
}
TEST(MaxPoolGradTest, RandomIndicesDouble) {
  checkMaxPoolGradRandomIndices<double>(false);
  checkMaxPoolGradRandomIndices<double>(true);
}

TEST(MaxPoolGradTest, RoutesThroughForwardMaxPoolIndices) {
  // The forward maxPool's Indices (either storage order) route each
  // gradient to the naive argmax of its window.
  std::mt19937 rng(21);
  for (bool columnMajor : {false, true})
    for (const PoolCase &pc : poolCases()) {
      const Window w = poolWindow(pc);
      const int64_t planes = 2, inSize = w.inSize(), outSize = w.outSize(),
                    kernelSize = w.kernelSize();
      auto x = randomVector<float>(rng, planes * inSize);
      auto grad = randomVector<float>(rng, planes * outSize);
      std::vector<float> y(grad.size());
      std::vector<int64_t> indices(grad.size());
      maxPool<float, As<float>, As<float>>(x.data(), y.data(), indices.data(), planes, w,
                     columnMajor, scratchIndices(0), scratchIndices(1));
      std::vector<double> want(planes * inSize, 0.0);
      for (int64_t q = 0; q < planes; ++q)
        for (int64_t o = 0; o < outSize; ++o) {
          int64_t best = -1;
          for (int64_t k = 0; k < kernelSize; ++k) {
            int64_t i;
            if (classify(w, o, k, i) == Inside &&
                (best < 0 || x[q * inSize + i] > x[q * inSize + best]))
              best = i;
          }
          if (best >= 0)
            want[q * inSize + best] += grad[q * outSize + o];
        }
      std::vector<float> dx(want.size());
      maxPoolGrad<float, As<float>, As<float>>(grad.data(), indices.data(), dx.data(), planes, w,
                         columnMajor, scratchValues<float>(0));
      EXPECT_TRUE(allClose(dx, want, 1e-6)) << "columnMajor " << columnMajor;
    }
}

TEST(MaxPoolGradTest, F16RoundsOnceAtTheEnd) {
  // 1 + 4 · 2^-12 = 1 + 2^-10 is an f16 value, but each 2^-12 alone is a
  // quarter of an ulp of 1: rounding after every addition would stay at 1.
  const Window w = makeWindow({5}, {1});
  const uint16_t one = storeF16(1.0f), small = storeF16(std::ldexp(1.0f, -12));
  ASSERT_EQ(loadF16(small), std::ldexp(1.0f, -12));
  const uint16_t grad[] = {one, small, small, small, small};
  const int64_t indices[] = {3, 3, 3, 3, 3};
  uint16_t dx[5] = {1, 1, 1, 1, 1};
  maxPoolGrad<float, AsF16, AsF16>(grad, indices, dx, 1, w, false, scratchValues<float>(0));
  EXPECT_EQ(dx[3], storeF16(1.0f + std::ldexp(1.0f, -10)));
  EXPECT_EQ(dx[3], 0x3C01u);
  EXPECT_EQ(dx[0], 0u);
  EXPECT_EQ(dx[4], 0u);

  // Random: the f16 result is the FP32 result on the widened data, rounded.
  std::mt19937 rng(5);
  for (const PoolCase &pc : poolCases()) {
    const Window pw = poolWindow(pc);
    const int64_t planes = 2;
    auto x = randomF16(rng, planes * pw.inSize());
    std::vector<uint16_t> y(planes * pw.outSize());
    std::vector<int64_t> idx(y.size());
    maxPool<float, AsF16, AsF16>(x.data(), y.data(), idx.data(), planes, pw, false, scratchIndices(0), scratchIndices(1));
    auto g = randomF16(rng, y.size());
    std::vector<uint16_t> dx16(x.size());
    maxPoolGrad<float, AsF16, AsF16>(g.data(), idx.data(), dx16.data(), planes, pw, false, scratchValues<float>(0));
    auto gw = widened(g, loadF16);
    std::vector<float> dx32(x.size());
    maxPoolGrad<float, As<float>, As<float>>(gw.data(), idx.data(), dx32.data(), planes, pw, false, scratchValues<float>(0));
    EXPECT_TRUE(roundedOnce(dx16, dx32, storeF16));
  }
}

/// Average pool adjoint straight from the op definition.
template <typename T>
std::vector<double> averagePoolGradReference(const std::vector<T> &grad,
                                             int64_t planes, const Window &w,
                                             bool countIncludePad) {
  const int64_t inSize = w.inSize(), outSize = w.outSize(),
                kernelSize = w.kernelSize();
  std::vector<double> dx(planes * inSize, 0.0);
  for (int64_t q = 0; q < planes; ++q)
    for (int64_t o = 0; o < outSize; ++o) {
      int64_t count = 0, i;
      for (int64_t k = 0; k < kernelSize; ++k) {
        const Where where = classify(w, o, k, i);
        count += where == Inside || (countIncludePad && where == InPadding);
      }
      for (int64_t k = 0; k < kernelSize; ++k)
        if (classify(w, o, k, i) == Inside)
          dx[q * inSize + i] += double(grad[q * outSize + o]) / double(count);
    }
  return dx;
}

TEST(AveragePoolGradTest, HandComputed) {
  // 3 inputs, kernel 2, pads 1/1: windows {-1,0} {0,1} {1,2} {2,3}.
  const Window w = makeWindow({3}, {2}, {1}, {1}, {1});
  ASSERT_EQ(w.out[0], 4);
  const float grad[] = {1, 2, 4, 8};
  float dx[3];
  averagePoolGrad<float, As<float>, As<float>>(grad, dx, 1, w, false, scratchIndices(0), scratchIndices(1), scratchValues<float>(0));
  EXPECT_EQ(dx[0], 1 / 1.f + 2 / 2.f);
  EXPECT_EQ(dx[1], 2 / 2.f + 4 / 2.f);
  EXPECT_EQ(dx[2], 4 / 2.f + 8 / 1.f);
  averagePoolGrad<float, As<float>, As<float>>(grad, dx, 1, w, true, scratchIndices(0), scratchIndices(1), scratchValues<float>(0));
  EXPECT_EQ(dx[0], 0.5f + 1);
  EXPECT_EQ(dx[1], 1.f + 2);
  EXPECT_EQ(dx[2], 2.f + 4);
}

TEST(AveragePoolGradTest, CeilModePositionsNeverCount) {
  // 5 inputs, kernel 2, stride 2, ceil_mode: the third window reads input 4
  // and position 5, which lies beyond the (empty) end padding: divisor 1
  // even with count_include_pad.
  const Window w = makeWindow({5}, {2}, {2}, {0}, {0}, {1}, true);
  ASSERT_EQ(w.out[0], 3);
  const double grad[] = {2, 4, 6};
  for (bool includePad : {false, true}) {
    double dx[5];
    averagePoolGrad<double, As<double>, As<double>>(grad, dx, 1, w, includePad, scratchIndices(0), scratchIndices(1), scratchValues<double>(0));
    const double want[] = {1, 1, 2, 2, 6};
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ(dx[i], want[i]) << i << " includePad " << includePad;
  }
  // With an end pad of 1 position 5 is padding: it counts with
  // count_include_pad.
  const Window p = makeWindow({5}, {2}, {2}, {0}, {1}, {1}, true);
  ASSERT_EQ(p.out[0], 3);
  double dx[5];
  averagePoolGrad<double, As<double>, As<double>>(grad, dx, 1, p, true, scratchIndices(0), scratchIndices(1), scratchValues<double>(0));
  EXPECT_EQ(dx[4], 3);
  averagePoolGrad<double, As<double>, As<double>>(grad, dx, 1, p, false, scratchIndices(0), scratchIndices(1), scratchValues<double>(0));
  EXPECT_EQ(dx[4], 6);
}

template <typename T> void checkAveragePoolGradRandom() {
  std::mt19937 rng(77);
  for (bool includePad : {false, true})
    for (const PoolCase &pc : poolCases()) {
      const Window w = poolWindow(pc);
      const int64_t planes = 3;
      auto grad = randomVector<T>(rng, planes * w.outSize());
      std::vector<T> dx(planes * w.inSize(), T(-3));
      averagePoolGrad<T, As<T>, As<T>>(grad.data(), dx.data(), planes, w, includePad, scratchIndices(0), scratchIndices(1), scratchValues<T>(0));
      EXPECT_TRUE(allClose(dx,
                           averagePoolGradReference(grad, planes, w, includePad),
                           tolerance<T>()))
          << "includePad " << includePad;
      // The divisor is the forward's: <averagePool(x), grad> = <x, dx>.
      auto x = randomVector<T>(rng, dx.size());
      std::vector<T> y(grad.size());
      averagePool<T, As<T>, As<T>>(x.data(), y.data(), planes, w, includePad, scratchIndices(0));
      EXPECT_NEAR(dot(y, grad), dot(x, dx), 10 * tolerance<T>());
    }
}

TEST(AveragePoolGradTest, RandomFloat) { checkAveragePoolGradRandom<float>(); }
TEST(AveragePoolGradTest, RandomDouble) {
  checkAveragePoolGradRandom<double>();
}

TEST(AveragePoolGradTest, F16RoundsOnceAtTheEnd) {
  // Kernel 3, stride 1, pads 2/2 over 5 inputs: window o reads o-2..o, so
  // input 2 is read by windows 2, 3 and 4, each with divisor 3 (with
  // count_include_pad). Their shares 1 + 2^-11 + 2^-11 sum to the f16 value
  // 1 + 2^-10, but rounding after each addition (a tie, to even) would stay
  // at 1.
  const Window w = makeWindow({5}, {3}, {1}, {2}, {2});
  ASSERT_EQ(w.out[0], 7);
  const uint16_t one = storeF16(3.0f), small = storeF16(std::ldexp(3.0f, -11));
  const uint16_t grad[] = {0, 0, one, small, small, small, small};
  uint16_t dx[5];
  averagePoolGrad<float, AsF16, AsF16>(grad, dx, 1, w, true, scratchIndices(0), scratchIndices(1), scratchValues<float>(0));
  const float exact = 1.0f + 2 * std::ldexp(1.0f, -11);
  EXPECT_EQ(dx[2], storeF16(exact));
  EXPECT_EQ(dx[2], 0x3C01u);

  std::mt19937 rng(6);
  for (bool includePad : {false, true})
    for (const PoolCase &pc : poolCases()) {
      const Window pw = poolWindow(pc);
      const int64_t planes = 2;
      auto g = randomF16(rng, planes * pw.outSize());
      std::vector<uint16_t> dx16(planes * pw.inSize());
      averagePoolGrad<float, AsF16, AsF16>(g.data(), dx16.data(), planes, pw, includePad, scratchIndices(0), scratchIndices(1), scratchValues<float>(0));
      auto gw = widened(g, loadF16);
      std::vector<float> dx32(dx16.size());
      averagePoolGrad<float, As<float>, As<float>>(gw.data(), dx32.data(), planes, pw, includePad, scratchIndices(0), scratchIndices(1), scratchValues<float>(0));
      EXPECT_TRUE(roundedOnce(dx16, dx32, storeF16));
      // bf16 likewise.
      std::vector<uint16_t> b16(planes * pw.outSize());
      for (size_t i = 0; i < b16.size(); ++i)
        b16[i] = storeBf16(gw[i]);
      auto bw = widened(b16, loadBf16);
      averagePoolGrad<float, AsBf16, AsBf16>(b16.data(), dx16.data(), planes, pw, includePad, scratchIndices(0), scratchIndices(1), scratchValues<float>(0));
      averagePoolGrad<float, As<float>, As<float>>(bw.data(), dx32.data(), planes, pw, includePad, scratchIndices(0), scratchIndices(1), scratchValues<float>(0));
      EXPECT_TRUE(roundedOnce(dx16, dx32, storeBf16));
    }
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

struct BatchNormReference {
  std::vector<double> dx, gradScale, gradBias;
};

template <typename T>
BatchNormReference batchNormGradReference(const std::vector<T> &grad,
                                          const std::vector<T> &x, int64_t n,
                                          int64_t channels, int64_t inner,
                                          const std::vector<double> &scale,
                                          const double *mean,
                                          const double *variance,
                                          double epsilon) {
  BatchNormReference r;
  r.dx.assign(x.size(), 0.0);
  r.gradScale.assign(channels, 0.0);
  r.gradBias.assign(channels, 0.0);
  const double m = double(n * inner);
  for (int64_t c = 0; c < channels; ++c) {
    auto at = [&](int64_t b, int64_t i) { return (b * channels + c) * inner + i; };
    double mu, var;
    if (mean) {
      mu = mean[c];
      var = variance[c];
    } else {
      mu = var = 0;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i)
          mu += double(x[at(b, i)]);
      mu /= m;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i)
          var += (double(x[at(b, i)]) - mu) * (double(x[at(b, i)]) - mu);
      var /= m;
    }
    const double rs = 1 / std::sqrt(var + epsilon);
    double sg = 0, sgh = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < inner; ++i) {
        sg += double(grad[at(b, i)]);
        sgh += double(grad[at(b, i)]) * (double(x[at(b, i)]) - mu) * rs;
      }
    r.gradBias[c] = sg;
    r.gradScale[c] = sgh;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < inner; ++i) {
        const double g = double(grad[at(b, i)]);
        const double hat = (double(x[at(b, i)]) - mu) * rs;
        r.dx[at(b, i)] = mean ? scale[c] * rs * g
                              : scale[c] * rs * (g - sg / m - hat * sgh / m);
      }
  }
  return r;
}

/// batchNormGrad with the statistics as the forward saves them: the
/// batch's (channelStatistics) with `mean` null, else mean and variance
/// given; r = 1/sqrt(variance + epsilon).
template <typename C, typename Load, typename Store, typename In>
void batchNormGradFromVariance(const In *grad, const In *x, In *dx, int64_t n,
                               int64_t c, int64_t inner, const C *scale,
                               const C *mean, const C *variance, C epsilon,
                               C *gradScale, C *gradBias) {
  std::vector<C> mu(c), var(c), r(c);
  if (mean) {
    mu.assign(mean, mean + c);
    var.assign(variance, variance + c);
  } else {
    channelStatistics<C, Load>(x, n, c, inner, mu.data(), var.data());
  }
  for (int64_t ch = 0; ch < c; ++ch)
    r[ch] = C(1) / std::sqrt(var[ch] + epsilon);
  batchNormGrad<C, Load, Store>(grad, x, dx, n, c, inner, scale, mu.data(),
                                r.data(), mean == nullptr, gradScale, gradBias);
}

TEST(BatchNormGradTest, HandComputed) {
  // One channel, x = [-1, 0, 1]: μ = 0, σ² = 2/3, epsilon 1/3 gives r = 1,
  // x̂ = x. grad = [1, 2, 6]: Σgrad = 9, Σgrad·x̂ = 5, scale 2.
  const double x[] = {-1, 0, 1}, grad[] = {1, 2, 6}, scale[] = {2};
  double dx[3], gs, gb;
  batchNormGradFromVariance<double, As<double>, As<double>>(grad, x, dx, 1, 1, 3, scale, nullptr, nullptr,
                        1.0 / 3, &gs, &gb);
  EXPECT_NEAR(gb, 9, 1e-14);
  EXPECT_NEAR(gs, 5, 1e-14);
  EXPECT_NEAR(dx[0], 2 * (1 - 3 + 5.0 / 3), 1e-14);
  EXPECT_NEAR(dx[1], 2 * (2 - 3.0), 1e-14);
  EXPECT_NEAR(dx[2], 2 * (6 - 3 - 5.0 / 3), 1e-14);
  // Inference with mean 0.5, variance 3, epsilon 1: r = 1/2.
  const double mean[] = {0.5}, var[] = {3};
  batchNormGradFromVariance<double, As<double>, As<double>>(grad, x, dx, 1, 1, 3, scale, mean, var, 1.0, &gs, &gb);
  EXPECT_EQ(gb, 9);
  EXPECT_EQ(gs, 0.5 * (1 * -1.5 + 2 * -0.5 + 6 * 0.5));
  EXPECT_EQ(dx[0], 1);
  EXPECT_EQ(dx[1], 2);
  EXPECT_EQ(dx[2], 6);
}

template <typename T> void checkBatchNormGradRandom() {
  std::mt19937 rng(31);
  struct Shape { int64_t n, c, inner; };
  for (Shape s : {Shape{2, 3, 5}, Shape{1, 2, 130}, Shape{4, 1, 1},
                  Shape{3, 4, 33}})
    for (bool training : {true, false}) {
      auto x = randomVector<T>(rng, s.n * s.c * s.inner, -2, 3);
      auto grad = randomVector<T>(rng, x.size());
      auto scale = randomVector<T>(rng, s.c, 0.5, 2);
      auto mean = randomVector<T>(rng, s.c, -0.5, 0.5);
      auto variance = randomVector<T>(rng, s.c, 0.5, 2);
      const T epsilon = T(1e-3);
      std::vector<T> dx(x.size(), T(7)), gs(s.c, T(7)), gb(s.c, T(7));
      batchNormGradFromVariance<T, As<T>, As<T>>(grad.data(), x.data(), dx.data(), s.n, s.c, s.inner,
                       scale.data(), training ? nullptr : mean.data(),
                       variance.data(), epsilon, gs.data(), gb.data());
      auto md = toDouble(mean), vd = toDouble(variance);
      auto ref = batchNormGradReference(
          grad, x, s.n, s.c, s.inner, toDouble(scale),
          training ? nullptr : md.data(), vd.data(), double(epsilon));
      const double tol = 10 * tolerance<T>();
      EXPECT_TRUE(allClose(dx, ref.dx, tol)) << "training " << training;
      EXPECT_TRUE(allClose(gs, ref.gradScale, tol)) << "training " << training;
      EXPECT_TRUE(allClose(gb, ref.gradBias, tol)) << "training " << training;
      // gradScale and gradBias may be left out.
      std::vector<T> dx2(x.size());
      batchNormGradFromVariance<T, As<T>, As<T>>(grad.data(), x.data(), dx2.data(), s.n, s.c, s.inner,
                       scale.data(), training ? nullptr : mean.data(),
                       variance.data(), epsilon, nullptr, nullptr);
      EXPECT_EQ(dx2, dx);
    }
}

TEST(BatchNormGradTest, RandomFloat) { checkBatchNormGradRandom<float>(); }
TEST(BatchNormGradTest, RandomDouble) { checkBatchNormGradRandom<double>(); }

// gradBias and gradScale are pairwiseSum over each channel's elements in
// index order, bit for bit, whatever the leaves' split over the planes
// (leaves of 64 terms crossing planes of 7, 50 and 130).
TEST(BatchNormGradTest, SumsArePairwiseSumsInIndexOrder) {
  std::mt19937 rng(61);
  struct Shape { int64_t n, c, inner; };
  for (Shape s : {Shape{5, 1, 7}, Shape{3, 2, 50}, Shape{2, 3, 130},
                  Shape{40, 2, 7}}) {
    auto x = randomVector<float>(rng, s.n * s.c * s.inner, -2, 3);
    auto grad = randomVector<float>(rng, x.size());
    auto scale = randomVector<float>(rng, s.c, 0.5, 2);
    auto mean = randomVector<float>(rng, s.c, -0.5, 0.5);
    auto inv = randomVector<float>(rng, s.c, 0.5, 2);
    std::vector<float> dx(x.size()), gs(s.c), gb(s.c);
    batchNormGrad<float, As<float>, As<float>>(
        grad.data(), x.data(), dx.data(), s.n, s.c, s.inner, scale.data(),
        mean.data(), inv.data(), true, gs.data(), gb.data());
    for (int64_t ch = 0; ch < s.c; ++ch) {
      auto at = [&](int64_t j) {
        return ((j / s.inner) * s.c + ch) * s.inner + j % s.inner;
      };
      const float wantBias = ampc::math::pairwiseSum<float>(
          0, s.n * s.inner, [&](int64_t j) { return grad[at(j)]; });
      const float wantScale =
          ampc::math::pairwiseSum<float>(0, s.n * s.inner, [&](int64_t j) {
            return grad[at(j)] * ((x[at(j)] - mean[ch]) * inv[ch]);
          });
      EXPECT_EQ(gb[ch], wantBias) << s.n << "x" << s.inner << " channel " << ch;
      EXPECT_EQ(gs[ch], wantScale) << s.n << "x" << s.inner << " channel " << ch;
    }
  }
}

TEST(BatchNormGradTest, MatchesCentralDifferencesOfTheForward) {
  // L = Σ g·y with y the forward (batch statistics, channelStatistics +
  // batchNorm, in double); dx, gradScale and gradBias are its derivatives.
  std::mt19937 rng(41);
  const int64_t n = 2, c = 3, inner = 4;
  auto x = randomVector<double>(rng, n * c * inner, -2, 2);
  auto g = randomVector<double>(rng, x.size());
  auto scale = randomVector<double>(rng, c, 0.5, 2);
  auto bias = randomVector<double>(rng, c);
  const double epsilon = 1e-2;
  auto loss = [&](const std::vector<double> &xs, const std::vector<double> &sc,
                  const std::vector<double> &bs) {
    std::vector<double> mean(c), var(c), y(xs.size());
    channelStatistics<double, As<double>>(xs.data(), n, c, inner, mean.data(), var.data());
    batchNorm<double, As<double>, As<double>>(xs.data(), y.data(), n, c, inner, sc.data(), bs.data(),
                      mean.data(), var.data(), epsilon);
    return dot(g, y);
  };
  std::vector<double> dx(x.size()), gs(c), gb(c);
  batchNormGradFromVariance<double, As<double>, As<double>>(g.data(), x.data(), dx.data(), n, c, inner,
                        scale.data(), nullptr, nullptr, epsilon, gs.data(),
                        gb.data());
  const double h = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    auto plus = x, minus = x;
    plus[i] += h;
    minus[i] -= h;
    EXPECT_NEAR(dx[i], (loss(plus, scale, bias) - loss(minus, scale, bias)) / (2 * h),
                1e-6)
        << i;
  }
  for (int64_t ch = 0; ch < c; ++ch) {
    auto sp = scale, sm = scale, bp = bias, bm = bias;
    sp[ch] += h;
    sm[ch] -= h;
    bp[ch] += h;
    bm[ch] -= h;
    EXPECT_NEAR(gs[ch], (loss(x, sp, bias) - loss(x, sm, bias)) / (2 * h), 1e-6);
    EXPECT_NEAR(gb[ch], (loss(x, scale, bp) - loss(x, scale, bm)) / (2 * h), 1e-6);
  }
}

TEST(BatchNormGradTest, F16AndBf16RoundOnceAtTheEnd) {
  std::mt19937 rng(51);
  const int64_t n = 3, c = 2, inner = 7;
  auto scale = randomVector<float>(rng, c, 0.5, 2);
  auto mean = randomVector<float>(rng, c);
  auto var = randomVector<float>(rng, c, 0.5, 2);
  for (bool training : {true, false}) {
    auto x = randomF16(rng, n * c * inner);
    auto g = randomF16(rng, x.size());
    std::vector<uint16_t> dx16(x.size());
    std::vector<float> gs16(c), gb16(c), gs32(c), gb32(c);
    batchNormGradFromVariance<float, AsF16, AsF16>(g.data(), x.data(), dx16.data(), n, c, inner,
                         scale.data(), training ? nullptr : mean.data(),
                         var.data(), 1e-5f, gs16.data(), gb16.data());
    auto xw = widened(x, loadF16), gw = widened(g, loadF16);
    std::vector<float> dx32(x.size());
    batchNormGradFromVariance<float, As<float>, As<float>>(gw.data(), xw.data(), dx32.data(), n, c, inner,
                         scale.data(), training ? nullptr : mean.data(),
                         var.data(), 1e-5f, gs32.data(), gb32.data());
    EXPECT_TRUE(roundedOnce(dx16, dx32, storeF16)) << "training " << training;
    EXPECT_EQ(gs16, gs32);
    EXPECT_EQ(gb16, gb32);

    auto xb = randomBf16(rng, x.size()), gbf = randomBf16(rng, x.size());
    batchNormGradFromVariance<float, AsBf16, AsBf16>(gbf.data(), xb.data(), dx16.data(), n, c, inner,
                         scale.data(), training ? nullptr : mean.data(),
                         var.data(), 1e-5f, nullptr, nullptr);
    auto xbw = widened(xb, loadBf16), gbw = widened(gbf, loadBf16);
    batchNormGradFromVariance<float, As<float>, As<float>>(gbw.data(), xbw.data(), dx32.data(), n, c, inner,
                         scale.data(), training ? nullptr : mean.data(),
                         var.data(), 1e-5f, nullptr, nullptr);
    EXPECT_TRUE(roundedOnce(dx16, dx32, storeBf16)) << "training " << training;
  }
}

template <typename T>
std::vector<double> layerNormGradReference(const std::vector<T> &grad,
                                           const std::vector<T> &x,
                                           const std::vector<double> &scale,
                                           const std::vector<double> &mean,
                                           const std::vector<double> &rstd,
                                           int64_t outer, int64_t inner) {
  std::vector<double> dx(x.size());
  for (int64_t i = 0; i < outer; ++i) {
    double sg = 0, sgh = 0;
    for (int64_t j = 0; j < inner; ++j) {
      const double g = double(grad[i * inner + j]) * scale[j];
      const double hat = (double(x[i * inner + j]) - mean[i]) * rstd[i];
      sg += g;
      sgh += g * hat;
    }
    for (int64_t j = 0; j < inner; ++j) {
      const double g = double(grad[i * inner + j]) * scale[j];
      const double hat = (double(x[i * inner + j]) - mean[i]) * rstd[i];
      dx[i * inner + j] = rstd[i] * (g - sg / inner - hat * sgh / inner);
    }
  }
  return dx;
}

TEST(LayerNormGradTest, HandComputed) {
  // x = [-1, 0, 1] with stash mean 0, rstd 1, scale 1: Σg/n = 3,
  // Σg·x̂/n = 5/3.
  const float x[] = {-1, 0, 1}, grad[] = {1, 2, 6}, scale[] = {1, 1, 1};
  const float mean[] = {0}, rstd[] = {1};
  float dx[3];
  layerNormGrad<float, As<float>, As<float>, As<float>>(grad, x, scale, mean, rstd, dx, 1, 3);
  EXPECT_NEAR(dx[0], 1 - 3 + 5.0 / 3, 1e-6);
  EXPECT_NEAR(dx[1], -1, 1e-6);
  EXPECT_NEAR(dx[2], 6 - 3 - 5.0 / 3, 1e-6);
  // Scale multiplies grad; rstd 2 scales x̂ and the result.
  const float scale2[] = {2, 1, 1}, rstd2[] = {2};
  layerNormGrad<float, As<float>, As<float>, As<float>>(grad, x, scale2, mean, rstd2, dx, 1, 3);
  // g = [2, 2, 6], x̂ = [-2, 0, 2]: Σg/n = 10/3, Σg·x̂/n = 8/3.
  EXPECT_NEAR(dx[0], 2 * (2 - 10.0 / 3 + 2 * 8.0 / 3), 1e-5);
  EXPECT_NEAR(dx[1], 2 * (2 - 10.0 / 3), 1e-5);
  EXPECT_NEAR(dx[2], 2 * (6 - 10.0 / 3 - 2 * 8.0 / 3), 1e-5);
}

template <typename T> void checkLayerNormGradRandom() {
  std::mt19937 rng(61);
  struct Shape { int64_t outer, inner; };
  for (Shape s : {Shape{3, 5}, Shape{2, 150}, Shape{1, 1}, Shape{6, 64}}) {
    auto x = randomVector<T>(rng, s.outer * s.inner, -2, 3);
    auto grad = randomVector<T>(rng, x.size());
    auto scale = randomVector<T>(rng, s.inner, 0.5, 2);
    auto mean = randomVector<T>(rng, s.outer, -0.5, 0.5);
    auto rstd = randomVector<T>(rng, s.outer, 0.5, 2);
    std::vector<T> dx(x.size(), T(9));
    layerNormGrad<T, As<T>, As<T>, As<T>>(grad.data(), x.data(), scale.data(), mean.data(),
                     rstd.data(), dx.data(), s.outer, s.inner);
    EXPECT_TRUE(allClose(dx,
                         layerNormGradReference(grad, x, toDouble(scale),
                                                toDouble(mean), toDouble(rstd),
                                                s.outer, s.inner),
                         10 * tolerance<T>()));
  }
}

TEST(LayerNormGradTest, RandomFloat) { checkLayerNormGradRandom<float>(); }
TEST(LayerNormGradTest, RandomDouble) { checkLayerNormGradRandom<double>(); }

TEST(LayerNormGradTest, MatchesCentralDifferencesOfTheForward) {
  std::mt19937 rng(71);
  const int64_t outer = 3, inner = 6;
  auto x = randomVector<double>(rng, outer * inner, -2, 2);
  auto g = randomVector<double>(rng, x.size());
  auto scale = randomVector<double>(rng, inner, 0.5, 2);
  auto bias = randomVector<double>(rng, inner);
  const double epsilon = 1e-2;
  std::vector<double> mean(outer), rstd(outer);
  auto loss = [&](const std::vector<double> &xs) {
    std::vector<double> y(xs.size()), m(outer), r(outer);
    layerNorm<double, As<double>, As<double>, As<double>>(xs.data(), y.data(), m.data(), r.data(), outer, inner,
                      scale.data(), bias.data(), epsilon);
    return dot(g, y);
  };
  std::vector<double> y(x.size());
  layerNorm<double, As<double>, As<double>, As<double>>(x.data(), y.data(), mean.data(), rstd.data(), outer, inner,
                    scale.data(), bias.data(), epsilon);
  std::vector<double> dx(x.size());
  layerNormGrad<double, As<double>, As<double>, As<double>>(g.data(), x.data(), scale.data(), mean.data(),
                        rstd.data(), dx.data(), outer, inner);
  const double h = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    auto plus = x, minus = x;
    plus[i] += h;
    minus[i] -= h;
    EXPECT_NEAR(dx[i], (loss(plus) - loss(minus)) / (2 * h), 1e-6) << i;
  }
}

TEST(LayerNormGradTest, F16AndBf16RoundOnceAtTheEnd) {
  std::mt19937 rng(81);
  const int64_t outer = 4, inner = 70;
  auto scale = randomVector<float>(rng, inner, 0.5, 2);
  auto x = randomF16(rng, outer * inner);
  auto g = randomF16(rng, x.size());
  // f16 data with an f16 stash (computed by the forward in f16) ...
  std::vector<uint16_t> y(x.size()), mean(outer), rstd(outer);
  layerNorm<float, AsF16, AsF16, AsF16>(x.data(), y.data(), mean.data(), rstd.data(), outer, inner,
                   scale.data(), static_cast<const float *>(nullptr), 1e-5f);
  std::vector<uint16_t> dx16(x.size());
  layerNormGrad<float, AsF16, AsF16, AsF16>(g.data(), x.data(), scale.data(), mean.data(),
                       rstd.data(), dx16.data(), outer, inner);
  auto xw = widened(x, loadF16), gw = widened(g, loadF16);
  auto mw = widened(mean, loadF16), rw = widened(rstd, loadF16);
  std::vector<float> dx32(x.size());
  layerNormGrad<float, As<float>, As<float>, As<float>>(gw.data(), xw.data(), scale.data(), mw.data(),
                       rw.data(), dx32.data(), outer, inner);
  EXPECT_TRUE(roundedOnce(dx16, dx32, storeF16));
  EXPECT_TRUE(allClose(dx32,
                       layerNormGradReference(gw, xw, toDouble(scale),
                                              toDouble(mw), toDouble(rw),
                                              outer, inner),
                       1e-4));
  // ... and bf16 data with an FP32 stash.
  auto xb = randomBf16(rng, x.size()), gb = randomBf16(rng, x.size());
  std::vector<uint16_t> yb(x.size());
  std::vector<float> meanF(outer), rstdF(outer);
  layerNorm<float, AsBf16, AsBf16, As<float>>(xb.data(), yb.data(), meanF.data(), rstdF.data(), outer,
                   inner, scale.data(), static_cast<const float *>(nullptr),
                   1e-5f);
  layerNormGrad<float, AsBf16, As<float>, AsBf16>(gb.data(), xb.data(), scale.data(), meanF.data(),
                       rstdF.data(), dx16.data(), outer, inner);
  auto xbw = widened(xb, loadBf16), gbw = widened(gb, loadBf16);
  layerNormGrad<float, As<float>, As<float>, As<float>>(gbw.data(), xbw.data(), scale.data(), meanF.data(),
                       rstdF.data(), dx32.data(), outer, inner);
  EXPECT_TRUE(roundedOnce(dx16, dx32, storeBf16));
}

// ampc-fold-casts (issue 37, item 6): a LayerNorm writing its FP32 Y in
// 16 bits writes what the cast of the FP32 Y wrote, and a layer_norm_grad
// reading 16-bit dY computes what it did from the widened dY, bit for bit.
TEST(LayerNormGradTest, SixteenBitYAndDyAreTheCastsBits) {
  std::mt19937 rng(82);
  const int64_t outer = 5, inner = 37;
  auto scale = randomVector<float>(rng, inner, 0.5, 2);
  auto bias = randomVector<float>(rng, inner);
  auto x = randomVector<float>(rng, outer * inner, -3, 3);
  std::vector<float> y32(x.size()), mean(outer), rstd(outer);
  layerNorm<float, As<float>, As<float>, As<float>>(
      x.data(), y32.data(), mean.data(), rstd.data(), outer, inner,
      scale.data(), bias.data(), 1e-5f);
  std::vector<uint16_t> y16(x.size()), yb16(x.size());
  layerNorm<float, As<float>, AsF16, As<float>>(
      x.data(), y16.data(), mean.data(), rstd.data(), outer, inner,
      scale.data(), bias.data(), 1e-5f);
  layerNorm<float, As<float>, AsBf16, As<float>>(
      x.data(), yb16.data(), mean.data(), rstd.data(), outer, inner,
      scale.data(), bias.data(), 1e-5f);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(y16[i], storeF16(y32[i])) << i;
    ASSERT_EQ(yb16[i], storeBf16(y32[i])) << i;
  }
  for (bool bf16 : {false, true}) {
    auto g = bf16 ? randomBf16(rng, x.size()) : randomF16(rng, x.size());
    auto gw = bf16 ? widened(g, loadBf16) : widened(g, loadF16);
    std::vector<float> widenedDx(x.size()), dx(x.size());
    layerNormGrad<float, As<float>, As<float>, As<float>>(
        gw.data(), x.data(), scale.data(), mean.data(), rstd.data(),
        widenedDx.data(), outer, inner);
    if (bf16)
      layerNormGrad<float, As<float>, As<float>, As<float>, AsBf16>(
          g.data(), x.data(), scale.data(), mean.data(), rstd.data(),
          dx.data(), outer, inner);
    else
      layerNormGrad<float, As<float>, As<float>, As<float>, AsF16>(
          g.data(), x.data(), scale.data(), mean.data(), rstd.data(),
          dx.data(), outer, inner);
    EXPECT_EQ(0, std::memcmp(dx.data(), widenedDx.data(),
                             dx.size() * sizeof(float)))
        << (bf16 ? "bf16" : "f16");
  }
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

template <typename C, typename I>
std::vector<double> nllLossGradReference(const std::vector<C> &grad,
                                         const std::vector<I> &target,
                                         const C *weights, int64_t n,
                                         int64_t classes, int64_t d,
                                         bool hasIgnore, int64_t ignoreIndex,
                                         LossReduction reduction) {
  std::vector<double> out(n * classes * d, 0.0), w(n * d, 0.0);
  double total = 0;
  for (int64_t s = 0; s < n * d; ++s) {
    const int64_t t = int64_t(target[s]);
    w[s] = hasIgnore && t == ignoreIndex ? 0.0 : weights ? double(weights[t]) : 1.0;
    total += w[s];
  }
  if (reduction == LossMean && total == 0)
    return out;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t j = 0; j < d; ++j) {
      const int64_t s = b * d + j, t = int64_t(target[s]);
      if (hasIgnore && t == ignoreIndex)
        continue;
      double f = w[s] * double(grad[reduction == LossNone ? s : 0]);
      if (reduction == LossMean)
        f /= total;
      out[(b * classes + t) * d + j] = -f;
    }
  return out;
}

TEST(NllLossGradTest, HandComputed) {
  // n = 2, 3 classes, targets [2, 0], weights [0.5, 1, 2]: W = 2.5.
  const int64_t target[] = {2, 0};
  const float weights[] = {0.5f, 1, 2};
  const float scalar[] = {3}, perSample[] = {1, 4};
  float out[6];
  ASSERT_TRUE(nllLossGrad<float>(scalar, target, weights, 2, 3, 1, false, 0,
                                 LossMean, out));
  const float mean[] = {0, 0, -2.4f, -0.6f, 0, 0};
  for (int i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(out[i], mean[i]) << i;
  ASSERT_TRUE(nllLossGrad<float>(scalar, target, weights, 2, 3, 1, false, 0,
                                 LossSum, out));
  const float sum[] = {0, 0, -6, -1.5f, 0, 0};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(out[i], sum[i]) << i;
  ASSERT_TRUE(nllLossGrad<float>(perSample, target, weights, 2, 3, 1, false, 0,
                                 LossNone, out));
  const float none[] = {0, 0, -2, -2, 0, 0};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(out[i], none[i]) << i;
  // Ignoring class 2 (an in-range ignore_index): only sample 1 is left, W =
  // 0.5, and the mean gradient is -grad at its target.
  ASSERT_TRUE(nllLossGrad<float>(scalar, target, weights, 2, 3, 1, true, 2,
                                 LossMean, out));
  const float ignored[] = {0, 0, 0, -3, 0, 0};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(out[i], ignored[i]) << i;
  // Everything ignored: W = 0, all zeros (not NaN).
  const int64_t allTwo[] = {2, 2};
  std::fill(out, out + 6, 5.f);
  ASSERT_TRUE(nllLossGrad<float>(scalar, allTwo, weights, 2, 3, 1, true, 2,
                                 LossMean, out));
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(out[i], 0) << i;
  // W = 0 from zero class weights (nothing ignored): zeros as well.
  const float zeroWeights[] = {0, 1, 0};
  std::fill(out, out + 6, 5.f);
  ASSERT_TRUE(nllLossGrad<float>(scalar, target, zeroWeights, 2, 3, 1, false,
                                 0, LossMean, out));
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(out[i], 0) << i;
}

template <typename C, typename I> void checkNllLossGradRandom() {
  std::mt19937 rng(91);
  struct Shape { int64_t n, classes, d; };
  for (Shape s : {Shape{4, 5, 1}, Shape{3, 4, 6}, Shape{1, 2, 9}})
    for (LossReduction reduction : {LossNone, LossSum, LossMean})
      for (bool withWeights : {false, true})
        for (int ignoreMode : {0, 1, 2}) { // none, in range, -100
          const bool hasIgnore = ignoreMode != 0;
          const int64_t ignoreIndex = ignoreMode == 1 ? 1 : -100;
          std::uniform_int_distribution<int64_t> label(0, s.classes - 1),
              coin(0, 4);
          std::vector<I> target(s.n * s.d);
          for (auto &t : target)
            t = static_cast<I>(ignoreMode == 2 && coin(rng) == 0 ? -100
                                                                 : label(rng));
          auto weights = randomVector<C>(rng, s.classes, 0.1, 2);
          auto grad = randomVector<C>(
              rng, reduction == LossNone ? s.n * s.d : 1, -2, 2);
          std::vector<C> out(s.n * s.classes * s.d, C(42));
          ASSERT_TRUE(nllLossGrad<C>(grad.data(), target.data(),
                                     withWeights ? weights.data() : nullptr,
                                     s.n, s.classes, s.d, hasIgnore,
                                     ignoreIndex, reduction, out.data()));
          EXPECT_TRUE(allClose(
              out,
              nllLossGradReference(grad, target,
                                   withWeights ? weights.data() : nullptr, s.n,
                                   s.classes, s.d, hasIgnore, ignoreIndex,
                                   reduction),
              tolerance<C>()))
              << "reduction " << reduction << " weights " << withWeights
              << " ignore " << ignoreMode;
        }
}

TEST(NllLossGradTest, RandomFloatInt64) {
  checkNllLossGradRandom<float, int64_t>();
}
TEST(NllLossGradTest, RandomDoubleInt32) {
  checkNllLossGradRandom<double, int32_t>();
}

TEST(NllLossGradTest, BadLabelReturnsFalse) {
  const float grad[] = {1};
  float out[6] = {7, 7, 7, 7, 7, 7};
  for (int64_t bad : {int64_t(3), int64_t(-1), int64_t(100)}) {
    const int64_t target[] = {0, bad};
    EXPECT_FALSE(nllLossGrad<float>(grad, target, nullptr, 2, 3, 1, false, 0,
                                    LossMean, out))
        << bad;
    // An ignore_index other than the bad label does not excuse it.
    EXPECT_FALSE(nllLossGrad<float>(grad, target, nullptr, 2, 3, 1, true, 1,
                                    LossSum, out))
        << bad;
    // The same label as ignore_index is fine (and the zeros are written:
    // the buffer starts non-zero).
    float ok[6] = {7, 7, 7, 7, 7, 7};
    EXPECT_TRUE(nllLossGrad<float>(grad, target, nullptr, 2, 3, 1, true, bad,
                                   LossSum, ok))
        << bad;
    EXPECT_EQ(ok[0], -1);
    for (int i = 1; i < 6; ++i)
      EXPECT_EQ(ok[i], 0) << i;
  }
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(out[i], 7) << "a failing call wrote " << i;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

TEST(GatherGradTest, HandComputed) {
  // Table of 4 rows; indices 1, -1 (= 3), 1.
  const float grad[] = {1, 2, 4};
  const int64_t indices[] = {1, -1, 1};
  float out[4] = {9, 9, 9, 9};
  ASSERT_TRUE(gatherGrad<float>(grad, indices, out, 1, 4, 3, 1));
  const float want[] = {0, 5, 0, 2};
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(out[i], want[i]) << i;
  // No indices: zeros.
  ASSERT_TRUE(gatherGrad<float>(grad, indices, out, 1, 4, 0, 1));
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(out[i], 0) << i;
}

template <typename C, typename I> void checkGatherGradRandom() {
  std::mt19937 rng(101);
  struct Shape { int64_t outer, axis, count, inner; };
  for (Shape s : {Shape{1, 10, 7, 4}, Shape{3, 4, 9, 2}, Shape{2, 5, 5, 1},
                  Shape{4, 3, 12, 3}}) {
    std::uniform_int_distribution<int64_t> index(-s.axis, s.axis - 1);
    std::vector<I> indices(s.count);
    for (auto &i : indices)
      i = static_cast<I>(index(rng)); // negative and (count > axis) repeated
    auto grad = randomVector<C>(rng, s.outer * s.count * s.inner);
    std::vector<double> want(s.outer * s.axis * s.inner, 0.0);
    for (int64_t a = 0; a < s.outer; ++a)
      for (int64_t j = 0; j < s.count; ++j) {
        const int64_t k = int64_t(indices[j]) < 0 ? int64_t(indices[j]) + s.axis
                                                  : int64_t(indices[j]);
        for (int64_t b = 0; b < s.inner; ++b)
          want[(a * s.axis + k) * s.inner + b] +=
              double(grad[(a * s.count + j) * s.inner + b]);
      }
    std::vector<C> out(want.size(), C(3));
    ASSERT_TRUE(gatherGrad<C>(grad.data(), indices.data(), out.data(), s.outer,
                              s.axis, s.count, s.inner));
    EXPECT_TRUE(allClose(out, want, tolerance<C>()));
    // Adjoint of the forward gather: <gather(t), grad> = <t, out>.
    auto table = randomVector<C>(rng, want.size());
    std::vector<C> gathered(grad.size());
    ASSERT_TRUE(gather(table.data(), indices.data(), gathered.data(), s.outer,
                       s.axis, s.count, s.inner));
    EXPECT_NEAR(dot(gathered, grad), dot(table, out), 10 * tolerance<C>());
  }
}

TEST(GatherGradTest, RandomFloatInt64) { checkGatherGradRandom<float, int64_t>(); }
TEST(GatherGradTest, RandomDoubleInt32) {
  checkGatherGradRandom<double, int32_t>();
}

TEST(GatherGradTest, OutOfRangeIndexReturnsFalse) {
  const float grad[] = {1, 2, 3, 4};
  float out[8] = {7, 7, 7, 7, 7, 7, 7, 7};
  for (int32_t bad : {4, -5, 1000}) {
    const int32_t indices[] = {0, bad};
    EXPECT_FALSE(gatherGrad<float>(grad, indices, out, 2, 4, 2, 1)) << bad;
  }
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(out[i], 7) << "a failing call wrote " << i;
  const int32_t edges[] = {-4, 3};
  ASSERT_TRUE(gatherGrad<float>(grad, edges, out, 2, 4, 2, 1));
  const float want[] = {1, 0, 0, 2, 3, 0, 0, 4};
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(out[i], want[i]) << i;
}

/// One Slice: its axes' starts/ends/steps, read as ampc.slice reads them.
struct SliceCase {
  Dims shape, starts, ends, axes, steps;
};

/// The strided view of the input the forward Slice is emitted as (the CPU
/// emitter's computation), and the result shape.
void sliceView(const SliceCase &sc, Dims &resultDims, Dims &strides,
               int64_t &base) {
  const int rank = static_cast<int>(sc.shape.size());
  Dims inStrides(rank, 1);
  for (int d = rank - 2; d >= 0; --d)
    inStrides[d] = inStrides[d + 1] * sc.shape[d + 1];
  strides = inStrides;
  resultDims = sc.shape;
  base = 0;
  for (size_t i = 0; i < sc.axes.size(); ++i) {
    const int64_t axis = sc.axes[i] < 0 ? sc.axes[i] + rank : sc.axes[i];
    const int64_t dim = sc.shape[axis], step = sc.steps[i];
    int64_t start = sc.starts[i], end = sc.ends[i];
    if (start < 0)
      start += dim;
    if (end < 0)
      end += dim;
    start = step > 0 ? std::clamp<int64_t>(start, 0, dim)
                     : std::clamp<int64_t>(start, 0, dim - 1);
    end = step > 0 ? std::clamp<int64_t>(end, 0, dim)
                   : std::clamp<int64_t>(end, -1, dim - 1);
    resultDims[axis] =
        step > 0 ? std::max<int64_t>(0, (end - start + step - 1) / step)
                 : std::max<int64_t>(0, (start - end - step - 1) / -step);
    base += start * inStrides[axis];
    strides[axis] = inStrides[axis] * step;
  }
}

/// Naive slice adjoint: per axis the list of selected positions (a plain
/// loop from start towards end), then the elements of their product in
/// row-major order receive grad in order.
template <typename T>
std::vector<T> sliceGradReference(const std::vector<T> &grad,
                                  const SliceCase &sc) {
  const int rank = static_cast<int>(sc.shape.size());
  std::vector<Dims> selected(rank);
  for (int d = 0; d < rank; ++d)
    for (int64_t i = 0; i < sc.shape[d]; ++i)
      selected[d].push_back(i);
  for (size_t a = 0; a < sc.axes.size(); ++a) {
    const int64_t axis = sc.axes[a] < 0 ? sc.axes[a] + rank : sc.axes[a];
    const int64_t dim = sc.shape[axis], step = sc.steps[a];
    int64_t start = sc.starts[a] < 0 ? sc.starts[a] + dim : sc.starts[a];
    int64_t end = sc.ends[a] < 0 ? sc.ends[a] + dim : sc.ends[a];
    selected[axis].clear();
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      for (int64_t i = start; i < end; i += step)
        selected[axis].push_back(i);
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      for (int64_t i = start; i > end; i += step)
        selected[axis].push_back(i);
    }
  }
  Dims counts(rank);
  for (int d = 0; d < rank; ++d)
    counts[d] = static_cast<int64_t>(selected[d].size());
  std::vector<T> out(product(sc.shape), T(0));
  EXPECT_EQ(static_cast<int64_t>(grad.size()), product(counts));
  for (int64_t g = 0; g < product(counts); ++g) {
    int64_t index[16];
    unravel(g, rank, counts.data(), index);
    int64_t flat = 0;
    for (int d = 0; d < rank; ++d)
      flat = flat * sc.shape[d] + selected[d][index[d]];
    out[flat] = grad[g];
  }
  return out;
}

TEST(SliceGradTest, HandComputed) {
  // (2, 5), axis 1 from 4 towards 0 by -2: columns 4 and 2.
  const SliceCase sc{{2, 5}, {4}, {0}, {1}, {-2}};
  Dims dims, strides;
  int64_t base;
  sliceView(sc, dims, strides, base);
  ASSERT_EQ(dims, (Dims{2, 2}));
  const float grad[] = {1, 2, 3, 4};
  float out[10];
  std::fill(out, out + 10, 9.f);
  sliceGrad(grad, out, 10, 2, dims.data(), strides.data(), base);
  const float want[] = {0, 0, 2, 0, 1, 0, 0, 4, 0, 3};
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(out[i], want[i]) << i;
}

template <typename T> void checkSliceGradRandom() {
  std::mt19937 rng(111);
  const std::vector<SliceCase> cases = {
      {{8}, {1}, {7}, {0}, {2}},
      {{8}, {-1}, {-9}, {0}, {-3}},                    // whole axis backwards
      {{4, 6}, {1, 5}, {3, 0}, {0, 1}, {1, -1}},
      {{4, 6}, {-3, 0}, {100, 6}, {0, -1}, {2, 2}},    // clamped end
      {{3, 4, 5}, {2, -1, 4}, {0, -100, 1}, {0, 1, 2}, {-1, -2, -3}},
      {{3, 4, 5}, {0}, {5}, {2}, {7}},                 // one element per row
      {{2, 3, 4, 5}, {1, 3}, {3, 0}, {1, 3}, {1, -1}},
      {{5, 4}, {3}, {3}, {0}, {1}},                    // empty slice
      {{5, 4}, {10}, {-10}, {0}, {-1}},                // start clamped to 4
  };
  for (const SliceCase &sc : cases) {
    Dims dims, strides;
    int64_t base;
    sliceView(sc, dims, strides, base);
    auto grad = randomVector<T>(rng, product(dims));
    for (auto &g : grad)
      g += T(2); // nonzero, so that every selected element is visible
    std::vector<T> out(product(sc.shape), T(-1));
    sliceGrad(grad.data(), out.data(), static_cast<int64_t>(out.size()),
              static_cast<int>(dims.size()), dims.data(), strides.data(), base);
    EXPECT_EQ(out, sliceGradReference(grad, sc));
  }
}

TEST(SliceGradTest, RandomFloat) { checkSliceGradRandom<float>(); }
TEST(SliceGradTest, RandomDouble) { checkSliceGradRandom<double>(); }

TEST(SliceGradTest, SixteenBitStorageIsCopied) {
  // The values are only moved: f16 bits travel unchanged.
  const SliceCase sc{{3, 4}, {2, 3}, {-100, -100}, {0, 1}, {-1, -2}};
  Dims dims, strides;
  int64_t base;
  sliceView(sc, dims, strides, base);
  ASSERT_EQ(dims, (Dims{3, 2}));
  std::vector<uint16_t> grad = {storeF16(1.5f), storeF16(-2.f),  0x7E00,
                                storeF16(65504.f), storeF16(3.f), 0x0001};
  std::vector<uint16_t> out(12, 0xFFFF);
  sliceGrad(grad.data(), out.data(), 12, 2, dims.data(), strides.data(), base);
  EXPECT_EQ(out, sliceGradReference(grad, sc));
  EXPECT_EQ(out[2 * 4 + 3], storeF16(1.5f)); // first element: row 2, col 3
  EXPECT_EQ(out[0], 0u);
}

//===----------------------------------------------------------------------===//
// --sync-batchnorm (CpuTrainKernels.h)
//===----------------------------------------------------------------------===//

/// A communicator of one of `size` ranks run one after the other in one
/// thread: the ranks other than 0 run first and `record` what they send
/// (the sums of their buffers, by request); rank 0 runs last and its sum
/// adds theirs, so rank 0 computes what it would in the job.
struct SequentialRanks {
  ampc_abi_comm abi{};
  std::map<int32_t, std::vector<float>> *others;
  bool record;

  SequentialRanks(int32_t rank, int32_t size,
                  std::map<int32_t, std::vector<float>> &sums)
      : others(&sums), record(rank != 0) {
    abi.struct_size = sizeof(abi);
    abi.rank = rank;
    abi.size = size;
    abi.handle = this;
    abi.start = [](void *handle, int32_t request, void *buffer,
                   uint64_t count, int32_t dtype) -> int32_t {
      auto &self = *static_cast<SequentialRanks *>(handle);
      if (dtype != AMPC_DTYPE_F32)
        return 1;
      std::vector<float> &sum = (*self.others)[request];
      sum.resize(count, 0.0f);
      auto *b = static_cast<float *>(buffer);
      for (uint64_t i = 0; i < count; ++i) {
        if (self.record)
          sum[i] += b[i];
        else
          b[i] += sum[i];
      }
      return 0;
    };
    abi.wait = [](void *, int32_t) -> int32_t { return 0; };
    abi.last_error = [](void *) -> const char * { return ""; };
  }
};

/// 2 and 4 ranks whose channels hold 64 elements each (the kernels' leaf):
/// rank 0's statistics and input adjoint are, bit for bit, those of one
/// process over every rank's rows (the tree of ranks is the top of the
/// pairwise tree), and its scale and bias adjoints its own rows' sums.
TEST(SyncBatchNormTest, RanksComputeWhatOneProcessComputes) {
  for (int32_t ranks : {2, 4}) {
    std::mt19937 rng(5 + ranks);
    const int64_t n = 4 / ranks, c = 3, inner = 64 / n, all = n * ranks;
    auto x = randomVector<float>(rng, all * c * inner, -2, 3);
    // Each rank's rows shifted and scaled differently.
    for (int64_t b = 0; b < all; ++b)
      for (int64_t i = 0; i < c * inner; ++i)
        x[b * c * inner + i] = x[b * c * inner + i] * float(1 + b) + float(b);
    auto grad = randomVector<float>(rng, x.size(), -1, 1);
    const std::vector<float> scale = {0.5f, 2.0f, -1.0f};
    std::map<int32_t, std::vector<float>> sums;
    std::vector<float> mean(c), variance(c);
    const int64_t rankElements = n * c * inner;
    for (int32_t r = ranks - 1; r >= 0; --r) {
      SequentialRanks comm(r, ranks, sums);
      ASSERT_TRUE((syncChannelStatistics<float, As<float>>(
          &comm.abi, 7, x.data() + r * rankElements, n, c, inner, mean.data(),
          variance.data())));
    }
    std::vector<float> wholeMean(c), wholeVariance(c);
    channelStatistics<float, As<float>>(x.data(), all, c, inner,
                                        wholeMean.data(), wholeVariance.data());
    EXPECT_EQ(mean, wholeMean) << ranks << " ranks";
    EXPECT_EQ(variance, wholeVariance) << ranks << " ranks";

    std::vector<float> invStdDev(c);
    for (int64_t ch = 0; ch < c; ++ch)
      invStdDev[ch] = 1.0f / std::sqrt(wholeVariance[ch] + 1e-5f);
    std::vector<float> dx(rankElements), gradScale(c), gradBias(c);
    for (int32_t r = ranks - 1; r >= 0; --r) {
      SequentialRanks comm(r, ranks, sums);
      ASSERT_TRUE((syncBatchNormGrad<float, As<float>, As<float>>(
          &comm.abi, 8, grad.data() + r * rankElements,
          x.data() + r * rankElements, dx.data(), n, c, inner, scale.data(),
          wholeMean.data(), invStdDev.data(), gradScale.data(),
          gradBias.data())));
    }
    std::vector<float> wholeDx(x.size()), wholeScale(c), wholeBias(c);
    batchNormGrad<float, As<float>, As<float>>(
        grad.data(), x.data(), wholeDx.data(), all, c, inner, scale.data(),
        wholeMean.data(), invStdDev.data(), true, wholeScale.data(),
        wholeBias.data());
    EXPECT_EQ(dx, std::vector<float>(wholeDx.begin(),
                                     wholeDx.begin() + rankElements))
        << ranks << " ranks";
    std::vector<float> ownDx(rankElements), ownScale(c), ownBias(c);
    batchNormGrad<float, As<float>, As<float>>(
        grad.data(), x.data(), ownDx.data(), n, c, inner, scale.data(),
        wholeMean.data(), invStdDev.data(), true, ownScale.data(),
        ownBias.data());
    EXPECT_EQ(gradScale, ownScale);
    EXPECT_EQ(gradBias, ownBias);
    EXPECT_NE(dx, ownDx) << "the adjoint reads every rank's sums";
  }
}

/// The unbiased factor of the running variance at run time is the
/// compile-time one (BatchNormalizationOp::runningVarianceFactor).
TEST(SyncBatchNormTest, UnbiasedFactor) {
  EXPECT_EQ(unbiasedFactor<float>(128), float(128.0 / 127.0));
  EXPECT_EQ(unbiasedFactor<double>(3), 1.5);
  EXPECT_EQ(unbiasedFactor<float>(1), 1.0f);
}

} // namespace
