//===- Runtime.cpp - the CUDA runtime API on the CPU ----------------------===//
//
// The part of the CUDA runtime the CUDA target uses, defined against CUDA's
// own declarations (cuda_runtime_api.h), with the documented semantics made
// as unforgiving as a GPU can be:
//
// - Device memory is host memory the execution registers: fresh
//   allocations are filled with 0xFF bytes (NaN in every float type, -1 in
//   every integer) so a read before a write shows, and freed memory is
//   made inaccessible and never reused, so a use after free faults or is
//   refused by name. Every call checks that its pointers are what its kind
//   says (device memory, not a host pointer, not freed). Pinned host
//   memory (cudaMallocHost, cudaHostAlloc) is also a device address, as
//   under unified addressing: a kernel argument or a copy's device side
//   may be one.
// - Work on a stream runs later, in stream order, only when a synchronising
//   call needs it. Streams CUDA leaves unordered stay unordered: the legacy
//   default stream and a cudaStreamNonBlocking stream never wait for each
//   other, and work that nothing waits for runs as late as it can. A
//   host-to-device cudaMemcpy from pageable memory returns after the data
//   is staged and lands when the legacy stream runs (CUDA's documentation:
//   "the DMA to final destination may not have completed"); cudaMemset is
//   asynchronous. Copies from pinned memory read it when they run. A
//   device-to-host copy returns once the data is in host memory, except a
//   cudaMemcpyAsync into pinned memory, which writes it when it runs (CUDA
//   documents the pageable one as "might be synchronous"; the drivers make
//   it so). cudaStreamQuery and cudaEventQuery report work still queued as
//   cudaErrorNotReady and then run it: a polling host makes progress.
// - A stream capture follows events: a stream that waits for an event
//   recorded in a capture joins it, and each captured node waits for its
//   stream's previous node and the events' nodes. Ending the capture fails
//   (cudaErrorStreamCaptureUnjoined) unless every node is ordered before
//   the origin stream's last; a launch replays the nodes in an order that
//   respects the dependencies and runs, of the ready ones, the node
//   captured last first (unordered branches do not run in capture order).
//   Waiting for an event from outside the capture, merging two captures,
//   ending on another stream and querying a captured event are refused as
//   CUDA refuses them; cudaEventWaitExternal is not modelled (refused).
// - A failure while work runs is sticky, as a fault on a device is: every
//   later call reports it. A fault in a kernel is one (Execution.cpp):
//   cudaErrorIllegalAddress, naming the kernel.
// - Each piece of work is counted as it runs (Counters.h), by the kind and
//   name its caller gave enqueue: the launch counts the tests pin are what
//   the device did, not what was asked of it.
//
//===----------------------------------------------------------------------===//

#include "Sim.h"

#include "ampc/CudaSim/Counters.h"

#include <cuda_runtime_api.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ampc::sim {
namespace {

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

thread_local cudaError_t lastError = cudaSuccess;
cudaError_t stickyError = cudaSuccess;
std::map<int, std::string> details; // error code -> latest detail

const char *standardName(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return "no error";
  case cudaErrorInvalidValue: return "invalid argument";
  case cudaErrorMemoryAllocation: return "out of memory";
  case cudaErrorInvalidConfiguration: return "invalid configuration argument";
  case cudaErrorInvalidDevicePointer: return "invalid device pointer";
  case cudaErrorInvalidResourceHandle: return "invalid resource handle";
  case cudaErrorNotReady: return "device not ready";
  case cudaErrorLaunchFailure: return "unspecified launch failure";
  case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
  case cudaErrorNotPermitted: return "operation not permitted";
  case cudaErrorInvalidDevice: return "invalid device ordinal";
  case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
  case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
  case cudaErrorStreamCaptureMerge: return "operation would result in a merge of separate capture sequences";
  case cudaErrorStreamCaptureUnmatched: return "capture was not ended in the same stream as it began";
  case cudaErrorStreamCaptureUnjoined: return "capturing stream has unjoined work";
  case cudaErrorStreamCaptureIsolation: return "dependency created on uncaptured work in another stream";
  case cudaErrorCapturedEvent: return "operation not permitted on an event last recorded in a capturing stream";
  case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
  case cudaErrorCooperativeLaunchTooLarge: return "too many blocks in cooperative launch";
  default: return "cuda-sim error";
  }
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

struct Allocation {
  size_t bytes;
  size_t mapped; // device: the mapping, guard page included
  bool live;
  bool device;
  int ordinal = 0; // the device current when it was allocated
};
std::map<uintptr_t, Allocation> allocations; // by start address
std::recursive_mutex mutex;                  // one host thread in at a time

const std::pair<const uintptr_t, Allocation> *find(uintptr_t p) {
  auto it = allocations.upper_bound(p);
  if (it == allocations.begin())
    return nullptr;
  --it;
  // A range may end exactly at the allocation's end (bytes == 0 at the end).
  if (p > it->first + it->second.bytes)
    return nullptr;
  return &*it;
}

std::string hex(const void *p) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%p", p);
  return buffer;
}

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

struct Stream;
struct Op {
  std::string what;
  std::function<cudaError_t()> work; // empty: wait for `stream` to reach `seq`
  Stream *stream = nullptr;
  uint64_t seq = 0;
  Work kind = Work::Kernel; // what `work` counts as when it runs
  std::string name;
};
/// A captured graph: each node's work and the nodes it waits for (the
/// order of its stream, and the events it waited on).
struct Node {
  Op op;
  std::vector<size_t> after;
};
struct Graph {
  std::vector<Node> nodes; // in the order they were captured
};
/// A stream capture in progress: the graph it builds, the stream it began
/// on (the only one that may end it), and whether something the capture
/// cannot hold happened. Streams join it by waiting on an event recorded
/// in it; ending it takes them all out of capture mode.
struct Capture {
  uint64_t id;
  Graph *graph;
  Stream *origin;
  bool invalidated = false;
};
struct Stream {
  unsigned flags = 0;
  bool legacy = false;
  /// The device it was created on; -1 for the legacy and per-thread
  /// streams, which are the current device's.
  int device = -1;
  std::deque<Op> queue;
  uint64_t enqueued = 0, completed = 0;
  /// While part of a capture: the capture, and the nodes the stream's next
  /// captured work waits for.
  Capture *capturing = nullptr;
  std::vector<size_t> tails;
  bool blocking() const { return !(flags & cudaStreamNonBlocking); }
};
struct Event {
  Stream *stream = nullptr;
  uint64_t seq = 0;
  /// Created without cudaEventDisableTiming: `at` is when the stream's
  /// work up to `seq` had run (cudaEventElapsedTime), `stamped` once known.
  bool timing = true;
  bool stamped = false;
  std::chrono::steady_clock::time_point at;
  /// Last recorded in a capture: its id (0: not) and the nodes recorded.
  uint64_t capture = 0;
  std::vector<size_t> nodes;
};

