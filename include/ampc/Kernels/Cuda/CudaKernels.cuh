//===- CudaKernels.cuh - what the CUDA target's generated code runs on -*- C++ -*-===//
//
// Included by every library the CUDA target writes (lib/Target/Cuda) and
// compiled with it by nvcc. It holds the instance context (one device arena,
// the stream, the cuBLASLt handle and workspace, the GEMM plan cache, the
// cuDNN handle, convolution plans and workspace, the error message), the
// cuBLASLt GEMM with its epilogues, the convolutions through cuDNN, and the
// kernels the emitter calls for ops that are not elementwise (the emitter
// generates the elementwise and fused kernels itself). Arithmetic matches the CPU target:
// f16/bf16 values are loaded to float, computed in float (double for f64)
// and rounded to nearest even once when stored; the training arithmetic is
// TrainMath.h, shared with the CPU kernels.
//
// Errors: every CUDA runtime, cuBLASLt and cuDNN call is checked; a
// failure puts "CALL: error string (node ...)" in the context and the
// library function returns non-zero. Range errors found on the device (a
// label or index out of range) set a code in the arena that the next
// synchronising call reports.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_RUNTIME_CUDAKERNELS_CUH
#define AMPC_RUNTIME_CUDAKERNELS_CUH

// --target=cuda-sim: the same source, compiled by the host compiler against
// the CUDA execution on the CPU (lib/Runtime/CudaSim).
#if defined(AMPC_CUDA_SIM)
#include "ampc/CudaSim/CudaSim.h"
#else
// Shared memory, declared so that cuda-sim can give each block its own
// (CudaSim.h): `type` is an array type (`float[256]`).
namespace ampc::cuda {
template <typename T> using SharedType = T;
} // namespace ampc::cuda
#define AMPC_SHARED(type, name) __shared__ ::ampc::cuda::SharedType<type> name
#define AMPC_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#include <cooperative_groups.h>
#endif

#include "ampc/Runtime/ModelAbi.h"
#include "ampc/Kernels/Common/TrainMath.h"

#include <cublasLt.h>
#include <cudnn.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <mutex>
#include <type_traits>
#include <new>
#include <tuple>
#include <utility>

namespace ampc::cuda {

//===----------------------------------------------------------------------===//
// Loads and stores
//===----------------------------------------------------------------------===//

AMPC_HD inline float loadF16(uint16_t v) {
  return __half2float(__ushort_as_half(v));
}
AMPC_HD inline uint16_t storeF16(float v) {
  return __half_as_ushort(__float2half_rn(v));
}
AMPC_HD inline float loadBf16(uint16_t v) {
  return __bfloat162float(__ushort_as_bfloat16(v));
}
AMPC_HD inline uint16_t storeBf16(float v) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

/// How the templated kernels read and write a storage type: As<T> for
/// plain types, AsF16 / AsBf16 for 16-bit floats held as bits.
template <typename T> struct As {
  using Storage = T;
  AMPC_HD static T load(T v) { return v; }
  template <typename C> AMPC_HD static T store(C v) { return static_cast<T>(v); }
};
struct AsF16 {
  using Storage = uint16_t;
  AMPC_HD static float load(uint16_t v) { return loadF16(v); }
  template <typename C> AMPC_HD static uint16_t store(C v) {
    return storeF16(static_cast<float>(v));
  }
};
struct AsBf16 {
  using Storage = uint16_t;
  AMPC_HD static float load(uint16_t v) { return loadBf16(v); }
  template <typename C> AMPC_HD static uint16_t store(C v) {
    return storeBf16(static_cast<float>(v));
  }
};

//===----------------------------------------------------------------------===//
// The instance context
//===----------------------------------------------------------------------===//

/// The heuristic's candidates a GEMM plan asks for (issue 37, item 3).
constexpr int kGemmCandidates = 4;

struct GemmPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo;
  /// The heuristic's other candidates, in its order: the fallbacks when
  /// `algo` does not run.
  int fallbacks = 0;
  cublasLtMatmulAlgo_t fallback[kGemmCandidates - 1];
};

/// Lives in the host state block the runtime allocates; `init` constructs
/// it, `release` destroys it.
struct Context {
  /// The arena: the state laid out as the CPU target lays it out
  /// (parameters, training state, constants, activations, inputs), then the
  /// cuBLASLt workspace.
  unsigned char *device = nullptr;
  size_t stateBytes = 0;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  cudaStream_t stream = nullptr;
  bool ownStream = false;
  /// The device current when the model was loaded: its arena, stream and
  /// cuBLASLt handle are that device's (DeviceScope).
  int deviceOrdinal = 0;
  cublasLtHandle_t lt = nullptr;
  /// Pinned host memory the loss of each queued step is copied to before a
  /// host function copies it to the caller's buffer: a ring of kLossSlots
  /// slots, each with the event that says its host function has run.
  unsigned char *pinned = nullptr;
  struct LossSlot {
    unsigned char *pinned;
    void *destination;
    size_t bytes;
    cudaEvent_t done;
  } slots[64];
  uint64_t queued = 0;
  /// Offset in the arena of the device error code (int32).
  uint64_t errorOffset = 0;
  const char *const *deviceErrors = nullptr;
  int32_t numDeviceErrors = 0;
  std::map<std::tuple<int, int, int, int, int64_t, int64_t, int64_t, int64_t,
                      int64_t, int64_t, int64_t, int, int, int, int,
                      int64_t, int64_t, int64_t>,
           GemmPlan> *plans = nullptr;
  /// The training step's kernels as one CUDA graph (issue 37, item 7):
  /// captured at the first step, replayed after; the loss's device address
  /// the capture recorded. `graphs` false (AMPC_CUDA_GRAPHS=0, or a stream
  /// that cannot be captured) runs the kernels one launch at a time.
  bool graphs = true;
  cudaGraphExec_t stepGraph = nullptr;
  /// The convolutions of the library (initConvolutions): the cuDNN handle
  /// on the model's stream, one plan per convolution and direction, and
  /// the one workspace they share (the largest any plan's algorithm needs).
  cudnnHandle_t dnn = nullptr;
  struct ConvolutionPlan *convolutions = nullptr;
  int numConvolutions = 0;
  void *convolutionWorkspace = nullptr;
  size_t convolutionWorkspaceBytes = 0;
  /// GEMM tuning (issue 37, item 3): a new GEMM plan times the heuristic's
  /// candidates on its first run outside a capture and keeps the fastest
  /// (AMPC_CUDA_GEMM_TUNING=0: the heuristic's first, the same algorithm
  /// in every process). With graphs, the first training step runs outside
  /// the capture for that (`stepTuned`), the second is captured.
  bool tuneGemms = true;
  bool stepTuned = false;
  const void *stepLoss = nullptr;
  /// Whether the caller's tensors of the call in progress are on the
  /// device (ampc_model_train_step_device, ampc_model_infer_device; issue
  /// 37, item 2) or in host memory: the kind of the staging copies.
  bool callerOnDevice = false;
  /// Host batches of the training step, staged (issue 37, item 2): two
  /// slots, each a pinned buffer and a device buffer of the inputs'
  /// staging region; the copy to the device runs on `copyStream`, beside
  /// the previous step's kernels. Made at the first host step.
  cudaStream_t copyStream = nullptr;
  struct Stage {
    unsigned char *pinned = nullptr;
    unsigned char *device = nullptr;
    cudaEvent_t copied = nullptr;   // its copy to `device` has run
    cudaEvent_t consumed = nullptr; // `device` is in the arena
  } stages[2];
  uint64_t stagedSteps = 0;
  char message[512] = {0};
  /// Data parallel (issue 41): the ranks' communicator (null alone), the
  /// communication stream the all-reduces run on, and per bucket the
  /// events that order them: `packed` (on the model's stream, after the
  /// pack kernel) and `reduced` (on the communication stream, after the
  /// sum). A communicator without start_on_stream (host memory: the CUDA
  /// execution on the CPU) is called from a host function per bucket,
  /// which records a failure in `commError` for the next synchronising
  /// call.
  const ampc_abi_comm *comm = nullptr;
  cudaStream_t commStream = nullptr;
  struct Bucket {
    cudaEvent_t packed = nullptr, reduced = nullptr;
    struct Context *ctx = nullptr;
    int32_t request = 0, dtype = 0;
    void *buffer = nullptr;
    uint64_t count = 0;
  } *buckets = nullptr;
  int32_t numBuckets = 0;
  char commError[512] = {0};
};

inline Context &context(void *raw) { return *static_cast<Context *>(raw); }

/// Makes the model's device current for one call into the library and
/// gives the caller's back at its end: every entry point opens one, so two
/// models loaded on two devices work from one host thread, whatever device
/// the application has made current in between (issue 37, item 8). CUDA's
/// current device is per host thread; a model's calls then work from any
/// thread too.
class DeviceScope {
public:
  explicit DeviceScope(void *raw) {
    int now = 0;
    if (cudaGetDevice(&now) == cudaSuccess &&
        now != context(raw).deviceOrdinal &&
        cudaSetDevice(context(raw).deviceOrdinal) == cudaSuccess)
      previous = now;
  }
  ~DeviceScope() {
    if (previous >= 0)
      cudaSetDevice(previous);
  }
  DeviceScope(const DeviceScope &) = delete;
  DeviceScope &operator=(const DeviceScope &) = delete;

private:
  int previous = -1;
};

/// The copy kinds between the caller's tensors and the arena in the call
/// in progress.
inline cudaMemcpyKind fromCaller(const Context &ctx) {
  return ctx.callerOnDevice ? cudaMemcpyDeviceToDevice
                            : cudaMemcpyHostToDevice;
}
inline cudaMemcpyKind toCaller(const Context &ctx) {
  return ctx.callerOnDevice ? cudaMemcpyDeviceToDevice
                            : cudaMemcpyDeviceToHost;
}

/// Marks one call's tensors as device memory (the _device entry points).
class CallerOnDevice {
public:
  explicit CallerOnDevice(void *raw) : ctx(context(raw)) {
    ctx.callerOnDevice = true;
  }
  ~CallerOnDevice() { ctx.callerOnDevice = false; }
  CallerOnDevice(const CallerOnDevice &) = delete;
  CallerOnDevice &operator=(const CallerOnDevice &) = delete;

private:
  Context &ctx;
};

/// ModelAbi's memory_of: where `pointer` is, as cudaPointerGetAttributes
/// says (pageable memory is "unregistered", pinned "host"). Reads only the
/// model's device ordinal.
inline int32_t memoryOf(const Context &ctx, const void *pointer) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    (void)cudaGetLastError(); // older drivers: an unknown host pointer
    return AMPC_ABI_MEMORY_HOST;
  }
  switch (attributes.type) {
  case cudaMemoryTypeDevice:
    return attributes.device == ctx.deviceOrdinal
               ? AMPC_ABI_MEMORY_DEVICE
               : AMPC_ABI_MEMORY_OTHER_DEVICE;
  case cudaMemoryTypeManaged:
    return AMPC_ABI_MEMORY_MANAGED;
  default:
    return AMPC_ABI_MEMORY_HOST;
  }
}

inline int32_t fail(Context &ctx, const char *call, const char *error,
                    const char *where);

/// ModelAbi's wait_stream: an event recorded on `stream`, which the
/// model's stream waits for (on the device; the host does not block).
inline int32_t waitStream(Context &ctx, cudaStream_t stream) {
  if (stream == ctx.stream)
    return 0;
  cudaEvent_t event = nullptr;
  cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  if (e == cudaSuccess)
    e = cudaEventRecord(event, stream);
  if (e == cudaSuccess)
    e = cudaStreamWaitEvent(ctx.stream, event, 0);
  if (event)
    cudaEventDestroy(event); // released once the wait has passed
  if (e != cudaSuccess)
    return fail(ctx, "ampc_model_wait_stream", cudaGetErrorString(e),
                "the caller's stream");
  return 0;
}

inline int32_t fail(Context &ctx, const char *call, const char *error,
                    const char *where) {
  // A failed runtime call is also CUDA's "last error" until someone reads
  // it: read it now, or the next launch check (AMPC_LAUNCHED) of any later
  // call would report this handled failure as its own.
  (void)cudaGetLastError();
  std::snprintf(ctx.message, sizeof ctx.message, "%s: %s%s%s%s", call, error,
                where && *where ? " (" : "", where ? where : "",
                where && *where ? ")" : "");
  return 1;
}

#define AMPC_CUDA(ctx, call, where)                                           \
  do {                                                                        \
    cudaError_t ampcError_ = (call);                                          \
    if (ampcError_ != cudaSuccess)                                            \
      return ::ampc::cuda::fail(ctx, #call, cudaGetErrorString(ampcError_),   \
                                where);                                       \
  } while (0)
#define AMPC_CUBLAS(ctx, call, where)                                         \
  do {                                                                        \
    cublasStatus_t ampcStatus_ = (call);                                      \
    if (ampcStatus_ != CUBLAS_STATUS_SUCCESS)                                 \
      return ::ampc::cuda::fail(ctx, #call,                                   \
                                cublasLtGetStatusString(ampcStatus_), where); \
  } while (0)
#define AMPC_CUDNN(ctx, call, where)                                          \
  do {                                                                        \
    cudnnStatus_t ampcStatus_ = (call);                                       \
    if (ampcStatus_ != CUDNN_STATUS_SUCCESS)                                  \
      return ::ampc::cuda::fail(ctx, #call, cudnnGetErrorString(ampcStatus_), \
                                where);                                       \
  } while (0)
/// After a kernel launch: the launch's own error (bad configuration, no
/// device code for this GPU), not the kernel's outcome.
#define AMPC_LAUNCHED(ctx, where)                                             \
  AMPC_CUDA(ctx, cudaGetLastError(), where)

/// Before a kernel launch, for each result it writes: `bytes` bytes at
/// `data`, followed by `guard` bytes the memory plan leaves unused
/// (ampc.guard_bytes). The CUDA execution on the CPU, in its strict memory
/// mode, fails the launch's kernel if it writes into them; on a GPU it is
/// nothing.
#if defined(AMPC_CUDA_SIM)
#define AMPC_GUARD(data, bytes, guard, where)                                  \
  ::ampc::sim::guardNextLaunch(data, bytes, guard, where)
#else
#define AMPC_GUARD(data, bytes, guard, where) ((void)0)
#endif

inline const char *lastError(void *raw) { return context(raw).message; }

inline void freeConvolutions(Context &ctx);

/// Frees every resource the context holds (convolution plans, the cuDNN
/// handle and workspace, GEMM plans, handle, arena, pinned memory, events,
/// an owned stream) and forgets them.
inline void freeResources(Context &ctx) {
  freeConvolutions(ctx);
  if (ctx.stepGraph)
    cudaGraphExecDestroy(ctx.stepGraph);
  ctx.stepGraph = nullptr;
  if (ctx.plans)
    for (auto &entry : *ctx.plans) {
      cublasLtMatmulDescDestroy(entry.second.op);
      cublasLtMatrixLayoutDestroy(entry.second.a);
      cublasLtMatrixLayoutDestroy(entry.second.b);
      cublasLtMatrixLayoutDestroy(entry.second.c);
    }
  delete ctx.plans;
  ctx.plans = nullptr;
  if (ctx.lt)
    cublasLtDestroy(ctx.lt);
  ctx.lt = nullptr;
  if (ctx.device)
    cudaFree(ctx.device);
  ctx.device = nullptr;
  if (ctx.pinned)
    cudaFreeHost(ctx.pinned);
  ctx.pinned = nullptr;
  for (auto &slot : ctx.slots) {
    if (slot.done)
      cudaEventDestroy(slot.done);
    slot.done = nullptr;
  }
  for (auto &stage : ctx.stages) {
    if (stage.pinned)
      cudaFreeHost(stage.pinned);
    if (stage.device)
      cudaFree(stage.device);
    for (cudaEvent_t event : {stage.copied, stage.consumed})
      if (event)
        cudaEventDestroy(event);
    stage = Context::Stage{};
  }
  if (ctx.copyStream)
    cudaStreamDestroy(ctx.copyStream);
  ctx.copyStream = nullptr;
  for (int32_t b = 0; ctx.buckets && b < ctx.numBuckets; ++b)
    for (cudaEvent_t event : {ctx.buckets[b].packed, ctx.buckets[b].reduced})
      if (event)
        cudaEventDestroy(event);
  delete[] ctx.buckets;
  ctx.buckets = nullptr;
  ctx.numBuckets = 0;
  if (ctx.commStream)
    cudaStreamDestroy(ctx.commStream);
  ctx.commStream = nullptr;
  ctx.comm = nullptr;
  if (ctx.ownStream && ctx.stream)
    cudaStreamDestroy(ctx.stream);
  ctx.stream = nullptr;
  ctx.ownStream = false;
}

/// Constructs the context in `raw`, allocates the arena (state + workspace),
/// copies the blob to its start and zeroes the rest. `arenaBase`: where
/// the functions' planned buffers start in the state; before it is what
/// persists (the blob, the state that starts at zero, splat constants).
inline int32_t init(void *raw, const ampc_abi_config *config,
                    size_t stateBytes, const unsigned char *blob,
                    size_t blobBytes, uint64_t arenaBase, uint64_t errorOffset,
                    const char *const *deviceErrors, int32_t numDeviceErrors) {
  Context &ctx = *new (raw) Context();
  const char *graphs = std::getenv("AMPC_CUDA_GRAPHS");
  ctx.graphs = !(graphs && std::strcmp(graphs, "0") == 0);
  const char *tuning = std::getenv("AMPC_CUDA_GEMM_TUNING");
  ctx.tuneGemms = !(tuning && std::strcmp(tuning, "0") == 0);
  ctx.stateBytes = stateBytes;
  ctx.errorOffset = errorOffset;
  ctx.deviceErrors = deviceErrors;
  ctx.numDeviceErrors = numDeviceErrors;
  // A failed init frees what it took; the context stays, for its message.
  auto undo = [&](int32_t code) {
    freeResources(ctx);
    return code;
  };
  int device = 0;
  cudaDeviceProp prop;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    cudaError_t e = cudaGetLastError();
    return fail(ctx, "cudaGetDeviceProperties", cudaGetErrorString(e),
                "no usable CUDA device");
  }
  // cuBLASLt's recommended workspace: 32 MiB on Hopper, 4 MiB before.
  ctx.workspaceBytes = prop.major >= 9 ? (32u << 20) : (4u << 20);
  ctx.deviceOrdinal = device;
  size_t stateAligned = (stateBytes + 255) / 256 * 256;
  if (config->struct_size >= offsetof(ampc_abi_config, cuda_stream) +
                                 sizeof(void *) &&
      config->cuda_stream) {
    ctx.stream = static_cast<cudaStream_t>(config->cuda_stream);
  } else {
    cudaError_t e = cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking);
    if (e != cudaSuccess)
      return undo(fail(ctx, "cudaStreamCreateWithFlags", cudaGetErrorString(e), ""));
    ctx.ownStream = true;
  }
  cudaError_t e = cudaMalloc(&ctx.device, stateAligned + ctx.workspaceBytes);
  if (e != cudaSuccess)
    return undo(fail(ctx, "cudaMalloc", cudaGetErrorString(e), "the model's arena"));
  ctx.workspace = ctx.device + stateAligned;
  e = cudaMallocHost(&ctx.pinned, 64 * 16);
  if (e != cudaSuccess)
    return undo(fail(ctx, "cudaMallocHost", cudaGetErrorString(e), ""));
  for (int i = 0; i < 64; ++i) {
    ctx.slots[i] = {ctx.pinned + 16 * i, nullptr, 0, nullptr};
    e = cudaEventCreateWithFlags(&ctx.slots[i].done, cudaEventDisableTiming);
    if (e != cudaSuccess)
      return undo(fail(ctx, "cudaEventCreateWithFlags", cudaGetErrorString(e), ""));
  }
  cublasStatus_t s = cublasLtCreate(&ctx.lt);
  if (s != CUBLAS_STATUS_SUCCESS)
    return undo(fail(ctx, "cublasLtCreate", cublasLtGetStatusString(s), ""));
  ctx.plans = new (std::nothrow) std::remove_pointer_t<decltype(ctx.plans)>();
  if (!ctx.plans)
    return undo(fail(ctx, "new", "out of host memory", ""));
  // Zero what a kernel may read before any writes it: the persistent state
  // and the error code. The planned buffers need not be (every op writes
  // its results before they are read); under the CUDA execution's strict
  // memory mode they keep the uninitialised pattern cudaMalloc left (NaN),
  // so a kernel that reads one before it is written shows.
  size_t zeroed = stateAligned;
