//===- StrictMemory.cpp - the strict memory mode's switch -----------------===//
//
// AMPC_CUDA_SIM_STRICT_MEMORY=1 asks a --target=cuda-sim model not to zero
// its planned buffers at init (CudaKernels.cuh `init`): they keep the 0xFF
// bytes every cudaMalloc allocation starts with here (NaN in f32, f16 and
// bf16), so a kernel that reads a buffer before an op wrote it turns its
// result to NaN instead of silently reading 0. CI runs the CUDA execution's
// lit tests with it (docs/testing.md).
//
//===----------------------------------------------------------------------===//

#include "ampc/CudaSim/CudaSim.h"

#include <cstdlib>
#include <cstring>

namespace ampc::sim {

bool strictMemory() {
  const char *value = std::getenv("AMPC_CUDA_SIM_STRICT_MEMORY");
  return value && std::strcmp(value, "1") == 0;
}

} // namespace ampc::sim
