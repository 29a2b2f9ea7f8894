//===- CudaSimCudnnTest.cpp - cuDNN's convolutions on the CPU -------------===//
//
// cudnnConvolutionForward / BackwardData / BackwardFilter of libampc_cudasim
// against a direct FP64 reference (exactly: the operands are small
// integers, so every sum is exact in FP32 and in the f16 output), for
// grouped, depthwise, strided, padded and dilated windows in 1-D (as 2-D
// with H = 1), 2-D and 3-D, and the strict checks: descriptors that do not
// agree, a workspace too small, a host pointer. Then the runtime's side
// (CudaKernels.cuh: initConvolutions, convolution) on it: plans and the
// workspace made at init, deterministic algorithms only, cuDNN's failures
// in the library's error message.
//
//===----------------------------------------------------------------------===//

#include "ampc/Kernels/Cuda/CudaKernels.cuh"
#include "ampc/CudaSim/Counters.h"
#include "ampc/Kernels/Common/Float16.h"

#include <cudnn.h>
#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

/// A convolution in the forward's terms (spatial rank 2 or 3).
struct Shape {
  int n, c, m, group, rank;
  int in[3], kernel[3], pad[3], stride[3], dilation[3];
  int out(int d) const {
    return (in[d] + 2 * pad[d] - (kernel[d] - 1) * dilation[d] - 1) /
               stride[d] +
           1;
  }
  int64_t inSize() const { return in[0] * in[1] * (rank == 3 ? in[2] : 1); }
  int64_t outSize() const { return out(0) * out(1) * (rank == 3 ? out(2) : 1); }
  int64_t kernelSize() const {
    return kernel[0] * kernel[1] * (rank == 3 ? kernel[2] : 1);
  }
};

/// Direct convolution in FP64: y[b][f][q] = Σ x · w over the window.
void reference(const Shape &s, const std::vector<double> &x,
               const std::vector<double> &w, std::vector<double> &y,
               std::vector<double> &dx, const std::vector<double> &dy,
               std::vector<double> &dw) {
  const int cg = s.c / s.group, mg = s.m / s.group;
  y.assign(s.n * s.m * s.outSize(), 0);
  dx.assign(x.size(), 0);
  dw.assign(w.size(), 0);
  const int in2 = s.rank == 3 ? s.in[2] : 1, out2 = s.rank == 3 ? s.out(2) : 1,
            k2 = s.rank == 3 ? s.kernel[2] : 1;
  for (int b = 0; b < s.n; ++b)
    for (int f = 0; f < s.m; ++f) {
      const int g = f / mg;
      for (int o0 = 0; o0 < s.out(0); ++o0)
        for (int o1 = 0; o1 < s.out(1); ++o1)
          for (int o2 = 0; o2 < out2; ++o2) {
            const int64_t yi = ((int64_t(b) * s.m + f) * s.out(0) + o0) * s.out(1) * out2 + o1 * out2 + o2;
            for (int ci = 0; ci < cg; ++ci)
              for (int k0 = 0; k0 < s.kernel[0]; ++k0)
                for (int k1 = 0; k1 < s.kernel[1]; ++k1)
                  for (int kk = 0; kk < k2; ++kk) {
                    const int i0 = o0 * s.stride[0] - s.pad[0] + k0 * s.dilation[0];
                    const int i1 = o1 * s.stride[1] - s.pad[1] + k1 * s.dilation[1];
                    const int i2 = s.rank == 3 ? o2 * s.stride[2] - s.pad[2] + kk * s.dilation[2] : 0;
                    if (i0 < 0 || i0 >= s.in[0] || i1 < 0 || i1 >= s.in[1] || i2 < 0 || i2 >= in2)
                      continue;
                    const int64_t xi = ((int64_t(b) * s.c + g * cg + ci) * s.in[0] + i0) * s.in[1] * in2 + i1 * in2 + i2;
                    const int64_t wi = ((int64_t(f) * cg + ci) * s.kernel[0] + k0) * s.kernel[1] * k2 + k1 * k2 + kk;
                    y[yi] += x[xi] * w[wi];
                    dx[xi] += dy[yi] * w[wi];
                    dw[wi] += dy[yi] * x[xi];
                  }
          }
    }
}

size_t sizeOf(cudnnDataType_t t) {
  return t == CUDNN_DATA_DOUBLE ? 8 : t == CUDNN_DATA_FLOAT ? 4 : 2;
}