#if defined(AMPC_CUDA_SIM)
  if (::ampc::sim::strictMemory() && arenaBase <= stateAligned &&
      errorOffset >= arenaBase)
    zeroed = arenaBase;
#endif
  if ((e = cudaMemsetAsync(ctx.device, 0, zeroed, ctx.stream)) != cudaSuccess ||
      (zeroed < errorOffset + sizeof(int32_t) &&
       (e = cudaMemsetAsync(ctx.device + errorOffset, 0, sizeof(int32_t),
                            ctx.stream)) != cudaSuccess) ||
      (blobBytes && (e = cudaMemcpyAsync(ctx.device, blob, blobBytes,
                                         cudaMemcpyHostToDevice, ctx.stream)) !=
                        cudaSuccess) ||
      (e = cudaStreamSynchronize(ctx.stream)) != cudaSuccess)
    return undo(fail(ctx, "cudaMemcpyAsync", cudaGetErrorString(e),
                     "the initial state"));
  return 0;
}

/// Data parallel (issue 41): keeps `config`'s communicator (none alone, or
/// in a job of one rank) and makes the communication stream and the events
/// of the library's `buckets` all-reduces. A communicator of host memory
/// (no start_on_stream) serves only the CUDA execution on the CPU.
inline int32_t initComm(Context &ctx, const ampc_abi_config *config,
                        int32_t buckets) {
  const ampc_abi_comm *comm =
      config->struct_size >= offsetof(ampc_abi_config, comm) + sizeof(void *)
          ? config->comm
          : nullptr;
  if (!comm || comm->size <= 1)
    return 0;
  const bool onStream =
      comm->struct_size >= offsetof(ampc_abi_comm, start_on_stream) +
                               sizeof(void *) &&
      comm->start_on_stream;
#if !defined(AMPC_CUDA_SIM)
  if (!onStream)
    return fail(ctx, "init", "the communicator sums host memory only (no "
                "start_on_stream: libampc_comm_mpi.so?); a CUDA library "
                "needs one on the device (libampc_comm_nccl.so)", "");
#else
  (void)onStream;
#endif
  ctx.comm = comm;
  ctx.buckets = new (std::nothrow) Context::Bucket[buckets];
  if (!ctx.buckets)
    return fail(ctx, "new", "out of host memory", "the all-reduce buckets");
  ctx.numBuckets = buckets;
  AMPC_CUDA(ctx, cudaStreamCreateWithFlags(&ctx.commStream,
                                           cudaStreamNonBlocking),
            "the communication stream");
  for (int32_t b = 0; b < buckets; ++b) {
    ctx.buckets[b].ctx = &ctx;
    ctx.buckets[b].request = b;
    for (cudaEvent_t *event : {&ctx.buckets[b].packed, &ctx.buckets[b].reduced})
      AMPC_CUDA(ctx, cudaEventCreateWithFlags(event, cudaEventDisableTiming),
                "the all-reduce events");
  }
  return 0;
}

/// A bucket's sum through a communicator of host memory, run by the
/// communication stream when it reaches it (CUDA calls are not allowed
/// here; the first failure is kept for synchronize, and later buckets do
/// not call the communicator).
inline void allReduceOnHost(void *data) {
  auto &bucket = *static_cast<Context::Bucket *>(data);
  Context &ctx = *bucket.ctx;
  if (ctx.commError[0])
    return;
  const ampc_abi_comm *comm = ctx.comm;
  if (comm->start(comm->handle, bucket.request, bucket.buffer, bucket.count,
                  bucket.dtype) != 0 ||
      comm->wait(comm->handle, bucket.request) != 0)
    std::snprintf(ctx.commError, sizeof ctx.commError,
                  "the all-reduce of bucket %d failed: %s", bucket.request,
                  comm->last_error(comm->handle));
}

/// all_reduce_start after its pack kernel: the communication stream waits
/// for the pack (an event on the model's stream), sums `count` elements of
/// `dtype` at `buffer` over the ranks, and records the bucket's `reduced`.
/// Inside the step's capture the fork and its join (allReduceWait) are
/// graph edges.
inline int32_t allReduceStart(Context &ctx, int32_t bucket, void *buffer,
                              uint64_t count, int32_t dtype,
                              const char *where) {
  Context::Bucket &b = ctx.buckets[bucket];
  AMPC_CUDA(ctx, cudaEventRecord(b.packed, ctx.stream), where);
  AMPC_CUDA(ctx, cudaStreamWaitEvent(ctx.commStream, b.packed, 0), where);
  const ampc_abi_comm *comm = ctx.comm;
  if (comm->struct_size >= offsetof(ampc_abi_comm, start_on_stream) +
                               sizeof(void *) &&
      comm->start_on_stream) {
    if (comm->start_on_stream(comm->handle, bucket, buffer, count, dtype,
                              ctx.commStream) != 0)
      return fail(ctx, "start_on_stream", comm->last_error(comm->handle),
                  where);
  } else {
    b.buffer = buffer;
    b.count = count;
    b.dtype = dtype;
    AMPC_CUDA(ctx, cudaLaunchHostFunc(ctx.commStream, allReduceOnHost, &b),
              where);
  }
  AMPC_CUDA(ctx, cudaEventRecord(b.reduced, ctx.commStream), where);
  return 0;
}

/// all_reduce_wait before its unpack kernel: the model's stream waits for
/// the bucket's sum (on the device; the host does not block).
inline int32_t allReduceWait(Context &ctx, int32_t bucket, const char *where) {
  AMPC_CUDA(ctx, cudaStreamWaitEvent(ctx.stream, ctx.buckets[bucket].reduced, 0),
            where);
  return 0;
}

inline void release(void *raw) {
  DeviceScope bound(raw);
  Context &ctx = context(raw);
  if (ctx.stream)
    cudaStreamSynchronize(ctx.stream);
  freeResources(ctx);
  ctx.~Context();
}

/// Waits for the stream, then reports a range error a kernel found (the
/// code is cleared so that it is reported once).
inline int32_t synchronize(Context &ctx) {
  AMPC_CUDA(ctx, cudaStreamSynchronize(ctx.stream), "");
  if (ctx.commError[0]) {
    std::snprintf(ctx.message, sizeof ctx.message, "%s", ctx.commError);
    return 1;
  }
  // Every copy and memset here is on the model's stream: the legacy
  // default stream (cudaMemcpy, cudaMemset) is unordered with a
  // non-blocking stream, and a pageable cudaMemcpy may land after it
  // returns.
  int32_t code = 0;
  AMPC_CUDA(ctx, cudaMemcpyAsync(&code, ctx.device + ctx.errorOffset,
                                 sizeof code, cudaMemcpyDeviceToHost,
                                 ctx.stream),
            "");
  AMPC_CUDA(ctx, cudaStreamSynchronize(ctx.stream), "");
  if (code != 0) {
    AMPC_CUDA(ctx, cudaMemsetAsync(ctx.device + ctx.errorOffset, 0,
                                   sizeof code, ctx.stream),
              "");
    AMPC_CUDA(ctx, cudaStreamSynchronize(ctx.stream), "");
    std::snprintf(ctx.message, sizeof ctx.message, "%s",
                  code > 0 && code < ctx.numDeviceErrors
                      ? ctx.deviceErrors[code]
                      : "a kernel reported an unknown error");
    return 1;
  }
  return 0;
}

inline int32_t copyOut(Context &ctx, uint64_t offset, void *out, uint64_t bytes) {
  if (int32_t code = synchronize(ctx))
    return code;
  AMPC_CUDA(ctx, cudaMemcpyAsync(out, ctx.device + offset, bytes,
                                 cudaMemcpyDeviceToHost, ctx.stream),
            "reading the state");
  AMPC_CUDA(ctx, cudaStreamSynchronize(ctx.stream), "reading the state");
  return 0;
}

inline int32_t copyIn(Context &ctx, uint64_t offset, const void *in, uint64_t bytes) {
  if (int32_t code = synchronize(ctx))
    return code;
  // On the model's stream, and waited for: the next step must see it, and
  // the caller may reuse `in` when this returns.
  AMPC_CUDA(ctx, cudaMemcpyAsync(ctx.device + offset, in, bytes,
                                 cudaMemcpyHostToDevice, ctx.stream),
            "writing the state");
  AMPC_CUDA(ctx, cudaStreamSynchronize(ctx.stream), "writing the state");
  return 0;
}

/// The training step's kernels (`body`, which records the loss's address
/// in ctx.stepLoss) as one CUDA graph: captured from the model's stream at
/// the first step (the second when GEMMs are tuned: the first runs
/// directly) and instantiated, then one cudaGraphLaunch per step.
/// Everything the kernels read that changes between steps lives in the
/// arena (the staged inputs, the learning rate, the step count, the
/// scaler), so the captured launches stay right. A stream that cannot be
/// captured (the legacy default stream) runs the kernels directly, as
/// does AMPC_CUDA_GRAPHS=0.
inline int32_t runStep(Context &ctx, int32_t (*body)(Context &)) {
  if (!ctx.graphs)
    return body(ctx);
  if (!ctx.stepGraph && ctx.tuneGemms && !ctx.stepTuned) {
    // The first step runs its kernels directly, so that its new GEMM plans
    // can time their candidates (nothing runs while captured).
    ctx.stepTuned = true;
    return body(ctx);
  }
  if (!ctx.stepGraph) {
    if (cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal) !=
        cudaSuccess) {
      (void)cudaGetLastError();
      ctx.graphs = false;
      return body(ctx);
    }
    int32_t code = body(ctx);
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(ctx.stream, &graph);
    if (code == 0 && e == cudaSuccess)
      e = cudaGraphInstantiate(&ctx.stepGraph, graph, 0);
    if (graph)
      cudaGraphDestroy(graph);
    if (code)
      return code;
    if (e != cudaSuccess)
      return fail(ctx, "capturing the training step", cudaGetErrorString(e),
                  "train_step");
  }
  AMPC_CUDA(ctx, cudaGraphLaunch(ctx.stepGraph, ctx.stream), "train_step");
  return 0;
}

/// One input of the training step: its staging buffer's offset in the
/// arena and its bytes.
struct StagedInput {
  uint64_t offset, bytes;
};

/// The training step's inputs into their staging buffers, which the step's
/// graph reads; the staging region is [base, base + bytes) of the arena.
/// From the device (the _device calls): a device-to-device copy each. From
/// host memory (issue 37, item 2): the inputs are packed into a pinned
/// buffer, copied to the device on the copy stream (so the copy overlaps
/// the previous step's kernels instead of waiting behind them on the
/// model's stream, as a pageable cudaMemcpyAsync did), and the model's
/// stream copies the region into the arena device to device once that
/// copy has run. Two slots alternate: a slot's pinned buffer is refilled
/// once its copy has run, its device buffer once the step that read it has
/// copied it out.
inline int32_t stageInputs(Context &ctx, const void *const *inputs,
                           const StagedInput *table, int32_t count,
                           uint64_t base, uint64_t bytes) {
  if (ctx.callerOnDevice || bytes == 0) {
    for (int32_t i = 0; i < count; ++i)
      if (table[i].bytes)
        AMPC_CUDA(ctx, cudaMemcpyAsync(ctx.device + table[i].offset,
                                       inputs[i], table[i].bytes,
                                       fromCaller(ctx), ctx.stream),
                  "an input");
    return 0;
  }
  if (!ctx.copyStream) {
    AMPC_CUDA(ctx, cudaStreamCreateWithFlags(&ctx.copyStream,
                                             cudaStreamNonBlocking),
              "the input copy stream");
    for (Context::Stage &stage : ctx.stages) {
      AMPC_CUDA(ctx, cudaMallocHost(&stage.pinned, bytes), "input staging");
      std::memset(stage.pinned, 0, bytes);
      AMPC_CUDA(ctx, cudaMalloc(&stage.device, bytes), "input staging");
      AMPC_CUDA(ctx, cudaEventCreateWithFlags(&stage.copied,
                                              cudaEventDisableTiming),
                "input staging");
      AMPC_CUDA(ctx, cudaEventCreateWithFlags(&stage.consumed,
                                              cudaEventDisableTiming),
                "input staging");
    }
  }
  Context::Stage &stage = ctx.stages[ctx.stagedSteps++ % 2];
  AMPC_CUDA(ctx, cudaEventSynchronize(stage.copied), "input staging");
  for (int32_t i = 0; i < count; ++i)
    if (table[i].bytes)
      std::memcpy(stage.pinned + (table[i].offset - base), inputs[i],
                  table[i].bytes);
  AMPC_CUDA(ctx, cudaStreamWaitEvent(ctx.copyStream, stage.consumed, 0),
            "input staging");
  AMPC_CUDA(ctx, cudaMemcpyAsync(stage.device, stage.pinned, bytes,
                                 cudaMemcpyHostToDevice, ctx.copyStream),
            "the inputs");
  AMPC_CUDA(ctx, cudaEventRecord(stage.copied, ctx.copyStream),
            "input staging");
  AMPC_CUDA(ctx, cudaStreamWaitEvent(ctx.stream, stage.copied, 0),
            "input staging");
  AMPC_CUDA(ctx, cudaMemcpyAsync(ctx.device + base, stage.device, bytes,
                                 cudaMemcpyDeviceToDevice, ctx.stream),
            "the inputs");
  AMPC_CUDA(ctx, cudaEventRecord(stage.consumed, ctx.stream),
            "input staging");
  return 0;
}

/// The loss: copied to a pinned slot on the stream, then to the caller's
/// buffer by a host function when the stream gets there. The caller's
/// buffer holds the loss once `synchronize` returns. A slot is reused 64
/// steps later, after waiting for its event (long since done in practice).
inline void CUDART_CB deliverLoss(void *raw) {
  auto *slot = static_cast<Context::LossSlot *>(raw);
  std::memcpy(slot->destination, slot->pinned, slot->bytes);
}
inline int32_t returnLoss(Context &ctx, void *destination, const void *loss,
                          size_t bytes) {
  if (bytes > 16)
    return fail(ctx, "train_step", "the loss is not a scalar", "");
  // A loss on the device is copied there on the stream, and NULL nowhere:
  // no pinned slot, no host function (issue 37, item 2).
  if (ctx.callerOnDevice) {
    if (destination)
      AMPC_CUDA(ctx, cudaMemcpyAsync(destination, loss, bytes,
                                     cudaMemcpyDeviceToDevice, ctx.stream),
                "the loss");
    return 0;
  }
  Context::LossSlot &slot = ctx.slots[ctx.queued++ % 64];
  AMPC_CUDA(ctx, cudaEventSynchronize(slot.done), "the loss");
  slot.destination = destination;
  slot.bytes = bytes;
  AMPC_CUDA(ctx, cudaMemcpyAsync(slot.pinned, loss, bytes,
                                 cudaMemcpyDeviceToHost, ctx.stream),
            "the loss");
  AMPC_CUDA(ctx, cudaLaunchHostFunc(ctx.stream, deliverLoss, &slot), "the loss");
  AMPC_CUDA(ctx, cudaEventRecord(slot.done, ctx.stream), "the loss");
  return 0;
}

/// Every kernel launch the target writes, so that nvcc and the host
/// compiler read the same source: kernel<<<grid, block, shared, stream>>>
/// under nvcc, the CUDA execution on the CPU (CudaSim.h) otherwise. `name`
/// is what the execution's messages call the kernel.
template <typename... Params, typename... Args>
inline void launch(const char *name, void (*kernel)(Params...), dim3 grid,
                   dim3 block, size_t sharedBytes, cudaStream_t stream,
                   Args &&...args) {
#if defined(AMPC_CUDA_SIM)
  ::ampc::sim::launch(name, kernel, grid, block, sharedBytes, stream,
                      std::forward<Args>(args)...);
#else
  (void)name;
  kernel<<<grid, block, sharedBytes, stream>>>(std::forward<Args>(args)...);
#endif
}

/// How many blocks of `kernel` with `block` threads and `sharedBytes` of
/// dynamic shared memory the current device holds at once: the occupancy
/// API's blocks per multiprocessor times the multiprocessors, asked once
/// per kernel, block size and device. -1 when a query failed (its error is
/// the last error).
inline int64_t coResidentBlocks(const void *kernel, int block,
                                size_t sharedBytes) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess)
    return -1;
  static std::mutex mutex;
  static std::map<std::tuple<const void *, int, size_t, int>, int64_t> known;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(kernel, block, sharedBytes, device);
  if (auto it = known.find(key); it != known.end())
    return it->second;
  int perMultiprocessor = 0, multiprocessors = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &perMultiprocessor, kernel, block, sharedBytes) != cudaSuccess ||
      cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount,
                             device) != cudaSuccess)
    return -1;
  const int64_t blocks = int64_t{perMultiprocessor} * multiprocessors;
  known.emplace(key, blocks);
  return blocks;
}

/// A cooperative launch of `kernel`: every block resident at once, so
/// that gridSync can wait for all of them. The grid is as many blocks as
/// the device holds at once (coResidentBlocks), at most `maxBlocks`: the
/// kernel loops over its work by gridDim, and its results must not depend
/// on the grid's size. Under nvcc, cudaLaunchKernelEx with
/// cudaLaunchAttributeCooperative, which a stream capture records as a
/// cooperative kernel node; the CUDA execution on the CPU otherwise. A
/// kernel no block of which fits is still launched, with one block, so
/// that the launch fails (cudaErrorCooperativeLaunchTooLarge).
template <typename... Params, typename... Args>
inline void launchCooperative(const char *name, void (*kernel)(Params...),
                              unsigned maxBlocks, dim3 block,
                              size_t sharedBytes, cudaStream_t stream,
                              Args &&...args) {
  const int64_t resident = coResidentBlocks(
      reinterpret_cast<const void *>(kernel),
      static_cast<int>(block.x * block.y * block.z), sharedBytes);
  if (resident < 0)
    return; // the failed query's error is the launch check's
  const dim3 grid(static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(maxBlocks, resident))));
#if defined(AMPC_CUDA_SIM)
  ::ampc::sim::launchCooperative(name, kernel, grid, block, sharedBytes, stream,
                                 std::forward<Args>(args)...);
#else
  (void)name;
  cudaLaunchAttribute cooperative[1] = {};
  cooperative[0].id = cudaLaunchAttributeCooperative;
  cooperative[0].val.cooperative = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = sharedBytes;
  config.stream = stream;
  config.attrs = cooperative;
  config.numAttrs = 1;
  // Its error is the last error too, which the launch check reads.
  (void)cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
#endif
}

/// Waits for every thread of the grid, whose memory accesses before it are
/// then seen by every thread after it: only in a kernel launched with
/// launchCooperative (the CUDA execution on the CPU fails the kernel
/// otherwise).
#if defined(AMPC_CUDA_SIM)
inline void gridSync(AMPC_SIM_CALL_SITE) {
  ::ampc::sim::gridSync(AMPC_SIM_CALLER);
}
#else
__device__ inline void gridSync() { cooperative_groups::this_grid().sync(); }
#endif

/// Threads per block and blocks for `n` elements.
constexpr int kThreads = 256;
inline unsigned blocks(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 0x7FFFFFFF ? 0x7FFFFFFF : b));
}
#define AMPC_FOR(i, n)                                                        \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; \
       i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

/// Sets the device error code to `code` unless one is set.
__device__ inline void raise(int32_t *error, int32_t code) {
  atomicCAS(error, 0, code);
}

