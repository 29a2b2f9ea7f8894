//===- CudaSimStreamsTest.cpp - streams and graphs as CUDA defines them ---===//
//
// The CUDA execution's streams, events, graphs, pinned memory and device
// faults against what CUDA documents (issue 36, item 4): a capture follows
// event forks and joins into other streams and replays all of it; polling
// queries make progress; pinned host memory is a device address; a
// device-to-host copy into pageable memory returns with the data; a fault
// in a kernel is the sticky cudaErrorIllegalAddress, not a dead process.
// Compiled with AMPC_CUDA_SIM, as a --target=cuda-sim library is.
//
//===----------------------------------------------------------------------===//

#include "ampc/Kernels/Cuda/CudaKernels.cuh"
#include "ampc/CudaSim/Counters.h"
#include "ampc/Runtime/ampc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

__global__ void fill(int *out, int value, int n) {
  AMPC_FOR(i, n) out[i] = value;
}

/// out[i] = in[i] * scale + add: reads what an earlier kernel wrote.
__global__ void affine(const int *in, int *out, int scale, int add, int n) {
  AMPC_FOR(i, n) out[i] = in[i] * scale + add;
}

/// A block-wide barrier before each thread writes through `out` (a wild
/// pointer in the fault tests): the other threads of the block are
/// suspended in the barrier or not yet started when one faults.
__global__ void barrierThenWrite(int *out, int n) {
  AMPC_SHARED(int[64], tile);
  tile[threadIdx.x] = threadIdx.x;
  __syncthreads();
  AMPC_FOR(i, n) out[i] = tile[threadIdx.x];
}

/// Recurses `depth` frames of 1 KiB each: deeper than a fiber's stack, a
/// stack overflow (the guard page).
__device__ int recurse(int depth) {
  volatile char frame[1024];
  frame[0] = static_cast<char>(depth);
  return depth ? recurse(depth - 1) + frame[0] : 0;
}
__global__ void deepRecursion(int *out, int depth) {
  out[threadIdx.x] = recurse(depth);
}

template <typename T> T *deviceAlloc(size_t count) {
  void *p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, count * sizeof(T)), cudaSuccess);
  return static_cast<T *>(p);
}
template <typename T> T *pinnedAlloc(size_t count) {
  void *p = nullptr;
  EXPECT_EQ(cudaMallocHost(&p, count * sizeof(T)), cudaSuccess);
  return static_cast<T *>(p);
}

std::string counters() {
  std::vector<char> text(ampc_cudasim_counters(nullptr, 0) + 1);
  ampc_cudasim_counters(text.data(), text.size());
  return text.data();
}

cudaStream_t nonBlockingStream() {
  cudaStream_t s = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  return s;
}

//===----------------------------------------------------------------------===//
// Capture across streams
//===----------------------------------------------------------------------===//

