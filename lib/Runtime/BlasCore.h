//===- BlasCore.h - OpenBLAS's kernels for the CPU the process runs on -----===//
//
// Debian 12's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernel set when it
// is loaded, from the CPU's family and model numbers. A model it does not
// know gets its generic Prescott kernels (SSE3): on an Emerald Rapids Xeon
// (family 6, model 207, AVX-512) sgemm then runs at a fraction of the
// speed its Cooperlake kernels reach. OPENBLAS_CORETYPE, read by OpenBLAS
// when it loads, overrides the choice. The runtime sets it from the CPU's
// features for the one dlopen that brings OpenBLAS into the process, unless
// the user set it or OpenBLAS is already loaded (docs/design.md, "OpenBLAS's
// kernel set").
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_RUNTIME_BLASCORE_H
#define AMPC_RUNTIME_BLASCORE_H

#include <string>

namespace ampc {

/// The instruction-set features the choice depends on.
struct CpuFeatures {
  bool avx2 = false, fma = false;
  /// AVX-512 F, BW, VL and DQ together (SkylakeX's kernels need all four).
  bool avx512 = false;
  bool avx512bf16 = false;
};

/// The features of the CPU this process runs on (as the OS enables them).
CpuFeatures hostCpuFeatures();

/// The OPENBLAS_CORETYPE for a CPU with `features`: "Cooperlake" (AVX-512
/// with BF16), "SkylakeX" (AVX-512), "Haswell" (AVX2 and FMA), or "" where
/// OpenBLAS's own choice stands.
const char *openBlasCoreFor(const CpuFeatures &features);

/// Sets OPENBLAS_CORETYPE for the lifetime of the object when OpenBLAS is
/// not loaded in the process yet, the variable is unset and the CPU has a
/// core to name; restores the environment when destroyed. Construct it
/// around the dlopen of a library that may load OpenBLAS.
class ScopedBlasCore {
public:
  ScopedBlasCore();
  ~ScopedBlasCore();
  ScopedBlasCore(const ScopedBlasCore &) = delete;
  ScopedBlasCore &operator=(const ScopedBlasCore &) = delete;

private:
  bool set = false;
};

} // namespace ampc

#endif // AMPC_RUNTIME_BLASCORE_H
