//===- CudaSim.h - CUDA device code on the CPU (--target=cuda-sim) -*- C++ -*-===//
//
// Included first by CudaKernels.cuh when AMPC_CUDA_SIM is defined, so that
// the CUDA target's generated source, unchanged, compiles with the host C++
// compiler against CUDA's own headers (types, enums and the runtime and
// cuBLASLt declarations) and runs on libampc_cudasim, which defines those
// functions on the CPU (lib/Runtime/CudaSim).
//
// Kernels are plain functions here; every thread of every block runs the
// body on its own fiber, so __syncthreads, warp shuffles and votes keep
// CUDA's semantics (a thread waits until every thread it synchronises with
// arrives). Shared memory is declared with AMPC_SHARED(type, name) and
// AMPC_DYNAMIC_SHARED(type, name) (CudaKernels.cuh gives nvcc the
// __shared__ declarations they stand for): here each is a reference into
// the running block's own shared memory, which starts as 0xFF bytes in
// every block (NaN in f32, f16 and bf16; -1 in integers), so a read of what
// no thread of the block wrote shows. A plain __shared__ does not compile:
// as a function static it would be one copy for every block. Atomics are
// plain read-modify-writes: threads switch only at synchronisation points.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_RUNTIME_CUDASIM_CUDASIM_H
#define AMPC_RUNTIME_CUDASIM_CUDASIM_H

// CUDA's host_defines.h keeps these when they are already defined.
#define __global__
#define __device__
#define __host__
#define __shared__                                                             \
  static_assert(false, "cuda-sim: declare shared memory with AMPC_SHARED or "  \
                       "AMPC_DYNAMIC_SHARED (ampc/CudaSim/CudaSim.h)");
#define __launch_bounds__(...)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