Stream legacyStream{0, true};
/// The current device of this host thread (cudaSetDevice).
thread_local int current = 0;
Stream perThreadStream{0, false};
std::vector<std::unique_ptr<Stream>> streams; // created by the host, live
std::vector<std::unique_ptr<Event>> events;
bool inHostFunction = false;

Stream *resolve(cudaStream_t s) {
  if (s == nullptr || s == cudaStreamLegacy)
    return &legacyStream;
  if (s == cudaStreamPerThread)
    return &perThreadStream;
  for (auto &owned : streams)
    if (owned.get() == reinterpret_cast<Stream *>(s))
      return owned.get();
  return nullptr;
}
std::vector<Stream *> allStreams() {
  std::vector<Stream *> all = {&legacyStream, &perThreadStream};
  for (auto &owned : streams)
    all.push_back(owned.get());
  return all;
}

/// Counters.h: how often each (kind, name) of work ran since the reset.
std::map<std::pair<Work, std::string>, uint64_t> counts;

/// AMPC_CUDA_SIM_PROFILE=1: the host seconds each kind of work took (by
/// kernel or call name), printed to stderr at exit, slowest first. For
/// finding what makes a test slow under the execution; nothing else.
std::map<std::string, double> profileTimes;
void printProfile() {
  std::vector<std::pair<double, std::string>> rows;
  double total = 0;
  for (const auto &[name, seconds] : profileTimes) {
    rows.push_back({seconds, name});
    total += seconds;
  }
  std::sort(rows.rbegin(), rows.rend());
  std::fprintf(stderr, "ampc cuda-sim profile: %.3f s of device work\n",
               total);
  for (const auto &[seconds, name] : rows)
    std::fprintf(stderr, "  %10.3f s  %5.1f%%  %s\n", seconds,
                 total > 0 ? 100 * seconds / total : 0.0, name.c_str());
}
bool profiling() {
  static const bool on = [] {
    const char *v = std::getenv("AMPC_CUDA_SIM_PROFILE");
    if (!v || !*v || std::string(v) == "0")
      return false;
    std::atexit(printProfile);
    return true;
  }();
  return on;
}

/// Live events created with timing (none outside GEMM tuning): stamping
/// looks at the events only while there are any.
size_t timingEvents = 0;

/// Timing events recorded on `s` whose work has now run get their time.
void stampEvents(Stream &s) {
  if (timingEvents == 0)
    return;
  for (auto &e : events)
    if (e->timing && !e->stamped && e->stream == &s &&
        e->seq <= s.completed) {
      e->stamped = true;
      e->at = std::chrono::steady_clock::now();
    }
}

/// Runs `s`'s work until `seq` ops have completed, first running whatever
/// that work waits for.
void drain(Stream &s, uint64_t seq) {
  while (s.completed < seq && !s.queue.empty()) {
    Op op = std::move(s.queue.front());
    s.queue.pop_front();
    if (op.work) {
      if (stickyError == cudaSuccess) {
        ++counts[{op.kind, op.name}];
        const bool timed = profiling();
        auto start = std::chrono::steady_clock::now();
        cudaError_t e = op.work();
        if (timed)
          profileTimes[op.name] +=
              std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                            start)
                  .count();
        if (e != cudaSuccess)
          stickyError = e;
      }
    } else {
      drain(*op.stream, op.seq);
    }
    ++s.completed;
    stampEvents(s);
  }
}
void drainAll() {
  bool more = true;
  while (more) {
    more = false;
    for (Stream *s : allStreams())
      if (!s->queue.empty()) {
        drain(*s, s->enqueued);
        more = true;
      }
  }
}

void push(Stream &s, Op op) {
  s.queue.push_back(std::move(op));
  ++s.enqueued;
}

/// Queues work with CUDA's implicit ordering: the legacy stream waits for
/// every blocking stream's earlier work, and a blocking stream waits for
/// the legacy stream's.
void enqueueOn(Stream &s, Op op) {
  if (s.capturing) {
    Graph &g = *s.capturing->graph;
    g.nodes.push_back(Node{std::move(op), s.tails});
    s.tails = {g.nodes.size() - 1};
    return;
  }
  if (s.legacy) {
    for (Stream *other : allStreams())
      if (other != &s && other->blocking() && other->completed < other->enqueued)
        push(s, Op{"implicit wait", nullptr, other, other->enqueued});
  } else if (s.blocking() && legacyStream.completed < legacyStream.enqueued) {
    push(s, Op{"implicit wait", nullptr, &legacyStream, legacyStream.enqueued});
  }
  push(s, std::move(op));
}

/// A call that would wait for a capturing stream: CUDA refuses it and
/// invalidates the capture.
cudaError_t refuseWhileCapturing(const char *call) {
  for (Stream *s : allStreams())
    if (s->capturing) {
      s->capturing->invalidated = true;
      return fail(cudaErrorStreamCaptureUnsupported,
                  std::string(call) +
                      ": waits for a stream that is being captured (the "
                      "capture is invalidated)");
    }
  return cudaSuccess;
}

/// The error a call returns: a sticky error first, else `e`.
cudaError_t result(cudaError_t e) {
  if (stickyError != cudaSuccess)
    return lastError = stickyError;
  return e;
}

/// CUDA forbids runtime calls from a host function.
#define AMPC_SIM_ENTRY(call)                                                   \
  std::lock_guard<std::recursive_mutex> lock(mutex);                           \
  if (inHostFunction)                                                          \
    return fail(cudaErrorNotPermitted,                                         \
                std::string(call) + ": called from a host function "           \
                                    "(cudaLaunchHostFunc forbids CUDA calls)")

size_t limitStackSize = 1024; // cudaLimitStackSize's default

} // namespace

//===----------------------------------------------------------------------===//
// Sim.h
//===----------------------------------------------------------------------===//

Memory classify(const void *pointer, size_t bytes) {
  std::lock_guard<std::recursive_mutex> lock(mutex);
  const auto p = reinterpret_cast<uintptr_t>(pointer);
  const auto *found = find(p);
  if (!found || p + bytes > found->first + found->second.bytes ||
      p + bytes < p)
    return Memory::Host;
  if (!found->second.device)
    return found->second.live ? Memory::PinnedHost : Memory::Host;
  return found->second.live ? Memory::Device : Memory::FreedDevice;
}