//===----------------------------------------------------------------------===//
// GEMM through cuBLASLt
//===----------------------------------------------------------------------===//

/// One row-major GEMM, D = alpha op(A) op(B) + beta C, `batch` times with
/// the given element strides between batches (0: broadcast), with an
/// optional bias epilogue (D += bias[j] per column j, then ReLU/GELU when
/// asked). Types are cudaDataType; compute is FP32 (FP64 for f64). The
/// leading dimensions (elements between rows of A, B and D as stored;
/// ampc.batched_gemm) are last, and 0 means packed rows. `maskBits`: the
/// bits per row of D of the ReLU bit mask RELU_AUX writes and DRELU reads
/// (CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: a multiple of 128 no less than
/// n, cuBLASLt's D being column-major Dᵀ); 0 for the other epilogues.
struct Gemm {
  bool transA, transB;
  int64_t m, n, k;
  int64_t batch, strideA, strideB, strideD;
  cudaDataType_t ab, d;
  float alpha, beta;
  cublasLtEpilogue_t epilogue;
  int64_t lda = 0, ldb = 0, ldd = 0;
  int64_t maskBits = 0;
};

/// The largest power of two up to 256 that divides every address: what
/// the heuristic is told about alignment (views and group offsets can be
/// less aligned than the arena's 64 bytes).
inline int alignmentOf(std::initializer_list<const void *> pointers) {
  int align = 256;
  for (const void *p : pointers)
    if (p)
      while (reinterpret_cast<uintptr_t>(p) % align)
        align /= 2;
  return align;
}

/// One cublasLtMatmul of `plan` with `algo` (D written in place of C).
inline cublasStatus_t runGemm(Context &ctx, const Gemm &g, GemmPlan &plan,
                              const cublasLtMatmulAlgo_t &algo, const void *a,
                              const void *b, void *d) {
  const double alpha64 = g.alpha, beta64 = g.beta;
  const void *alpha = g.ab == CUDA_R_64F ? static_cast<const void *>(&alpha64)
                                         : static_cast<const void *>(&g.alpha);
  const void *beta = g.ab == CUDA_R_64F ? static_cast<const void *>(&beta64)
                                        : static_cast<const void *>(&g.beta);
  return cublasLtMatmul(ctx.lt, plan.op, alpha, b, plan.a, a, plan.b, beta, d,
                        plan.c, d, plan.c, &algo, ctx.workspace,
                        ctx.workspaceBytes, ctx.stream);
}

/// Issue 37, item 3: the fastest of the heuristic's `count` candidates for
/// a new plan, timed on the model's stream (each run once, then
/// kTuningRuns times between two events), into `best`; a candidate that
/// does not run is passed over. Only where running the GEMM more than once
/// leaves what running it once does (beta 0: D is not read), outside a
/// stream capture, and with tuning on; otherwise the heuristic's first.
/// The caller then runs the chosen one, so D holds its result.
constexpr int kTuningRuns = 3;
inline int32_t tuneGemm(Context &ctx, const char *where, const Gemm &g,
                        GemmPlan &plan, const cublasLtMatmulAlgo_t *candidates,
                        int count, const void *a, const void *b, void *d,
                        int &best) {
  best = 0;
  if (!ctx.tuneGemms || count < 2 || g.beta != 0)
    return 0;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  AMPC_CUDA(ctx, cudaStreamIsCapturing(ctx.stream, &capture), where);
  if (capture != cudaStreamCaptureStatusNone)
    return 0;
  cudaEvent_t start = nullptr, stop = nullptr;
  AMPC_CUDA(ctx, cudaEventCreate(&start), where);
  cudaError_t made = cudaEventCreate(&stop);
  if (made != cudaSuccess) {
    cudaEventDestroy(start);
    return fail(ctx, "cudaEventCreate", cudaGetErrorString(made), where);
  }
  float fastest = 0;
  int ran = 0;
  cudaError_t e = cudaSuccess;
  for (int i = 0; i < count && e == cudaSuccess; ++i) {
    if (runGemm(ctx, g, plan, candidates[i], a, b, d) != CUBLAS_STATUS_SUCCESS)
      continue;
    e = cudaEventRecord(start, ctx.stream);
    bool runs = true;
    for (int r = 0; r < kTuningRuns && runs; ++r)
      runs = runGemm(ctx, g, plan, candidates[i], a, b, d) ==
             CUBLAS_STATUS_SUCCESS;
    if (!runs)
      continue;
    float ms = 0;
    if (e == cudaSuccess)
      e = cudaEventRecord(stop, ctx.stream);
    if (e == cudaSuccess)
      e = cudaEventSynchronize(stop);
    if (e == cudaSuccess)
      e = cudaEventElapsedTime(&ms, start, stop);
    if (e == cudaSuccess && (ran++ == 0 || ms < fastest)) {
      fastest = ms;
      best = i;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (e != cudaSuccess)
    return fail(ctx, "timing the GEMM's algorithms", cudaGetErrorString(e),
                where);
  return 0;
}

inline int32_t gemm(Context &ctx, const char *where, const Gemm &g,
                    const void *a, const void *b, void *d, const void *bias,
                    const void *mask = nullptr) {
  auto bytes = [](cudaDataType_t t, int64_t n) {
    const int64_t size = t == CUDA_R_64F ? 8 : t == CUDA_R_32F ? 4 : 2;
    return reinterpret_cast<const void *>(static_cast<uintptr_t>(n * size));
  };
  // Row-major A is m x k (k x m when transposed), B k x n (n x k), D m x n.
  const int64_t lda = g.lda ? g.lda : g.transA ? g.m : g.k;
  const int64_t ldb = g.ldb ? g.ldb : g.transB ? g.k : g.n;
  const int64_t ldd = g.ldd ? g.ldd : g.n;
  // Batches and rows start at multiples of the strides and leading
  // dimensions: they bound the alignment too.
  const int align = alignmentOf({a, b, d, bias, bytes(g.ab, g.strideA),
                                 bytes(g.ab, g.strideB), bytes(g.d, g.strideD),
                                 bytes(g.ab, lda), bytes(g.ab, ldb),
                                 bytes(g.d, ldd)});
  // Row-major D (m x n) is column-major Dᵀ (n x m) = op(B)ᵀ op(A)ᵀ: cuBLASLt
  // gets B as its first operand and A as its second.
  auto key = std::make_tuple(int(g.transA), int(g.transB), int(g.ab), int(g.d),
                             g.m, g.n, g.k, g.batch, g.strideA, g.strideB,
                             g.strideD, int(g.epilogue), int(g.beta != 0),
                             align, alignmentOf({bias}) | alignmentOf({mask}) << 16,
                             lda, ldb, ldd);
  auto found = ctx.plans->find(key);
  if (found == ctx.plans->end()) {
    // Descriptors of a plan that fails half-way are destroyed with it.
    struct Building {
      GemmPlan plan;
      cublasLtMatmulPreference_t preference = nullptr;
      bool kept = false;
      ~Building() {
        if (preference)
          cublasLtMatmulPreferenceDestroy(preference);
        if (kept)
          return;
        if (plan.op)
          cublasLtMatmulDescDestroy(plan.op);
        for (cublasLtMatrixLayout_t l : {plan.a, plan.b, plan.c})
          if (l)
            cublasLtMatrixLayoutDestroy(l);
      }
    } building;
    GemmPlan &plan = building.plan;
    const bool f64 = g.ab == CUDA_R_64F;
    const cudaDataType_t scale = f64 ? CUDA_R_64F : CUDA_R_32F;
    AMPC_CUBLAS(ctx, cublasLtMatmulDescCreate(&plan.op, f64 ? CUBLAS_COMPUTE_64F
                                                            : CUBLAS_COMPUTE_32F,
                                              scale),
                where);
    cublasOperation_t ta = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    AMPC_CUBLAS(ctx, cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), where);
    AMPC_CUBLAS(ctx, cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), where);
    AMPC_CUBLAS(ctx, cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epilogue, sizeof g.epilogue), where);
    if (g.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      cudaDataType_t biasType = g.d;
      AMPC_CUBLAS(ctx, cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType, sizeof biasType), where);
      // The heuristic reads the bias pointer's alignment (cublasLt.h), so it
      // is set before the query, and the plan is keyed by the bias's own
      // alignment (a plan found for a 128-byte aligned bias may not be used
      // with a 64-byte aligned one).
      AMPC_CUBLAS(ctx, cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), where);
    }
    if (g.maskBits) {
      // The ReLU mask likewise: its pointer's alignment is the heuristic's
      // (cublasLt.h, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER), its ld in
      // bits.
      AMPC_CUBLAS(ctx, cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &mask, sizeof mask), where);
      AMPC_CUBLAS(ctx, cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &g.maskBits, sizeof g.maskBits), where);
    }
    // First operand: B, stored k x n (n x k when transposed) row-major.
    uint64_t rowsA = g.transB ? g.k : g.n, colsA = g.transB ? g.n : g.k;
    uint64_t rowsB = g.transA ? g.m : g.k, colsB = g.transA ? g.k : g.m;
    AMPC_CUBLAS(ctx, cublasLtMatrixLayoutCreate(&plan.a, g.ab, rowsA, colsA, ldb), where);
    AMPC_CUBLAS(ctx, cublasLtMatrixLayoutCreate(&plan.b, g.ab, rowsB, colsB, lda), where);
    AMPC_CUBLAS(ctx, cublasLtMatrixLayoutCreate(&plan.c, g.d, g.n, g.m, ldd), where);
    if (g.batch > 1) {
      int32_t count = static_cast<int32_t>(g.batch);
      int64_t sa = g.strideB, sb = g.strideA, sd = g.strideD;
      for (auto [layout, stride] : {std::pair{plan.a, sa}, {plan.b, sb}, {plan.c, sd}}) {
        AMPC_CUBLAS(ctx, cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count), where);
        AMPC_CUBLAS(ctx, cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride), where);
      }
    }
    AMPC_CUBLAS(ctx, cublasLtMatmulPreferenceCreate(&building.preference), where);
    uint64_t workspace = ctx.workspaceBytes;
    AMPC_CUBLAS(ctx, cublasLtMatmulPreferenceSetAttribute(building.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace), where);
    const uint32_t alignBytes = static_cast<uint32_t>(align);
    for (auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                           CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                           CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                           CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      AMPC_CUBLAS(ctx, cublasLtMatmulPreferenceSetAttribute(building.preference, attribute, &alignBytes, sizeof alignBytes), where);
    cublasLtMatmulHeuristicResult_t results[kGemmCandidates];
    int returned = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(
        ctx.lt, plan.op, plan.a, plan.b, plan.c, plan.c, building.preference,
        kGemmCandidates, results, &returned);
    cublasLtMatmulAlgo_t candidates[kGemmCandidates];
    int count = 0;
    for (int i = 0; s == CUBLAS_STATUS_SUCCESS && i < returned; ++i)
      if (results[i].state == CUBLAS_STATUS_SUCCESS)
        candidates[count++] = results[i].algo;
    if (s != CUBLAS_STATUS_SUCCESS || count == 0)
      return fail(ctx, "cublasLtMatmulAlgoGetHeuristic",
                  s != CUBLAS_STATUS_SUCCESS ? cublasLtGetStatusString(s)
                                             : "no algorithm for this GEMM",
                  where);
    int best = 0;
    if (int32_t code = tuneGemm(ctx, where, g, plan, candidates, count, a, b,
                                d, best))
      return code;
    plan.algo = candidates[best];
    for (int i = 0; i < count; ++i)
      if (i != best)
        plan.fallback[plan.fallbacks++] = candidates[i];
    found = ctx.plans->emplace(key, plan).first;
    building.kept = true;
  }
  GemmPlan &plan = found->second;
  if (g.epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    AMPC_CUBLAS(ctx, cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), where);
  if (g.maskBits)
    AMPC_CUBLAS(ctx, cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &mask, sizeof mask), where);
  // An algorithm that does not run gives way to the heuristic's next one,
  // for this run and every later one.
  for (;;) {
    cublasStatus_t s = runGemm(ctx, g, plan, plan.algo, a, b, d);
    if (s == CUBLAS_STATUS_SUCCESS)
      return 0;
    if (plan.fallbacks == 0)
      return fail(ctx, "cublasLtMatmul (no candidate algorithm runs)",
                  cublasLtGetStatusString(s), where);
    plan.algo = plan.fallback[0];
    for (int i = 1; i < plan.fallbacks; ++i)
      plan.fallback[i - 1] = plan.fallback[i];
    --plan.fallbacks;
  }
}

//===----------------------------------------------------------------------===//
// Convolutions through cuDNN
//===----------------------------------------------------------------------===//

/// Which call of a convolution: Y from X and W, dX from dY and W, dW from
/// X and dY.
enum ConvolutionDirection : int {
  kConvolutionForward = 0,
  kConvolutionBackwardData = 1,
  kConvolutionBackwardFilter = 2,
};

/// One convolution and direction of the library, NCHW (NCDHW), as the
/// emitter writes it in the library's table: X (n, c, in...), W (m,
/// c/group, kernel...), Y (n, m, out...) of one type. A 1-D convolution
/// is a 2-D one with H = 1 (rank 2). `beta`: the forward's Y is
/// alpha·conv + beta·Y (1 where Y holds the bias already); the adjoints
/// write their result (beta 0). `channelsLast` (ops with `channels_last`):
/// the same sizes, the tensors packed NHWC (NDHWC: X (n, in..., c), Y (n,
/// out..., m)) and W KRSC (m, kernel..., c/group), as cuDNN takes NHWC
/// tensors (its filter then in CUDNN_TENSOR_NHWC).
struct Convolution {
  int direction;
  cudnnDataType_t type;
  int rank; // spatial: 2 or 3
  int n, c, m, group;
  int in[3], out[3], kernel[3], pad[3], stride[3], dilation[3];
  float beta;
  bool channelsLast;
  /// The workspace slot the memory plan gives each call of this
  /// convolution (its `ampc.launch` `workspace`): the call passes it, and
  /// an algorithm whose workspace fits runs in it.
  size_t slotBytes = 0;
};

/// A convolution's descriptors and the algorithm initConvolutions chose
/// for it, and that algorithm's workspace.
struct ConvolutionPlan {
  Convolution spec;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;
  size_t workspace = 0;
  /// Whether the workspace fits the call's slot in the arena; if not, the
  /// calls use the context's one overflow workspace.
  bool inSlot = false;
};

/// The most workspace one convolution's algorithm may take: an algorithm
/// that needs more is passed over for the next one the heuristic ranks.
constexpr size_t kConvolutionWorkspaceLimit = size_t(256) << 20;

inline void freeConvolutions(Context &ctx) {
  for (int i = 0; i < ctx.numConvolutions; ++i) {
    ConvolutionPlan &p = ctx.convolutions[i];
    if (p.x)
      cudnnDestroyTensorDescriptor(p.x);
    if (p.y)
      cudnnDestroyTensorDescriptor(p.y);
    if (p.w)
      cudnnDestroyFilterDescriptor(p.w);
    if (p.conv)
      cudnnDestroyConvolutionDescriptor(p.conv);
  }
  delete[] ctx.convolutions;
  ctx.convolutions = nullptr;
  ctx.numConvolutions = 0;
  if (ctx.dnn)
    cudnnDestroy(ctx.dnn);
  ctx.dnn = nullptr;
  if (ctx.convolutionWorkspace)
    cudaFree(ctx.convolutionWorkspace);
  ctx.convolutionWorkspace = nullptr;
  ctx.convolutionWorkspaceBytes = 0;
}

/// Picks, of the heuristic's ranking `perf` (cudnnGet*Algorithm_v7), the
/// first algorithm that runs, is deterministic (the same bits in every
/// step and process, as the CPU target's results are) and fits
/// kConvolutionWorkspaceLimit. 16-bit data: the math type it was reported
/// for goes on the descriptor (Tensor Cores or not). FP32 and FP64
/// (`math` CUDNN_FMA_MATH): a Tensor Core algorithm is passed over and the
/// descriptor keeps CUDNN_FMA_MATH, so FP32 is never rounded to TF32 (as
/// PyTorch does with allow_tf32 off). False when none qualifies.
template <typename Perf>
inline bool chooseAlgorithm(const Perf *perf, int count, cudnnMathType_t math,
                            int &algo, cudnnMathType_t &chosen) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS ||
        perf[i].determinism != CUDNN_DETERMINISTIC ||
        perf[i].memory > kConvolutionWorkspaceLimit)
      continue;
    if (math == CUDNN_FMA_MATH && perf[i].mathType != CUDNN_FMA_MATH &&
        perf[i].mathType != CUDNN_DEFAULT_MATH)
      continue;
    algo = static_cast<int>(perf[i].algo);
    chosen = math == CUDNN_FMA_MATH ? math : perf[i].mathType;
    return true;
  }
  return false;
}

/// Builds one plan: the descriptors of `spec`, the algorithm, its
/// workspace.
inline int32_t planConvolution(Context &ctx, const Convolution &spec,
                               ConvolutionPlan &p, const char *where) {
  p.spec = spec;
  const int dims = spec.rank + 2;
  int xDims[5] = {spec.n, spec.c}, yDims[5] = {spec.n, spec.m},
      wDims[5] = {spec.m, spec.c / spec.group};
  for (int d = 0; d < spec.rank; ++d) {
    xDims[2 + d] = spec.in[d];
    yDims[2 + d] = spec.out[d];
    wDims[2 + d] = spec.kernel[d];
  }
  // Packed strides of the dims (logical N, C, spatial... order, as cuDNN
  // takes them in either layout): NCHW, or channels-last (C innermost, then
  // the spatial dims, N outermost).
  auto packed = [&](const int *shape, int *strides) {
    int order[5] = {0, 1, 2, 3, 4}; // outermost first
    if (spec.channelsLast) {
      for (int d = 1; d < dims - 1; ++d)
        order[d] = d + 1;
      order[dims - 1] = 1;
    }
    int stride = 1;
    for (int i = dims - 1; i >= 0; --i) {
      strides[order[i]] = stride;
      stride *= shape[order[i]];
    }
  };
  int xStrides[5], yStrides[5];
  packed(xDims, xStrides);
  packed(yDims, yStrides);
  AMPC_CUDNN(ctx, cudnnCreateTensorDescriptor(&p.x), where);
  AMPC_CUDNN(ctx, cudnnCreateTensorDescriptor(&p.y), where);
  AMPC_CUDNN(ctx, cudnnCreateFilterDescriptor(&p.w), where);
  AMPC_CUDNN(ctx, cudnnCreateConvolutionDescriptor(&p.conv), where);
  AMPC_CUDNN(ctx, cudnnSetTensorNdDescriptor(p.x, spec.type, dims, xDims, xStrides), where);
  AMPC_CUDNN(ctx, cudnnSetTensorNdDescriptor(p.y, spec.type, dims, yDims, yStrides), where);
  AMPC_CUDNN(ctx, cudnnSetFilterNdDescriptor(p.w, spec.type, spec.channelsLast ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, dims, wDims), where);
  // FP32 accumulation (FP64 for f64), whatever the data type.
  const bool f64 = spec.type == CUDNN_DATA_DOUBLE;
  AMPC_CUDNN(ctx, cudnnSetConvolutionNdDescriptor(p.conv, spec.rank, spec.pad, spec.stride, spec.dilation, CUDNN_CROSS_CORRELATION, f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT), where);
  AMPC_CUDNN(ctx, cudnnSetConvolutionGroupCount(p.conv, spec.group), where);
  const bool half = spec.type == CUDNN_DATA_HALF || spec.type == CUDNN_DATA_BFLOAT16;
  const cudnnMathType_t math = half ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  AMPC_CUDNN(ctx, cudnnSetConvolutionMathType(p.conv, math), where);
  cudnnMathType_t chosen = math;
  bool found = false;
  int count = 0;
  if (spec.direction == kConvolutionForward) {
    AMPC_CUDNN(ctx, cudnnGetConvolutionForwardAlgorithmMaxCount(ctx.dnn, &count), where);
    cudnnConvolutionFwdAlgoPerf_t perf[32];
    count = count < 32 ? count : 32;
    AMPC_CUDNN(ctx, cudnnGetConvolutionForwardAlgorithm_v7(ctx.dnn, p.x, p.w, p.conv, p.y, count, &count, perf), where);
    found = chooseAlgorithm(perf, count, math, p.algo, chosen);
  } else if (spec.direction == kConvolutionBackwardData) {
    AMPC_CUDNN(ctx, cudnnGetConvolutionBackwardDataAlgorithmMaxCount(ctx.dnn, &count), where);
    cudnnConvolutionBwdDataAlgoPerf_t perf[32];
    count = count < 32 ? count : 32;
    AMPC_CUDNN(ctx, cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx.dnn, p.w, p.y, p.conv, p.x, count, &count, perf), where);
    found = chooseAlgorithm(perf, count, math, p.algo, chosen);
  } else {
    AMPC_CUDNN(ctx, cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(ctx.dnn, &count), where);
    cudnnConvolutionBwdFilterAlgoPerf_t perf[32];
    count = count < 32 ? count : 32;
    AMPC_CUDNN(ctx, cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx.dnn, p.x, p.y, p.conv, p.w, count, &count, perf), where);
    found = chooseAlgorithm(perf, count, math, p.algo, chosen);
  }
  if (!found)
    return fail(ctx, "cudnnGetConvolution*Algorithm_v7",
                "no deterministic algorithm within the workspace limit", where);
  AMPC_CUDNN(ctx, cudnnSetConvolutionMathType(p.conv, chosen), where);
  if (spec.direction == kConvolutionForward)
    AMPC_CUDNN(ctx, cudnnGetConvolutionForwardWorkspaceSize(ctx.dnn, p.x, p.w, p.conv, p.y, static_cast<cudnnConvolutionFwdAlgo_t>(p.algo), &p.workspace), where);
  else if (spec.direction == kConvolutionBackwardData)
    AMPC_CUDNN(ctx, cudnnGetConvolutionBackwardDataWorkspaceSize(ctx.dnn, p.w, p.y, p.conv, p.x, static_cast<cudnnConvolutionBwdDataAlgo_t>(p.algo), &p.workspace), where);
  else
    AMPC_CUDNN(ctx, cudnnGetConvolutionBackwardFilterWorkspaceSize(ctx.dnn, p.x, p.y, p.conv, p.w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.algo), &p.workspace), where);
  p.inSlot = p.workspace <= spec.slotBytes;
  return 0;
}