namespace ampc::sim {

/// The built-in variables of the simulated thread that runs now.
struct ThreadIndex {
  uint3 threadIdx, blockIdx;
  dim3 blockDim, gridDim;
  unsigned lane; // linear thread index % 32
};
/// Set by the scheduler before it resumes a thread.
extern ThreadIndex *current;

/// Where in the kernel's source a barrier or warp operation is called: the
/// threads that one synchronisation releases must all have called the same
/// one (a GPU leaves it undefined otherwise).
struct CallSite {
  const char *file;
  int line;
};
/// The last parameters of a CUDA intrinsic: its caller's file and line
/// (GCC and Clang give the caller's when the builtin is the whole default
/// argument, not when it is inside one).
#define AMPC_SIM_CALL_SITE                                                     \
  const char *callerFile = __builtin_FILE(), int callerLine = __builtin_LINE()
#define AMPC_SIM_CALLER (::ampc::sim::CallSite{callerFile, callerLine})

/// __syncthreads: waits for every thread of the block.
void syncThreads(CallSite site);
/// ampc::cuda::gridSync: waits for every thread of the grid, which must
/// have been launched cooperatively (launchCooperative: its blocks run at
/// once) and reach it from the same `site`.
void gridSync(CallSite site);
/// A warp-synchronous step: waits for every lane of `mask` (all in the
/// caller's warp, the caller among them) and returns the 32 values the
/// lanes brought (lanes outside the mask: unspecified). The lanes must
/// bring the same `op` from the same `site`.
const uint64_t *warpExchange(unsigned mask, uint64_t value, const char *op,
                             CallSite site);
/// A warp-wide collective (the wmma operations): every lane of the
/// caller's warp (all 32 must exist) waits here, having called it from the
/// same `site` with the same `op` (a divergent call fails the kernel), and
/// each copies the `bytes` bytes every lane brought at `mine` into `all`
/// (lane l's at all + l * bytes); then the lanes wait for each other again,
/// so that none changes what it brought before every lane has copied it.
/// As a warp operation it orders the lanes' memory accesses for the race
/// check.
void warpGather(const void *mine, size_t bytes, void *all, const char *op,
                CallSite site);
/// Reports a lane read outside the mask (undefined on a GPU).
void badLane(const char *op, unsigned mask, int lane);

/// The byte shared memory starts as in every block: 0xFF, NaN in every
/// floating-point type the kernels use and -1 in every integer type.
constexpr unsigned char kUninitialisedByte = 0xFF;
/// The running block's copy of the shared array that `key` (a static of
/// its declaration) identifies: `bytes` bytes aligned to `align`, placed
/// when the block's first thread reaches the declaration and the same for
/// every thread of the block. A block that needs more than the device
/// gives (48 KiB with the dynamic part) fails.
void *sharedArray(const void *key, size_t bytes, size_t align);
/// The running block's dynamic shared memory (the launch's `sharedBytes`).
void *dynamicShared();
template <typename T> using SharedType = T;

/// Whether AMPC_CUDA_SIM_STRICT_MEMORY=1 (read at each call): a model's
/// planned buffers are not zeroed at init, so they start as cudaMalloc
/// leaves memory here (0xFF bytes, NaN).
bool strictMemory();

/// The next launch on this host thread writes `bytes` bytes at `data` and
/// nothing in the `guard` bytes after them (AMPC_GUARD). In the strict
/// memory mode the execution fills those bytes with a pattern before the
/// kernel runs and fails it (cudaErrorIllegalAddress, naming `what`) if
/// they changed; otherwise the guard is forgotten at the launch.
void guardNextLaunch(const void *data, size_t bytes, size_t guard,
                     const char *what);

/// What a launch checks and queues (Execution.cpp).
struct Launch {
  const char *name;
  dim3 grid, block;
  size_t sharedBytes;
  cudaStream_t stream;
  size_t parameterBytes;
  const void *const *pointers; // the pointer arguments, checked as device memory
  int numPointers;
  /// Every block at once, for ampc::cuda::gridSync; the grid may not exceed
  /// what the device holds at once (cudaErrorCooperativeLaunchTooLarge).
  bool cooperative = false;
};
/// Checks the configuration and the pointer arguments and queues the
/// kernel; the result is what cudaGetLastError returns next.
void launchKernel(const Launch &launch, void (*body)(void *), void *arguments,
                  void (*destroy)(void *));

template <typename T> void collectPointer(const T &value, const void **out,
                                          int &count) {
  if constexpr (std::is_pointer_v<T>)
    out[count++] = static_cast<const void *>(value);
}

/// kernel<<<grid, block, shared, stream>>>(args...), or with `cooperative`
/// a cooperative launch: the arguments are converted to the parameter
/// types and copied, as CUDA does.
template <typename... P, typename... A>
void launchAs(bool cooperative, const char *name, void (*kernel)(P...),
              dim3 grid, dim3 block, size_t sharedBytes, cudaStream_t stream,
              A &&...args) {
  using Arguments = std::tuple<std::decay_t<P>...>;
  struct Closure {
    void (*kernel)(P...);
    Arguments arguments;
  };
  auto *closure =
      new Closure{kernel, Arguments(static_cast<std::decay_t<P>>(args)...)};
  const void *pointers[sizeof...(P) + 1] = {};
  int numPointers = 0;
  std::apply(
      [&](const auto &...value) {
        (collectPointer(value, pointers, numPointers), ...);
      },
      closure->arguments);
  Launch l{name,        grid,        block,
           sharedBytes, stream,      (0 + ... + sizeof(P)),
           pointers,    numPointers, cooperative};
  launchKernel(
      l,
      [](void *raw) {
        auto *c = static_cast<Closure *>(raw);
        std::apply(c->kernel, c->arguments);
      },
      closure, [](void *raw) { delete static_cast<Closure *>(raw); });
}
template <typename... P, typename... A>
void launch(const char *name, void (*kernel)(P...), dim3 grid, dim3 block,
            size_t sharedBytes, cudaStream_t stream, A &&...args) {
  launchAs(false, name, kernel, grid, block, sharedBytes, stream,
           std::forward<A>(args)...);
}
/// A cooperative launch (cudaLaunchKernelEx with
/// cudaLaunchAttributeCooperative).
template <typename... P, typename... A>
void launchCooperative(const char *name, void (*kernel)(P...), dim3 grid,
                       dim3 block, size_t sharedBytes, cudaStream_t stream,
                       A &&...args) {
  launchAs(true, name, kernel, grid, block, sharedBytes, stream,
           std::forward<A>(args)...);
}

} // namespace ampc::sim

/// __shared__ `type` `name` (an array type: `float[256]`), per block.
#define AMPC_SHARED(type, name)                                                \
  static char name##SharedKey;                                                 \
  ::ampc::sim::SharedType<type> &name =                                        \
      *static_cast<::ampc::sim::SharedType<type> *>(::ampc::sim::sharedArray(  \
          &name##SharedKey, sizeof(::ampc::sim::SharedType<type>),             \
          alignof(::ampc::sim::SharedType<type>)))
/// extern __shared__ `type` `name`[]: the launch's dynamic shared memory.
#define AMPC_DYNAMIC_SHARED(type, name)                                        \
  type *name = static_cast<type *>(::ampc::sim::dynamicShared())

#define threadIdx (::ampc::sim::current->threadIdx)
#define blockIdx (::ampc::sim::current->blockIdx)
#define blockDim (::ampc::sim::current->blockDim)
#define gridDim (::ampc::sim::current->gridDim)
#ifndef warpSize
#define warpSize 32
#endif

inline void __syncthreads(AMPC_SIM_CALL_SITE) {
  ::ampc::sim::syncThreads(AMPC_SIM_CALLER);
}
inline void __syncwarp(unsigned mask = 0xFFFFFFFFu, AMPC_SIM_CALL_SITE) {
  ::ampc::sim::warpExchange(mask, 0, "__syncwarp", AMPC_SIM_CALLER);
}
inline void __threadfence() {}
inline void __threadfence_block() {}

