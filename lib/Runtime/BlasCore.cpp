//===- BlasCore.cpp - OpenBLAS's kernels for the CPU the process runs on ---===//

#include "BlasCore.h"

#include <cstdlib>
#include <dlfcn.h>

namespace ampc {

CpuFeatures hostCpuFeatures() {
  __builtin_cpu_init();
  CpuFeatures features;
  features.avx2 = __builtin_cpu_supports("avx2");
  features.fma = __builtin_cpu_supports("fma");
  features.avx512 = __builtin_cpu_supports("avx512f") &&
                    __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl") &&
                    __builtin_cpu_supports("avx512dq");
  features.avx512bf16 = __builtin_cpu_supports("avx512bf16");
  return features;
}

const char *openBlasCoreFor(const CpuFeatures &features) {
  if (features.avx512)
    return features.avx512bf16 ? "Cooperlake" : "SkylakeX";
  if (features.avx2 && features.fma)
    return "Haswell";
  return "";
}

ScopedBlasCore::ScopedBlasCore() {
  if (std::getenv("OPENBLAS_CORETYPE"))
    return;
  // Loaded already (by this runtime for another model, by NumPy, by the
  // application): its kernels are chosen.
  if (void *loaded = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD)) {
    dlclose(loaded);
    return;
  }
  const char *core = openBlasCoreFor(hostCpuFeatures());
  if (!*core)
    return;
  set = setenv("OPENBLAS_CORETYPE", core, /*overwrite=*/0) == 0;
}

ScopedBlasCore::~ScopedBlasCore() {
  if (set)
    unsetenv("OPENBLAS_CORETYPE");
}

} // namespace ampc