bool findGlobal(const void *pointer, const void *&base, size_t &bytes) {
  std::lock_guard<std::recursive_mutex> lock(mutex);
  const auto p = reinterpret_cast<uintptr_t>(pointer);
  const auto *found = find(p);
  if (!found || !found->second.live || p >= found->first + found->second.bytes)
    return false;
  base = reinterpret_cast<const void *>(found->first);
  bytes = found->second.bytes;
  return true;
}

bool checkDevice(const void *pointer, size_t bytes, const char *call,
                 const char *what) {
  if (!pointer && bytes == 0)
    return true;
  std::lock_guard<std::recursive_mutex> lock(mutex);
  const auto p = reinterpret_cast<uintptr_t>(pointer);
  const auto *found = find(p);
  std::string prefix = std::string(call) + ": " + what + " " + hex(pointer);
  if (!found || !found->second.device) {
    fail(cudaErrorInvalidDevicePointer,
         prefix + " is a host pointer, not device memory");
    return false;
  }
  if (!found->second.live) {
    fail(cudaErrorInvalidDevicePointer,
         prefix + " is in device memory that cudaFree released (use after free)");
    return false;
  }
  if (p + bytes > found->first + found->second.bytes || p + bytes < p) {
    fail(cudaErrorInvalidValue,
         prefix + " + " + std::to_string(bytes) +
             " bytes runs past the end of its allocation (" +
             std::to_string(found->second.bytes) + " bytes at " +
             hex(reinterpret_cast<void *>(found->first)) + ")");
    return false;
  }
  return true;
}

bool checkDeviceAccessible(const void *pointer, size_t bytes, const char *call,
                           const char *what) {
  return classify(pointer, bytes) == Memory::PinnedHost ||
         checkDevice(pointer, bytes, call, what);
}

cudaError_t fail(cudaError_t error, const std::string &message) {
  std::lock_guard<std::recursive_mutex> lock(mutex);
  details[error] = std::string(standardName(error)) + ": " + message;
  std::fprintf(stderr, "ampc cuda-sim: %s\n", message.c_str());
  lastError = error;
  return error;
}

cudaError_t enqueue(cudaStream_t stream, const char *call, Work kind,
                    std::string name, std::function<cudaError_t()> work) {
  std::lock_guard<std::recursive_mutex> lock(mutex);
  Stream *s = resolve(stream);
  if (!s)
    return fail(cudaErrorInvalidResourceHandle,
                std::string(call) + ": stream " + hex(stream) +
                    " is not a live stream");
  enqueueOn(*s, Op{call, std::move(work), nullptr, 0, kind, std::move(name)});
  return result(cudaSuccess);
}

size_t stackLimit() { return limitStackSize; }

int deviceCount() {
  const char *value = std::getenv("AMPC_CUDA_SIM_DEVICES");
  int n = value ? std::atoi(value) : 1;
  return n >= 1 && n <= 16 ? n : 1;
}

int currentDevice() { return current; }

bool checkStreamDevice(cudaStream_t stream, const char *call) {
  std::lock_guard<std::recursive_mutex> lock(mutex);
  Stream *s = resolve(stream);
  if (!s || s->device < 0 || s->device == current)
    return true;
  fail(cudaErrorInvalidResourceHandle,
       std::string(call) + ": stream " + hex(stream) + " belongs to device " +
           std::to_string(s->device) + ", the current device is " +
           std::to_string(current) +
           " (a kernel runs only on a stream of the current device)");
  return false;
}

} // namespace ampc::sim

using namespace ampc::sim;

//===----------------------------------------------------------------------===//
// Device, errors
//===----------------------------------------------------------------------===//

extern "C" {

cudaError_t cudaGetDeviceCount(int *count) {
  *count = deviceCount();
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) {
  *device = currentDevice();
  return result(cudaSuccess);
}
cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= deviceCount())
    return fail(cudaErrorInvalidDevice,
                "cudaSetDevice: device " + std::to_string(device) +
                    " (the execution has " + std::to_string(deviceCount()) +
                    " device(s); AMPC_CUDA_SIM_DEVICES sets how many)");
  current = device;
  return result(cudaSuccess);
}

/// An H100 SXM by default; AMPC_CUDA_SIM_SM=80 describes an A100 instead
/// (the CUDA target sizes cuBLASLt's workspace by compute capability).
/// Either has kMultiprocessors multiprocessors (Sim.h: what bounds a
/// cooperative grid), not the 132 or 108 of the real ones.
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
  if (device < 0 || device >= deviceCount())
    return fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties: device " +
                                            std::to_string(device));
  std::memset(prop, 0, sizeof *prop);
  int sm = 90;
  if (const char *env = std::getenv("AMPC_CUDA_SIM_SM"))
    sm = std::atoi(env);
  std::snprintf(prop->name, sizeof prop->name, "ampc cuda-sim (sm_%d)", sm);
  prop->major = sm / 10;
  prop->minor = sm % 10;
  prop->totalGlobalMem = size_t(80) << 30;
  prop->sharedMemPerBlock = 48 << 10;
  prop->sharedMemPerBlockOptin = 227 << 10;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7FFFFFFF;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->multiProcessorCount = kMultiprocessors;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->l2CacheSize = sm >= 90 ? 50 << 20 : 40 << 20;
  prop->totalConstMem = 64 << 10;
  prop->unifiedAddressing = 1;
  prop->concurrentKernels = 1;
  return result(cudaSuccess);
}

/// The attributes the generated code asks for; any other fails.
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attribute,
                                   int device) {
  if (device < 0 || device >= deviceCount())
    return fail(cudaErrorInvalidDevice,
                "cudaDeviceGetAttribute: device " + std::to_string(device));
  switch (attribute) {
  case cudaDevAttrMultiProcessorCount:
    *value = kMultiprocessors;
    return result(cudaSuccess);
  case cudaDevAttrCooperativeLaunch:
    *value = 1;
    return result(cudaSuccess);
  default:
    return fail(cudaErrorInvalidValue,
                "cudaDeviceGetAttribute: attribute " +
                    std::to_string(static_cast<int>(attribute)) +
                    " is not one the execution describes");
  }
}