/// At the library's init, after `init`: the cuDNN handle on the model's
/// stream, a plan for each of the `count` convolutions of `table`, and,
/// when some plan's workspace does not fit the slot the memory plan gives
/// its calls, one overflow workspace (the largest such plan needs), so
/// that the step makes no handle, descriptor or allocation (it is
/// captured as one CUDA graph). Nothing without convolutions. A failure
/// frees what the context holds.
inline int32_t initConvolutions(Context &ctx, const Convolution *table,
                                int count, const char *const *wheres) {
  if (count == 0)
    return 0;
  auto undo = [&](int32_t code) {
    freeResources(ctx);
    return code;
  };
  cudnnStatus_t s = cudnnCreate(&ctx.dnn);
  if (s != CUDNN_STATUS_SUCCESS)
    return undo(fail(ctx, "cudnnCreate", cudnnGetErrorString(s), ""));
  s = cudnnSetStream(ctx.dnn, ctx.stream);
  if (s != CUDNN_STATUS_SUCCESS)
    return undo(fail(ctx, "cudnnSetStream", cudnnGetErrorString(s), ""));
  ctx.convolutions = new (std::nothrow) ConvolutionPlan[count];
  if (!ctx.convolutions)
    return undo(fail(ctx, "new", "out of host memory", ""));
  ctx.numConvolutions = count;
  size_t workspace = 0;
  for (int i = 0; i < count; ++i) {
    if (int32_t code = planConvolution(ctx, table[i], ctx.convolutions[i],
                                       wheres[i]))
      return undo(code);
    if (!ctx.convolutions[i].inSlot)
      workspace = std::max(workspace, ctx.convolutions[i].workspace);
  }
  if (workspace) {
    cudaError_t e = cudaMalloc(&ctx.convolutionWorkspace, workspace);
    if (e != cudaSuccess)
      return undo(fail(ctx, "cudaMalloc", cudaGetErrorString(e),
                       "the convolutions' workspace"));
    ctx.convolutionWorkspaceBytes = workspace;
  }
  return 0;
}

/// Convolution `index` of the table: one cuDNN call. Forward: `a` X, `b`
/// W, `out` Y; backward data: `a` dY, `b` W, `out` dX; backward filter:
/// `a` X, `b` dY, `out` dW. `slot`: the call's workspace in the arena
/// (the entry's slotBytes).
inline int32_t convolution(Context &ctx, const char *where, int index,
                           const void *a, const void *b, void *out,
                           void *slot) {
  ConvolutionPlan &p = ctx.convolutions[index];
  const float alpha32 = 1.0f, beta32 = p.spec.beta;
  const double alpha64 = 1.0, beta64 = p.spec.beta;
  const bool f64 = p.spec.type == CUDNN_DATA_DOUBLE;
  const void *alpha = f64 ? static_cast<const void *>(&alpha64)
                          : static_cast<const void *>(&alpha32);
  const void *beta = f64 ? static_cast<const void *>(&beta64)
                         : static_cast<const void *>(&beta32);
  void *space = !p.workspace ? nullptr
                : p.inSlot    ? slot
                              : ctx.convolutionWorkspace;
  if (p.spec.direction == kConvolutionForward)
    AMPC_CUDNN(ctx, cudnnConvolutionForward(ctx.dnn, alpha, p.x, a, p.w, b, p.conv, static_cast<cudnnConvolutionFwdAlgo_t>(p.algo), space, p.workspace, beta, p.y, out), where);
  else if (p.spec.direction == kConvolutionBackwardData)
    AMPC_CUDNN(ctx, cudnnConvolutionBackwardData(ctx.dnn, alpha, p.w, b, p.y, a, p.conv, static_cast<cudnnConvolutionBwdDataAlgo_t>(p.algo), space, p.workspace, beta, p.x, out), where);
  else
    AMPC_CUDNN(ctx, cudnnConvolutionBackwardFilter(ctx.dnn, alpha, p.x, a, p.y, b, p.conv, static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.algo), space, p.workspace, beta, p.w, out), where);
  return 0;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// Up to 16 dimensions and one input's strides, passed by value.
struct Strided {
  int rank;
  int64_t dims[16];
  int64_t strides[16];
  AMPC_HD int64_t offset(int64_t o) const {
    int64_t at = 0;
    for (int d = rank - 1; d >= 0; --d) {
      at += (o % dims[d]) * strides[d];
      o /= dims[d];
    }
    return at;
  }
};

/// out[o] = in[base + offset(o)]: Transpose, Slice, broadcasts.
template <typename T>
__global__ void stridedCopy(const T *in, T *out, int64_t count, int64_t base,
                            Strided s) {
  AMPC_FOR(o, count) out[o] = in[base + s.offset(o)];
}

/// slice_grad: zero, then out[base + offset(o)] = grad[o].
template <typename T>
__global__ void stridedScatter(const T *grad, T *out, int64_t count,
                               int64_t base, Strided s) {
  AMPC_FOR(o, count) out[base + s.offset(o)] = grad[o];
}

/// Concat: `outer` blocks of `inBlock` elements at `offset` within blocks
/// of `outBlock`.
template <typename T>
__global__ void concatPart(const T *in, T *out, int64_t outer, int64_t inBlock,
                           int64_t outBlock, int64_t offset) {
  AMPC_FOR(i, outer * inBlock) {
    const int64_t o = i / inBlock, j = i % inBlock;
    out[o * outBlock + offset + j] = in[i];
  }
}

/// A concat of `in` (`outer` blocks of `inBlock`) and zeros after each
/// block, in blocks of `outBlock`: one kernel, the zeros written, not read
/// (ampc-pad-gemms' and ampc-pad-channels' padding).
template <typename T>
__global__ void padPart(const T *in, T *out, int64_t outer, int64_t inBlock,
                        int64_t outBlock) {
  AMPC_FOR(i, outer * outBlock) {
    const int64_t o = i / outBlock, j = i % outBlock;
    out[i] = j < inBlock ? in[o * inBlock + j] : T{};
  }
}

/// Gather along the middle of `outer x axisSize x inner`; an index out of
/// range raises `code` and writes 0.
template <typename T, typename I>
__global__ void gather(const T *data, const I *indices, T *out, int64_t outer,
                       int64_t axisSize, int64_t count, int64_t inner,
                       int32_t *error, int32_t code) {
  AMPC_FOR(x, outer * count * inner) {
    const int64_t j = x % inner, i = (x / inner) % count, o = x / (inner * count);
    int64_t k = static_cast<int64_t>(indices[i]);
    if (k < -axisSize || k >= axisSize) {
      raise(error, code);
      out[x] = T(0);
      continue;
    }
    if (k < 0)
      k += axisSize;
    out[x] = data[(o * axisSize + k) * inner + j];
  }
}

/// Scatter (ampc.scatter) onto `out`, which already holds the data: one
/// thread per (a, b) column applies that column's updates in index order,
/// so no two threads write one element and a later index wins under none
/// (as on the CPU). An index out of range raises `code` and is skipped.
template <typename C, typename S, typename I>
__global__ void scatter(const typename S::Storage *updates, const I *indices,
                        typename S::Storage *out, int64_t outer,
                        int64_t axisSize, int64_t count, int64_t inner,
                        math::ScatterReduction reduction, int32_t *error,
                        int32_t code) {
  AMPC_FOR(x, outer * inner) {
    const int64_t o = x / inner, b = x % inner;
    for (int64_t i = 0; i < count; ++i) {
      int64_t k = static_cast<int64_t>(indices[i]);
      if (k < -axisSize || k >= axisSize) {
        raise(error, code);
        continue;
      }
      if (k < 0)
        k += axisSize;
      const typename S::Storage src = updates[(o * count + i) * inner + b];
      typename S::Storage &dst = out[(o * axisSize + k) * inner + b];
      dst = reduction == math::ScatterNone
                ? src
                : S::store(math::scatterCombine<C>(static_cast<C>(S::load(dst)),
                                                   static_cast<C>(S::load(src)),
                                                   reduction));
    }
  }
}

/// TopK's indices (ampc.top_k): one thread per input element counts the
/// elements of its row that come before it (math::topKBefore, a strict
/// total order) and, when that rank is below k, writes its position there.
template <typename C, typename L>
__global__ void topK(const typename L::Storage *in, int64_t *out,
                     int64_t outer, int64_t axisSize, int64_t inner, int64_t k,
                     bool largest) {
  AMPC_FOR(x, outer * axisSize * inner) {
    const int64_t b = x % inner, a = (x / inner) % axisSize,
                  o = x / (inner * axisSize);
    const typename L::Storage *row = in + o * axisSize * inner + b;
    const C v = static_cast<C>(L::load(row[a * inner]));
    int64_t rank = 0;
    for (int64_t j = 0; j < axisSize && rank < k; ++j)
      if (math::topKBefore<C>(static_cast<C>(L::load(row[j * inner])), j, v, a,
                              largest))
        ++rank;
    if (rank < k)
      out[(o * k + rank) * inner + b] = a;
  }
}

/// gather_grad in work linear in the indices and the output: the indices
/// are bucketed by the table row they name (a counting sort), each bucket
/// put back in index order, then each output element sums its row's bucket
/// in C, in index order, as the CPU kernel adds (deterministic: the atomics
/// only count and claim slots). `buckets` holds 2 * axisSize + 1 counters,
/// zeroed before gatherGradCount: the rows' starts (axisSize + 1) and the
/// fill cursors (axisSize); `order` holds `count` index positions.
template <typename I>
__global__ void gatherGradCount(const I *indices, int64_t count,
                                int64_t axisSize,
                                unsigned long long *buckets, int32_t *error,
                                int32_t code) {
  AMPC_FOR(i, count) {
    int64_t at = static_cast<int64_t>(indices[i]);
    if (at < -axisSize || at >= axisSize) {
      raise(error, code);
      continue;
    }
    atomicAdd(buckets + (at < 0 ? at + axisSize : at) + 1, 1ULL);
  }
}

/// The rows' counts (buckets[1 ... n - 1], buckets[0] = 0) made their
/// starts, an inclusive prefix sum, by one block: each thread sums a
/// contiguous share, the shares' totals are scanned in shared memory, then
/// each thread writes its share's running sums.
__global__ inline void gatherGradStarts(unsigned long long *buckets, int64_t n) {
  AMPC_SHARED(unsigned long long[kThreads], share);
  const int64_t t = threadIdx.x, per = (n + blockDim.x - 1) / blockDim.x;
  const int64_t begin = t * per < n ? t * per : n;
  const int64_t end = begin + per < n ? begin + per : n;
  unsigned long long total = 0;
  for (int64_t k = begin; k < end; ++k)
    total += buckets[k];
  share[t] = total;
  __syncthreads();
  if (t == 0)
    for (unsigned k = 1; k < blockDim.x; ++k)
      share[k] += share[k - 1];
  __syncthreads();
  unsigned long long running = t == 0 ? 0 : share[t - 1];
  for (int64_t k = begin; k < end; ++k) {
    running += buckets[k];
    buckets[k] = running;
  }
}

/// Each valid index claims a slot of its row's bucket (in any order).
template <typename I>
__global__ void gatherGradFill(const I *indices, int64_t count,
                               int64_t axisSize, unsigned long long *buckets,
                               int64_t *order) {
  AMPC_FOR(i, count) {
    int64_t at = static_cast<int64_t>(indices[i]);
    if (at < -axisSize || at >= axisSize)
      continue;
    if (at < 0)
      at += axisSize;
    const unsigned long long slot =
        atomicAdd(buckets + axisSize + 1 + at, 1ULL);
    order[buckets[at] + slot] = i;
  }
}

/// Sorts a[0, n) ascending in O(n log n) comparisons however the values
/// came, and in O(n) when they came nearly in order: insertion sort while
/// its moves stay within 8 n, heapsort of the whole range once they do not.
/// (The atomics of gatherGradFill claim slots roughly in index order within
/// a warp but not across a grid, and a padding token may name one row
/// thousands of times a batch: insertion sort alone would cost n^2 / 4.)
template <typename T>
__host__ __device__ void sortAscending(T *a, int64_t n) {
  if (n < 2)
    return;
  int64_t budget = 8 * n;
  int64_t s = 1;
  for (; s < n && budget >= 0; ++s) {
    const T v = a[s];
    int64_t d = s;
    for (; d > 0 && v < a[d - 1]; --d, --budget)
      a[d] = a[d - 1];
    a[d] = v;
  }
  if (s == n)
    return;
  auto siftDown = [a](int64_t root, int64_t size) {
    const T v = a[root];
    for (int64_t child = 2 * root + 1; child < size;
         root = child, child = 2 * root + 1) {
      if (child + 1 < size && a[child] < a[child + 1])
        ++child;
      if (!(v < a[child]))
        break;
      a[root] = a[child];
    }
    a[root] = v;
  };
  for (int64_t root = n / 2; root-- > 0;)
    siftDown(root, n);
  for (int64_t end = n - 1; end > 0; --end) {
    const T top = a[0];
    a[0] = a[end];
    a[end] = top;
    siftDown(0, end);
  }
}

/// Each row's bucket sorted back into index order.
__global__ inline void gatherGradSort(const unsigned long long *buckets,
                                      int64_t axisSize, int64_t *order) {
  AMPC_FOR(k, axisSize) {
    const int64_t begin = buckets[k];
    sortAscending(order + begin, static_cast<int64_t>(buckets[k + 1]) - begin);
  }
}

/// Each output element (o, k, j) sums grad[o, i, j] over its row k's
/// bucket, in index order.
template <typename C, typename G, typename L, typename S>
__global__ void gatherGrad(const G *grad, const unsigned long long *buckets,
                           const int64_t *order, G *out, int64_t outer,
                           int64_t axisSize, int64_t count, int64_t inner) {
  AMPC_FOR(x, outer * axisSize * inner) {
    const int64_t j = x % inner, k = (x / inner) % axisSize,
                  o = x / (inner * axisSize);
    C sum = 0;
    for (int64_t s = buckets[k], end = buckets[k + 1]; s < end; ++s)
      sum += static_cast<C>(L::load(grad[(o * count + order[s]) * inner + j]));
    out[x] = S::store(sum);
  }
}

//===----------------------------------------------------------------------===//
// Reductions and normalisation (one thread per row or output element)
//===----------------------------------------------------------------------===//

// Sums pairwise as the CPU kernels do (KernelMath.h).
using math::pairwiseSum;

/// Softmax / LogSoftmax with a thread per row, for rows shorter than
/// kCudaWarpRowMinLength (KernelGeometry.h); softmaxByWarp and
/// softmaxByBlock for the others. x = in·scale + mask as there.
template <typename C, typename LI, typename SO, typename LM>
__global__ void softmax(const typename LI::Storage *in,
                        typename SO::Storage *out, int64_t outer,
                        int64_t axisSize, int64_t inner, bool logarithm,
                        C scale, const typename LM::Storage *mask,
                        Strided maskAt) {
  AMPC_FOR(r, outer * inner) {
    const int64_t base = (r / inner) * axisSize * inner + r % inner;
    auto at = [&](int64_t a) {
      C x = static_cast<C>(LI::load(in[base + a * inner])) * scale;
      if (mask)
        x += static_cast<C>(LM::load(mask[maskAt.offset(base + a * inner)]));
      return x;
    };
    C maxValue = -INFINITY;
    for (int64_t a = 0; a < axisSize; ++a) {
      const C x = at(a);
      maxValue = x > maxValue ? x : maxValue;
    }
    const C sum = pairwiseSum<C>(
        0, axisSize, [&](int64_t a) { return exp(at(a) - maxValue); });
    const C logSum = log(sum);
    for (int64_t a = 0; a < axisSize; ++a) {
      const C x = at(a) - maxValue;
      out[base + a * inner] = SO::store(logarithm ? x - logSum : exp(x) / sum);
    }
  }
}

enum Reduction { ReduceSum = 0, ReduceMean = 1, ReduceMax = 2, ReduceProd = 3 };

/// ReduceSum/Mean/Max/Prod: output element o reduces the `count` elements at
/// kept.offset(o) + reduced.offset(j).
template <typename C, typename LI, typename SO>
__global__ void reduce(const typename LI::Storage *in,
                       typename SO::Storage *out, int64_t outCount,
                       Strided kept, Strided reduced, int64_t count,
                       Reduction kind) {
  AMPC_FOR(o, outCount) {
    const int64_t base = kept.offset(o);
    C acc;
    if (kind == ReduceMax) {
      acc = static_cast<C>(LI::load(in[base + reduced.offset(0)]));
      for (int64_t j = 1; j < count; ++j) {
        const C x = static_cast<C>(LI::load(in[base + reduced.offset(j)]));
        if (x > acc || (x != x && acc == acc))
          acc = x;
      }
    } else if (kind == ReduceProd) {
      acc = C(1);
      for (int64_t j = 0; j < count; ++j)
        acc *= static_cast<C>(LI::load(in[base + reduced.offset(j)]));
    } else {
      acc = pairwiseSum<C>(0, count, [&](int64_t j) {
        return static_cast<C>(LI::load(in[base + reduced.offset(j)]));
      });
      if (kind == ReduceMean)
        acc = static_cast<C>(acc / static_cast<C>(count));
    }
    out[o] = SO::store(acc);
  }
}