std::vector<unsigned char> encode(const std::vector<double> &v,
                                  cudnnDataType_t t) {
  std::vector<unsigned char> bytes(v.size() * sizeOf(t));
  for (size_t i = 0; i < v.size(); ++i) {
    unsigned char *at = bytes.data() + i * sizeOf(t);
    if (t == CUDNN_DATA_HALF) {
      uint16_t h = ampc::numeric::f32ToF16Bits(static_cast<float>(v[i]));
      std::memcpy(at, &h, 2);
    } else if (t == CUDNN_DATA_BFLOAT16) {
      uint16_t h = ampc::numeric::f32ToBf16Bits(static_cast<float>(v[i]));
      std::memcpy(at, &h, 2);
    } else if (t == CUDNN_DATA_FLOAT) {
      float f = static_cast<float>(v[i]);
      std::memcpy(at, &f, 4);
    } else {
      std::memcpy(at, &v[i], 8);
    }
  }
  return bytes;
}

std::vector<double> decode(const std::vector<unsigned char> &bytes,
                           cudnnDataType_t t) {
  std::vector<double> v(bytes.size() / sizeOf(t));
  for (size_t i = 0; i < v.size(); ++i) {
    const unsigned char *at = bytes.data() + i * sizeOf(t);
    uint16_t h;
    float f;
    if (t == CUDNN_DATA_HALF) {
      std::memcpy(&h, at, 2);
      v[i] = ampc::numeric::f16BitsToF32(h);
    } else if (t == CUDNN_DATA_BFLOAT16) {
      std::memcpy(&h, at, 2);
      v[i] = ampc::numeric::bf16BitsToF32(h);
    } else if (t == CUDNN_DATA_FLOAT) {
      std::memcpy(&f, at, 4);
      v[i] = f;
    } else {
      std::memcpy(&v[i], at, 8);
    }
  }
  return v;
}

/// Small integers, so that every product and sum is exact.
std::vector<double> values(size_t n, int seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<double>(static_cast<int>((i * 7 + seed * 13) % 5) - 2);
  return v;
}