/// Blocks per multiprocessor for `func` (Sim.h's blocksPerMultiprocessor:
/// the execution checks a cooperative launch against the same count).
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int *numBlocks, const void *func, int blockSize, size_t dynamicSMemSize,
    unsigned int) {
  if (!func || blockSize <= 0)
    return fail(cudaErrorInvalidValue,
                "cudaOccupancyMaxActiveBlocksPerMultiprocessor: " +
                    std::string(!func ? "no kernel"
                                      : "a block of " +
                                            std::to_string(blockSize) +
                                            " threads"));
  *numBlocks = blocksPerMultiprocessor(blockSize, dynamicSMemSize);
  return result(cudaSuccess);
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(
    int *numBlocks, const void *func, int blockSize, size_t dynamicSMemSize) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
      numBlocks, func, blockSize, dynamicSMemSize, cudaOccupancyDefault);
}

cudaError_t cudaDeviceSetLimit(cudaLimit limit, size_t value) {
  AMPC_SIM_ENTRY("cudaDeviceSetLimit");
  if (limit == cudaLimitStackSize)
    limitStackSize = value;
  return result(cudaSuccess);
}
cudaError_t cudaDeviceGetLimit(size_t *value, cudaLimit limit) {
  AMPC_SIM_ENTRY("cudaDeviceGetLimit");
  *value = limit == cudaLimitStackSize ? limitStackSize : 0;
  return result(cudaSuccess);
}