/// Combines one value per thread of the block with `combine` as a tree in
/// `share` (kThreads elements of shared memory): a fixed order, so the
/// result does not depend on scheduling. Every thread gets the result.
template <typename C, typename Combine>
__device__ C blockCombine(C value, C *share, Combine combine) {
  const int t = threadIdx.x;
  share[t] = value;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half)
      share[t] = combine(share[t], share[t + half]);
    __syncthreads();
  }
  const C result = share[0];
  __syncthreads();
  return result;
}

/// The `count` elements at(0) ... at(count - 1) shared among the threads
/// of a block: thread t takes t, t + blockDim, ... (coalesced where the
/// elements are adjacent); `term(k)` of the thread's k-th element.
template <typename C, typename Term>
__device__ C threadShareSum(int64_t count, const Term &term) {
  const int64_t t = threadIdx.x, step = blockDim.x;
  const int64_t mine = t < count ? (count - t + step - 1) / step : 0;
  return pairwiseSum<C>(0, mine, [&](int64_t k) { return term(t + k * step); });
}

template <typename C> __device__ C addOf(C a, C b) { return a + b; }
template <typename C> __device__ C productOf(C a, C b) { return a * b; }
/// The identity of ReduceMax: -infinity, or the lowest int64 (an integer
/// reduction accumulates in int64).
template <typename C> __device__ C lowestOf() {
  if constexpr (std::is_integral<C>::value)
    return static_cast<C>(-9223372036854775807LL - 1);
  else
    return -static_cast<C>(INFINITY);
}
/// ReduceMax's step: the larger, a NaN winning (as `reduce`).
template <typename C> __device__ C largerOf(C acc, C x) {
  return x > acc || (x != x && acc == acc) ? x : acc;
}

/// The sum (or with ReduceMax the maximum, with ReduceProd the product) of
/// at(0) ... at(n - 1), shared
/// among the block's threads and combined (blockCombine); every thread gets
/// it. A mean is left to the caller.
template <typename C, typename At>
__device__ C blockReduce(int64_t n, const At &at, Reduction kind, C *share) {
  if (kind == ReduceProd) {
    C acc = 1;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      acc *= at(j);
    return blockCombine<C>(acc, share, productOf<C>);
  }
  if (kind != ReduceMax)
    return blockCombine<C>(threadShareSum<C>(n, at), share, addOf<C>);
  C acc = lowestOf<C>();
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
    acc = largerOf(acc, at(j));
  return blockCombine<C>(acc, share, largerOf<C>);
}

/// The same reduction with one block per output element, for outputs of
/// many elements each (a loss's mean over a whole activation: `reduce`
/// would leave one thread to sum millions of elements). Each thread sums
/// its share pairwise, then the block combines the shares (blockCombine).
template <typename C, typename LI, typename SO>
__global__ void reduceByBlock(const typename LI::Storage *in,
                              typename SO::Storage *out, int64_t outCount,
                              Strided kept, Strided reduced, int64_t count,
                              Reduction kind) {
  AMPC_SHARED(C[kThreads], share);
  for (int64_t o = blockIdx.x; o < outCount; o += gridDim.x) {
    const int64_t base = kept.offset(o);
    auto at = [&](int64_t j) {
      return static_cast<C>(LI::load(in[base + reduced.offset(j)]));
    };
    C acc = blockReduce<C>(count, at, kind, share);
    if (kind == ReduceMean)
      acc = static_cast<C>(acc / static_cast<C>(count));
    if (threadIdx.x == 0)
      out[o] = SO::store(acc);
  }
}

/// A reduction split over `splits` blocks per output (few outputs of many
/// elements each; the emitter's cudaReduceSplits): block b = o * splits + s
/// reduces output o's elements [s * share, (s + 1) * share) as
/// reduceByBlock does, into partials[b] (sum or maximum; a mean is divided
/// by reduceFinish).
template <typename C, typename LI>
__global__ void reducePartials(const typename LI::Storage *in, C *partials,
                               int64_t outCount, Strided kept,
                               Strided reduced, int64_t count, int64_t splits,
                               Reduction kind) {
  AMPC_SHARED(C[kThreads], share);
  const int64_t size = (count + splits - 1) / splits;
  for (int64_t b = blockIdx.x; b < outCount * splits; b += gridDim.x) {
    const int64_t base = kept.offset(b / splits);
    const int64_t begin = (b % splits) * size;
    const int64_t n = begin < count ? (count - begin < size ? count - begin
                                                            : size)
                                    : 0;
    auto at = [&](int64_t j) {
      return static_cast<C>(LI::load(in[base + reduced.offset(begin + j)]));
    };
    const C acc = blockReduce<C>(n, at, kind, share);
    if (threadIdx.x == 0)
      partials[b] = acc;
  }
}

/// The second part of a split reduction: output o from its `splits`
/// partials, in order.
template <typename C, typename SO>
__global__ void reduceFinish(const C *partials, typename SO::Storage *out,
                             int64_t outCount, int64_t splits, int64_t count,
                             Reduction kind) {
  AMPC_FOR(o, outCount) {
    C acc = partials[o * splits];
    for (int64_t s = 1; s < splits; ++s) {
      const C x = partials[o * splits + s];
      acc = kind == ReduceMax    ? largerOf(acc, x)
            : kind == ReduceProd ? acc * x
                                 : acc + x;
    }
    if (kind == ReduceMean)
      acc = static_cast<C>(acc / static_cast<C>(count));
    out[o] = SO::store(acc);
  }
}

//===----------------------------------------------------------------------===//
// Row-parallel kernels: a warp or a block per row (issue 37, items 4 and 9)
//===----------------------------------------------------------------------===//

