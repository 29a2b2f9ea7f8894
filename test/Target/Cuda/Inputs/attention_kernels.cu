// Fused attention's CUDA kernels (include/ampc/Kernels/Cuda/CudaAttention.cuh)
// instantiated for FP16 and BF16 at the ends and the middle of the head
// dimensions they take (16, 64 and 128: forward, pre-pass, backward; 256:
// the forward), so that nvcc compiles their WMMA for real GPUs
// (attention-nvcc.test). -DAMPC_ALL_HEAD_DIMS adds every other multiple of
// 16 up to 128 (about 40 s here, too long for the suite).
#include "ampc/Kernels/Cuda/CudaKernels.cuh"

namespace att = ampc::cuda::attention;

template <typename T, int D> void instantiate() {
  const att::Strides s{};
  const att::Shape p{};
  T *x = nullptr;
  float *f = nullptr;
  (void)att::forward<T, D>(x, s, x, s, x, s, f, s, x, s, f, p, nullptr);
  if constexpr (D <= 128) {
    (void)att::prepass<T, D>(x, s, x, s, f, p, nullptr);
    (void)att::backward<T, D>(x, s, x, s, x, s, x, s, f, s, f, f, x, s, x, s,
                              x, s, p, nullptr);
  }
}

template <typename T> void instantiateAll() {
  instantiate<T, 16>();
  instantiate<T, 64>();
  instantiate<T, 128>();
  instantiate<T, 256>();
#ifdef AMPC_ALL_HEAD_DIMS
  instantiate<T, 32>();
  instantiate<T, 48>();
  instantiate<T, 80>();
  instantiate<T, 96>();
  instantiate<T, 112>();
#endif
}

void instantiateAttention() {
  instantiateAll<__half>();
  instantiateAll<__nv_bfloat16>();
}