namespace ampc::sim {
template <typename T>
T shuffle(const char *op, CallSite site, unsigned mask, T value, int source,
          bool keepOwn) {
  static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  const uint64_t *lanes = warpExchange(mask, bits, op, site);
  if (keepOwn)
    return value;
  if (!(mask >> source & 1u))
    badLane(op, mask, source);
  T out;
  std::memcpy(&out, &lanes[source], sizeof(T));
  return out;
}
} // namespace ampc::sim

template <typename T>
T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32,
              AMPC_SIM_CALL_SITE) {
  const int lane = static_cast<int>(::ampc::sim::current->lane);
  const int base = lane & ~(width - 1);
  return ::ampc::sim::shuffle("__shfl_sync", AMPC_SIM_CALLER, mask, var,
                              base + (srcLane & (width - 1)), false);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32,
                 AMPC_SIM_CALL_SITE) {
  const int lane = static_cast<int>(::ampc::sim::current->lane);
  const int base = lane & ~(width - 1), source = lane - static_cast<int>(delta);
  return ::ampc::sim::shuffle("__shfl_up_sync", AMPC_SIM_CALLER, mask, var,
                              source, source < base);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32,
                   AMPC_SIM_CALL_SITE) {
  const int lane = static_cast<int>(::ampc::sim::current->lane);
  const int base = lane & ~(width - 1), source = lane + static_cast<int>(delta);
  return ::ampc::sim::shuffle("__shfl_down_sync", AMPC_SIM_CALLER, mask, var,
                              source, source >= base + width);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = 32,
                  AMPC_SIM_CALL_SITE) {
  const int lane = static_cast<int>(::ampc::sim::current->lane);
  const int base = lane & ~(width - 1), source = lane ^ laneMask;
  return ::ampc::sim::shuffle("__shfl_xor_sync", AMPC_SIM_CALLER, mask, var,
                              source, source >= base + width || source < base);
}
namespace ampc::sim {
inline unsigned vote(const char *op, CallSite site, unsigned mask,
                     int predicate) {
  const uint64_t *lanes = warpExchange(mask, predicate != 0, op, site);
  unsigned bits = 0;
  for (int l = 0; l < 32; ++l)
    if ((mask >> l & 1u) && lanes[l])
      bits |= 1u << l;
  return bits;
}
} // namespace ampc::sim
inline unsigned __ballot_sync(unsigned mask, int predicate,
                              AMPC_SIM_CALL_SITE) {
  return ::ampc::sim::vote("__ballot_sync", AMPC_SIM_CALLER, mask, predicate);
}
inline int __any_sync(unsigned mask, int predicate, AMPC_SIM_CALL_SITE) {
  return ::ampc::sim::vote("__any_sync", AMPC_SIM_CALLER, mask, predicate) != 0;
}
inline int __all_sync(unsigned mask, int predicate, AMPC_SIM_CALL_SITE) {
  return ::ampc::sim::vote("__all_sync", AMPC_SIM_CALLER, mask, predicate) ==
         mask;
}

// Atomics: the threads of the execution switch only where they
// synchronise, so a read-modify-write cannot be interleaved. They are what
// threads may share a location with, so the race check (a library built
// with AMPC_CUDA_SIM_RACECHECK=1, lib/Runtime/CudaSim/RaceCheck.cpp) does
// not see their accesses: not instrumented, and never inlined into code
// that is.
#define AMPC_SIM_NO_RACE_CHECK __attribute__((no_sanitize("thread")))
#define AMPC_SIM_ATOMIC(NAME, EXPR)                                            \
  template <typename T>                                                        \
  AMPC_SIM_NO_RACE_CHECK inline T NAME(T *address, T value) {                  \
    T old = *address;                                                          \
    *address = (EXPR);                                                         \
    return old;                                                                \
  }
AMPC_SIM_ATOMIC(atomicAdd, old + value)
AMPC_SIM_ATOMIC(atomicSub, old - value)
AMPC_SIM_ATOMIC(atomicExch, value)
AMPC_SIM_ATOMIC(atomicMax, old < value ? value : old)
AMPC_SIM_ATOMIC(atomicMin, value < old ? value : old)
AMPC_SIM_ATOMIC(atomicAnd, old &value)
AMPC_SIM_ATOMIC(atomicOr, old | value)
AMPC_SIM_ATOMIC(atomicXor, old ^ value)
#undef AMPC_SIM_ATOMIC
template <typename T>
AMPC_SIM_NO_RACE_CHECK inline T atomicCAS(T *address, T compare, T value) {
  T old = *address;
  if (old == compare)
    *address = value;
  return old;
}

#include "ampc/CudaSim/Wmma.h"

#endif // AMPC_RUNTIME_CUDASIM_CUDASIM_H