cudaError_t cudaGetLastError(void) {
  std::lock_guard<std::recursive_mutex> lock(mutex);
  if (stickyError != cudaSuccess)
    return stickyError;
  cudaError_t e = lastError;
  lastError = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError(void) {
  std::lock_guard<std::recursive_mutex> lock(mutex);
  return stickyError != cudaSuccess ? stickyError : lastError;
}
const char *cudaGetErrorString(cudaError_t error) {
  std::lock_guard<std::recursive_mutex> lock(mutex);
  auto it = details.find(error);
  return it != details.end() ? it->second.c_str() : standardName(error);
}
const char *cudaGetErrorName(cudaError_t error) { return standardName(error); }

cudaError_t cudaDeviceSynchronize(void) {
  AMPC_SIM_ENTRY("cudaDeviceSynchronize");
  if (cudaError_t e = refuseWhileCapturing("cudaDeviceSynchronize"))
    return e;
  drainAll();
  return result(cudaSuccess);
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

/// The device's memory: 80 GiB (an H100), or AMPC_CUDA_SIM_MEMORY bytes.
static size_t deviceMemory() {
  if (const char *env = std::getenv("AMPC_CUDA_SIM_MEMORY"))
    return std::strtoull(env, nullptr, 10);
  return size_t(80) << 30;
}

cudaError_t cudaMalloc(void **pointer, size_t bytes) {
  AMPC_SIM_ENTRY("cudaMalloc");
  size_t live = 0;
  for (auto &[start, a] : allocations)
    if (a.device && a.live)
      live += a.bytes;
  if (bytes > deviceMemory() || live > deviceMemory() - bytes)
    return fail(cudaErrorMemoryAllocation,
                "cudaMalloc: " + std::to_string(bytes) + " bytes with " +
                    std::to_string(live) + " in use, of the device's " +
                    std::to_string(deviceMemory()));
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t rounded = (std::max<size_t>(bytes, 1) + page - 1) / page * page;
  // One inaccessible page after the allocation: a kernel that runs past
  // the end faults (and Execution.cpp names the kernel).
  void *p = mmap(nullptr, rounded + page, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return fail(cudaErrorMemoryAllocation,
                "cudaMalloc: " + std::to_string(bytes) + " bytes");
  mprotect(static_cast<char *>(p) + rounded, page, PROT_NONE);
  std::memset(p, 0xFF, bytes);
  allocations[reinterpret_cast<uintptr_t>(p)] = {bytes, rounded + page, true,
                                                 true, currentDevice()};
  *pointer = p;
  return result(cudaSuccess);
}

cudaError_t cudaFree(void *pointer) {
  AMPC_SIM_ENTRY("cudaFree");
  if (!pointer)
    return result(cudaSuccess);
  // cudaFree synchronises the device.
  drainAll();
  auto it = allocations.find(reinterpret_cast<uintptr_t>(pointer));
  if (it == allocations.end() || !it->second.device)
    return fail(cudaErrorInvalidValue,
                "cudaFree: " + hex(pointer) + " is not a device allocation");
  if (!it->second.live)
    return fail(cudaErrorInvalidValue,
                "cudaFree: " + hex(pointer) + " was already freed");
  it->second.live = false;
  // Kept reserved and inaccessible: the address is never handed out again,
  // so a stale pointer cannot silently reach a newer allocation.
  mprotect(pointer, it->second.mapped, PROT_NONE);
  madvise(pointer, it->second.mapped, MADV_DONTNEED);
  return result(cudaSuccess);
}

cudaError_t cudaMallocHost(void **pointer, size_t bytes) {
  AMPC_SIM_ENTRY("cudaMallocHost");
  void *p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  if (!p)
    return fail(cudaErrorMemoryAllocation,
                "cudaMallocHost: " + std::to_string(bytes) + " bytes");
  std::memset(p, 0xFF, bytes);
  allocations[reinterpret_cast<uintptr_t>(p)] = {bytes, 0, true, false,
                                                 currentDevice()};
  *pointer = p;
  return result(cudaSuccess);
}
cudaError_t cudaHostAlloc(void **pointer, size_t bytes, unsigned int) {
  return cudaMallocHost(pointer, bytes);
}
/// As CUDA 11 and later: pageable (or unknown) memory is
/// cudaMemoryTypeUnregistered with device -2, not an error; freed device
/// memory is no longer the device's, so unregistered too.
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *attributes,
                                     const void *pointer) {
  AMPC_SIM_ENTRY("cudaPointerGetAttributes");
  if (!attributes)
    return fail(cudaErrorInvalidValue,
                "cudaPointerGetAttributes: attributes is NULL");
  *attributes = cudaPointerAttributes{};
  attributes->type = cudaMemoryTypeUnregistered;
  attributes->device = -2;
  const auto *found = find(reinterpret_cast<uintptr_t>(pointer));
  if (!found || !found->second.live ||
      reinterpret_cast<uintptr_t>(pointer) >=
          found->first + std::max<size_t>(found->second.bytes, 1))
    return result(cudaSuccess);
  attributes->device = found->second.ordinal;
  if (found->second.device) {
    attributes->type = cudaMemoryTypeDevice;
    attributes->devicePointer = const_cast<void *>(pointer);
  } else {
    attributes->type = cudaMemoryTypeHost;
    attributes->hostPointer = const_cast<void *>(pointer);
    attributes->devicePointer = const_cast<void *>(pointer);
  }
  return result(cudaSuccess);
}

cudaError_t cudaFreeHost(void *pointer) {
  AMPC_SIM_ENTRY("cudaFreeHost");
  if (!pointer)
    return result(cudaSuccess);
  drainAll();
  auto it = allocations.find(reinterpret_cast<uintptr_t>(pointer));
  if (it == allocations.end() || it->second.device || !it->second.live)
    return fail(cudaErrorInvalidValue,
                "cudaFreeHost: " + hex(pointer) + " is not pinned host memory");
  allocations.erase(it);
  std::free(pointer);
  return result(cudaSuccess);
}

} // extern "C"

namespace {

const char *kindName(cudaMemcpyKind kind) {
  switch (kind) {
  case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
  case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
  case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
  case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
  default: return "cudaMemcpyDefault";
  }
}

/// Checks the pointers of a copy against its kind and says which way it
/// goes (cudaMemcpyDefault is resolved from the pointers); false after
/// recording the failure. Pinned host memory is accepted on either side:
/// under unified addressing it is also a device address.
bool checkCopy(const char *call, void *dst, const void *src, size_t bytes,
               cudaMemcpyKind &kind) {
  const bool dstDevice = classify(dst, bytes) == Memory::Device ||
                         classify(dst, bytes) == Memory::FreedDevice;
  const bool srcDevice = classify(src, bytes) == Memory::Device ||
                         classify(src, bytes) == Memory::FreedDevice;
  if (kind == cudaMemcpyDefault)
    kind = dstDevice ? (srcDevice ? cudaMemcpyDeviceToDevice
                                  : cudaMemcpyHostToDevice)
                     : (srcDevice ? cudaMemcpyDeviceToHost
                                  : cudaMemcpyHostToHost);
  const bool wantDst = kind == cudaMemcpyHostToDevice ||
                       kind == cudaMemcpyDeviceToDevice;
  const bool wantSrc = kind == cudaMemcpyDeviceToHost ||
                       kind == cudaMemcpyDeviceToDevice;
  const std::string name = std::string(call) + " (" + kindName(kind) + ")";
  if (wantDst ? !checkDeviceAccessible(dst, bytes, name.c_str(), "destination")
              : dstDevice) {
    if (!wantDst)
      fail(cudaErrorInvalidValue, name + ": destination " + hex(dst) +
                                      " is device memory, the kind says host");
    return false;
  }
  if (wantSrc ? !checkDeviceAccessible(src, bytes, name.c_str(), "source")
              : srcDevice) {
    if (!wantSrc)
      fail(cudaErrorInvalidValue, name + ": source " + hex(src) +
                                      " is device memory, the kind says host");
    return false;
  }
  return true;
}

/// The copy as queued work. A host source that is not pinned is staged
/// now (the caller may reuse it when the call returns); pinned memory is
/// read, and host destinations written, when the work runs.
std::function<cudaError_t()> copyWork(void *dst, const void *src, size_t bytes,
                                      cudaMemcpyKind kind) {
  if (kind == cudaMemcpyHostToDevice &&
      classify(src, bytes) != Memory::PinnedHost) {
    auto staged = std::make_shared<std::vector<unsigned char>>(
        static_cast<const unsigned char *>(src),
        static_cast<const unsigned char *>(src) + bytes);
    return [dst, staged]() {
      std::memcpy(dst, staged->data(), staged->size());
      return cudaSuccess;
    };
  }
  return [dst, src, bytes]() {
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  };
}

} // namespace

extern "C" {

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes,
                       cudaMemcpyKind kind) {
  AMPC_SIM_ENTRY("cudaMemcpy");
  if (bytes == 0)
    return result(cudaSuccess);
  if (!checkCopy("cudaMemcpy", dst, src, bytes, kind))
    return cudaErrorInvalidValue;
  if (cudaError_t e = refuseWhileCapturing("cudaMemcpy"))
    return e;
  if (kind == cudaMemcpyHostToHost) {
    std::memmove(dst, src, bytes);
    return result(cudaSuccess);
  }
  // On the legacy default stream. What returns before the copy lands:
  // pageable host-to-device (staged) and device-to-device.
  const bool pageable = kind == cudaMemcpyHostToDevice &&
                        classify(src, bytes) != Memory::PinnedHost;
  if (pageable)
    drain(legacyStream, legacyStream.enqueued);
  enqueueOn(legacyStream, Op{"cudaMemcpy", copyWork(dst, src, bytes, kind),
                             nullptr, 0, Work::Copy, kindName(kind)});
  if (!pageable && kind != cudaMemcpyDeviceToDevice)
    drain(legacyStream, legacyStream.enqueued);
  return result(cudaSuccess);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t stream) {
  AMPC_SIM_ENTRY("cudaMemcpyAsync");
  if (bytes == 0)
    return result(cudaSuccess);
  if (!checkCopy("cudaMemcpyAsync", dst, src, bytes, kind))
    return cudaErrorInvalidValue;
  // A capture cannot hold a copy from or to pageable memory: it would be
  // replayed from a buffer the host may long have reused.
  if (Stream *s = resolve(stream); s && s->capturing &&
      ((kind == cudaMemcpyHostToDevice && classify(src, bytes) != Memory::PinnedHost) ||
       (kind == cudaMemcpyDeviceToHost && classify(dst, bytes) != Memory::PinnedHost))) {
    s->capturing->invalidated = true;
    return fail(cudaErrorStreamCaptureUnsupported,
                std::string("cudaMemcpyAsync (") + kindName(kind) +
                    "): pageable host memory in a stream capture (the "
                    "capture is invalidated)");
  }
  if (cudaError_t e = enqueue(stream, "cudaMemcpyAsync", Work::Copy,
                              kindName(kind), copyWork(dst, src, bytes, kind)))
    return e;
  // Into pageable memory the copy goes through a staging buffer, and the
  // call returns once the data is in the caller's memory: synchronous
  // with the stream, as CUDA's drivers make it (its documentation: "might
  // be synchronous"). Into pinned memory it is fully asynchronous.
  if (kind == cudaMemcpyDeviceToHost &&
      classify(dst, bytes) != Memory::PinnedHost) {
    Stream *s = resolve(stream);
    drain(*s, s->enqueued);
  }
  return result(cudaSuccess);
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes,
                            cudaStream_t stream) {
  AMPC_SIM_ENTRY("cudaMemsetAsync");
  if (!checkDevice(dst, bytes, "cudaMemsetAsync", "destination"))
    return cudaErrorInvalidValue;
  return enqueue(stream, "cudaMemsetAsync", Work::Memset, "cudaMemsetAsync",
                 [dst, value, bytes]() {
                   std::memset(dst, value, bytes);
                   return cudaSuccess;
                 });
}

/// Asynchronous with respect to the host (CUDA's documentation), on the
/// legacy default stream.
cudaError_t cudaMemset(void *dst, int value, size_t bytes) {
  AMPC_SIM_ENTRY("cudaMemset");
  if (!checkDevice(dst, bytes, "cudaMemset", "destination"))
    return cudaErrorInvalidValue;
  return enqueue(nullptr, "cudaMemset", Work::Memset, "cudaMemset",
                 [dst, value, bytes]() {
                   std::memset(dst, value, bytes);
                   return cudaSuccess;
                 });
}

//===----------------------------------------------------------------------===//
// Streams, events, host functions
//===----------------------------------------------------------------------===//

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
  AMPC_SIM_ENTRY("cudaStreamCreateWithFlags");
  streams.push_back(std::make_unique<Stream>());
  streams.back()->flags = flags;
  streams.back()->device = currentDevice();
  *stream = reinterpret_cast<cudaStream_t>(streams.back().get());
  return result(cudaSuccess);
}
cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  AMPC_SIM_ENTRY("cudaStreamDestroy");
  Stream *s = resolve(stream);
  if (!s || s == &legacyStream || s == &perThreadStream)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaStreamDestroy: " + hex(stream) + " is not a live stream");
  if (s->capturing)
    return fail(cudaErrorStreamCaptureUnsupported,
                "cudaStreamDestroy: " + hex(stream) +
                    " is part of a stream capture (end the capture first)");
  // Work already queued still runs (CUDA releases the stream afterwards).
  drain(*s, s->enqueued);
  for (auto &e : events)
    if (e->stream == s)
      e->stream = nullptr;
  streams.erase(std::find_if(streams.begin(), streams.end(),
                             [&](auto &owned) { return owned.get() == s; }));
  return result(cudaSuccess);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  AMPC_SIM_ENTRY("cudaStreamSynchronize");
  Stream *s = resolve(stream);
  if (!s)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaStreamSynchronize: " + hex(stream) + " is not a live stream");
  if (s->capturing) {
    s->capturing->invalidated = true;
    return fail(cudaErrorStreamCaptureUnsupported,
                "cudaStreamSynchronize: the stream is being captured (the "
                "capture is invalidated)");
  }
  drain(*s, s->enqueued);
  return result(cudaSuccess);
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  AMPC_SIM_ENTRY("cudaStreamQuery");
  Stream *s = resolve(stream);
  if (!s)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaStreamQuery: " + hex(stream) + " is not a live stream");
  if (s->capturing) {
    s->capturing->invalidated = true;
    return fail(cudaErrorStreamCaptureUnsupported,
                "cudaStreamQuery: the stream is being captured (the capture "
                "is invalidated)");
  }
  // Work still queued is reported as pending, and then runs: the device
  // makes progress while the host polls, so a polling loop ends (at the
  // next query), and a host that takes the first answer for completion
  // still sees cudaErrorNotReady.
  if (s->completed < s->enqueued) {
    drain(*s, s->enqueued);
    return result(cudaErrorNotReady);
  }
  return result(cudaSuccess);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
  AMPC_SIM_ENTRY("cudaEventCreateWithFlags");
  events.push_back(std::make_unique<Event>());
  events.back()->timing = !(flags & cudaEventDisableTiming);
  timingEvents += events.back()->timing;
  *event = reinterpret_cast<cudaEvent_t>(events.back().get());
  return result(cudaSuccess);
}
cudaError_t cudaEventCreate(cudaEvent_t *event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

static Event *resolveEvent(cudaEvent_t event) {
  for (auto &owned : events)
    if (owned.get() == reinterpret_cast<Event *>(event))
      return owned.get();
  return nullptr;
}

/// An event last recorded in a capture records graph nodes, not work on a
/// stream: CUDA refuses to query or wait for it on the host, and a capture
/// still running that it belongs to is invalidated.
static cudaError_t refuseCapturedEvent(const char *call, Event &e) {
  for (Stream *s : allStreams())
    if (s->capturing && s->capturing->id == e.capture)
      s->capturing->invalidated = true;
  return fail(cudaErrorCapturedEvent,
              std::string(call) +
                  ": the event was last recorded in a stream capture");
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  AMPC_SIM_ENTRY("cudaEventDestroy");
  Event *e = resolveEvent(event);
  if (!e)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaEventDestroy: " + hex(event) + " is not a live event");
  timingEvents -= e->timing;
  events.erase(std::find_if(events.begin(), events.end(),
                            [&](auto &owned) { return owned.get() == e; }));
  return result(cudaSuccess);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  AMPC_SIM_ENTRY("cudaEventRecord");
  Event *e = resolveEvent(event);
  Stream *s = resolve(stream);
  if (!e || !s)
    return fail(cudaErrorInvalidResourceHandle,
                std::string("cudaEventRecord: ") +
                    (!e ? "event " + hex(event) : "stream " + hex(stream)) +
                    " is not live");
  if (s->capturing) {
    // The nodes the stream's next work would wait for: a stream that waits
    // on the event joins the capture after them.
    e->stream = nullptr;
    e->capture = s->capturing->id;
    e->nodes = s->tails;
    return result(cudaSuccess);
  }
  e->stream = s;
  e->seq = s->enqueued;
  e->capture = 0;
  e->nodes.clear();
  e->stamped = false;
  stampEvents(*s);
  return result(cudaSuccess);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start,
                                 cudaEvent_t end) {
  AMPC_SIM_ENTRY("cudaEventElapsedTime");
  Event *a = resolveEvent(start), *b = resolveEvent(end);
  if (!ms)
    return fail(cudaErrorInvalidValue, "cudaEventElapsedTime: ms is null");
  if (!a || !b)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaEventElapsedTime: " + hex(!a ? start : end) +
                    " is not a live event");
  for (Event *e : {a, b}) {
    if (e->capture)
      return refuseCapturedEvent("cudaEventElapsedTime", *e);
    if (!e->timing || !e->stream)
      return fail(cudaErrorInvalidResourceHandle,
                  std::string("cudaEventElapsedTime: an event ") +
                      (!e->timing ? "created with cudaEventDisableTiming"
                                  : "never recorded"));
  }
  // As on a device: an event whose work has not run yet is not ready (and
  // the work then runs, as cudaEventQuery does).
  for (Event *e : {a, b})
    if (!e->stamped) {
      drain(*e->stream, e->seq);
      return result(cudaErrorNotReady);
    }
  *ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
  return result(cudaSuccess);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  AMPC_SIM_ENTRY("cudaEventSynchronize");
  Event *e = resolveEvent(event);
  if (!e)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaEventSynchronize: " + hex(event) + " is not a live event");
  if (e->capture)
    return refuseCapturedEvent("cudaEventSynchronize", *e);
  if (e->stream)
    drain(*e->stream, e->seq);
  return result(cudaSuccess);
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  AMPC_SIM_ENTRY("cudaEventQuery");
  Event *e = resolveEvent(event);
  if (!e)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaEventQuery: " + hex(event) + " is not a live event");
  if (e->capture)
    return refuseCapturedEvent("cudaEventQuery", *e);
  // As cudaStreamQuery: pending work is reported, then run (up to the
  // event only).
  if (e->stream && e->stream->completed < e->seq) {
    drain(*e->stream, e->seq);
    return result(cudaErrorNotReady);
  }
  return result(cudaSuccess);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned int flags) {
  AMPC_SIM_ENTRY("cudaStreamWaitEvent");
  Event *e = resolveEvent(event);
  Stream *s = resolve(stream);
  if (!e || !s)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaStreamWaitEvent: a handle is not live");
  if (e->capture) {
    // A fork or a join: the stream's next captured work waits for the
    // event's nodes, and a stream outside any capture joins this one.
    Capture *capture = nullptr;
    for (Stream *other : allStreams())
      if (other->capturing && other->capturing->id == e->capture)
        capture = other->capturing;
    if (!capture)
      return refuseCapturedEvent("cudaStreamWaitEvent", *e);
    if (s->capturing && s->capturing != capture) {
      s->capturing->invalidated = capture->invalidated = true;
      return fail(cudaErrorStreamCaptureMerge,
                  "cudaStreamWaitEvent: the stream and the event belong to "
                  "different stream captures (both are invalidated)");
    }
    if (s->legacy) {
      capture->invalidated = true;
      return fail(cudaErrorStreamCaptureImplicit,
                  "cudaStreamWaitEvent: the legacy default stream cannot "
                  "join a stream capture (the capture is invalidated)");
    }
    if (!s->capturing) {
      s->capturing = capture;
      s->tails.clear();
    }
    for (size_t node : e->nodes)
      if (std::find(s->tails.begin(), s->tails.end(), node) == s->tails.end())
        s->tails.push_back(node);
    return result(cudaSuccess);
  }
  if (s->capturing && e->stream) {
    s->capturing->invalidated = true;
    return fail((flags & cudaEventWaitExternal)
                    ? cudaErrorStreamCaptureUnsupported
                    : cudaErrorStreamCaptureIsolation,
                std::string("cudaStreamWaitEvent: a stream being captured "
                            "waits for an event recorded outside the capture") +
                    ((flags & cudaEventWaitExternal)
                         ? " (cudaEventWaitExternal is not modelled)"
                         : "") +
                    " (the capture is invalidated)");
  }
  if (e->stream)
    push(*s, Op{"cudaStreamWaitEvent", nullptr, e->stream, e->seq});
  return result(cudaSuccess);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn,
                               void *userData) {
  AMPC_SIM_ENTRY("cudaLaunchHostFunc");
  return enqueue(stream, "cudaLaunchHostFunc", Work::HostFunction,
                 "cudaLaunchHostFunc", [fn, userData]() {
                   inHostFunction = true;
                   fn(userData);
                   inHostFunction = false;
                   return cudaSuccess;
                 });
}