/// A handle and the descriptors of `s` in type `t`.
struct Fixture {
  cudnnHandle_t handle = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  Fixture(const Shape &s, cudnnDataType_t t, int yChannels = -1,
          cudnnDataType_t yType = CUDNN_DATA_FLOAT, bool sameType = true) {
    EXPECT_EQ(cudnnCreate(&handle), CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(cudnnSetStream(handle, nullptr), CUDNN_STATUS_SUCCESS);
    cudnnCreateTensorDescriptor(&x);
    cudnnCreateTensorDescriptor(&y);
    cudnnCreateFilterDescriptor(&w);
    cudnnCreateConvolutionDescriptor(&conv);
    const int dims = s.rank + 2;
    int xd[5] = {s.n, s.c}, yd[5] = {s.n, yChannels < 0 ? s.m : yChannels},
        wd[5] = {s.m, s.c / s.group};
    for (int d = 0; d < s.rank; ++d)
      xd[2 + d] = s.in[d], yd[2 + d] = s.out(d), wd[2 + d] = s.kernel[d];
    auto strides = [&](const int *shape, int *st) {
      st[dims - 1] = 1;
      for (int d = dims - 2; d >= 0; --d)
        st[d] = st[d + 1] * shape[d + 1];
    };
    int xs[5], ys[5];
    strides(xd, xs);
    strides(yd, ys);
    EXPECT_EQ(cudnnSetTensorNdDescriptor(x, t, dims, xd, xs), CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(cudnnSetTensorNdDescriptor(y, sameType ? t : yType, dims, yd, ys), CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(cudnnSetFilterNdDescriptor(w, t, CUDNN_TENSOR_NCHW, dims, wd), CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(cudnnSetConvolutionNdDescriptor(conv, s.rank, s.pad, s.stride, s.dilation, CUDNN_CROSS_CORRELATION, t == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT), CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(cudnnSetConvolutionGroupCount(conv, s.group), CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH), CUDNN_STATUS_SUCCESS);
  }
  /// Sets X and Y packed channels-last or NCHW, and W's format, as given.
  void layout(const Shape &s, cudnnDataType_t t, bool xNhwc, bool yNhwc,
              cudnnTensorFormat_t wFormat) {
    const int dims = s.rank + 2;
    int xd[5] = {s.n, s.c}, yd[5] = {s.n, s.m}, wd[5] = {s.m, s.c / s.group};
    for (int d = 0; d < s.rank; ++d)
      xd[2 + d] = s.in[d], yd[2 + d] = s.out(d), wd[2 + d] = s.kernel[d];
    auto strides = [&](const int *shape, bool nhwc, int *st) {
      // Outermost first: N, C, spatial... or N, spatial..., C.
      int order[5] = {0, 1, 2, 3, 4};
      if (nhwc) {
        for (int d = 1; d < dims - 1; ++d)
          order[d] = d + 1;
        order[dims - 1] = 1;
      }
      int stride = 1;
      for (int i = dims - 1; i >= 0; --i)
        st[order[i]] = stride, stride *= shape[order[i]];
    };
    int xs[5], ys[5];
    strides(xd, xNhwc, xs);
    strides(yd, yNhwc, ys);
    EXPECT_EQ(cudnnSetTensorNdDescriptor(x, t, dims, xd, xs), CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(cudnnSetTensorNdDescriptor(y, t, dims, yd, ys), CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(cudnnSetFilterNdDescriptor(w, t, wFormat, dims, wd), CUDNN_STATUS_SUCCESS);
  }
  ~Fixture() {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroy(handle);
  }
};

void *device(const std::vector<unsigned char> &bytes) {
  void *p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, bytes.size() + 1), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  return p;
}

std::vector<unsigned char> host(const void *p, size_t bytes) {
  std::vector<unsigned char> out(bytes);
  EXPECT_EQ(cudaMemcpy(out.data(), p, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

/// `v`, an NCHW tensor of `outer` x `channels` x `size`, channels-last
/// (NHWC: outer x size x channels), or back with `back`.
std::vector<double> permute(const std::vector<double> &v, int64_t outer,
                            int64_t channels, int64_t size, bool back = false) {
  std::vector<double> out(v.size());
  for (int64_t b = 0; b < outer; ++b)
    for (int64_t ch = 0; ch < channels; ++ch)
      for (int64_t i = 0; i < size; ++i) {
        const int64_t nchw = (b * channels + ch) * size + i,
                      nhwc = (b * size + i) * channels + ch;
        if (back)
          out[nchw] = v[nhwc];
        else
          out[nhwc] = v[nchw];
      }
  return out;
}

/// The three directions' results (NCHW order whatever the layout).
struct Results {
  std::vector<double> y, dx, dw;
};

/// Runs the three directions with the heuristic's first deterministic
/// algorithm and its workspace on NCHW `x`, `w`, `dy`, in NCHW or with the
/// operands permuted to channels-last (NHWC tensors, KRSC filters).
Results run(const Shape &s, cudnnDataType_t t, bool nhwc,
            std::vector<double> x, std::vector<double> w,
            std::vector<double> dy) {
  Fixture f(s, t);
  const int cg = s.c / s.group;
  if (nhwc) {
    f.layout(s, t, true, true, CUDNN_TENSOR_NHWC);
    x = permute(x, s.n, s.c, s.inSize());
    w = permute(w, s.m, cg, s.kernelSize());
    dy = permute(dy, s.n, s.m, s.outSize());
  }
  Results r;
  r.y.resize(dy.size());
  r.dx.resize(x.size());
  r.dw.resize(w.size());
  std::vector<double> &y = r.y, &dx = r.dx, &dw = r.dw;
  void *xp = device(encode(x, t)), *wp = device(encode(w, t)),
       *dyp = device(encode(dy, t)), *yp = device(encode(y, t)),
       *dxp = device(encode(dx, t)), *dwp = device(encode(dw, t));
  cudaMemset(yp, 0, y.size() * sizeOf(t));
  cudaMemset(dxp, 0, dx.size() * sizeOf(t));
  cudaMemset(dwp, 0, dw.size() * sizeOf(t));
  const float one = 1, zero = 0;
  const double one64 = 1, zero64 = 0;
  const void *alpha = t == CUDNN_DATA_DOUBLE ? static_cast<const void *>(&one64) : &one;
  const void *beta = t == CUDNN_DATA_DOUBLE ? static_cast<const void *>(&zero64) : &zero;
  void *workspace = nullptr;
  EXPECT_EQ(cudaMalloc(&workspace, 1 << 20), cudaSuccess);
  int returned = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[4];
  EXPECT_EQ(cudnnGetConvolutionForwardAlgorithm_v7(f.handle, f.x, f.w, f.conv, f.y, 4, &returned, fwd), CUDNN_STATUS_SUCCESS);
  EXPECT_GT(returned, 0);
  EXPECT_EQ(cudnnConvolutionForward(f.handle, alpha, f.x, xp, f.w, wp, f.conv, fwd[0].algo, workspace, 1 << 20, beta, f.y, yp), CUDNN_STATUS_SUCCESS);
  cudnnConvolutionBwdDataAlgoPerf_t data[4];
  EXPECT_EQ(cudnnGetConvolutionBackwardDataAlgorithm_v7(f.handle, f.w, f.y, f.conv, f.x, 4, &returned, data), CUDNN_STATUS_SUCCESS);
  int pick = 0;
  while (pick < returned && data[pick].determinism != CUDNN_DETERMINISTIC)
    ++pick;
  EXPECT_LT(pick, returned);
  size_t need = 0;
  EXPECT_EQ(cudnnGetConvolutionBackwardDataWorkspaceSize(f.handle, f.w, f.y, f.conv, f.x, data[pick].algo, &need), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(need, data[pick].memory);
  EXPECT_EQ(cudnnConvolutionBackwardData(f.handle, alpha, f.w, wp, f.y, dyp, f.conv, data[pick].algo, workspace, 1 << 20, beta, f.x, dxp), CUDNN_STATUS_SUCCESS);
  cudnnConvolutionBwdFilterAlgoPerf_t filter[4];
  EXPECT_EQ(cudnnGetConvolutionBackwardFilterAlgorithm_v7(f.handle, f.x, f.y, f.conv, f.w, 4, &returned, filter), CUDNN_STATUS_SUCCESS);
  pick = 0;
  while (pick < returned && filter[pick].determinism != CUDNN_DETERMINISTIC)
    ++pick;
  EXPECT_LT(pick, returned);
  EXPECT_EQ(cudnnConvolutionBackwardFilter(f.handle, alpha, f.x, xp, f.y, dyp, f.conv, filter[pick].algo, workspace, 1 << 20, beta, f.w, dwp), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  y = decode(host(yp, y.size() * sizeOf(t)), t);
  dx = decode(host(dxp, dx.size() * sizeOf(t)), t);
  dw = decode(host(dwp, dw.size() * sizeOf(t)), t);
  for (void *p : {xp, wp, dyp, yp, dxp, dwp, workspace})
    cudaFree(p);
  if (nhwc) {
    y = permute(y, s.n, s.m, s.outSize(), true);
    dx = permute(dx, s.n, s.c, s.inSize(), true);
    dw = permute(dw, s.m, cg, s.kernelSize(), true);
  }
  return r;
}

/// run() in the layout against the reference.
void check(const Shape &s, cudnnDataType_t t, bool nhwc = false) {
  std::vector<double> x = values(s.n * s.c * s.inSize(), 1),
                      w = values(s.m * (s.c / s.group) * s.kernelSize(), 2),
                      dy = values(s.n * s.m * s.outSize(), 3), y, dx, dw;
  reference(s, x, w, y, dx, dy, dw);
  Results r = run(s, t, nhwc, x, w, dy);
  EXPECT_EQ(r.y, y);
  EXPECT_EQ(r.dx, dx);
  EXPECT_EQ(r.dw, dw);
}

TEST(CudaSimCudnn, GroupedPaddedStrided2d) {
  check({2, 4, 6, 2, 2, {7, 6}, {3, 3}, {1, 1}, {2, 2}, {1, 1}}, CUDNN_DATA_FLOAT);
}

TEST(CudaSimCudnn, DepthwiseHalf) {
  check({2, 4, 4, 4, 2, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}}, CUDNN_DATA_HALF);
}

TEST(CudaSimCudnn, Dilated1dAs2dBf16) {
  check({2, 3, 4, 1, 2, {1, 9}, {1, 3}, {0, 2}, {1, 1}, {1, 2}}, CUDNN_DATA_BFLOAT16);
}

TEST(CudaSimCudnn, Strided3dDouble) {
  check({1, 2, 2, 1, 3, {4, 5, 3}, {2, 3, 2}, {1, 0, 1}, {2, 1, 1}, {1, 1, 1}}, CUDNN_DATA_DOUBLE);
}

// Channels-last (NHWC tensors, KRSC filters): the same results, all three
// directions, padded, strided, grouped, depthwise, dilated.
TEST(CudaSimCudnn, ChannelsLastGroupedPaddedStrided) {
  check({2, 4, 6, 2, 2, {7, 6}, {3, 3}, {1, 1}, {2, 2}, {1, 1}}, CUDNN_DATA_FLOAT, true);
  check({2, 4, 4, 4, 2, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}}, CUDNN_DATA_HALF, true);
  check({2, 3, 4, 1, 2, {1, 9}, {1, 3}, {0, 2}, {1, 1}, {1, 2}}, CUDNN_DATA_BFLOAT16, true);
  check({1, 2, 2, 1, 3, {4, 5, 3}, {2, 3, 2}, {1, 0, 1}, {2, 1, 1}, {1, 1, 1}}, CUDNN_DATA_DOUBLE, true);
}

TEST(CudaSimCudnn, ChannelsLastIsNchwBitForBit) {
  // Operands that round (not small integers): the NHWC call gives the NCHW
  // call's bits, each result from the same terms in the same order.
  const Shape s = {3, 6, 4, 2, 2, {9, 7}, {3, 2}, {1, 0}, {2, 1}, {1, 2}};
  auto noisy = [](size_t n, int seed) {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i)
      v[i] = static_cast<float>(std::sin(0.37 * double(i) + seed) * 3.1);
    return v;
  };
  const std::vector<double> x = noisy(s.n * s.c * s.inSize(), 1),
                            w = noisy(s.m * (s.c / s.group) * s.kernelSize(), 2),
                            dy = noisy(s.n * s.m * s.outSize(), 3);
  for (cudnnDataType_t t : {CUDNN_DATA_FLOAT, CUDNN_DATA_HALF}) {
    Results nchw = run(s, t, false, x, w, dy), nhwc = run(s, t, true, x, w, dy);
    EXPECT_EQ(nhwc.y, nchw.y);
    EXPECT_EQ(nhwc.dx, nchw.dx);
    EXPECT_EQ(nhwc.dw, nchw.dw);
    // Not trivially: the sums round.
    std::vector<double> y, dx, dw;
    reference(s, x, w, y, dx, dy, dw);
    EXPECT_NE(nchw.y, y);
  }
}

/// A forward call of `f` on fresh buffers, with the given workspace.
cudnnStatus_t forward(Fixture &f, const Shape &s, cudnnDataType_t t,
                      cudnnConvolutionFwdAlgo_t algo, void *workspace,
                      size_t bytes, bool hostX = false) {
  std::vector<unsigned char> hx(s.n * s.c * s.inSize() * sizeOf(t));
  void *xp = device(hx), *wp = device(std::vector<unsigned char>(s.m * (s.c / s.group) * s.kernelSize() * sizeOf(t))),
       *yp = device(std::vector<unsigned char>(s.n * s.m * s.outSize() * sizeOf(t)));
  const float one = 1, zero = 0;
  cudnnStatus_t status = cudnnConvolutionForward(f.handle, &one, f.x, hostX ? hx.data() : xp, f.w, wp, f.conv, algo, workspace, bytes, &zero, f.y, yp);
  cudaDeviceSynchronize();
  for (void *p : {xp, wp, yp})
    cudaFree(p);
  return status;
}

const Shape kSmall = {1, 4, 4, 2, 2, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}};

TEST(CudaSimCudnn, RejectsATooSmallWorkspace) {
  Fixture f(kSmall, CUDNN_DATA_FLOAT);
  size_t need = 0;
  ASSERT_EQ(cudnnGetConvolutionForwardWorkspaceSize(f.handle, f.x, f.w, f.conv, f.y, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, &need), CUDNN_STATUS_SUCCESS);
  ASSERT_GT(need, 0u);
  void *workspace = nullptr;
  ASSERT_EQ(cudaMalloc(&workspace, need), cudaSuccess);
  EXPECT_EQ(forward(f, kSmall, CUDNN_DATA_FLOAT, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, workspace, need - 1), CUDNN_STATUS_BAD_PARAM);
  EXPECT_NE(std::string(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM)).find("bytes of workspace"), std::string::npos);
  EXPECT_EQ(forward(f, kSmall, CUDNN_DATA_FLOAT, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, nullptr, need), CUDNN_STATUS_BAD_PARAM);
  EXPECT_EQ(forward(f, kSmall, CUDNN_DATA_FLOAT, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, workspace, need), CUDNN_STATUS_SUCCESS);
  // IMPLICIT_GEMM takes none.
  EXPECT_EQ(forward(f, kSmall, CUDNN_DATA_FLOAT, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0), CUDNN_STATUS_SUCCESS);
  cudaFree(workspace);
}

TEST(CudaSimCudnn, RejectsMismatchedTypes) {
  Fixture f(kSmall, CUDNN_DATA_HALF, -1, CUDNN_DATA_FLOAT, false);
  EXPECT_EQ(forward(f, kSmall, CUDNN_DATA_HALF, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0), CUDNN_STATUS_BAD_PARAM);
  EXPECT_NE(std::string(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM)).find("different data types"), std::string::npos);
}

TEST(CudaSimCudnn, RejectsDescriptorsThatDisagree) {
  // y with 3 channels where w has 4 filters.
  Fixture f(kSmall, CUDNN_DATA_FLOAT, 3);
  EXPECT_EQ(forward(f, kSmall, CUDNN_DATA_FLOAT, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0), CUDNN_STATUS_BAD_PARAM);
  EXPECT_NE(std::string(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM)).find("are not x's batch"), std::string::npos);
  // A group count that does not divide the channels.
  Fixture g(kSmall, CUDNN_DATA_FLOAT);
  ASSERT_EQ(cudnnSetConvolutionGroupCount(g.conv, 3), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(forward(g, kSmall, CUDNN_DATA_FLOAT, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0), CUDNN_STATUS_BAD_PARAM);
  EXPECT_NE(std::string(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM)).find("group count 3"), std::string::npos);
  // A stride that changes the output's size.
  Fixture h(kSmall, CUDNN_DATA_FLOAT);
  const int pad[2] = {1, 1}, stride[2] = {2, 2}, dilation[2] = {1, 1};
  ASSERT_EQ(cudnnSetConvolutionNdDescriptor(h.conv, 2, pad, stride, dilation, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(forward(h, kSmall, CUDNN_DATA_FLOAT, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0), CUDNN_STATUS_BAD_PARAM);
  // Negative pads are refused when set.
  const int negative[2] = {-1, 0};
  EXPECT_EQ(cudnnSetConvolutionNdDescriptor(h.conv, 2, negative, stride, dilation, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT), CUDNN_STATUS_BAD_PARAM);
}

TEST(CudaSimCudnn, RejectsLayoutsThatDisagree) {
  auto refused = [](bool xNhwc, bool yNhwc, cudnnTensorFormat_t wFormat,
                    const char *says) {
    Fixture f(kSmall, CUDNN_DATA_FLOAT);
    f.layout(kSmall, CUDNN_DATA_FLOAT, xNhwc, yNhwc, wFormat);
    EXPECT_EQ(forward(f, kSmall, CUDNN_DATA_FLOAT, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0), CUDNN_STATUS_NOT_SUPPORTED) << says;
    EXPECT_NE(std::string(cudnnGetErrorString(CUDNN_STATUS_NOT_SUPPORTED)).find(says), std::string::npos) << cudnnGetErrorString(CUDNN_STATUS_NOT_SUPPORTED);
  };
  // NHWC tensors with a KCRS filter, NCHW ones with a KRSC filter.
  refused(true, true, CUDNN_TENSOR_NCHW, "the filter is NCHW but x and y are packed NHWC");
  refused(false, false, CUDNN_TENSOR_NHWC, "the filter is NHWC but x and y are packed NCHW");
  // X and Y in different layouts.
  refused(true, false, CUDNN_TENSOR_NHWC, "x is packed NHWC and y NCHW");
  refused(false, true, CUDNN_TENSOR_NCHW, "x is packed NCHW and y NHWC");
  // A filter format the simulation does not take.
  refused(false, false, CUDNN_TENSOR_NCHW_VECT_C, "only NCHW and NHWC filters");
  // Strides of neither packed layout.
  Fixture f(kSmall, CUDNN_DATA_FLOAT);
  const int dims[4] = {1, 4, 5, 5}, strides[4] = {200, 50, 10, 2};
  ASSERT_EQ(cudnnSetTensorNdDescriptor(f.x, CUDNN_DATA_FLOAT, 4, dims, strides), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(forward(f, kSmall, CUDNN_DATA_FLOAT, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0), CUDNN_STATUS_NOT_SUPPORTED);
  EXPECT_NE(std::string(cudnnGetErrorString(CUDNN_STATUS_NOT_SUPPORTED)).find("x's strides are [200, 50, 10, 2]"), std::string::npos);
  // The matching NHWC call runs.
  Fixture g(kSmall, CUDNN_DATA_FLOAT);
  g.layout(kSmall, CUDNN_DATA_FLOAT, true, true, CUDNN_TENSOR_NHWC);
  EXPECT_EQ(forward(g, kSmall, CUDNN_DATA_FLOAT, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0), CUDNN_STATUS_SUCCESS);
}

TEST(CudaSimCudnn, RejectsHostPointers) {
  Fixture f(kSmall, CUDNN_DATA_FLOAT);
  EXPECT_EQ(forward(f, kSmall, CUDNN_DATA_FLOAT, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, true), CUDNN_STATUS_BAD_PARAM);
  EXPECT_NE(std::string(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM)).find("host pointer"), std::string::npos);
}

TEST(CudaSimCudnn, CountsEachCall) {
  ampc_cudasim_counters_reset();
  Fixture f(kSmall, CUDNN_DATA_FLOAT);
  ASSERT_EQ(forward(f, kSmall, CUDNN_DATA_FLOAT, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0), CUDNN_STATUS_SUCCESS);
  char text[4096];
  ampc_cudasim_counters(text, sizeof text);
  EXPECT_NE(std::string(text).find("cudnn 1 cudnnConvolutionForward\n"), std::string::npos) << text;
}

TEST(CudaSimCudnn, FloatOutsideFmaMathIsTf32) {
  // 1 + 2^-12 is not a TF32 value: under CUDNN_DEFAULT_MATH the product
  // with 1 loses it, under CUDNN_FMA_MATH it stays.
  const Shape s = {1, 1, 1, 1, 2, {1, 1}, {1, 1}, {0, 0}, {1, 1}, {1, 1}};
  for (cudnnMathType_t math : {CUDNN_FMA_MATH, CUDNN_DEFAULT_MATH}) {
    Fixture f(s, CUDNN_DATA_FLOAT);
    ASSERT_EQ(cudnnSetConvolutionMathType(f.conv, math), CUDNN_STATUS_SUCCESS);
    const float x = 1.0f + 1.0f / 4096, w = 1.0f, zero = 0, one = 1;
    float *xp, *wp, *yp;
    cudaMalloc(reinterpret_cast<void **>(&xp), 4);
    cudaMalloc(reinterpret_cast<void **>(&wp), 4);
    cudaMalloc(reinterpret_cast<void **>(&yp), 4);
    cudaMemcpy(xp, &x, 4, cudaMemcpyHostToDevice);
    cudaMemcpy(wp, &w, 4, cudaMemcpyHostToDevice);
    ASSERT_EQ(cudnnConvolutionForward(f.handle, &one, f.x, xp, f.w, wp, f.conv, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zero, f.y, yp), CUDNN_STATUS_SUCCESS);
    float y = 0;
    cudaMemcpy(&y, yp, 4, cudaMemcpyDeviceToHost);
    EXPECT_EQ(y, math == CUDNN_FMA_MATH ? x : 1.0f);
    for (float *p : {xp, wp, yp})
      cudaFree(p);
  }
}

/// A context as a library's init makes it (arena of `stateBytes`).
struct Library {
  alignas(ampc::cuda::Context) unsigned char raw[sizeof(ampc::cuda::Context)];
  explicit Library(size_t stateBytes) {
    static const char *const errors[] = {"no error"};
    ampc_abi_config config{sizeof(ampc_abi_config), 0, nullptr};
    EXPECT_EQ(ampc::cuda::init(raw, &config, stateBytes, nullptr, 0, 0, 0,
                               errors, 1),
              0)
        << ampc::cuda::lastError(raw);
  }
  ~Library() { ampc::cuda::release(raw); }
  ampc::cuda::Context &ctx() { return ampc::cuda::context(raw); }
};

/// The runtime's plans of one convolution's three directions, NCHW or
/// channels-last (`nhwc`: the operands permuted, the results permuted
/// back), against the reference. `slotBytes`: the workspace slot the
/// memory plan gives each call (in the arena after the operands); the
/// algorithms' workspaces fit one of `kFits` bytes, then no overflow
/// workspace is allocated.
constexpr size_t kFits = 18u * 9u * 4u;
void planAndRun(bool nhwc, size_t slotBytes = 0) {
  // 2 groups, pads 1, strides 2, f32: X 1x4x6x6, W 6x2x3x3, Y 1x6x3x3.
  const Shape s = {1, 4, 6, 2, 2, {6, 6}, {3, 3}, {1, 1}, {2, 2}, {1, 1}};
  ampc::cuda::Convolution table[3];
  for (int d = 0; d < 3; ++d)
    table[d] = {d, CUDNN_DATA_FLOAT, 2, 1, 4, 6, 2, {6, 6}, {3, 3}, {3, 3},
                {1, 1}, {2, 2}, {1, 1}, 0.0f, nhwc, slotBytes};
  const char *const nodes[] = {"conv", "conv data", "conv weight"};
  Library lib(8192);
  ampc::cuda::Context &ctx = lib.ctx();
  ASSERT_EQ(ampc::cuda::initConvolutions(ctx, table, 3, nodes), 0)
      << ctx.message;
  // The backward calls' non-deterministic ALGO_0 was passed over, and the
  // overflow workspace is the largest the chosen algorithms take (the
  // simulation's columns of one image and group: 18 x 9 floats) when the
  // slots are smaller, none when the workspaces fit the slots.
  EXPECT_EQ(ctx.convolutions[1].algo, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1);
  EXPECT_EQ(ctx.convolutions[2].algo, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);
  const bool fits = slotBytes >= kFits;
  EXPECT_EQ(ctx.convolutionWorkspaceBytes, fits ? 0u : kFits);
  EXPECT_EQ(ctx.convolutionWorkspace == nullptr, fits);
  for (int d = 0; d < 3; ++d)
    EXPECT_EQ(ctx.convolutions[d].inSlot,
              fits || ctx.convolutions[d].workspace == 0);
  std::vector<double> x = values(s.n * s.c * s.inSize(), 1),
                      w = values(s.m * (s.c / s.group) * s.kernelSize(), 2),
                      dy = values(s.n * s.m * s.outSize(), 3), y, dx, dw;
  reference(s, x, w, y, dx, dy, dw);
  const int cg = s.c / s.group;
  if (nhwc) {
    x = permute(x, s.n, s.c, s.inSize());
    w = permute(w, s.m, cg, s.kernelSize());
    dy = permute(dy, s.n, s.m, s.outSize());
  }
  // After the error code (offset 0).
  float *xp = reinterpret_cast<float *>(ctx.device + 64),
        *wp = xp + x.size(), *dyp = wp + w.size(), *yp = dyp + dy.size(),
        *dxp = yp + y.size(), *dwp = dxp + dx.size();
  // The slot, 256-byte aligned as the plan's are; null without one (a
  // call whose plan is in its slot then fails: the workspace is checked).
  unsigned char *slot = nullptr;
  if (slotBytes) {
    size_t at = (reinterpret_cast<unsigned char *>(dwp + dw.size()) -
                 ctx.device + 255) / 256 * 256;
    slot = ctx.device + at;
  }
  // On the model's stream (the legacy stream's copies are unordered with
  // it), as the library's own copies are.
  auto put = [&](float *at, const std::vector<double> &v) {
    std::vector<unsigned char> bytes = encode(v, CUDNN_DATA_FLOAT);
    ASSERT_EQ(ampc::cuda::copyIn(ctx, reinterpret_cast<unsigned char *>(at) - ctx.device, bytes.data(), bytes.size()), 0) << ctx.message;
  };
  auto get = [&](const float *at, size_t count) {
    std::vector<unsigned char> bytes(count * 4);
    EXPECT_EQ(ampc::cuda::copyOut(ctx, reinterpret_cast<const unsigned char *>(at) - ctx.device, bytes.data(), bytes.size()), 0) << ctx.message;
    return decode(bytes, CUDNN_DATA_FLOAT);
  };
  put(xp, x);
  put(wp, w);
  put(dyp, dy);
  ASSERT_EQ(ampc::cuda::convolution(ctx, "conv", 0, xp, wp, yp, slot), 0) << ctx.message;
  ASSERT_EQ(ampc::cuda::convolution(ctx, "conv data", 1, dyp, wp, dxp, slot), 0) << ctx.message;
  ASSERT_EQ(ampc::cuda::convolution(ctx, "conv weight", 2, xp, dyp, dwp, slot), 0) << ctx.message;
  ASSERT_EQ(ampc::cuda::synchronize(ctx), 0) << ctx.message;
  auto back = [&](std::vector<double> v, int64_t outer, int64_t channels,
                  int64_t size) {
    return nhwc ? permute(v, outer, channels, size, true) : v;
  };
  EXPECT_EQ(back(get(yp, y.size()), s.n, s.m, s.outSize()), y);
  EXPECT_EQ(back(get(dxp, dx.size()), s.n, s.c, s.inSize()), dx);
  EXPECT_EQ(back(get(dwp, dw.size()), s.m, cg, s.kernelSize()), dw);
}

TEST(CudaSimCudnnRuntime, PlansAtInitThenOneCallPerDirection) {
  planAndRun(false);
}

TEST(CudaSimCudnnRuntime, ChannelsLastPlansNhwcDescriptors) {
  planAndRun(true);
}

// The memory plan's workspace slots (issue 39): a workspace that fits
// runs in the call's slot and nothing is allocated beside the arena; one
// byte short, the overflow workspace again.
TEST(CudaSimCudnnRuntime, WorkspaceInThePlansSlot) {
  planAndRun(false, kFits);
  planAndRun(true, kFits);
  planAndRun(false, kFits - 1);
}

TEST(CudaSimCudnnRuntime, CudnnFailuresAreTheLibrarysErrors) {
  // 3 groups of 4 channels: the heuristic refuses the descriptors.
  ampc::cuda::Convolution bad = {ampc::cuda::kConvolutionForward,
                                 CUDNN_DATA_FLOAT, 2, 1, 4, 6, 3, {6, 6},
                                 {3, 3}, {3, 3}, {1, 1}, {2, 2}, {1, 1}, 0.0f, false};
  const char *const nodes[] = {"the bad conv"};
  Library lib(4096);
  ampc::cuda::Context &ctx = lib.ctx();
  EXPECT_EQ(ampc::cuda::initConvolutions(ctx, &bad, 1, nodes), 1);
  const std::string message = ctx.message;
  EXPECT_NE(message.find("cudnnGetConvolutionForwardAlgorithm_v7"), std::string::npos) << message;
  EXPECT_NE(message.find("CUDNN_STATUS_BAD_PARAM"), std::string::npos) << message;
  EXPECT_NE(message.find("(the bad conv)"), std::string::npos) << message;
  // What init took is freed with it.
  EXPECT_EQ(ctx.dnn, nullptr);
  EXPECT_EQ(ctx.convolutions, nullptr);
}

} // namespace
