//===- Sim.h - the CUDA execution's internal interface ----------*- C++ -*-===//
//
// What the parts of the CUDA execution on the CPU (libampc_cudasim: the
// runtime API in Runtime.cpp, kernel execution in Execution.cpp, cuBLASLt
// in CublasLt.cpp, cuDNN's convolutions in Cudnn.cpp) share: the device memory registry that the strict checks
// consult, the streams that order (and defer) work, and the detailed error
// messages that cudaGetErrorString / cublasLtGetStatusString hand back.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_RUNTIME_CUDASIM_SIM_H
#define AMPC_RUNTIME_CUDASIM_SIM_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ampc::sim {

/// What a pointer is, as the device would see it.
enum class Memory {
  Device,      // inside a live cudaMalloc allocation
  FreedDevice, // inside an allocation that cudaFree released
  PinnedHost,  // inside a live cudaMallocHost / cudaHostAlloc allocation
  Host,        // anything else: pageable host memory (or garbage)
};

/// Classifies [pointer, pointer + bytes): the whole range must lie in one
/// allocation to be Device or PinnedHost (a range that starts in a device
/// allocation and runs past its end is reported as Host, i.e. not device
/// memory).
Memory classify(const void *pointer, size_t bytes);

/// The live allocation that holds `pointer` when it is memory every block
/// of a kernel sees (device memory or pinned host memory): its start and
/// size. False for anything else (the race check's shared, stack and heap
/// memory).
bool findGlobal(const void *pointer, const void *&base, size_t &bytes);

/// Checks that [pointer, pointer + bytes) is live device memory; otherwise
/// records a detailed message ("CALL: WHAT is freed device memory", "... is a
/// host pointer", "... runs past the end of its allocation") and returns false.
/// A null pointer with bytes == 0 passes.
bool checkDevice(const void *pointer, size_t bytes, const char *call,
                 const char *what);

/// As checkDevice, but live pinned host memory (cudaMallocHost,
/// cudaHostAlloc) passes too: under unified addressing every pinned
/// allocation is mapped into the device's address space at its host
/// address, so a kernel argument or a copy's device side may be one.
bool checkDeviceAccessible(const void *pointer, size_t bytes, const char *call,
                           const char *what);

/// The devices the execution has: AMPC_CUDA_SIM_DEVICES (1 to 16, default
/// 1), all alike; memory is one address space, as under unified
/// addressing.
int deviceCount();
/// This host thread's current device (cudaSetDevice).
int currentDevice();
/// Whether a kernel may run on `stream` now: a stream created on another
/// device than the current one may not (CUDA: "a kernel launch will fail if
/// it is issued to a stream that is not associated to the current device");
/// records the failure (cudaErrorInvalidResourceHandle) if not.
bool checkStreamDevice(cudaStream_t stream, const char *call);

/// The bytes after a result that the next device work of a host thread
/// must not write (guardNextLaunch, Guards.cpp).
struct Guard {
  unsigned char *begin;
  size_t bytes;
  size_t resultBytes;
  std::string what;
};
using Guards = std::vector<Guard>;
/// The guards declared on this host thread since the last launch, which
/// takes them (whether it is then queued or refused). GEMMs have none: a
/// failure between a declaration and cublasLtMatmul (a plan the library
/// could not build) would leave it to a later launch.
Guards takeGuards();
/// Fills the guards with their pattern: before the work runs.
void fillGuards(const Guards &guards);
/// "" if every guard still holds its pattern, else what the work did to
/// which ("wrote past the end of ...").
std::string brokenGuard(const Guards &guards);

/// Records `message` as the detail of `error` (what cudaGetErrorString
/// returns for it until the next failure of the same code), prints it to
/// stderr prefixed "ampc cuda-sim: ", makes it the last error of the
/// calling thread (cudaGetLastError) and returns `error`.
cudaError_t fail(cudaError_t error, const std::string &message);

/// The same for cuBLASLt: the detail cublasLtGetStatusString returns.
cublasStatus_t failBlas(cublasStatus_t status, const std::string &message);

/// Whether [x, x + xBytes) and [y, y + yBytes) share a byte (empty ranges
/// share none): the libraries' rule that an output overlaps no input.
inline bool overlaps(const void *x, uint64_t xBytes, const void *y,
                     uint64_t yBytes) {
  const auto a = reinterpret_cast<uintptr_t>(x),
             b = reinterpret_cast<uintptr_t>(y);
  return xBytes && yBytes && a < b + yBytes && b < a + xBytes;
}

/// The simulated device's multiprocessors, as cudaGetDeviceProperties and
/// cudaDeviceGetAttribute report them: few, because a cooperative launch
/// runs every block of its grid at once (each thread on a fiber with its
/// own stack) and its grid may be as large as the device holds at once.
constexpr int kMultiprocessors = 2;
/// How many blocks of `threadsPerBlock` threads with `dynamicSharedBytes`
/// of dynamic shared memory one multiprocessor holds at once (what
/// cudaOccupancyMaxActiveBlocksPerMultiprocessor answers, and what a
/// cooperative launch is checked against): an H100's 2048 threads, 32
/// blocks and 228 KiB of shared memory per multiprocessor. Static shared
/// memory (AMPC_SHARED) is not counted: the execution cannot know it
/// before the kernel runs. 0 when one block does not fit.
int blocksPerMultiprocessor(int threadsPerBlock, size_t dynamicSharedBytes);

/// What a piece of queued work is, for the counts of Counters.h.
enum class Work { Kernel, Gemm, Copy, Memset, HostFunction, Graph, Cudnn };

/// Queues `work` on `stream` (0, cudaStreamLegacy and cudaStreamPerThread
/// name the legacy default stream). Work runs later, in stream order, when
/// a synchronising call needs it; work on streams that CUDA leaves unordered
/// is run as late as possible. `work` returns cudaSuccess or the error it
/// failed with (after calling fail); an error becomes sticky, as a fault on
/// a real device does, and every later synchronising call reports it.
/// `call` names the caller in messages; the work is counted as `kind` and
/// `name` when it runs (Counters.h), which is why the caller says what it
/// is. Returns cudaErrorInvalidResourceHandle for a destroyed or unknown
/// stream.
cudaError_t enqueue(cudaStream_t stream, const char *call, Work kind,
                    std::string name, std::function<cudaError_t()> work);

} // namespace ampc::sim

#endif // AMPC_RUNTIME_CUDASIM_SIM_H