//===----------------------------------------------------------------------===//
// Stream capture and graphs
//===----------------------------------------------------------------------===//

} // extern "C"

namespace {
/// An instantiated graph: its work in the order a launch runs it.
struct GraphExec {
  std::vector<Op> ops;
};
std::vector<std::unique_ptr<Graph>> graphs;
std::vector<std::unique_ptr<GraphExec>> graphExecs;
std::vector<std::unique_ptr<Capture>> captures; // in progress
uint64_t lastCaptureId = 0;

template <typename T>
T *resolveHandle(std::vector<std::unique_ptr<T>> &list, const void *handle) {
  for (auto &owned : list)
    if (owned.get() == handle)
      return owned.get();
  return nullptr;
}

/// The nodes of `g` that `roots` wait for, directly or not, and the roots.
std::vector<bool> ancestors(const Graph &g, const std::vector<size_t> &roots) {
  std::vector<bool> seen(g.nodes.size(), false);
  std::vector<size_t> work = roots;
  while (!work.empty()) {
    size_t n = work.back();
    work.pop_back();
    if (seen[n])
      continue;
    seen[n] = true;
    for (size_t before : g.nodes[n].after)
      work.push_back(before);
  }
  return seen;
}

/// An order of `g`'s nodes that respects every dependency. Of the nodes
/// ready to run, the one captured last goes first: work on two forked
/// streams runs in the opposite order from its capture, so a dependency
/// the capture lacks (work on one branch that reads what the other
/// writes, without an event between them) shows in the results.
std::vector<Op> replayOrder(const Graph &g) {
  const size_t n = g.nodes.size();
  std::vector<size_t> waiting(n);
  std::vector<std::vector<size_t>> next(n);
  for (size_t i = 0; i < n; ++i) {
    waiting[i] = g.nodes[i].after.size();
    for (size_t before : g.nodes[i].after)
      next[before].push_back(i);
  }
  std::vector<size_t> ready; // kept sorted: the last is run next
  for (size_t i = 0; i < n; ++i)
    if (!waiting[i])
      ready.push_back(i);
  std::vector<Op> ops;
  while (!ready.empty()) {
    size_t i = ready.back();
    ready.pop_back();
    ops.push_back(g.nodes[i].op);
    for (size_t after : next[i])
      if (--waiting[after] == 0)
        ready.insert(std::upper_bound(ready.begin(), ready.end(), after), after);
  }
  return ops; // every node: a capture only adds edges to earlier nodes
}
} // namespace

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t stream,
                                   enum cudaStreamCaptureMode) {
  AMPC_SIM_ENTRY("cudaStreamBeginCapture");
  Stream *s = resolve(stream);
  if (!s || s->legacy)
    return fail(s ? cudaErrorStreamCaptureUnsupported
                  : cudaErrorInvalidResourceHandle,
                "cudaStreamBeginCapture: " +
                    std::string(s ? "the legacy default stream cannot be captured"
                                  : hex(stream) + " is not a live stream"));
  if (s->capturing)
    return fail(cudaErrorIllegalState,
                "cudaStreamBeginCapture: the stream is already capturing");
  graphs.push_back(std::make_unique<Graph>());
  captures.push_back(std::make_unique<Capture>(
      Capture{++lastCaptureId, graphs.back().get(), s}));
  s->capturing = captures.back().get();
  s->tails.clear();
  return result(cudaSuccess);
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                  enum cudaStreamCaptureStatus *status) {
  AMPC_SIM_ENTRY("cudaStreamIsCapturing");
  Stream *s = resolve(stream);
  if (!s)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaStreamIsCapturing: " + hex(stream) + " is not a live stream");
  *status = !s->capturing                ? cudaStreamCaptureStatusNone
            : s->capturing->invalidated ? cudaStreamCaptureStatusInvalidated
                                         : cudaStreamCaptureStatusActive;
  return result(cudaSuccess);
}