/// a · b rounded once, never contracted into a following add (nvcc fuses
/// a product and a sum into an FMA by default; the CPU's ReduceSum adds
/// products it read from memory).
__device__ inline float exactProduct(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
__device__ inline double exactProduct(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

/// The threads that share one row: a warp (WarpRows: rows shorter than a
/// block's worth, kThreads / 32 rows per block) or the whole block
/// (BlockRows). `group()` is the row group's index among all groups and
/// `groups()` their number: group g takes rows g, g + groups(), ... Each
/// thread of the group takes the row's elements lane(), lane() + size(),
/// ...; combine() gives every thread of the group the same value, combined
/// in a fixed tree (warp shuffles or shared memory), so results do not
/// depend on the order threads run in.
struct WarpRows {
  static constexpr bool kBlock = false;
  __device__ static int64_t lane() { return threadIdx.x % 32; }
  __device__ static int64_t size() { return 32; }
  __device__ static int64_t group() {
    return static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) +
           threadIdx.x / 32;
  }
  __device__ static int64_t groups() {
    return static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  }
  /// A butterfly: lane l adds lane l ^ d's value for d = 16, 8, ... 1;
  /// both lanes of a pair add the same two values, so every lane ends with
  /// the same bits.
  template <typename C, typename Combine>
  __device__ static C combine(C value, C *, Combine f) {
    for (int d = 16; d > 0; d /= 2)
      value = f(value, __shfl_xor_sync(0xFFFFFFFFu, value, d));
    return value;
  }
};
struct BlockRows {
  static constexpr bool kBlock = true;
  __device__ static int64_t lane() { return threadIdx.x; }
  __device__ static int64_t size() { return blockDim.x; }
  __device__ static int64_t group() { return blockIdx.x; }
  __device__ static int64_t groups() { return gridDim.x; }
  template <typename C, typename Combine>
  __device__ static C combine(C value, C *share, Combine f) {
    return blockCombine<C>(value, share, f);
  }
};

/// A thread per row, for rows too short to share (under
/// kCudaWarpRowMinLength elements): the row's sums in element order.
struct ThreadRows {
  static constexpr bool kBlock = false;
  __device__ static int64_t lane() { return 0; }
  __device__ static int64_t size() { return 1; }
  __device__ static int64_t group() {
    return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  }
  __device__ static int64_t groups() {
    return static_cast<int64_t>(gridDim.x) * blockDim.x;
  }
  template <typename C, typename Combine>
  __device__ static C combine(C value, C *, Combine) {
    return value;
  }
};

/// 16 bytes, the widest load a thread issues.
struct alignas(16) Vector16 {
  uint32_t words[4];
};

/// Calls f(i, value) for this thread's elements of a contiguous row of `n`
/// elements of S, the row's threads R sharing it: 16-byte loads (thread t
/// takes vectors t, t + R::size(), ...) where the row is a whole number of
/// 16-byte vectors and starts on one, else elements t, t + R::size(), ...
/// Which elements a thread takes depends only on its lane, n and the
/// alignment of the row.
template <typename R, typename S, typename F>
__device__ void forRow(const S *row, int64_t n, const F &f) {
  constexpr int64_t kPer = 16 / sizeof(S);
  if (kPer > 1 && n % kPer == 0 &&
      reinterpret_cast<uintptr_t>(row) % 16 == 0) {
    const Vector16 *vectors = reinterpret_cast<const Vector16 *>(row);
    for (int64_t v = R::lane(); v < n / kPer; v += R::size()) {
      const Vector16 bits = vectors[v];
      S values[kPer];
      memcpy(values, &bits, sizeof bits);
      for (int64_t k = 0; k < kPer; ++k)
        f(v * kPer + k, values[k]);
    }
    return;
  }
  for (int64_t i = R::lane(); i < n; i += R::size())
    f(i, row[i]);
}

/// Calls f(i) for the indices forRow gives this thread on a row of `n`
/// elements of S at `row`: the same elements, without loading them (a
/// pass that writes the row first, read back by forRow: each thread reads
/// what it wrote).
template <typename R, typename S, typename F>
__device__ void forRowIndex(const S *row, int64_t n, const F &f) {
  constexpr int64_t kPer = 16 / sizeof(S);
  if (kPer > 1 && n % kPer == 0 &&
      reinterpret_cast<uintptr_t>(row) % 16 == 0) {
    for (int64_t v = R::lane(); v < n / kPer; v += R::size())
      for (int64_t k = 0; k < kPer; ++k)
        f(v * kPer + k);
    return;
  }
  for (int64_t i = R::lane(); i < n; i += R::size())
    f(i);
}

/// Softmax / LogSoftmax with a warp or a block per row: one pass keeps the
/// running maximum and the sum of exponentials relative to it (the online
/// softmax), the threads' pairs are combined (combine), a second pass
/// writes. `scale` and `mask` (null for none; broadcast to the input
/// through maskAt) are an attention's scores·scale + mask fused in:
/// x = in·scale + mask.
template <typename C> struct MaxSum {
  C max, sum;
};
template <typename C> __device__ MaxSum<C> maxSumOf(MaxSum<C> a, MaxSum<C> b) {
  const C m = b.max > a.max ? b.max : a.max;
  if (m == -static_cast<C>(INFINITY))
    return {m, a.sum + b.sum};
  return {m, a.sum * exp(a.max - m) + b.sum * exp(b.max - m)};
}
template <typename R, typename C, typename LI, typename SO, typename LM>
__device__ void softmaxRows(const typename LI::Storage *in,
                            typename SO::Storage *out, int64_t outer,
                            int64_t axisSize, int64_t inner, bool logarithm,
                            C scale, const typename LM::Storage *mask,
                            Strided maskAt, C *shareMax, C *shareSum) {
  for (int64_t r = R::group(); r < outer * inner; r += R::groups()) {
    const int64_t base = (r / inner) * axisSize * inner + r % inner;
    auto at = [&](int64_t a) {
      C x = static_cast<C>(LI::load(in[base + a * inner])) * scale;
      if (mask)
        x += static_cast<C>(LM::load(mask[maskAt.offset(base + a * inner)]));
      return x;
    };
    MaxSum<C> mine{-static_cast<C>(INFINITY), C(0)};
    for (int64_t a = R::lane(); a < axisSize; a += R::size())
      mine = maxSumOf<C>(mine, MaxSum<C>{at(a), C(1)});
    // Two scalar combines in a fixed order (max first, then each thread's
    // sum rescaled to it), so that the shuffles move 4 or 8 bytes.
    const C m = R::template combine<C>(mine.max, shareMax,
                                       [](C a, C b) { return b > a ? b : a; });
    const C rescaled = m == -static_cast<C>(INFINITY)
                           ? mine.sum
                           : mine.sum * exp(mine.max - m);
    const C sum = R::template combine<C>(rescaled, shareSum, addOf<C>);
    const C logSum = log(sum);
    for (int64_t a = R::lane(); a < axisSize; a += R::size()) {
      const C x = at(a) - m;
      out[base + a * inner] = SO::store(logarithm ? x - logSum : exp(x) / sum);
    }
  }
}
template <typename C, typename LI, typename SO, typename LM>
__global__ void softmaxByWarp(const typename LI::Storage *in,
                              typename SO::Storage *out, int64_t outer,
                              int64_t axisSize, int64_t inner, bool logarithm,
                              C scale,
                              const typename LM::Storage *mask,
                              Strided maskAt) {
  softmaxRows<WarpRows, C, LI, SO, LM>(in, out, outer, axisSize, inner,
                                       logarithm, scale, mask, maskAt,
                                       nullptr, nullptr);
}
template <typename C, typename LI, typename SO, typename LM>
__global__ void softmaxByBlock(const typename LI::Storage *in,
                               typename SO::Storage *out, int64_t outer,
                               int64_t axisSize, int64_t inner,
                               bool logarithm, C scale,
                               const typename LM::Storage *mask,
                               Strided maskAt) {
  AMPC_SHARED(C[kThreads], shareMax);
  AMPC_SHARED(C[kThreads], shareSum);
  softmaxRows<BlockRows, C, LI, SO, LM>(in, out, outer, axisSize, inner,
                                        logarithm, scale, mask, maskAt,
                                        shareMax, shareSum);
}

/// LayerNormalization with a thread (layerNorm, rows under 8 elements), a
/// warp (layerNormByWarp) or a block (layerNormByBlock) per row: the mean and the variance of the deviations
/// (two passes, as the CPU's meanAndVariance), then the writes, each pass
/// shared among the row's threads with 16-byte loads (forRow).
/// With `addend` (ampc.add_layer_norm: a residual add fused in) X is
/// x + addend, computed in C and stored in X's type to `sum` in the first
/// pass (each thread the elements it reads back from `sum` in the others),
/// the statistics taken over the stored values: the bits of the add then
/// the LayerNorm.
template <typename R, typename C, typename LI, typename SO, typename SS,
          typename LP, typename LA = LI>
__device__ void layerNormRows(
    const typename LI::Storage *x, typename SO::Storage *y,
    typename SS::Storage *mean, typename SS::Storage *invStdDev, int64_t outer,
    int64_t inner, const typename LP::Storage *scale, Strided scaleAt,
    const typename LP::Storage *bias, Strided biasAt, C epsilon, C *share,
    const typename LA::Storage *addend = nullptr,
    typename LI::Storage *sum = nullptr) {
  using S = typename LI::Storage;
  const C n = static_cast<C>(inner);
  for (int64_t o = R::group(); o < outer; o += R::groups()) {
    const S *row = x + o * inner;
    C total = 0;
    if (addend) {
      S *out = sum + o * inner;
      const typename LA::Storage *other = addend + o * inner;
      forRowIndex<R>(out, inner, [&](int64_t i) {
        const S v = LI::store(static_cast<C>(LI::load(row[i])) +
                              static_cast<C>(LA::load(other[i])));
        out[i] = v;
        total += static_cast<C>(LI::load(v));
      });
      row = out;
    } else {
      forRow<R>(row, inner,
                [&](int64_t, S v) { total += static_cast<C>(LI::load(v)); });
    }
    const C m = R::template combine<C>(total, share, addOf<C>) / n;
    C squares = 0;
    forRow<R>(row, inner, [&](int64_t, S v) {
      const C d = static_cast<C>(LI::load(v)) - m;
      squares += d * d;
    });
    const C variance = R::template combine<C>(squares, share, addOf<C>) / n;
    const C inv = C(1) / sqrt(variance + epsilon);
    forRow<R>(row, inner, [&](int64_t i, S v) {
      C out = (static_cast<C>(LI::load(v)) - m) * inv *
              static_cast<C>(LP::load(scale[scaleAt.offset(i)]));
      if (bias)
        out += static_cast<C>(LP::load(bias[biasAt.offset(i)]));
      y[o * inner + i] = SO::store(out);
    });
    if (R::lane() == 0) {
      mean[o] = SS::store(m);
      invStdDev[o] = SS::store(inv);
    }
  }
}
template <typename C, typename LI, typename SO, typename SS, typename LP>
__global__ void layerNorm(
    const typename LI::Storage *x, typename SO::Storage *y,
    typename SS::Storage *mean, typename SS::Storage *invStdDev, int64_t outer,
    int64_t inner, const typename LP::Storage *scale, Strided scaleAt,
    const typename LP::Storage *bias, Strided biasAt, C epsilon) {
  layerNormRows<ThreadRows, C, LI, SO, SS, LP>(x, y, mean, invStdDev, outer,
                                               inner, scale, scaleAt, bias,
                                               biasAt, epsilon, nullptr);
}
template <typename C, typename LI, typename SO, typename SS, typename LP>
__global__ void layerNormByWarp(
    const typename LI::Storage *x, typename SO::Storage *y,
    typename SS::Storage *mean, typename SS::Storage *invStdDev, int64_t outer,
    int64_t inner, const typename LP::Storage *scale, Strided scaleAt,
    const typename LP::Storage *bias, Strided biasAt, C epsilon) {
  layerNormRows<WarpRows, C, LI, SO, SS, LP>(x, y, mean, invStdDev, outer,
                                             inner, scale, scaleAt, bias,
                                             biasAt, epsilon, nullptr);
}
template <typename C, typename LI, typename SO, typename SS, typename LP>
__global__ void layerNormByBlock(
    const typename LI::Storage *x, typename SO::Storage *y,
    typename SS::Storage *mean, typename SS::Storage *invStdDev, int64_t outer,
    int64_t inner, const typename LP::Storage *scale, Strided scaleAt,
    const typename LP::Storage *bias, Strided biasAt, C epsilon) {
  AMPC_SHARED(C[kThreads], share);
  layerNormRows<BlockRows, C, LI, SO, SS, LP>(x, y, mean, invStdDev, outer,
                                              inner, scale, scaleAt, bias,
                                              biasAt, epsilon, share);
}

/// ampc.add_layer_norm: LayerNormalization of x + addend (addend in LA's
/// type), the sum written to `sum` (X's type); a thread, a warp or a block
/// per row as layerNorm.
#define AMPC_ADD_LAYER_NORM(NAME, ROWS, SHARE)                                 \
  template <typename C, typename LI, typename SO, typename SS, typename LP,    \
            typename LA>                                                       \
  __global__ void NAME(                                                        \
      const typename LI::Storage *x, const typename LA::Storage *addend,       \
      typename LI::Storage *sum, typename SO::Storage *y,                      \
      typename SS::Storage *mean, typename SS::Storage *invStdDev,             \
      int64_t outer, int64_t inner, const typename LP::Storage *scale,         \
      Strided scaleAt, const typename LP::Storage *bias, Strided biasAt,       \
      C epsilon) {                                                             \
    SHARE;                                                                     \
    layerNormRows<ROWS, C, LI, SO, SS, LP, LA>(                                \
        x, y, mean, invStdDev, outer, inner, scale, scaleAt, bias, biasAt,     \
        epsilon, share, addend, sum);                                          \
  }
AMPC_ADD_LAYER_NORM(addLayerNorm, ThreadRows, C *share = nullptr)
AMPC_ADD_LAYER_NORM(addLayerNormByWarp, WarpRows, C *share = nullptr)
AMPC_ADD_LAYER_NORM(addLayerNormByBlock, BlockRows,
                    AMPC_SHARED(C[kThreads], share))
#undef AMPC_ADD_LAYER_NORM

/// layer_norm_grad with a warp or a block per row (dY loaded with LG: X's
/// codec, or 16 bits where a cast was folded in): dX as layerNormGrad
/// (none where `dx` is null: a LayerNorm whose input needs no gradient),
/// the row's two sums (of g and of g·x̂) in one pass. With `partials`
/// (non-null) also the Scale and B adjoints' shares: row group G takes the
/// rows of the CPU's pairwise-sum leaf G (math::pairwiseLeaf) in order and
/// owns partials[2G · inner ...] (Σ dy·x̂ over them, from 0 in row order,
/// as the CPU's leaf) and partials[(2G + 1) · inner ...] (Σ dy), each
/// element written by one thread; layerNormParamGrad adds the leaves as the
/// CPU does. No atomics: the result does not depend on the order blocks
/// run in, and equals the CPU's ReduceSums.
template <typename R, typename C, typename LI, typename LS, typename LP,
          typename SO, typename LG>
__device__ void
layerNormGradRow(const typename LG::Storage *dy, const typename LI::Storage *x,
                 const typename LP::Storage *scale, Strided scaleAt,
                 const typename LS::Storage *mean,
                 const typename LS::Storage *invStdDev,
                 typename SO::Storage *dx, int64_t o, int64_t inner,
                 C *scaleShare, C *biasShare, C *share) {
  using S = typename LI::Storage;
  const C m = static_cast<C>(LS::load(mean[o])),
          inv = static_cast<C>(LS::load(invStdDev[o]));
  const typename LG::Storage *dyRow = dy + o * inner;
  const S *xRow = x + o * inner;
  auto g = [&](int64_t i) {
    return static_cast<C>(LG::load(dyRow[i])) *
           static_cast<C>(LP::load(scale[scaleAt.offset(i)]));
  };
  auto xhat = [&](int64_t i) {
    return (static_cast<C>(LI::load(xRow[i])) - m) * inv;
  };
  C meanG = 0, meanGx = 0;
  if (dx) {
    C sumG = 0, sumGx = 0;
    for (int64_t i = R::lane(); i < inner; i += R::size()) {
      const C gi = g(i);
      sumG += gi;
      sumGx += gi * xhat(i);
    }
    meanG =
        R::template combine<C>(sumG, share, addOf<C>) / static_cast<C>(inner);
    meanGx =
        R::template combine<C>(sumGx, share, addOf<C>) / static_cast<C>(inner);
  }
  for (int64_t i = R::lane(); i < inner; i += R::size()) {
    const C xh = xhat(i);
    if (dx)
      dx[o * inner + i] = SO::store(inv * (g(i) - meanG - xh * meanGx));
    if (scaleShare) {
      const C d = static_cast<C>(LG::load(dyRow[i]));
      scaleShare[i] += exactProduct(d, xh);
      biasShare[i] += d;
    }
  }
}
template <typename R, typename C, typename LI, typename LS, typename LP,
          typename SO, typename LG>
__device__ void
layerNormGradRows(const typename LG::Storage *dy, const typename LI::Storage *x,
                  const typename LP::Storage *scale, Strided scaleAt,
                  const typename LS::Storage *mean,
                  const typename LS::Storage *invStdDev,
                  typename SO::Storage *dx, int64_t outer, int64_t inner,
                  C *partials, C *share) {
  if (!partials) {
    for (int64_t o = R::group(); o < outer; o += R::groups())
      layerNormGradRow<R, C, LI, LS, LP, SO, LG>(dy, x, scale, scaleAt, mean,
                                                 invStdDev, dx, o, inner,
                                                 nullptr, nullptr, share);
    return;
  }
  int64_t begin, end;
  math::pairwiseLeaf(outer, R::group(), begin, end);
  if (begin == end)
    return; // a warp past the last leaf
  C *scaleShare = partials + 2 * R::group() * inner;
  C *biasShare = scaleShare + inner;
  for (int64_t i = R::lane(); i < inner; i += R::size())
    scaleShare[i] = biasShare[i] = C(0);
  for (int64_t o = begin; o < end; ++o)
    layerNormGradRow<R, C, LI, LS, LP, SO, LG>(dy, x, scale, scaleAt, mean,
                                               invStdDev, dx, o, inner,
                                               scaleShare, biasShare, share);
}
template <typename C, typename LI, typename LS, typename LP, typename SO,
          typename LG>
__global__ void layerNormGradByWarp(
    const typename LG::Storage *dy, const typename LI::Storage *x,
    const typename LP::Storage *scale, Strided scaleAt,
    const typename LS::Storage *mean, const typename LS::Storage *invStdDev,
    typename SO::Storage *dx, int64_t outer, int64_t inner, C *partials) {
  layerNormGradRows<WarpRows, C, LI, LS, LP, SO, LG>(dy, x, scale, scaleAt,
                                                     mean, invStdDev, dx, outer,
                                                     inner, partials, nullptr);
}
template <typename C, typename LI, typename LS, typename LP, typename SO,
          typename LG>
__global__ void layerNormGradByBlock(
    const typename LG::Storage *dy, const typename LI::Storage *x,
    const typename LP::Storage *scale, Strided scaleAt,
    const typename LS::Storage *mean, const typename LS::Storage *invStdDev,
    typename SO::Storage *dx, int64_t outer, int64_t inner, C *partials) {
  AMPC_SHARED(C[kThreads], share);
  layerNormGradRows<BlockRows, C, LI, LS, LP, SO, LG>(
      dy, x, scale, scaleAt, mean, invStdDev, dx, outer, inner, partials,
      share);
}

/// The Scale and B adjoints from layerNormGrad*'s shares, one per leaf of
/// the pairwise sum over the `outer` rows: element i of each adds the
/// leaves as math::pairwiseSum does (a thread per element, adjacent
/// threads adjacent elements).
template <typename C, typename SS, typename SB>
__global__ void layerNormParamGrad(const C *partials, int64_t outer,
                                   int64_t inner, typename SS::Storage *dScale,
                                   typename SB::Storage *dBias) {
  AMPC_FOR(i, inner) {
    for (int which = 0; which < 2; ++which) {
      if (which == 1 && !dBias)
        break;
      int64_t leaf = 0;
      const C sum = math::pairwiseSumOfLeaves<C>(
          0, outer, [&](int64_t, int64_t) {
            return partials[(2 * leaf++ + which) * inner + i];
          });
      if (which == 0)
        dScale[i] = SS::store(sum);
      else
        dBias[i] = SB::store(sum);
    }
  }
}

/// layer_norm_grad's dX per row: x̂ = (x − mean)·inv, g = dy·scale,
/// dx = inv · (g − mean(g) − x̂ · mean(g·x̂)).
template <typename C, typename LI, typename LS, typename LP, typename SO,
          typename LG>
__global__ void layerNormGrad(const typename LG::Storage *dy,
                              const typename LI::Storage *x,
                              const typename LP::Storage *scale,
                              Strided scaleAt,
                              const typename LS::Storage *mean,
                              const typename LS::Storage *invStdDev,
                              typename SO::Storage *dx, int64_t outer,
                              int64_t inner) {
  AMPC_FOR(o, outer) {
    const C m = static_cast<C>(LS::load(mean[o])),
            inv = static_cast<C>(LS::load(invStdDev[o]));
    auto g = [&](int64_t i) {
      return static_cast<C>(LG::load(dy[o * inner + i])) *
             static_cast<C>(LP::load(scale[scaleAt.offset(i)]));
    };
    auto xhat = [&](int64_t i) {
      return (static_cast<C>(LI::load(x[o * inner + i])) - m) * inv;
    };
    const C meanG = pairwiseSum<C>(0, inner, g) / static_cast<C>(inner);
    const C meanGx = pairwiseSum<C>(0, inner, [&](int64_t i) {
                       return g(i) * xhat(i);
                     }) /
                     static_cast<C>(inner);
    for (int64_t i = 0; i < inner; ++i)
      dx[o * inner + i] = SO::store(inv * (g(i) - meanG - xhat(i) * meanGx));
  }
}

enum LossReduction { LossNone = 0, LossSum = 1, LossMean = 2 };

/// NegativeLogLikelihoodLoss over (n, classes, inner) log-probabilities in
/// C: per element −w[t]·logp[t] (0 where ignored), then the reduction (the
/// mean divides by the sum of weights). One thread does the reduction so
/// that the sum is in index order, as on the CPU.
template <typename C, typename LP, typename LW, typename SO, typename I>
__global__ void nllLoss(const typename LP::Storage *logp, const I *labels,
                        const typename LW::Storage *weights, int64_t n,
                        int64_t classes, int64_t inner, bool hasIgnore,
                        int64_t ignore, LossReduction reduction,
                        typename SO::Storage *out, int32_t *error,
                        int32_t code) {
  auto term = [&](int64_t e, C &weight) -> C {
    const int64_t b = e / inner, j = e % inner;
    const int64_t t = static_cast<int64_t>(labels[e]);
    if (hasIgnore && t == ignore) {
      weight = 0;
      return 0;
    }
    if (t < 0 || t >= classes) {
      raise(error, code);
      weight = 0;
      return 0;
    }
    weight = weights ? static_cast<C>(LW::load(weights[t])) : C(1);
    return -weight * static_cast<C>(LP::load(logp[(b * classes + t) * inner + j]));
  };
  if (reduction == LossNone) {
    AMPC_FOR(e, n * inner) {
      C w;
      out[e] = SO::store(term(e, w));
    }
    return;
  }
  if (blockIdx.x != 0 || threadIdx.x != 0)
    return;
  const C sum = pairwiseSum<C>(0, n * inner, [&](int64_t e) {
    C w;
    return term(e, w);
  });
  const C weightSum = pairwiseSum<C>(0, n * inner, [&](int64_t e) {
    C w;
    term(e, w);
    return w;
  });
  out[0] = SO::store(reduction == LossMean ? sum / weightSum : sum);
}

/// nll_loss_grad: d logp[b, t, j] = −w[t]·g (g the upstream gradient,
/// divided by the weight sum for mean), 0 elsewhere. With `logp` (log_prob,
/// grad's type) SoftmaxCrossEntropyLoss's adjoint with respect to the
/// scores: each thread also takes its row's value at the label and
/// applies math::softmaxLossGrad, so the row sum needs no pass of its own.
template <typename C, typename LG, typename LW, typename SO, typename I>
__global__ void nllLossGrad(const typename LG::Storage *grad, const I *labels,
                            const typename LW::Storage *weights,
                            const typename LG::Storage *logp, int64_t n,
                            int64_t classes, int64_t inner, bool hasIgnore,
                            int64_t ignore, LossReduction reduction,
                            typename SO::Storage *out, int32_t *error,
                            int32_t code) {
  // The weight sum for mean, pairwise as on the CPU, computed by every
  // thread (n · inner terms); a zero sum gives zero gradients.
  C weightSum = 1;
  if (reduction == LossMean)
    weightSum = pairwiseSum<C>(0, n * inner, [&](int64_t e) {
      const int64_t t = static_cast<int64_t>(labels[e]);
      if ((hasIgnore && t == ignore) || t < 0 || t >= classes)
        return C(0);
      return weights ? static_cast<C>(LW::load(weights[t])) : C(1);
    });
  AMPC_FOR(x, n * classes * inner) {
    const int64_t j = x % inner, c = (x / inner) % classes, b = x / (inner * classes);
    const int64_t e = b * inner + j;
    const int64_t t = static_cast<int64_t>(labels[e]);
    C atLabel = 0;
    if (!(hasIgnore && t == ignore)) {
      if (t < 0 || t >= classes) {
        raise(error, code);
      } else {
        const C w = weights ? static_cast<C>(LW::load(weights[t])) : C(1);
        const C g = static_cast<C>(LG::load(grad[reduction == LossNone ? e : 0]));
        atLabel = reduction == LossMean
                      ? (weightSum == C(0) ? C(0) : -(w * g / weightSum))
                      : -(w * g);
      }
    }
    const C v = t == c ? atLabel : C(0);
    out[x] = SO::store(
        logp ? math::softmaxLossGrad<C>(v, atLabel,
                                        static_cast<C>(LG::load(logp[x])))
             : v);
  }
}

//===----------------------------------------------------------------------===//
// Dropout and the training ops
//===----------------------------------------------------------------------===//

template <typename L, typename S>
__global__ void dropout(const typename L::Storage *in, typename S::Storage *out,
                        uint8_t *mask, int64_t count, uint64_t seed,
                        const int64_t *step, double ratio) {
  const uint64_t s = step ? static_cast<uint64_t>(*step) : 0;
  const float scale = ratio >= 1.0 ? 0.0f : static_cast<float>(1.0 / (1.0 - ratio));
  AMPC_FOR(i, count) {
    const bool keep = math::dropoutKeeps(seed, s, static_cast<uint64_t>(i), ratio);
    mask[i] = keep;
    out[i] = S::store(keep && ratio < 1.0 ? L::load(in[i]) * scale : 0.0f);
  }
}

/// Sets a flag that any number of threads may set at once. A volatile
/// store, which the PTX memory model makes a relaxed (morally strong)
/// store: threads setting it together do not race, as plain stores of the
/// same value would (the CUDA execution's race check exempts it as it does
/// atomics).
__device__ inline void raiseFlag(uint8_t *flag) {
  *static_cast<volatile uint8_t *>(flag) = 1;
}

/// Multi-tensor kernels (unscale, clipping, the optimizer) run a 1-D grid
/// over the tensors of a list: tensor t has listBlocks(size[t]) blocks,
/// from firstBlock[t] (firstBlock[count] is the grid), and each block
/// covers kListBlockElements consecutive elements of its tensor, thread j
/// those j, j + blockDim.x, ... (coalesced). The emitter writes firstBlock
/// (KernelGeometry.h, cudaListBlocks).
constexpr int kMaxTensors = 256;
constexpr int64_t kListBlockElements = 2048;
inline int64_t listBlocks(int64_t n) {
  return n < 1 ? 1 : (n + kListBlockElements - 1) / kListBlockElements;
}
/// The tensor whose blocks hold this block: the last t of the list's
/// `count` with firstBlock[t] <= blockIdx.x.
__device__ inline int listTensor(const int32_t *firstBlock, int count) {
  int lo = 0, hi = count - 1;
  const int32_t b = static_cast<int32_t>(blockIdx.x);
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (firstBlock[mid] <= b)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}
/// for (i ...) over this block's elements of tensor t (its first block
/// `first`, `n` elements).
#define AMPC_LIST_FOR(i, first, n)                                             \
  for (int64_t i##Begin = (static_cast<int64_t>(blockIdx.x) - (first)) *       \
                          ::ampc::cuda::kListBlockElements,                    \
               i##End = i##Begin + ::ampc::cuda::kListBlockElements < (n)      \
                            ? i##Begin + ::ampc::cuda::kListBlockElements      \
                            : (n),                                             \
               i = i##Begin + threadIdx.x;                                     \
       i < i##End; i += blockDim.x)

/// One multi-tensor unscale over up to kMaxTensors gradients; any
/// non-finite scaled value sets *found.
template <typename T> struct TensorList {
  int32_t count;
  uint64_t in[kMaxTensors], out[kMaxTensors];
  int64_t size[kMaxTensors];
  int32_t firstBlock[kMaxTensors + 1];
};
/// What each gradient of an unscale list holds: kListType (the list's T)
/// or a 16-bit float that is widened to T exactly on load (a cast folded
/// into the unscale, ampc-fold-casts).
/// A gradient stored channels-last under its result's layout (ampc.unscale's
/// `channels_last`) has its channels and spatial size here, else 0.
enum GradientStorage : uint8_t { kListType = 0, kF16 = 1, kBf16 = 2 };
struct GradientStorages {
  uint8_t of[kMaxTensors];
  int32_t channels[kMaxTensors], spatial[kMaxTensors];
};
template <typename In, typename T>
__device__ void unscaleTensor(const unsigned char *in, T *o, int32_t first,
                              int64_t size, float inv, uint8_t *found,
                              int64_t channels, int64_t spatial) {
  const auto *g = reinterpret_cast<const typename In::Storage *>(in);
  AMPC_LIST_FOR(i, first, size) {
    const T v = static_cast<T>(
        In::load(g[math::weightCopyIndex(i, channels, spatial)]));
    if (!isfinite(v))
      raiseFlag(found);
    o[i] = math::unscale(v, inv);
  }
}
template <typename T>
__global__ void unscale(unsigned char *base, TensorList<T> list,
                        GradientStorages storage, const float *scale,
                        uint8_t *found) {
  const float inv = math::inverseScale(*scale);
  const int t = listTensor(list.firstBlock, list.count);
  const unsigned char *g = base + list.in[t];
  T *o = reinterpret_cast<T *>(base + list.out[t]);
  const int32_t first = list.firstBlock[t];
  const int64_t c = storage.channels[t], s = storage.spatial[t];
  switch (storage.of[t]) {
  case kF16:
    return unscaleTensor<AsF16>(g, o, first, list.size[t], inv, found, c, s);
  case kBf16:
    return unscaleTensor<AsBf16>(g, o, first, list.size[t], inv, found, c, s);
  default:
    return unscaleTensor<As<T>>(g, o, first, list.size[t], inv, found, c, s);
  }
}

/// Data parallel (issue 41): all_reduce_start's pack, one multi-tensor
/// launch per gradient type of a bucket. Each gradient (`In`, list.in) is
/// divided by the world size (times `inv`, in T) and rounded to the
/// communicated type (`Out`) into its slice of the packed buffer
/// (list.out): the CPU target's packGradient, element for element.
template <typename In, typename Out, typename T>
__global__ void packGradients(unsigned char *base,
                              TensorList<typename In::Storage> list, T inv) {
  const int t = listTensor(list.firstBlock, list.count);
  const auto *g = reinterpret_cast<const typename In::Storage *>(base + list.in[t]);
  auto *p = reinterpret_cast<typename Out::Storage *>(base + list.out[t]);
  AMPC_LIST_FOR(i, list.firstBlock[t], list.size[t])
  p[i] = Out::store(static_cast<T>(In::load(g[i])) * inv);
}
/// all_reduce_wait's unpack: each slice of the summed buffer (`In`,
/// list.in) into its mean gradient's type (`Out`, list.out).
template <typename In, typename Out>
__global__ void unpackGradients(unsigned char *base,
                                TensorList<typename Out::Storage> list) {
  const int t = listTensor(list.firstBlock, list.count);
  const auto *p = reinterpret_cast<const typename In::Storage *>(base + list.in[t]);
  auto *m = reinterpret_cast<typename Out::Storage *>(base + list.out[t]);
  AMPC_LIST_FOR(i, list.firstBlock[t], list.size[t]) m[i] = Out::store(In::load(p[i]));
}

/// Clipping's global norm, the same bits whatever order the blocks run in:
/// each block of the multi-tensor pass sums the squares of its elements
/// (blockCombine's fixed tree) into partials[blockIdx.x]; sumPartials
/// then adds every list's partials in one block.
template <typename T>
__global__ void sumOfSquares(unsigned char *base, TensorList<T> list,
                             T *partials) {
  AMPC_SHARED(T[kThreads], share);
  const int t = listTensor(list.firstBlock, list.count);
  const T *g = reinterpret_cast<const T *>(base + list.in[t]);
  T local = 0;
  AMPC_LIST_FOR(i, list.firstBlock[t], list.size[t]) local += g[i] * g[i];
  const T sum = blockCombine<T>(local, share, addOf<T>);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = sum;
}

/// The sum of `count` partials in one block (pairwise per thread, then
/// blockCombine), into *sum.
template <typename T>
__global__ void sumPartials(const T *partials, int64_t count, T *sum) {
  AMPC_SHARED(T[kThreads], share);
  const T total = blockReduce<T>(
      count, [&](int64_t j) { return partials[j]; }, ReduceSum, share);
  if (threadIdx.x == 0)
    *sum = total;
}

template <typename T>
__global__ void clipByNorm(unsigned char *base, TensorList<T> list,
                           const T *sum, T maxNorm) {
  const T coef = fmin(T(1), maxNorm / (sqrt(*sum) + T(1e-6)));
  const int t = listTensor(list.firstBlock, list.count);
  const T *g = reinterpret_cast<const T *>(base + list.in[t]);
  T *o = reinterpret_cast<T *>(base + list.out[t]);
  AMPC_LIST_FOR(i, list.firstBlock[t], list.size[t]) o[i] = g[i] * coef;
}

/// torch.optim.SGD for one parameter; a step with *found set copies every
/// input to its result bit for bit.
template <typename T>
__global__ void sgdStep(const T *param, const T *grad, const T *buffer,
                        T *newParam, T *newBuffer, int64_t count, const float *lr,
                        const int64_t *step, const uint8_t *found, T momentum,
                        T dampening, bool nesterov, T weightDecay) {
  const bool skip = found && *found;
  AMPC_FOR(i, count) {
    if (skip) {
      newParam[i] = param[i];
      if (buffer)
        newBuffer[i] = buffer[i];
      continue;
    }
    math::sgdElement(param[i], grad[i], buffer ? buffer + i : nullptr,
                     newParam + i, newBuffer ? newBuffer + i : nullptr,
                     static_cast<T>(*lr), *step, momentum, dampening, nesterov,
                     weightDecay);
  }
}

template <typename T>
__global__ void adamStep(const T *param, const T *grad, const T *expAvg,
                         const T *expAvgSq, T *newParam, T *newExpAvg,
                         T *newExpAvgSq, int64_t count, const float *lr,
                         const int64_t *step, const uint8_t *found, T beta1,
                         T beta2, T eps, T weightDecay, bool decoupled) {
  const bool skip = found && *found;
  const T rate = static_cast<T>(*lr);
  const math::AdamStep<T> s = math::adamStep(rate, *step, beta1, beta2);
  AMPC_FOR(i, count) {
    if (skip) {
      newParam[i] = param[i];
      newExpAvg[i] = expAvg[i];
      newExpAvgSq[i] = expAvgSq[i];
      continue;
    }
    math::adamElement(param[i], grad[i], expAvg[i], expAvgSq[i], newParam + i,
                      newExpAvg + i, newExpAvgSq + i, s, rate, beta1, beta2,
                      eps, weightDecay, decoupled);
  }
}

/// The tensors of one multi-tensor optimizer step (a kernel parameter, up to
/// kMaxOptimizerTensors): for each parameter the state offsets of its FP32
/// (FP64) master, its gradient, its moments (Adam: exp_avg, exp_avg_sq; SGD
/// with momentum: the buffer in moment1), its FP16 and BF16 weight copies
/// and its learning rate (an f32 scalar), kNoTensor where it has none; its
/// element count and its group's weight decay, momentum, dampening, betas
/// and eps (parameter groups set them per tensor); for channels-last copies
/// the channels and spatial size (WeightCopy's), else 0.
constexpr int kMaxOptimizerTensors = 128;
constexpr uint64_t kNoTensor = ~uint64_t(0);
template <typename T> struct OptimizerList {
  int32_t count;
  uint64_t param[kMaxOptimizerTensors], grad[kMaxOptimizerTensors],
      moment1[kMaxOptimizerTensors], moment2[kMaxOptimizerTensors],
      f16[kMaxOptimizerTensors], bf16[kMaxOptimizerTensors],
      lr[kMaxOptimizerTensors];
  T weightDecay[kMaxOptimizerTensors], momentum[kMaxOptimizerTensors],
      dampening[kMaxOptimizerTensors], beta1[kMaxOptimizerTensors],
      beta2[kMaxOptimizerTensors], eps[kMaxOptimizerTensors];
  int64_t size[kMaxOptimizerTensors];
  int64_t copyChannels[kMaxOptimizerTensors], copySpatial[kMaxOptimizerTensors];
  int32_t firstBlock[kMaxOptimizerTensors + 1]; // as TensorList's
};
/// The kind every tensor of the step shares.
template <typename T> struct OptimizerHyper {
  bool adam, decoupled, nesterov;
};

/// torch.optim's SGD / Adam / AdamW over every parameter of a list, in
/// place, a 1-D grid over the list as TensorList's kernels; each element's master and moments are
/// read, updated by the same math as sgdStep / adamStep (and the CPU
/// target) and written back, and the FP16/BF16 weight copies are written
/// from the new master in the same pass. A step with *found set returns at
/// once: the state stays bit for bit (the copies are the master's casts).
template <typename T>
__global__ void optimizerStep(unsigned char *base, OptimizerList<T> list,
                              OptimizerHyper<T> h, const int64_t *step,
                              const uint8_t *found) {
  if (found && *found)
    return;
  const int t = listTensor(list.firstBlock, list.count);
  T *p = reinterpret_cast<T *>(base + list.param[t]);
  const T *g = reinterpret_cast<const T *>(base + list.grad[t]);
  T *m1 = list.moment1[t] == kNoTensor
              ? nullptr
              : reinterpret_cast<T *>(base + list.moment1[t]);
  T *m2 = list.moment2[t] == kNoTensor
              ? nullptr
              : reinterpret_cast<T *>(base + list.moment2[t]);
  uint16_t *f16 = list.f16[t] == kNoTensor
                      ? nullptr
                      : reinterpret_cast<uint16_t *>(base + list.f16[t]);
  uint16_t *bf16 = list.bf16[t] == kNoTensor
                       ? nullptr
                       : reinterpret_cast<uint16_t *>(base + list.bf16[t]);
  const T rate =
      static_cast<T>(*reinterpret_cast<const float *>(base + list.lr[t]));
  const T decay = list.weightDecay[t], beta1 = list.beta1[t],
          beta2 = list.beta2[t];
  const int64_t taken = *step;
  const math::AdamStep<T> s = h.adam ? math::adamStep(rate, taken, beta1, beta2)
                                     : math::AdamStep<T>{T(0), T(0)};
  AMPC_LIST_FOR(i, list.firstBlock[t], list.size[t]) {
    T updated;
    if (h.adam)
      math::adamElement(p[i], g[i], m1[i], m2[i], &updated, m1 + i, m2 + i, s,
                        rate, beta1, beta2, list.eps[t], decay, h.decoupled);
    else
      math::sgdElement(p[i], g[i], m1 ? m1 + i : nullptr, &updated,
                       m1 ? m1 + i : nullptr, rate, taken, list.momentum[t],
                       list.dampening[t], h.nesterov, decay);
    p[i] = updated;
    const int64_t at =
        math::weightCopyIndex(i, list.copyChannels[t], list.copySpatial[t]);
    if (f16)
      f16[at] = storeF16(static_cast<float>(updated));
    if (bf16)
      bf16[at] = storeBf16(static_cast<float>(updated));
  }
}

/// `_amp_update_scale_` in one thread, on the device.
__global__ inline void updateScale(const float *scale, const int32_t *tracker,
                                   const uint8_t *found, float growthFactor,
                                   float backoffFactor, int64_t growthInterval,
                                   float minScale, float maxScale,
                                   float *newScale, int32_t *newTracker) {
  math::updateScale(*scale, *tracker, *found != 0, growthFactor, backoffFactor,
                    growthInterval, minScale, maxScale, newScale, newTracker);
}

__global__ inline void weightCopy(const float *src, uint16_t *dst,
                                  int64_t count, bool bf16, int64_t channels,
                                  int64_t spatial) {
  AMPC_FOR(i, count)
  dst[math::weightCopyIndex(i, channels, spatial)] =
      bf16 ? storeBf16(src[i]) : storeF16(src[i]);
}

template <typename W>
__global__ inline void fillWords(W *out, W word, int64_t count) {
  AMPC_FOR(i, count) out[i] = word;
}

/// Fills `count` elements of `width` bytes at `offset` in the state with
/// `word` (its low `width` bytes): a splat constant kept in the state,
/// filled by init instead of stored in the blob.
inline int32_t fillState(Context &ctx, uint64_t offset, uint64_t word,
                         int64_t width, int64_t count) {
  unsigned char *at = ctx.device + offset;
  switch (width) {
  case 1:
    launch("fillWords", fillWords<uint8_t>, blocks(count), kThreads, 0,
           ctx.stream, at, static_cast<uint8_t>(word), count);
    break;
  case 2:
    launch("fillWords", fillWords<uint16_t>, blocks(count), kThreads, 0,
           ctx.stream, reinterpret_cast<uint16_t *>(at),
           static_cast<uint16_t>(word), count);
    break;
  case 4:
    launch("fillWords", fillWords<uint32_t>, blocks(count), kThreads, 0,
           ctx.stream, reinterpret_cast<uint32_t *>(at),
           static_cast<uint32_t>(word), count);
    break;
  default:
    launch("fillWords", fillWords<uint64_t>, blocks(count), kThreads, 0,
           ctx.stream, reinterpret_cast<uint64_t *>(at), word, count);
    break;
  }
  AMPC_LAUNCHED(ctx, "a splat constant");
  return 0;
}

/// Recomputes the low-precision weight copies of `parameter` (all when
/// negative), then waits: called from init and the state writers.
inline int32_t refreshCopies(Context &ctx, const WeightCopy *copies,
                             int32_t count, int32_t parameter) {
  for (int32_t c = 0; c < count; ++c) {
    const WeightCopy &w = copies[c];
    if (parameter >= 0 && parameter != w.parameter)
      continue;
    launch("weightCopy", weightCopy, blocks(w.count), kThreads, 0, ctx.stream,
        reinterpret_cast<const float *>(ctx.device + w.source),
        reinterpret_cast<uint16_t *>(ctx.device + w.copy), w.count, w.bf16,
        w.channels, w.spatial);
    AMPC_LAUNCHED(ctx, "a weight copy");
  }
  return synchronize(ctx);
}

//===----------------------------------------------------------------------===//
// Windows: convolution (im2col + cuBLASLt), pooling, batch normalisation
//===----------------------------------------------------------------------===//

/// The spatial geometry of a conv or pool window over one plane (the CPU
/// target's ampc::cpu::Window, by value).
struct Window {
  int rank;
  int64_t in[8], out[8], kernel[8], stride[8], padBegin[8], padEnd[8],
      dilation[8];
  AMPC_HD int64_t size(const int64_t *dims) const {
    int64_t p = 1;
    for (int d = 0; d < rank; ++d)
      p *= dims[d];
    return p;
  }
  AMPC_HD int64_t inSize() const { return size(in); }
  AMPC_HD int64_t outSize() const { return size(out); }
  AMPC_HD int64_t kernelSize() const { return size(kernel); }
  /// Where kernel position `k` of output position `p` reads: the row-major
  /// offset into the plane (column-major with `columnMajor`), -1 in the
  /// padding, -2 beyond the padded input (windows ceil_mode adds).
  AMPC_HD int64_t offset(int64_t k, int64_t p, bool columnMajor = false) const {
    int64_t kd[8], pd[8];
    for (int d = rank - 1; d >= 0; --d) {
      kd[d] = k % kernel[d], k /= kernel[d];
      pd[d] = p % out[d], p /= out[d];
    }
    int64_t at = 0, state = 0;
    for (int d = 0; d < rank; ++d) {
      const int64_t pos = pd[d] * stride[d] - padBegin[d] + kd[d] * dilation[d];
      if (pos >= in[d] + padEnd[d])
        state = -2;
      else if ((pos < 0 || pos >= in[d]) && state == 0)
        state = -1;
      at = at * in[d] + pos;
    }
    if (columnMajor && state == 0) {
      at = 0;
      for (int d = rank - 1; d >= 0; --d)
        at = at * in[d] + (pd[d] * stride[d] - padBegin[d] + kd[d] * dilation[d]);
    }
    return state ? state : at;
  }
  /// Calls visit(k, p) for every kernel position k and output position p
  /// that read input position `i` (row-major offset into the plane).
  template <typename Visit> AMPC_HD void readersOf(int64_t i, Visit visit) const {
    int64_t id[8];
    for (int d = rank - 1; d >= 0; --d)
      id[d] = i % in[d], i /= in[d];
    const int64_t kernels = kernelSize();
    for (int64_t k = 0; k < kernels; ++k) {
      int64_t rest = k, p = 0;
      int64_t kd[8];
      for (int d = rank - 1; d >= 0; --d)
        kd[d] = rest % kernel[d], rest /= kernel[d];
      bool ok = true;
      for (int d = 0; d < rank && ok; ++d) {
        const int64_t num = id[d] + padBegin[d] - kd[d] * dilation[d];
        if (num < 0 || num % stride[d] != 0 || num / stride[d] >= out[d])
          ok = false;
        else
          p = p * out[d] + num / stride[d];
      }
      if (ok)
        visit(k, p);
    }
  }
};

/// im2col of `n` images of `c` channels: columns[b][g] is the
/// ((c / group) · kernel) x out matrix of image b and group g, 0 in the
/// padding.
template <typename T>
__global__ void im2col(const T *x, T *columns, int64_t n, int64_t c, Window w) {
  const int64_t inSize = w.inSize(), outSize = w.outSize(),
                kernelSize = w.kernelSize();
  AMPC_FOR(e, n * c * kernelSize * outSize) {
    const int64_t p = e % outSize, k = (e / outSize) % kernelSize,
                  plane = e / (outSize * kernelSize);
    const int64_t at = w.offset(k, p);
    columns[e] = at >= 0 ? x[plane * inSize + at] : T(0);
  }
}

/// col2im: each input element sums, in C, the column entries that read it,
/// and is stored once.
template <typename C, typename S>
__global__ void col2im(const C *columns, typename S::Storage *dx, int64_t n,
                       int64_t c, Window w) {
  const int64_t inSize = w.inSize(), outSize = w.outSize(),
                kernelSize = w.kernelSize();
  AMPC_FOR(e, n * c * inSize) {
    const int64_t i = e % inSize, plane = e / inSize;
    C sum = 0;
    w.readersOf(i, [&](int64_t k, int64_t p) {
      sum += columns[(plane * kernelSize + k) * outSize + p];
    });
    dx[e] = S::store(sum);
  }
}

/// Stores C values in S's storage.
template <typename C, typename S>
__global__ void convert(const C *in, typename S::Storage *out, int64_t count) {
  AMPC_FOR(i, count) out[i] = S::store(in[i]);
}

/// The pools' layouts: a pooled tensor is `planes` planes q = (n, c) of
/// `size` spatial positions. NCHW (`channels` 0): plane q's position s is
/// element q·size + s. Channels-last (`channels` C > 0, NHWC): q = n·C + c
/// and the element is (n·size + s)·C + c.
AMPC_HD inline int64_t planeElement(int64_t q, int64_t s, int64_t size,
                                    int64_t channels) {
  return channels ? ((q / channels) * size + s) * channels + q % channels
                  : q * size + s;
}
/// The inverse: element `e`'s plane `q` and position `s`.
AMPC_HD inline void elementPlane(int64_t e, int64_t size, int64_t channels,
                                 int64_t &q, int64_t &s) {
  if (!channels) {
    q = e / size, s = e % size;
    return;
  }
  const int64_t rest = e / channels;
  s = rest % size;
  q = (rest / size) * channels + e % channels;
}

/// MaxPool: y[e] is the max of its window (NaN wins; -inf when the window
/// is all padding), `indices` (if any) the flat index of the first max in
/// X: NCHW's q·inSize + the spatial index (column-major with
/// `columnMajor`), channels-last's planeElement (row-major only). Each
/// thread one output element, in Y's order whatever the layout.
template <typename C, typename L, typename S>
__global__ void maxPool(const typename L::Storage *x, typename S::Storage *y,
                        int64_t *indices, int64_t planes, Window w,
                        bool columnMajor, int64_t channels) {
  const int64_t inSize = w.inSize(), outSize = w.outSize(),
                kernelSize = w.kernelSize();
  AMPC_FOR(e, planes * outSize) {
    int64_t q, p;
    elementPlane(e, outSize, channels, q, p);
    C best = 0;
    int64_t where = -1;
    for (int64_t k = 0; k < kernelSize; ++k) {
      const int64_t at = w.offset(k, p);
      if (at < 0)
        continue;
      const C v = static_cast<C>(L::load(x[planeElement(q, at, inSize, channels)]));
      if (where < 0 || v > best || (v != v && best == best)) {
        best = v;
        where = columnMajor ? w.offset(k, p, true) : at;
      }
    }
    y[e] = S::store(where < 0 ? -INFINITY : best);
    if (indices)
      indices[e] = where < 0       ? -1
                   : columnMajor ? q * inSize + where
                                 : planeElement(q, where, inSize, channels);
  }
}

/// max_pool_grad as a gather: each input element sums, in C from 0, the
/// gradients of the windows (of the forward's `w`) that contain it and whose
/// recorded index (MaxPool's flat index, column-major spatial order with
/// `columnMajor`, channels-last with `channels` as maxPool records it) is
/// this element, in increasing output order, and is stored once. The
/// CPU's scatter (CpuBackwardKernels.h) adds the same terms in the same
/// order, since MaxPool's index lies in its own window; no atomics, no
/// scratch.
template <typename C, typename L, typename S>
__global__ void maxPoolGrad(const typename L::Storage *grad,
                            const int64_t *indices, typename S::Storage *dx,
                            int64_t planes, Window w, bool columnMajor,
                            int64_t channels) {
  const int64_t inSize = w.inSize(), outSize = w.outSize();
  AMPC_FOR(e, planes * inSize) {
    int64_t plane, i;
    elementPlane(e, inSize, channels, plane, i);
    // The element's coordinates, the index MaxPool recorded for it, and
    // the box of output positions whose window spans it.
    int64_t rest = i, at[8], first[8], last[8], p[8];
    for (int d = w.rank - 1; d >= 0; --d)
      at[d] = rest % w.in[d], rest /= w.in[d];
    int64_t recorded = 0;
    for (int d = columnMajor ? w.rank - 1 : 0;
         columnMajor ? d >= 0 : d < w.rank; d += columnMajor ? -1 : 1)
      recorded = recorded * w.in[d] + at[d];
    recorded = columnMajor ? recorded + plane * inSize
                           : planeElement(plane, recorded, inSize, channels);
    bool empty = false;
    for (int d = 0; d < w.rank; ++d) {
      // o·stride − padBegin <= at <= o·stride − padBegin + (kernel − 1)·dilation
      const int64_t high = at[d] + w.padBegin[d],
                    low = high - (w.kernel[d] - 1) * w.dilation[d];
      first[d] = low <= 0 ? 0 : (low + w.stride[d] - 1) / w.stride[d];
      last[d] = high / w.stride[d] < w.out[d] - 1 ? high / w.stride[d]
                                                  : w.out[d] - 1;
      empty |= first[d] > last[d];
      p[d] = first[d];
    }
    C sum = 0;
    while (!empty) {
      int64_t o = 0;
      for (int d = 0; d < w.rank; ++d)
        o = o * w.out[d] + p[d];
      const int64_t y = planeElement(plane, o, outSize, channels);
      if (indices[y] == recorded)
        sum += static_cast<C>(L::load(grad[y]));
      int d = w.rank - 1;
      for (; d >= 0 && p[d] == last[d]; --d)
        p[d] = first[d];
      if (d < 0)
        break;
      ++p[d];
    }
    dx[e] = S::store(sum);
  }
}

/// The divisor AveragePool uses for output position p.
AMPC_HD inline int64_t poolCount(const Window &w, int64_t p,
                                 bool countIncludePad) {
  int64_t count = 0;
  for (int64_t k = 0; k < w.kernelSize(); ++k) {
    const int64_t at = w.offset(k, p);
    count += at >= 0 || (countIncludePad && at == -1);
  }
  return count;
}

/// AveragePool and its adjoint (a gather per input element), NCHW or
/// channels-last (`channels`; see planeElement).
template <typename C, typename L, typename S>
__global__ void averagePool(const typename L::Storage *x,
                            typename S::Storage *y, int64_t planes, Window w,
                            bool countIncludePad, int64_t channels) {
  const int64_t inSize = w.inSize(), outSize = w.outSize(),
                kernelSize = w.kernelSize();
  AMPC_FOR(e, planes * outSize) {
    int64_t q, p;
    elementPlane(e, outSize, channels, q, p);
    C sum = 0;
    for (int64_t k = 0; k < kernelSize; ++k) {
      const int64_t at = w.offset(k, p);
      if (at >= 0)
        sum += static_cast<C>(L::load(x[planeElement(q, at, inSize, channels)]));
    }
    y[e] = S::store(sum / static_cast<C>(poolCount(w, p, countIncludePad)));
  }
}

template <typename C, typename L, typename S>
__global__ void averagePoolGrad(const typename L::Storage *grad,
                                typename S::Storage *dx, int64_t planes,
                                Window w, bool countIncludePad,
                                int64_t channels) {
  const int64_t inSize = w.inSize(), outSize = w.outSize();
  AMPC_FOR(e, planes * inSize) {
    int64_t q, i;
    elementPlane(e, inSize, channels, q, i);
    C sum = 0;
    w.readersOf(i, [&](int64_t, int64_t p) {
      const int64_t count = poolCount(w, p, countIncludePad);
      if (count)
        sum += static_cast<C>(L::load(grad[planeElement(q, p, outSize, channels)])) /
               static_cast<C>(count);
    });
    dx[e] = S::store(sum);
  }
}

/// BatchNormalization's per-channel sums split over blocks (no thread
/// loops over a channel), bit for bit the CPU target's pairwiseSum over the
/// channel's n · inner elements in index order: that sum is a tree (halves
/// split at b + (e - b) / 2 down to leaves of at most 64 terms, each left
/// half added to its right half). Cut at a depth D where every node above
/// still splits (pairwiseCutDepth), its 2^D nodes are independent sums
/// (pairwiseSum of the node's range); the `splits` blocks of a channel
/// (a power of two, the emitter's cudaBatchNormSplits) each take 2^(D - s)
/// adjacent nodes, a thread each, and add them pairwise as the tree does
/// (blockPairwise); the channel's partials then make the root the same way.
__device__ inline int pairwiseCutDepth(int64_t count, int most) {
  int depth = 0;
  while (depth < most && count / (int64_t(1) << depth) > 64)
    ++depth;
  return depth;
}
/// [*b, *e): the terms of node `index` at `depth` of pairwiseSum's tree.
__device__ inline void pairwiseNode(int64_t count, int depth, int64_t index,
                                    int64_t *b, int64_t *e) {
  *b = 0;
  *e = count;
  for (int d = 0; d < depth; ++d) {
    const int64_t middle = *b + (*e - *b) / 2;
    if ((index >> (depth - 1 - d)) & 1)
      *b = middle;
    else
      *e = middle;
  }
}
__device__ inline int log2Of(int64_t powerOfTwo) {
  int log = 0;
  while ((int64_t(1) << log) < powerOfTwo)
    ++log;
  return log;
}
/// The combination of `active` (a power of two) adjacent tree nodes, one
/// per thread, as pairwiseTree combines them: c(c(v0, v1), c(v2, v3)), ...
/// Every thread gets it.
template <typename T, typename Combine>
__device__ T blockTree(T value, int active, T *share, const Combine &combine) {
  const int t = threadIdx.x;
  share[t] = value;
  __syncthreads();
  for (int stride = 1; stride < active; stride *= 2) {
    if (t % (2 * stride) == 0 && t + stride < active)
      share[t] = combine(share[t], share[t + stride]);
    __syncthreads();
  }
  const T result = share[0];
  __syncthreads();
  return result;
}
/// blockTree adding, as pairwiseSum adds.
template <typename C>
__device__ C blockPairwise(C value, int active, C *share) {
  return blockTree<C>(value, active, share,
                      [](C left, C right) { return left + right; });
}
template <typename C>
__device__ math::Moments<C> combineMomentsOf(const math::Moments<C> &a,
                                             const math::Moments<C> &b) {
  return math::combineMoments(a, b);
}
/// Block `part` of a channel's `splits`: its node of the tree over `count`
/// terms term(0) ... term(count - 1).
template <typename C, typename Term>
__device__ C channelNodeSum(int64_t count, int64_t splits, int64_t part,
                            const Term &term, C *share) {
  const int logSplits = log2Of(splits);
  const int depth = pairwiseCutDepth(count, logSplits + log2Of(blockDim.x));
  const int below = depth - logSplits;
  C value = 0;
  if (threadIdx.x < (1 << below)) {
    int64_t b, e;
    pairwiseNode(count, depth, (part << below) + threadIdx.x, &b, &e);
    value = pairwiseSum<C>(b, e, term);
  }
  return blockPairwise<C>(value, 1 << below, share);
}
/// Block `part` of a channel's `splits`: the moments (math::pairwiseMoments)
/// of its node of the tree over `count` terms value(0) ... value(count - 1).
template <typename C, typename Value>
__device__ math::Moments<C> channelNodeMoments(int64_t count, int64_t splits,
                                               int64_t part,
                                               const Value &value,
                                               math::Moments<C> *share) {
  const int logSplits = log2Of(splits);
  const int depth = pairwiseCutDepth(count, logSplits + log2Of(blockDim.x));
  const int below = depth - logSplits;
  math::Moments<C> m{0, C(0), C(0)};
  if (threadIdx.x < (1 << below)) {
    int64_t b, e;
    pairwiseNode(count, depth, (part << below) + threadIdx.x, &b, &e);
    m = math::pairwiseMoments<C>(b, e, value);
  }
  return blockTree<math::Moments<C>>(m, 1 << below, share,
                                     combineMomentsOf<C>);
}
/// The channel's moments from its `splits` partials (mean and M2 of each
/// block's node, adjacent), combined as the tree does.
template <typename C>
__device__ math::Moments<C> channelMomentsRoot(const C *partials,
                                               int64_t count, int64_t splits,
                                               math::Moments<C> *share) {
  const int t = threadIdx.x;
  math::Moments<C> m{0, C(0), C(0)};
  if (t < splits) {
    int64_t b, e;
    pairwiseNode(count, log2Of(splits), t, &b, &e);
    m = {e - b, partials[2 * t], partials[2 * t + 1]};
  }
  return blockTree<math::Moments<C>>(m, static_cast<int>(splits), share,
                                     combineMomentsOf<C>);
}
/// The root from a channel's `splits` partials (at stride `stride`).
template <typename C>
__device__ C channelRoot(const C *partials, int64_t splits, int64_t stride,
                         C *share) {
  const int t = threadIdx.x;
  return blockPairwise<C>(t < splits ? partials[t * stride] : C(0),
                          static_cast<int>(splits), share);
}
/// The element of channel `ch` that is the channel's term j.
__device__ inline int64_t channelElement(int64_t j, int64_t c, int64_t ch,
                                         int64_t inner) {
  return ((j / inner) * c + ch) * inner + j % inner;
}

/// BatchNormalization in training mode, one cooperative launch
/// (batchNormTrain): each of the c · splits work items (a channel's node
/// of math::pairwiseMoments' tree, as the CPU target's channelStatistics
/// computes it; the items are the same whatever the grid) writes its
/// moments (mean, M2) to partials[2b], partials[2b + 1] (batchNormPartials);
/// after a grid barrier each item combines its channel's partials (the
/// tree's root: every item of the channel computes the same), normalises
/// its node of the channel's elements and, in the channel's first item,
/// writes the running statistics and the saved mean and inverse standard
/// deviation (batchNormApply).
template <typename C, typename L>
__device__ void batchNormPartials(const typename L::Storage *x, int64_t n,
                                  int64_t c, int64_t inner, int64_t splits,
                                  C *partials, math::Moments<C> *share) {
  const int64_t count = n * inner;
  for (int64_t b = blockIdx.x; b < c * splits; b += gridDim.x) {
    const int64_t ch = b / splits;
    const math::Moments<C> m = channelNodeMoments<C>(
        count, splits, b % splits,
        [&](int64_t j) {
          return static_cast<C>(L::load(x[channelElement(j, c, ch, inner)]));
        },
        share);
    if (threadIdx.x == 0) {
      partials[2 * b] = m.mean;
      partials[2 * b + 1] = m.m2;
    }
  }
}
/// Parameters are read through their codec P, the running statistics
/// written through R, the saved ones through V (null when not saved). The
/// running variance takes the batch variance times `varianceFactor` (1, or
/// count / (count - 1) for the unbiased estimate). The epilogue
/// (math::batchNormEpilogue): a residual of Y's shape through Q (null:
/// none), added in E, and ReLU.
template <typename C, typename L, typename S, typename P, typename R,
          typename V, typename Q = S, typename E = C>
__device__ void batchNormApply(
    const typename L::Storage *x, typename S::Storage *y, int64_t n, int64_t c,
    int64_t inner, int64_t splits, const C *partials,
    const typename P::Storage *scale, const typename P::Storage *bias,
    const typename P::Storage *inputMean, const typename P::Storage *inputVar,
    C epsilon, C momentum, C varianceFactor, typename R::Storage *runningMean,
    typename R::Storage *runningVar, typename V::Storage *savedMean,
    typename V::Storage *savedInvStdDev, const typename Q::Storage *residual,
    bool relu, math::Moments<C> *share) {
  const int64_t count = n * inner;
  const int logSplits = log2Of(splits);
  for (int64_t b = blockIdx.x; b < c * splits; b += gridDim.x) {
    const int64_t ch = b / splits, part = b % splits;
    const math::Moments<C> m =
        channelMomentsRoot<C>(partials + 2 * ch * splits, count, splits, share);
    const C mean = m.mean, var = m.m2 / static_cast<C>(count);
    const C factor = static_cast<C>(P::load(scale[ch])) / sqrt(var + epsilon);
    const C shift = static_cast<C>(P::load(bias[ch]));
    int64_t jb, je;
    pairwiseNode(count, logSplits, part, &jb, &je);
    for (int64_t j = jb + threadIdx.x; j < je; j += blockDim.x) {
      const int64_t e = channelElement(j, c, ch, inner);
      y[e] = math::batchNormEpilogue<E, S, Q>(
          (static_cast<C>(L::load(x[e])) - mean) * factor + shift, residual, e,
          relu);
    }
    if (part == 0 && threadIdx.x == 0) {
      const C im = static_cast<C>(P::load(inputMean[ch])),
              iv = static_cast<C>(P::load(inputVar[ch]));
      runningMean[ch] = R::store(im * momentum + mean * (C(1) - momentum));
      runningVar[ch] = R::store(
          iv * momentum + (var * varianceFactor) * (C(1) - momentum));
      if (savedMean) {
        savedMean[ch] = V::store(mean);
        savedInvStdDev[ch] = V::store(C(1) / sqrt(var + epsilon));
      }
    }
  }
}
template <typename C, typename L, typename S, typename P, typename R,
          typename V, typename Q = S, typename E = C>
__global__ void batchNormTrain(
    const typename L::Storage *x, typename S::Storage *y, int64_t n, int64_t c,
    int64_t inner, int64_t splits, C *partials,
    const typename P::Storage *scale, const typename P::Storage *bias,
    const typename P::Storage *inputMean, const typename P::Storage *inputVar,
    C epsilon, C momentum, C varianceFactor, typename R::Storage *runningMean,
    typename R::Storage *runningVar, typename V::Storage *savedMean,
    typename V::Storage *savedInvStdDev, const typename Q::Storage *residual,
    bool relu) {
  AMPC_SHARED(math::Moments<C>[kThreads], share);
  batchNormPartials<C, L>(x, n, c, inner, splits, partials, share);
  gridSync();
  batchNormApply<C, L, S, P, R, V, Q, E>(
      x, y, n, c, inner, splits, partials, scale, bias, inputMean, inputVar,
      epsilon, momentum, varianceFactor, runningMean, runningVar, savedMean,
      savedInvStdDev, residual, relu, share);
}

/// BatchNormalization outside training mode, a thread per element: Y with
/// the input statistics, the running statistics equal to them, and (when
/// `savedMean` is not null) the saved mean and inverse standard deviation;
/// the epilogue as batchNormApply's.
template <typename C, typename L, typename S, typename P, typename R,
          typename V, typename Q = S, typename E = C>
__global__ void batchNorm(const typename L::Storage *x, typename S::Storage *y,
                          int64_t n, int64_t c, int64_t inner,
                          const typename P::Storage *scale,
                          const typename P::Storage *bias,
                          const typename P::Storage *inputMean,
                          const typename P::Storage *inputVar, C epsilon,
                          typename R::Storage *runningMean,
                          typename R::Storage *runningVar,
                          typename V::Storage *savedMean,
                          typename V::Storage *savedInvStdDev,
                          const typename Q::Storage *residual, bool relu) {
  AMPC_FOR(e, n * c * inner) {
    const int64_t ch = (e / inner) % c;
    const C m = static_cast<C>(P::load(inputMean[ch]));
    const C v = static_cast<C>(P::load(inputVar[ch]));
    const C factor = static_cast<C>(P::load(scale[ch])) / sqrt(v + epsilon);
    y[e] = math::batchNormEpilogue<E, S, Q>(
        (static_cast<C>(L::load(x[e])) - m) * factor +
            static_cast<C>(P::load(bias[ch])),
        residual, e, relu);
    if (e < c) {
      const C im = static_cast<C>(P::load(inputMean[e])),
              iv = static_cast<C>(P::load(inputVar[e]));
      if (runningMean) {
        runningMean[e] = R::store(im);
        runningVar[e] = R::store(iv);
      }
      if (savedMean) {
        savedMean[e] = V::store(im);
        savedInvStdDev[e] = V::store(C(1) / sqrt(iv + epsilon));
      }
    }
  }
}

/// batch_norm_grad's prologue (ampc-fuse-batch-norm-epilogue's backward
/// half, the CUDA target's), as the ops it replaces compute it: grad[e] (codec L); plus addend[e] in E, the
/// elementwise compute type, rounded to L's type as ampc.add rounds (null:
/// none); then 0 where reluOutput[e] is not above 0, as ampc.relu_grad
/// (null: none).
template <typename E, typename L>
__device__ E batchNormGradPrologue(const typename L::Storage *grad,
                                const typename L::Storage *addend,
                                const typename L::Storage *reluOutput,
                                int64_t e) {
  E g = static_cast<E>(L::load(grad[e]));
  if (addend)
    g = static_cast<E>(
        L::load(L::store(g + static_cast<E>(L::load(addend[e])))));
  if (reluOutput && !(static_cast<E>(L::load(reluOutput[e])) > E(0)))
    g = E(0);
  return g;
}

/// batch_norm_grad in one cooperative launch (batchNormGrad), over the
/// work items of batchNormTrain. batchNormGradPartials: each item's nodes
/// of sum(g) and sum(g · x̂), x̂ = (x - mean) · r with the saved mean and r
/// (bit for bit the CPU target's pairwise sums, split as channelNodeSum
/// splits them), into partials[2b], partials[2b + 1]. The prologue
/// (batchNormGradPrologue, in E): grad is grad + addend, masked
/// where reluOutput is not above 0 (either may be null).
template <typename C, typename L, typename V, typename E = C>
__device__ void batchNormGradPartials(
    const typename L::Storage *grad, const typename L::Storage *x, int64_t n,
    int64_t c, int64_t inner, int64_t splits,
    const typename V::Storage *mean, const typename V::Storage *invStdDev,
    C *partials, const typename L::Storage *addend,
    const typename L::Storage *reluOutput, C *share) {
  const int64_t count = n * inner;
  for (int64_t b = blockIdx.x; b < c * splits; b += gridDim.x) {
    const int64_t ch = b / splits;
    const C mu = static_cast<C>(V::load(mean[ch]));
    const C r = static_cast<C>(V::load(invStdDev[ch]));
    auto g = [&](int64_t j) {
      return static_cast<C>(batchNormGradPrologue<E, L>(
          grad, addend, reluOutput, channelElement(j, c, ch, inner)));
    };
    const C sumGrad = channelNodeSum<C>(count, splits, b % splits, g, share);
    const C sumGradHat = channelNodeSum<C>(
        count, splits, b % splits,
        [&](int64_t j) {
          const C xv =
              static_cast<C>(L::load(x[channelElement(j, c, ch, inner)]));
          return g(j) * ((xv - mu) * r);
        },
        share);
    if (threadIdx.x == 0) {
      partials[2 * b] = sumGrad;
      partials[2 * b + 1] = sumGradHat;
    }
  }
}

/// batchNormGradInput, after the grid barrier: each item adds its
/// channel's partials (the tree's root), writes the input gradient of its
/// node of the channel's elements (see the CPU target's batchNormGrad):
/// scale · r · (g - mean(g) - x̂ · mean(g · x̂)) in training mode, else
/// scale · r · g; the channel's first item writes the B and Scale
/// gradients. The prologue as batchNormGradPartials', its gradient written
/// to `kept` when not null.
template <typename C, typename L, typename S, typename P, typename V,
          typename G, typename E = C>
__device__ void batchNormGradInput(
    const typename L::Storage *grad, const typename L::Storage *x,
    typename S::Storage *dx, int64_t n, int64_t c, int64_t inner,
    int64_t splits, const C *partials, const typename P::Storage *scale,
    const typename V::Storage *mean, const typename V::Storage *invStdDev,
    bool training, typename G::Storage *gradScale,
    typename G::Storage *gradBias, const typename L::Storage *addend,
    const typename L::Storage *reluOutput, typename L::Storage *kept,
    C *share) {
  const int64_t count = n * inner;
  const int logSplits = log2Of(splits);
  for (int64_t b = blockIdx.x; b < c * splits; b += gridDim.x) {
    const int64_t ch = b / splits, part = b % splits;
    const C *p = partials + 2 * ch * splits;
    const C sumGrad = channelRoot<C>(p, splits, 2, share);
    const C sumGradHat = channelRoot<C>(p + 1, splits, 2, share);
    const C mu = static_cast<C>(V::load(mean[ch]));
    const C r = static_cast<C>(V::load(invStdDev[ch]));
    const C factor = static_cast<C>(P::load(scale[ch])) * r;
    const C meanGrad = sumGrad / static_cast<C>(count);
    const C meanGradHat = sumGradHat / static_cast<C>(count);
    int64_t jb, je;
    pairwiseNode(count, logSplits, part, &jb, &je);
    for (int64_t j = jb + threadIdx.x; j < je; j += blockDim.x) {
      const int64_t e = channelElement(j, c, ch, inner);
      const C g = static_cast<C>(
          batchNormGradPrologue<E, L>(grad, addend, reluOutput, e));
      if (kept)
        kept[e] = L::store(g);
      if (training) {
        const C hat = (static_cast<C>(L::load(x[e])) - mu) * r;
        dx[e] = S::store(factor * (g - meanGrad - hat * meanGradHat));
      } else {
        dx[e] = S::store(factor * g);
      }
    }
    if (part == 0 && threadIdx.x == 0) {
      gradBias[ch] = G::store(sumGrad);
      gradScale[ch] = G::store(sumGradHat);
    }
  }
}
template <typename C, typename L, typename S, typename P, typename V,
          typename G, typename E = C>
__global__ void
batchNormGrad(const typename L::Storage *grad, const typename L::Storage *x,
              typename S::Storage *dx, int64_t n, int64_t c, int64_t inner,
              int64_t splits, C *partials, const typename P::Storage *scale,
              const typename V::Storage *mean,
              const typename V::Storage *invStdDev, bool training,
              typename G::Storage *gradScale, typename G::Storage *gradBias,
              const typename L::Storage *addend,
              const typename L::Storage *reluOutput,
              typename L::Storage *kept) {
  AMPC_SHARED(C[kThreads], share);
  batchNormGradPartials<C, L, V, E>(grad, x, n, c, inner, splits, mean,
                                    invStdDev, partials, addend, reluOutput,
                                    share);
  gridSync();
  batchNormGradInput<C, L, S, P, V, G, E>(
      grad, x, dx, n, c, inner, splits, partials, scale, mean, invStdDev,
      training, gradScale, gradBias, addend, reluOutput, kept, share);
}

} // namespace ampc::cuda

// Fused attention (issue 38): FlashAttention-2 on WMMA.
#include "ampc/Kernels/Cuda/CudaAttention.cuh"

#endif // AMPC_RUNTIME_CUDAKERNELS_CUH