/// The fork-join pattern of multi-stream capture: `origin` records an
/// event, `side` waits for it (joining the capture), works, records an
/// event that `origin` waits for (the join). The graph holds the work of
/// both streams, in dependency order, and replays all of it each launch.
TEST(CudaSimStreams, CaptureFollowsForkAndJoin) {
  const int n = 64;
  cudaStream_t origin = nonBlockingStream(), side = nonBlockingStream();
  cudaEvent_t forked, joined;
  ASSERT_EQ(cudaEventCreate(&forked), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&joined), cudaSuccess);
  int *a = deviceAlloc<int>(n), *b = deviceAlloc<int>(n), *c = deviceAlloc<int>(n);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  ASSERT_EQ(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  ampc::cuda::launch("fill", fill, 1, 64, 0, origin, a, 3, n);
  ASSERT_EQ(cudaEventRecord(forked, origin), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(side, forked, 0), cudaSuccess);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(side, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive) << "the fork did not join";
  ampc::cuda::launch("sideAffine", affine, 1, 64, 0, side, a, b, 10, 1, n);
  ASSERT_EQ(cudaEventRecord(joined, side), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(origin, joined, 0), cudaSuccess);
  ampc::cuda::launch("joinAffine", affine, 1, 64, 0, origin, b, c, 2, 0, n);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(origin, &graph), cudaSuccess);
  ASSERT_EQ(cudaStreamIsCapturing(side, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  // Nothing captured has run (neither stream's work).
  ampc_cudasim_counters_reset();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(counters(), "") << "captured work ran outside the graph";

  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(cudaMemsetAsync(c, 0, n * sizeof(int), origin), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(b, 0, n * sizeof(int), origin), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, origin), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(origin), cudaSuccess);
    std::vector<int> host(n);
    ASSERT_EQ(cudaMemcpy(host.data(), c, n * sizeof(int),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(host[0], (3 * 10 + 1) * 2) << "round " << round;
    EXPECT_EQ(host[n - 1], (3 * 10 + 1) * 2) << "round " << round;
  }
  EXPECT_EQ(counters(), "kernel 3 fill\n"
                        "kernel 3 joinAffine\n"
                        "kernel 3 sideAffine\n"
                        "copy 3 cudaMemcpyDeviceToHost\n"
                        "memset 6 cudaMemsetAsync\n"
                        "graph 3 cudaGraphLaunch\n");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaEventDestroy(forked);
  cudaEventDestroy(joined);
  cudaStreamDestroy(origin);
  cudaStreamDestroy(side);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}

/// Branches of a fork are unordered: a replay runs the ready node captured
/// last first, so a branch that reads what the other writes without an
/// event between them sees the old value (here `side`, forked before
/// `origin` fills `a`, copies `a` without waiting for the fill).
TEST(CudaSimStreams, ForkedBranchesAreUnordered) {
  const int n = 32;
  cudaStream_t origin = nonBlockingStream(), side = nonBlockingStream();
  cudaEvent_t forked, joined;
  cudaEventCreate(&forked);
  cudaEventCreate(&joined);
  int *a = deviceAlloc<int>(n), *b = deviceAlloc<int>(n);
  ASSERT_EQ(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  ASSERT_EQ(cudaEventRecord(forked, origin), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(side, forked, 0), cudaSuccess);
  ampc::cuda::launch("fill", fill, 1, 32, 0, origin, a, 5, n);
  ampc::cuda::launch("copy", affine, 1, 32, 0, side, a, b, 1, 0, n);
  ASSERT_EQ(cudaEventRecord(joined, side), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(origin, joined, 0), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(origin, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(a, 0, n * sizeof(int), origin), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, origin), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(origin), cudaSuccess);
  int first = -1, filled = -1;
  ASSERT_EQ(cudaMemcpy(&first, b, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&filled, a, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(filled, 5);
  EXPECT_EQ(first, 0) << "the unordered copy ran after the fill";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaEventDestroy(forked);
  cudaEventDestroy(joined);
  cudaStreamDestroy(origin);
  cudaStreamDestroy(side);
  cudaFree(a);
  cudaFree(b);
}

/// A fork never joined back: CUDA fails the capture, and every stream of
/// it leaves capture mode.
TEST(CudaSimStreams, UnjoinedForkFailsTheCapture) {
  cudaStream_t origin = nonBlockingStream(), side = nonBlockingStream();
  cudaEvent_t forked;
  cudaEventCreate(&forked);
  int *a = deviceAlloc<int>(32);
  ASSERT_EQ(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  ampc::cuda::launch("fill", fill, 1, 32, 0, origin, a, 1, 32);
  ASSERT_EQ(cudaEventRecord(forked, origin), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(side, forked, 0), cudaSuccess);
  ampc::cuda::launch("sideFill", fill, 1, 32, 0, side, a, 2, 32);
  cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(&graph);
  // Only the stream the capture began on may end it.
  EXPECT_EQ(cudaStreamEndCapture(side, &graph),
            cudaErrorStreamCaptureUnmatched);
  cudaError_t e = cudaStreamEndCapture(origin, &graph);
  EXPECT_EQ(e, cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(side, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);

  // Again, without the wrong end: the unjoined work is named.
  ASSERT_EQ(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  ampc::cuda::launch("fill", fill, 1, 32, 0, origin, a, 1, 32);
  ASSERT_EQ(cudaEventRecord(forked, origin), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(side, forked, 0), cudaSuccess);
  ampc::cuda::launch("sideFill", fill, 1, 32, 0, side, a, 2, 32);
  e = cudaStreamEndCapture(origin, &graph);
  EXPECT_EQ(e, cudaErrorStreamCaptureUnjoined);
  EXPECT_NE(std::string(cudaGetErrorString(e)).find("sideFill"),
            std::string::npos)
      << cudaGetErrorString(e);
  EXPECT_EQ(graph, nullptr);
  ASSERT_EQ(cudaStreamIsCapturing(side, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  // The side stream's work was captured, never queued.
  ampc_cudasim_counters_reset();
  ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
  EXPECT_EQ(counters(), "");
  cudaGetLastError();
  cudaEventDestroy(forked);
  cudaStreamDestroy(origin);
  cudaStreamDestroy(side);
  cudaFree(a);
}

/// A capturing stream that waits for an event recorded outside the
/// capture, or the host querying an event recorded inside one: CUDA
/// refuses both and the capture is invalidated.
TEST(CudaSimStreams, CaptureIsolation) {
  cudaStream_t origin = nonBlockingStream(), other = nonBlockingStream();
  cudaEvent_t outside, inside;
  cudaEventCreate(&outside);
  cudaEventCreate(&inside);
  int *a = deviceAlloc<int>(32);
  ampc::cuda::launch("fill", fill, 1, 32, 0, other, a, 1, 32);
  ASSERT_EQ(cudaEventRecord(outside, other), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(origin, outside, 0),
            cudaErrorStreamCaptureIsolation);
  cudaGraph_t graph;
  EXPECT_EQ(cudaStreamEndCapture(origin, &graph),
            cudaErrorStreamCaptureInvalidated);

  ASSERT_EQ(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  ampc::cuda::launch("fill", fill, 1, 32, 0, origin, a, 2, 32);
  ASSERT_EQ(cudaEventRecord(inside, origin), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(inside), cudaErrorCapturedEvent);
  EXPECT_EQ(cudaStreamEndCapture(origin, &graph),
            cudaErrorStreamCaptureInvalidated);
  cudaGetLastError();
  cudaEventDestroy(outside);
  cudaEventDestroy(inside);
  cudaStreamDestroy(origin);
  cudaStreamDestroy(other);
  cudaFree(a);
}

//===----------------------------------------------------------------------===//
// Queries make progress
//===----------------------------------------------------------------------===//

/// A host that polls an event (or a stream) instead of synchronising: the
/// first query sees the work pending, and the work then completes, so the
/// loop ends with the data in place.
TEST(CudaSimStreams, PollingQueriesComplete) {
  cudaStream_t s = nonBlockingStream();
  cudaEvent_t done;
  cudaEventCreate(&done);
  int *d = deviceAlloc<int>(64);
  int *host = pinnedAlloc<int>(64);
  ampc::cuda::launch("fill", fill, 1, 64, 0, s, d, 9, 64);
  ASSERT_EQ(cudaMemcpyAsync(host, d, 64 * sizeof(int), cudaMemcpyDeviceToHost, s),
            cudaSuccess);
  ASSERT_EQ(cudaEventRecord(done, s), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady);
  int polls = 1;
  cudaError_t e;
  while ((e = cudaEventQuery(done)) == cudaErrorNotReady && polls < 100)
    ++polls;
  EXPECT_EQ(e, cudaSuccess) << "after " << polls << " polls";
  EXPECT_EQ(host[63], 9);

  ampc::cuda::launch("fill", fill, 1, 64, 0, s, d, 4, 64);
  ASSERT_EQ(cudaMemcpyAsync(host, d, 64 * sizeof(int), cudaMemcpyDeviceToHost, s),
            cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  polls = 1;
  while ((e = cudaStreamQuery(s)) == cudaErrorNotReady && polls < 100)
    ++polls;
  EXPECT_EQ(e, cudaSuccess) << "after " << polls << " polls";
  EXPECT_EQ(host[0], 4);
  EXPECT_EQ(cudaEventQuery(done), cudaSuccess); // long done
  cudaFreeHost(host);
  cudaEventDestroy(done);
  cudaStreamDestroy(s);
  cudaFree(d);
}

//===----------------------------------------------------------------------===//
// Pinned memory, pageable copies
//===----------------------------------------------------------------------===//

/// Under unified addressing pinned host memory is a device address: a
/// kernel may write it, and a device-to-device copy may read it.
TEST(CudaSimStreams, PinnedHostMemoryIsADeviceAddress) {
  cudaStream_t s = nonBlockingStream();
  int *pinned = pinnedAlloc<int>(64);
  int *mapped = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void **>(&mapped), 64 * sizeof(int),
                          cudaHostAllocMapped),
            cudaSuccess);
  int *d = deviceAlloc<int>(64);
  ampc::cuda::launch("fill", fill, 1, 64, 0, s, pinned, 6, 64);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d, pinned, 64 * sizeof(int),
                            cudaMemcpyDeviceToDevice, s),
            cudaSuccess);
  ampc::cuda::launch("affine", affine, 1, 64, 0, s, d, mapped, 1, 1, 64);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(pinned[63], 6);
  EXPECT_EQ(mapped[0], 7);
  // Freed, it is a host pointer again.
  ASSERT_EQ(cudaFreeHost(mapped), cudaSuccess);
  ampc::cuda::launch("fill", fill, 1, 64, 0, s, mapped, 6, 64);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevicePointer);
  cudaFreeHost(pinned);
  cudaStreamDestroy(s);
  cudaFree(d);
}

/// A device-to-host copy into pageable memory returns with the data (the
/// driver stages it and waits), with or without Async; into pinned memory
/// cudaMemcpyAsync returns at once and the data lands when the stream runs.
TEST(CudaSimStreams, PageableDeviceToHostCopyIsSynchronous) {
  cudaStream_t s = nonBlockingStream();
  int *d = deviceAlloc<int>(16);
  ampc::cuda::launch("fill", fill, 1, 32, 0, s, d, 8, 16);
  std::vector<int> pageable(16, 0);
  ASSERT_EQ(cudaMemcpyAsync(pageable.data(), d, 16 * sizeof(int),
                            cudaMemcpyDeviceToHost, s),
            cudaSuccess);
  EXPECT_EQ(pageable[15], 8) << "returned before the copy landed";
  ampc::cuda::launch("fill", fill, 1, 32, 0, s, d, 2, 16);
  int *pinned = pinnedAlloc<int>(16);
  pinned[0] = 0;
  ASSERT_EQ(cudaMemcpyAsync(pinned, d, 16 * sizeof(int),
                            cudaMemcpyDeviceToHost, s),
            cudaSuccess);
  EXPECT_EQ(pinned[0], 0) << "a pinned asynchronous copy landed at the call";
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(pinned[0], 2);
  cudaFreeHost(pinned);
  cudaStreamDestroy(s);
  cudaFree(d);
}

//===----------------------------------------------------------------------===//
// Device faults
//===----------------------------------------------------------------------===//

// A fault is sticky for the process, as on a device: each test runs in a
// child process (a death test) that checks and exits 0.

/// A write through a wild pointer from a kernel of 4 blocks of 64 threads
/// (the others waiting at a barrier): the kernel is abandoned, the error
/// is cudaErrorIllegalAddress naming the kernel, sticky for every later
/// synchronising call, later work is dropped, and the process lives.
TEST(CudaSimStreamsDeathTest, FaultInAKernelIsStickyIllegalAddress) {
  EXPECT_EXIT(
      {
        cudaStream_t s = nonBlockingStream();
        int *d = deviceAlloc<int>(16);
        int host = 0;
        bool ok = true;
        ampc_cudasim_counters_reset();
        // 16 ints, written as 1,000,000: past the allocation's guard page.
        ampc::cuda::launch("barrierThenWrite", barrierThenWrite, 4, 64, 0, s,
                           d, 1000000);
        ok &= cudaGetLastError() == cudaSuccess; // the launch is fine
        ampc::cuda::launch("fill", fill, 1, 32, 0, s, d, 1, 16);
        cudaError_t e = cudaStreamSynchronize(s);
        const std::string message = cudaGetErrorString(e);
        ok &= e == cudaErrorIllegalAddress;
        ok &= message.find("an illegal memory access was encountered") == 0;
        ok &= message.find("kernel barrierThenWrite") != std::string::npos;
        ok &= cudaDeviceSynchronize() == cudaErrorIllegalAddress;
        ok &= cudaStreamSynchronize(s) == cudaErrorIllegalAddress;
        ok &= cudaMemcpy(&host, d, 4, cudaMemcpyDeviceToHost) ==
              cudaErrorIllegalAddress;
        ok &= cudaGetLastError() == cudaErrorIllegalAddress;
        // The faulting kernel counted (it ran); the fill after it never did.
        ok &= counters() == "kernel 1 barrierThenWrite\n";
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "kernel barrierThenWrite: invalid memory access at 0x[0-9a-f]+ \\(not "
      "live device memory\\)");
}

/// A stack overflow on a thread's fiber (its guard page) is a fault too:
/// the handler runs on its own stack and recovers the same way.
TEST(CudaSimStreamsDeathTest, FiberStackOverflowIsIllegalAddress) {
  EXPECT_EXIT(
      {
        int *d = deviceAlloc<int>(32);
        ampc::cuda::launch("deepRecursion", deepRecursion, 1, 32, 0, nullptr,
                           d, 1 << 12);
        cudaError_t e = cudaDeviceSynchronize();
        std::exit(e == cudaErrorIllegalAddress ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "kernel deepRecursion: invalid memory");
}

/// A fault outside any kernel (here after one ran) still kills the process.
TEST(CudaSimStreamsDeathTest, FaultOutsideAKernelStillKills) {
  EXPECT_DEATH(
      {
        int *d = deviceAlloc<int>(32);
        ampc::cuda::launch("fill", fill, 1, 32, 0, nullptr, d, 1, 32);
        cudaDeviceSynchronize();
        cudaFree(d);
        *static_cast<volatile int *>(static_cast<void *>(d)) = 1;
      },
      "invalid memory access at 0x[0-9a-f]+ outside any kernel.s threads");
}

/// The CUDA target's error path: a model library (the test MLP under
/// cuda-sim) on the host's stream, after the host's own kernel faulted on
/// it. The device's sticky error reaches the caller as an execution error
/// with CUDA's message (naming the kernel), not as a crash. Exits 0 if so.
[[noreturn]] void modelAfterAFault() {
  cudaStream_t s = nonBlockingStream();
  ampc_model_options options;
  ampc_model_options_init(&options);
  options.cuda_stream = s;
  ampc_model *model = nullptr;
  if (ampc_model_load(AMPC_MLP_CUDA_SIM_LIBRARY, &options, &model) != AMPC_OK)
    std::exit(2);
  float x[32];
  for (int i = 0; i < 32; ++i)
    x[i] = std::sin(0.7f * i);
  int64_t label[8] = {0, 1, 2, 0, 1, 2, 0, 1};
  int64_t xShape[2] = {8, 4}, labelShape[1] = {8};
  ampc_tensor inputs[2] = {{AMPC_DTYPE_F32, 2, xShape, x, sizeof x},
                           {AMPC_DTYPE_I64, 1, labelShape, label, sizeof label}};
  float loss = NAN;
  ampc_tensor out = {AMPC_DTYPE_F32, 0, nullptr, &loss, sizeof loss};
  if (ampc_model_train_step(model, inputs, 2, &out) != AMPC_OK ||
      ampc_model_synchronize(model) != AMPC_OK || !std::isfinite(loss))
    std::exit(3);
  int *d = deviceAlloc<int>(16);
  ampc::cuda::launch("wildWrite", fill, 4, 64, 0, s, d, 1, 1000000);
  ampc_status status = ampc_model_train_step(model, inputs, 2, &out);
  if (status == AMPC_OK)
    status = ampc_model_synchronize(model);
  const std::string error = ampc_last_error();
  bool ok = status == AMPC_ERROR_EXECUTION &&
            error.find("an illegal memory access was encountered") !=
                std::string::npos &&
            error.find("kernel wildWrite") != std::string::npos;
  // Every later call reports it too.
  ok &= ampc_model_synchronize(model) == AMPC_ERROR_EXECUTION;
  ampc_model_release(model);
  std::fprintf(stderr, "status %d: %s\n", static_cast<int>(status),
               error.c_str());
  std::exit(ok ? 0 : 1);
}

TEST(CudaSimStreamsDeathTest, ModelLibraryReportsADeviceFault) {
  EXPECT_EXIT(modelAfterAFault(), ::testing::ExitedWithCode(0),
              "status [0-9]+: .*illegal memory access");
}

/// Devices (AMPC_CUDA_SIM_DEVICES): a kernel launched on a stream of
/// another device than the current one is refused, as CUDA refuses it; a
/// stream of the current device runs it. What a model library's entry
/// points must get right (DeviceScope, CudaLibraryTest.cpp).
TEST(CudaSimDevicesDeathTest, KernelOnAnotherDevicesStreamIsRefused) {
  EXPECT_EXIT(
      {
        setenv("AMPC_CUDA_SIM_DEVICES", "2", 1);
        int count = 0;
        cudaGetDeviceCount(&count);
        int *d = nullptr;
        cudaStream_t onOne = nullptr;
        if (count != 2 || cudaSetDevice(1) != cudaSuccess ||
            cudaMalloc(&d, 256) != cudaSuccess ||
            cudaStreamCreate(&onOne) != cudaSuccess ||
            cudaSetDevice(0) != cudaSuccess)
          std::exit(2);
        ampc::cuda::launch("fill", fill, 1, 32, 0, onOne, d, 7, 32);
        cudaError_t refused = cudaGetLastError();
        std::string message = cudaGetErrorString(refused);
        std::fprintf(stderr, "message: %s\n", message.c_str());
        cudaSetDevice(1);
        ampc::cuda::launch("fill", fill, 1, 32, 0, onOne, d, 7, 32);
        bool runs = cudaGetLastError() == cudaSuccess &&
                    cudaStreamSynchronize(onOne) == cudaSuccess;
        std::exit(refused == cudaErrorInvalidResourceHandle && runs &&
                          message.find("belongs to device 1, the current "
                                       "device is 0") != std::string::npos &&
                          cudaSetDevice(2) == cudaErrorInvalidDevice
                      ? 0
                      : 1);
      },
      ::testing::ExitedWithCode(0), "message: .*kernel fill launch");
}

} // namespace