/// Ends the capture on its origin stream. Every stream that joined it
/// leaves capture mode; the graph is returned only if the capture stayed
/// valid and every captured node is ordered before the origin stream's
/// last work (each fork joined back, as CUDA requires).
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
  AMPC_SIM_ENTRY("cudaStreamEndCapture");
  Stream *s = resolve(stream);
  if (!s || !s->capturing)
    return fail(cudaErrorIllegalState,
                "cudaStreamEndCapture: the stream is not capturing");
  Capture *capture = s->capturing;
  if (capture->origin != s) {
    capture->invalidated = true;
    return fail(cudaErrorStreamCaptureUnmatched,
                "cudaStreamEndCapture: the stream joined a capture that "
                "began on another stream (the capture is invalidated)");
  }
  *graph = nullptr;
  const std::vector<size_t> originTails = s->tails;
  for (Stream *member : allStreams())
    if (member->capturing == capture) {
      member->capturing = nullptr;
      member->tails.clear();
    }
  const bool invalidated = capture->invalidated;
  Graph *captured = capture->graph;
  captures.erase(std::find_if(captures.begin(), captures.end(),
                              [&](auto &owned) { return owned.get() == capture; }));
  auto discard = [&] {
    graphs.erase(std::find_if(graphs.begin(), graphs.end(), [&](auto &owned) {
      return owned.get() == captured;
    }));
  };
  if (invalidated) {
    discard();
    return fail(cudaErrorStreamCaptureInvalidated,
                "cudaStreamEndCapture: the capture was invalidated by an "
                "earlier call");
  }
  std::vector<bool> joined = ancestors(*captured, originTails);
  auto unjoined = std::find(joined.begin(), joined.end(), false);
  if (unjoined != joined.end()) {
    const std::string what =
        captured->nodes[unjoined - joined.begin()].op.what;
    const auto count = std::count(joined.begin(), joined.end(), false);
    discard();
    return fail(cudaErrorStreamCaptureUnjoined,
                "cudaStreamEndCapture: " + std::to_string(count) +
                    " captured operation(s) on a forked stream, the first " +
                    what + ", never joined back into the origin stream "
                    "(record an event after them and make the origin "
                    "stream wait for it)");
  }
  *graph = reinterpret_cast<cudaGraph_t>(captured);
  return result(cudaSuccess);
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long) {
  AMPC_SIM_ENTRY("cudaGraphInstantiate");
  Graph *g = resolveHandle(graphs, graph);
  if (!g)
    return fail(cudaErrorInvalidValue,
                "cudaGraphInstantiate: " + hex(graph) + " is not a live graph");
  graphExecs.push_back(std::make_unique<GraphExec>(GraphExec{replayOrder(*g)}));
  *exec = reinterpret_cast<cudaGraphExec_t>(graphExecs.back().get());
  return result(cudaSuccess);
}

