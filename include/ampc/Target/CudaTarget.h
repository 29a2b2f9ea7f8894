//===- CudaTarget.h - CUDA model libraries ----------------------*- C++ -*-===//
//
// The CUDA target writes a model as CUDA C++ implementing the model ABI
// (include/ampc/Runtime/ModelAbi.h) on top of cuBLASLt and the kernels of
// include/ampc/Kernels/Cuda/CudaKernels.cuh, then compiles it with nvcc into a
// shared library that libampc_runtime loads. The library links cudart and
// cuBLASLt only.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TARGET_CUDATARGET_H
#define AMPC_TARGET_CUDATARGET_H

#include "ampc/Target/LibraryEmitter.h"

#include <string>
#include <vector>

namespace ampc {

/// The runtime header every generated CUDA source includes (the
/// precompiled header of the cuda-sim compile holds it too).
inline constexpr const char kCudaKernelsHeader[] =
    "ampc/Kernels/Cuda/CudaKernels.cuh";

/// Writes the CUDA library of the module (after the pipeline) into
/// `artifact`: its code, its data and the initial state (parameters,
/// training state, constants). Fails with a diagnostic at the op the target
/// cannot compile.
mlir::LogicalResult emitCudaArtifact(mlir::ModuleOp module,
                                     const LibraryOptions &options,
                                     Artifact &artifact);
/// emitCudaArtifact's library as its text form (Artifact::text) on
/// `source`, the initial state in `blob`.
mlir::LogicalResult emitCudaSource(mlir::ModuleOp module,
                                   const LibraryOptions &options,
                                   llvm::raw_ostream &source,
                                   std::string &blob);

/// Whether this build has the CUDA target: CUDA's headers were found when
/// it was configured (docs/testing.md, A CPU-only build). Without it the
/// CUDA source is still written, and compiling it fails with
/// kCudaTargetUnavailable.
bool cudaTargetBuilt();

/// What --target=cuda and --target=cuda-sim say in a build without the CUDA
/// target.
extern const char kCudaTargetUnavailable[];

/// Where nvcc is: $NVCC, nvcc on PATH, or /usr/local/cuda/bin/nvcc; empty
/// when none is found.
std::string findNvcc();

/// Whether this machine can build CUDA libraries: nvcc and the cuBLASLt
/// header and library beside it.
bool cudaToolchainAvailable();

/// Whether this machine has a CUDA driver (libcuda.so.1 loads), so that
/// CUDA libraries built here can run here.
bool cudaDriverAvailable();

/// Compiles the library `source` (emitCudaArtifact's, or a source's text
/// read back), whose text form is at `sourcePath`, into the shared library
/// `output` for each architecture of `gpuArchs` (e.g. "sm_80", "sm_90a"),
/// plus PTX of the newest for later GPUs, and refuses the result as
/// checkCudaResources does (from this build's own PTX and ptxas report).
/// On failure sets `error` to one line (nvcc's first error).
bool compileCudaLibrary(const Artifact &source, llvm::StringRef sourcePath,
                        llvm::StringRef output,
                        const std::vector<std::string> &gpuArchs,
                        std::string &error);

/// Compiles the library `source` (text form at `sourcePath`, as for
/// compileCudaLibrary) with the host C++ compiler
/// against the CUDA execution on the CPU (libampc_cudasim: CUDA's runtime
/// and cuBLASLt on the CPU, strict where a GPU is; --target=cuda-sim). When
/// nvcc is found, the source's kernels are first checked as the GPU build
/// would compile them (checkCudaResources), unless `checkResources` is
/// false. On failure sets `error`.
bool compileCudaSimLibrary(const Artifact &source, llvm::StringRef sourcePath,
                           llvm::StringRef output, bool checkResources,
                           std::string &error);

/// Compiles the source's device code for sm_90a with nvcc and ptxas and
/// refuses what the library could not run on a GPU although it compiles:
/// device recursion (a cycle in the PTX call graph; ptxas cannot size the
/// stack it needs) and a kernel whose stack (ptxas's cumulative stack size)
/// exceeds the 1 KiB a thread gets by default (cudaLimitStackSize, which
/// the runtime does not raise). On failure sets `error` to one line naming
/// the kernel.
bool checkCudaResources(llvm::StringRef sourcePath, std::string &error);

} // namespace ampc

#endif // AMPC_TARGET_CUDATARGET_H