/// The graph's work, queued on `stream` in a valid order: later work on
/// the stream waits for all of it, as it waits for a launch on CUDA.
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  AMPC_SIM_ENTRY("cudaGraphLaunch");
  GraphExec *g = resolveHandle(graphExecs, exec);
  Stream *s = resolve(stream);
  if (!g || !s)
    return fail(cudaErrorInvalidResourceHandle,
                std::string("cudaGraphLaunch: ") +
                    (!g ? "graph exec " + hex(exec) : "stream " + hex(stream)) +
                    " is not live");
  // The launch itself counts (as "graph"), when the stream reaches it.
  enqueueOn(*s, Op{"cudaGraphLaunch", [] { return cudaSuccess; }, nullptr, 0,
                   Work::Graph, "cudaGraphLaunch"});
  for (const Op &op : g->ops)
    enqueueOn(*s, op);
  return result(cudaSuccess);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  AMPC_SIM_ENTRY("cudaGraphExecDestroy");
  auto it = std::find_if(graphExecs.begin(), graphExecs.end(),
                         [&](auto &owned) { return owned.get() == (void *)exec; });
  if (it == graphExecs.end())
    return fail(cudaErrorInvalidValue,
                "cudaGraphExecDestroy: " + hex(exec) + " is not a live graph exec");
  // Launched work already queued keeps its own copies of the closures.
  graphExecs.erase(it);
  return result(cudaSuccess);
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  AMPC_SIM_ENTRY("cudaGraphDestroy");
  auto it = std::find_if(graphs.begin(), graphs.end(),
                         [&](auto &owned) { return owned.get() == (void *)graph; });
  if (it == graphs.end())
    return fail(cudaErrorInvalidValue,
                "cudaGraphDestroy: " + hex(graph) + " is not a live graph");
  graphs.erase(it);
  return result(cudaSuccess);
}

} // extern "C"

//===----------------------------------------------------------------------===//
// Counters.h
//===----------------------------------------------------------------------===//

extern "C" {

void ampc_cudasim_counters_reset(void) {
  std::lock_guard<std::recursive_mutex> lock(mutex);
  counts.clear();
}

size_t ampc_cudasim_counters(char *buffer, size_t size) {
  std::lock_guard<std::recursive_mutex> lock(mutex);
  // In the order of Work, which is the order of the map's keys.
  static const char *const kinds[] = {"kernel", "gemm", "copy", "memset",
                                      "host_function", "graph", "cudnn"};
  std::string text;
  for (const auto &[key, count] : counts)
    text += std::string(kinds[static_cast<int>(key.first)]) + " " +
            std::to_string(count) + " " + key.second + "\n";
  if (size) {
    const size_t n = std::min(text.size(), size - 1);
    std::memcpy(buffer, text.data(), n);
    buffer[n] = '\0';
  }
  return text.size();
}

} // extern "C"
