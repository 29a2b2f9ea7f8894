//===- Execution.cpp - kernels on the CPU, one fiber per CUDA thread ------===//
//
// A launch is checked when it is made (the limits a real GPU refuses, and
// that every pointer argument is live device memory) and queued on its
// stream. When the stream runs it, every block runs in turn (in reverse
// order, or another that AMPC_CUDA_SIM_SEED picks: a kernel must not
// depend on the order of its blocks or threads), and every
// thread of the block runs the kernel on its own fiber (boost.context),
// round-robin until it returns or waits: at __syncthreads for the whole
// block, at a warp-synchronous op for the lanes of its mask. A barrier only
// some of the block reaches, lanes that never meet, or threads that one
// synchronisation would release from different call sites fail the kernel;
// a memory fault on a thread's fiber fails it as cudaErrorIllegalAddress.
// Each block gets its own shared memory, uninitialised (0xFF) at its start.
//
//===----------------------------------------------------------------------===//

#include "ampc/Runtime/CudaSim/CudaSim.h"

#include "RaceCheck.h"
#include "Sim.h"

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>

// AddressSanitizer checks each access against the stack it believes it is
// on; every switch between fibers tells it which stack comes next
// (otherwise a throw or a fiber's frames on a reused stack look like
// errors). The macros are no-ops in a build without ASan.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AMPC_SIM_ASAN 1
#endif
#endif
#if !defined(AMPC_SIM_ASAN) && defined(__SANITIZE_ADDRESS__)
#define AMPC_SIM_ASAN 1
#endif
#ifdef AMPC_SIM_ASAN
#include <sanitizer/common_interface_defs.h>
#define AMPC_SIM_START_SWITCH(fakeStack, bottom, size)                        \
  __sanitizer_start_switch_fiber(fakeStack, bottom, size)
#define AMPC_SIM_FINISH_SWITCH(fakeStack, bottom, size)                       \
  __sanitizer_finish_switch_fiber(fakeStack, bottom, size)
#else
#define AMPC_SIM_START_SWITCH(fakeStack, bottom, size)                        \
  ((void)(fakeStack), (void)(bottom), (void)(size))
#define AMPC_SIM_FINISH_SWITCH(fakeStack, bottom, size)                       \
  ((void)(fakeStack), (void)(bottom), (void)(size))
#endif

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <pthread.h>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

// The built-in variables are kernel code's; here they are ThreadIndex's members.
#undef threadIdx
#undef blockIdx
#undef blockDim
#undef gridDim

namespace ctx = boost::context;

namespace ampc::sim {

ThreadIndex *current = nullptr;

namespace {

// What a real GPU allows (compute capability 8.0 and 9.0 alike).
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDim[3] = {1024, 1024, 64};
constexpr unsigned kMaxGridDim[3] = {0x7FFFFFFFu, 65535, 65535};
constexpr size_t kMaxSharedBytes = 48 << 10; // without the opt-in attribute
constexpr size_t kMaxParameterBytes = 32764; // CUDA 12.1+, Volta and later

/// Fiber stacks, reused across threads and launches. Host frames are much
/// larger than a GPU thread's (no register file), hence 128 KiB; a guard
/// page below each turns an overflow into a fault.
class StackPool {
public:
  ctx::stack_context allocate() {
    if (free.empty())
      return ctx::protected_fixedsize_stack(128 << 10).allocate();
    ctx::stack_context s = free.back();
    free.pop_back();
    return s;
  }
  void deallocate(ctx::stack_context &s) { free.push_back(s); }

private:
  std::vector<ctx::stack_context> free;
};
StackPool pool;

enum class State { Runnable, AtBarrier, AtWarp, Done };

struct Thread {
  ThreadIndex index;
  State state = State::Runnable;
  ctx::fiber fiber;     // the thread, while it is suspended
  ctx::fiber scheduler; // the scheduler, while the thread runs
  unsigned mask = 0;    // at a warp op: the lanes it waits for
  const char *op = nullptr;
  /// At a barrier or warp op: the call that the thread waits at.
  CallSite site{};
  /// At a warp op: whether every lane must call it from the same site (a
  /// warp-wide collective such as a wmma operation; shuffles may come from
  /// two branches).
  bool sameSite = false;
  uint64_t value = 0;
  uint64_t lanes[32] = {};
  /// The kernel failed: the thread unwinds (throws Abandon) when resumed.
  bool abandon = false;
  /// For ASan: the fiber's stack, the stack of the scheduler that resumes
  /// it, and the thread's fake stack while it is suspended.
  ctx::stack_context stack{};
  const void *schedulerBottom = nullptr;
  size_t schedulerSize = 0;
  void *fakeStack = nullptr;
};

/// Takes a stack from the pool and tells its thread where it is.
struct PooledStack {
  Thread *owner;
  ctx::stack_context allocate() {
    owner->stack = pool.allocate();
    return owner->stack;
  }
  void deallocate(ctx::stack_context &s) { pool.deallocate(s); }
};

/// Shared memory: one block's at a time, as blocks run one at a time. The
/// launch's dynamic part first, then each AMPC_SHARED array where the
/// block first reaches it; every byte a block is handed starts as
/// kUninitialisedByte, whatever the previous block left.
alignas(256) unsigned char sharedMemory[kMaxSharedBytes];

/// The block being run, and the thread of it that runs now.
struct Block {
  std::vector<Thread> threads;
  Thread *running = nullptr;
  std::string error; // a failure found by a thread: the kernel stops
  /// Shared memory handed out: the dynamic part's size, then the arrays
  /// (the static that identifies each, and its offset in sharedMemory).
  size_t sharedUsed = 0, dynamicBytes = 0;
  std::vector<std::pair<const void *, size_t>> sharedArrays;
};
Block *block = nullptr;
const char *runningKernel = nullptr;

/// Unwinds a thread's fiber when the kernel is abandoned.
struct Abandon {};

/// Suspends the running thread until the scheduler resumes it.
void suspend(State state) {
  Thread &t = *block->running;
  t.state = state;
  AMPC_SIM_START_SWITCH(&t.fakeStack, t.schedulerBottom, t.schedulerSize);
  t.scheduler = std::move(t.scheduler).resume();
  AMPC_SIM_FINISH_SWITCH(t.fakeStack, &t.schedulerBottom, &t.schedulerSize);
  if (t.abandon)
    throw Abandon{};
}

/// The thread whose fiber runs now (null while the scheduler runs) and the
/// host thread running it; the thread that faulted, and where. `faulted`
/// tells runBlock that its failure is a fault.
Thread *onFiber = nullptr;
pthread_t fiberHost;
Thread *faultedThread = nullptr;
void *faultAddress = nullptr;
bool faulted = false;

/// Thread `t` faulted (a wild or freed pointer, a guard page, its stack's
/// overflow): what a device reports as an illegal address. The thread's
/// frames stay where they faulted: its fiber is never resumed or unwound
/// (those frames are what faulted) and its stack is leaked, not returned
/// to the pool; the handle resume got back (the fault handler's frame) is
/// dropped without the unwinding its destructor would do. The block then
/// fails as any kernel failure does (runBlock abandons the other threads),
/// with a sticky cudaErrorIllegalAddress.
void abandonFaultedThread(Thread &t) {
  // The handler ran with the faults blocked, and never returned.
  sigset_t faults;
  sigemptyset(&faults);
  sigaddset(&faults, SIGSEGV);
  sigaddset(&faults, SIGBUS);
  pthread_sigmask(SIG_UNBLOCK, &faults, nullptr);
  new (&t.fiber) ctx::fiber();
  t.state = State::Done;
  faultedThread = nullptr;
  faulted = true;
  char message[96];
  std::snprintf(message, sizeof message,
                "invalid memory access at %p (not live device memory)",
                faultAddress);
  block->error = message;
}

/// Runs thread `t` until it suspends, returns or faults.
void resume(Thread &t) {
  void *fakeStack = nullptr;
  AMPC_SIM_START_SWITCH(&fakeStack,
                        static_cast<char *>(t.stack.sp) - t.stack.size,
                        t.stack.size);
  onFiber = &t;
  fiberHost = pthread_self();
  t.fiber = std::move(t.fiber).resume();
  onFiber = nullptr;
  AMPC_SIM_FINISH_SWITCH(fakeStack, nullptr, nullptr);
  if (faultedThread == &t)
    abandonFaultedThread(t);
}

// A fault on a thread's fiber switches to the scheduler, which resume left
// waiting, as a suspend would; any other fault (the host's code, the
// scheduler's) kills the process, as it would without the execution.
void onFault(int signal, siginfo_t *info, void *) {
  if (onFiber && pthread_equal(pthread_self(), fiberHost)) {
    Thread &t = *onFiber;
    faultedThread = &t;
    faultAddress = info->si_addr;
    // Leaves the fiber for good: ASan drops its fake stack.
    AMPC_SIM_START_SWITCH(nullptr, t.schedulerBottom, t.schedulerSize);
    std::move(t.scheduler).resume(); // never resumed: does not return
    std::abort();
  }
  char message[256];
  int n = std::snprintf(message, sizeof message,
                        "ampc cuda-sim: invalid memory access at %p outside "
                        "any kernel's threads%s%s\n",
                        info->si_addr, runningKernel ? " while running " : "",
                        runningKernel ? runningKernel : "");
  if (n > 0)
    (void)!write(2, message, static_cast<size_t>(n));
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

void installFaultHandler() {
  static bool installed = false;
  if (installed)
    return;
  installed = true;
  static std::vector<char> altStack(1 << 16);
  stack_t ss{};
  ss.ss_sp = altStack.data();
  ss.ss_size = altStack.size();
  sigaltstack(&ss, nullptr);
  struct sigaction action {};
  action.sa_sigaction = onFault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigaction(SIGSEGV, &action, nullptr);
  sigaction(SIGBUS, &action, nullptr);
}

std::string describe(dim3 d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " +
         std::to_string(d.z) + ")";
}

/// The order threads and blocks run in (AMPC_CUDA_SIM_SEED, read at each
/// launch): "reverse" (the default), "forward", or a number that seeds a
/// random order per launch, per block and per scheduling round. A correct
/// kernel gives the same result in every order; one that reads what
/// another thread writes without a barrier (or depends on its blocks'
/// order) does not, and a failing launch names the seed to replay it.
struct Schedule {
  enum Kind { Reverse, Forward, Random } kind = Reverse;
  uint64_t seed = 0;
  std::string text; // as set, for messages; empty for the default
};
Schedule scheduleFromEnvironment() {
  Schedule s;
  const char *value = std::getenv("AMPC_CUDA_SIM_SEED");
  if (!value || !*value || std::strcmp(value, "reverse") == 0)
    return s;
  s.text = value;
  if (std::strcmp(value, "forward") == 0) {
    s.kind = Schedule::Forward;
    return s;
  }
  char *end = nullptr;
  unsigned long long seed = std::strtoull(value, &end, 0);
  if (end && *end == '\0') {
    s.kind = Schedule::Random;
    s.seed = seed;
  } else {
    // Not a number: seeded by its bytes, so that any text replays.
    s.kind = Schedule::Random;
    for (const char *c = value; *c; ++c)
      s.seed = s.seed * 131 + static_cast<unsigned char>(*c);
  }
  return s;
}
/// splitmix64: the next value of `state`.
uint64_t nextRandom(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
/// `order` set to 0..n-1 in the schedule's order (`random`: the state the
/// random order draws from).
void scheduleOrder(const Schedule &s, uint64_t &random,
                   std::vector<uint64_t> &order, uint64_t n) {
  order.resize(n);
  for (uint64_t i = 0; i < n; ++i)
    order[i] = s.kind == Schedule::Forward ? i : n - 1 - i;
  if (s.kind == Schedule::Random)
    for (uint64_t i = n; i > 1; --i)
      std::swap(order[i - 1], order[nextRandom(random) % i]);
}
/// The launches made so far: each random order is drawn from the seed and
/// the launch's number.
uint64_t launches = 0;

std::string describe(CallSite site) {
  return std::string(site.file) + ":" + std::to_string(site.line);
}

/// The threads one synchronisation releases must have called the same
/// operation (`sameSite`: at the same place): a GPU leaves it undefined
/// otherwise, and a CPU round that matched them would hide it. A barrier
/// must be the same __syncthreads for the whole block (CUDA's programming
/// guide: only in a conditional that the whole block evaluates alike). A
/// warp exchange needs the same operation, not the same place: PTX's
/// shfl.sync, vote.sync and bar.warp.sync wait for the lanes of the mask
/// to execute one "with the same qualifiers and the same membermask", and
/// from sm_70 on (every GPU the target builds for) need not be the same
/// instruction. Records the failure in `b` and returns false when `t` and
/// `u` differ.
bool sameCall(Block &b, const Thread &t, const Thread &u, const char *what,
              bool sameSite) {
  if (std::strcmp(t.op, u.op) == 0 &&
      (!sameSite || (t.site.line == u.site.line &&
                     std::strcmp(t.site.file, u.site.file) == 0)))
    return true;
  b.error = std::string(what) + ": thread " + describe(t.index.threadIdx) +
            " is at " + t.op + " (" + describe(t.site) + ") and thread " +
            describe(u.index.threadIdx) + " at " + u.op + " (" +
            describe(u.site) + ") in block " + describe(t.index.blockIdx) +
            (!sameSite ? ": one operation for the lanes that meet"
             : std::strcmp(what, "__syncthreads") == 0
                 ? ": one barrier for the whole block"
                 : ": one call site for the whole warp");
  return false;
}

/// Releases the threads whose synchronisation is complete; false when
/// none could be released (the caller decides whether that is the end or
/// a deadlock) or when the threads it would release called different
/// operations (b.error says which).
bool release(Block &b, unsigned threadsPerBlock) {
  bool released = false;
  // Warp ops: every lane of the mask must wait with the same mask.
  for (unsigned warp = 0; warp * 32 < threadsPerBlock; ++warp) {
    Thread *lanes[32] = {};
    for (unsigned l = 0; l < 32 && warp * 32 + l < threadsPerBlock; ++l)
      lanes[l] = &b.threads[warp * 32 + l];
    for (unsigned l = 0; l < 32; ++l) {
      Thread *t = lanes[l];
      if (!t || t->state != State::AtWarp)
        continue;
      bool complete = true;
      for (unsigned m = 0; m < 32 && complete; ++m)
        if (t->mask >> m & 1u)
          complete = lanes[m] && lanes[m]->state == State::AtWarp &&
                     lanes[m]->mask == t->mask;
      if (!complete)
        continue;
      for (unsigned m = 0; m < 32; ++m)
        if ((t->mask >> m & 1u) &&
            !sameCall(b, *t, *lanes[m], "lanes of one warp exchange",
                      t->sameSite || lanes[m]->sameSite))
          return false;
      uint64_t values[32] = {};
      for (unsigned m = 0; m < 32; ++m)
        if (t->mask >> m & 1u)
          values[m] = lanes[m]->value;
      const unsigned mask = t->mask;
      for (unsigned m = 0; m < 32; ++m)
        if (mask >> m & 1u) {
          std::memcpy(lanes[m]->lanes, values, sizeof values);
          lanes[m]->state = State::Runnable;
        }
      race::warpRelease(warp * 32, mask);
      released = true;
    }
  }
  if (released)
    return true;
  // __syncthreads: every thread of the block.
  unsigned atBarrier = 0, done = 0;
  for (Thread &t : b.threads) {
    atBarrier += t.state == State::AtBarrier;
    done += t.state == State::Done;
  }
  if (atBarrier && atBarrier + done == threadsPerBlock && done == 0) {
    for (Thread &t : b.threads)
      if (!sameCall(b, b.threads[0], t, "__syncthreads", /*sameSite=*/true))
        return false;
    for (Thread &t : b.threads)
      t.state = State::Runnable;
    race::barrier();
    return true;
  }
  return false;
}

/// Why the threads of a block cannot go on.
std::string deadlock(const Block &b) {
  unsigned atBarrier = 0, done = 0, atWarp = 0;
  const Thread *warpWaiter = nullptr;
  for (const Thread &t : b.threads) {
    atBarrier += t.state == State::AtBarrier;
    done += t.state == State::Done;
    if (t.state == State::AtWarp) {
      ++atWarp;
      warpWaiter = &t;
    }
  }
  std::string where = " in block " + describe(b.threads[0].index.blockIdx);
  if (warpWaiter)
    return std::string(warpWaiter->op) + " with mask 0x" +
           [&] {
             char hex[16];
             std::snprintf(hex, sizeof hex, "%08x", warpWaiter->mask);
             return std::string(hex);
           }() +
           " waits for lanes that never arrive (thread " +
           describe(warpWaiter->index.threadIdx) + where + "; " +
           std::to_string(atWarp) + " threads at warp ops, " +
           std::to_string(atBarrier) + " at __syncthreads, " +
           std::to_string(done) + " returned)";
  return "__syncthreads reached by " + std::to_string(atBarrier) + " of " +
         std::to_string(b.threads.size()) + " threads" + where + " (" +
         std::to_string(done) +
         " returned without reaching it: a divergent barrier)";
}

/// Runs every thread of one block to the end.
cudaError_t runBlock(const char *name, dim3 grid, dim3 blockDim, uint3 blockIdx,
                     size_t dynamicShared, void (*body)(void *),
                     void *arguments, const Schedule &schedule,
                     uint64_t &random) {
  const unsigned n = blockDim.x * blockDim.y * blockDim.z;
  Block b;
  b.threads.resize(n);
  b.dynamicBytes = b.sharedUsed = dynamicShared;
  std::memset(sharedMemory, kUninitialisedByte, dynamicShared);
  for (unsigned i = 0; i < n; ++i) {
    Thread &t = b.threads[i];
    t.index.threadIdx = {i % blockDim.x, (i / blockDim.x) % blockDim.y,
                         i / (blockDim.x * blockDim.y)};
    t.index.blockIdx = blockIdx;
    t.index.blockDim = blockDim;
    t.index.gridDim = grid;
    t.index.lane = i % 32;
    Thread *self = &t;
    t.fiber = ctx::fiber(
        std::allocator_arg, PooledStack{self},
        [self, body, arguments](ctx::fiber &&scheduler) {
          AMPC_SIM_FINISH_SWITCH(nullptr, &self->schedulerBottom,
                                 &self->schedulerSize);
          self->scheduler = std::move(scheduler);
          try {
            if (!self->abandon)
              body(arguments);
          } catch (Abandon &) {
          }
          self->state = State::Done;
          // Leaves the fiber for good: ASan drops its fake stack.
          AMPC_SIM_START_SWITCH(nullptr, self->schedulerBottom,
                                self->schedulerSize);
          return std::move(self->scheduler);
        });
  }
  Block *outer = block;
  block = &b;
  race::beginBlock(blockIdx, grid, blockDim);
  std::vector<uint64_t> order;
  while (true) {
    // Threads in the schedule's order, a new one each round: a kernel must
    // not depend on it.
    scheduleOrder(schedule, random, order, n);
    for (uint64_t i : order) {
      Thread &t = b.threads[i];
      if (t.state != State::Runnable)
        continue;
      b.running = &t;
      current = &t.index;
      resume(t);
      race::takeRace(b.error);
      if (!b.error.empty())
        break;
    }
    if (!b.error.empty())
      break;
    bool allDone = true;
    for (Thread &t : b.threads)
      allDone &= t.state == State::Done;
    if (allDone)
      break;
    if (!release(b, n)) {
      if (b.error.empty())
        b.error = deadlock(b);
      break;
    }
  }
  block = outer;
  current = nullptr;
  if (!b.error.empty()) {
    std::string message = std::string("kernel ") + name + ": " + b.error;
    if (!schedule.text.empty())
      message += " (AMPC_CUDA_SIM_SEED=" + schedule.text + ")";
    // Each thread not done unwinds its fiber (one that never ran returns
    // at once), switching stacks as a resume does.
    for (Thread &t : b.threads)
      if (t.state != State::Done) {
        t.abandon = true;
        resume(t);
      }
    b.threads.clear();
    return fail(std::exchange(faulted, false) ? cudaErrorIllegalAddress
                                              : cudaErrorLaunchFailure,
                message);
  }
  return cudaSuccess;
}

} // namespace

void syncThreads(CallSite site) {
  if (!block)
    std::abort();
  Thread &t = *block->running;
  t.op = "__syncthreads";
  t.site = site;
  suspend(State::AtBarrier);
}

const uint64_t *warpExchange(unsigned mask, uint64_t value, const char *op,
                             CallSite site) {
  Thread &t = *block->running;
  if (!(mask >> t.index.lane & 1u)) {
    block->error = std::string(op) + ": the calling lane " +
                   std::to_string(t.index.lane) + " is not in its mask";
    suspend(State::AtWarp);
  }
  t.mask = mask;
  t.op = op;
  t.site = site;
  t.value = value;
  t.sameSite = false;
  suspend(State::AtWarp);
  return t.lanes;
}

void warpGather(const void *mine, size_t bytes, void *all, const char *op,
                CallSite site) {
  Thread &t = *block->running;
  t.mask = 0xFFFFFFFFu;
  t.op = op;
  t.site = site;
  t.value = reinterpret_cast<uintptr_t>(mine);
  t.sameSite = true;
  suspend(State::AtWarp);
  // Every lane waits at the second exchange until all have copied: no lane
  // changes what it published before the others have read it.
  for (unsigned l = 0; l < 32; ++l)
    std::memcpy(static_cast<char *>(all) + l * bytes,
                reinterpret_cast<const void *>(t.lanes[l]), bytes);
  t.value = 0;
  suspend(State::AtWarp);
  t.sameSite = false;
}

void *sharedArray(const void *key, size_t bytes, size_t align) {
  if (!block)
    std::abort();
  Block &b = *block;
  for (const auto &[k, offset] : b.sharedArrays)
    if (k == key)
      return sharedMemory + offset;
  const size_t offset = (b.sharedUsed + align - 1) / align * align;
  if (offset + bytes > kMaxSharedBytes) {
    b.error = "needs " + std::to_string(offset + bytes) +
              " bytes of shared memory (" + std::to_string(b.dynamicBytes) +
              " of them dynamic), more than the 49152 a block gets";
    suspend(State::AtBarrier); // unwinds: the kernel has failed
  }
  std::memset(sharedMemory + offset, kUninitialisedByte, bytes);
  b.sharedUsed = offset + bytes;
  b.sharedArrays.push_back({key, offset});
  return sharedMemory + offset;
}

void *dynamicShared() {
  if (!block)
    std::abort();
  return sharedMemory;
}

void badLane(const char *op, unsigned mask, int lane) {
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08x", mask);
  block->error = std::string(op) + ": reads lane " + std::to_string(lane) +
                 ", which is not in the mask 0x" + hex + " (undefined)";
  suspend(State::AtWarp);
}

void launchKernel(const Launch &l, void (*body)(void *), void *arguments,
                  void (*destroy)(void *)) {
  std::unique_ptr<void, void (*)(void *)> owned(arguments, destroy);
  // The guards are this launch's, whether it is queued or refused.
  Guards guards = takeGuards();
  const std::string call = std::string("kernel ") + l.name + " launch: ";
  const unsigned block[3] = {l.block.x, l.block.y, l.block.z};
  const unsigned grid[3] = {l.grid.x, l.grid.y, l.grid.z};
  for (int d = 0; d < 3; ++d) {
    if (block[d] == 0 || block[d] > kMaxBlockDim[d] || grid[d] == 0 ||
        grid[d] > kMaxGridDim[d]) {
      fail(cudaErrorInvalidConfiguration,
           call + "grid " + describe(l.grid) + " x block " +
               describe(l.block) + " is outside the device's limits (block " +
               "(1024, 1024, 64), grid (2^31-1, 65535, 65535))");
      return;
    }
  }
  if (static_cast<uint64_t>(l.block.x) * l.block.y * l.block.z >
      kMaxThreadsPerBlock) {
    fail(cudaErrorInvalidConfiguration,
         call + "block " + describe(l.block) + " has more than 1024 threads");
    return;
  }
  if (l.sharedBytes > kMaxSharedBytes) {
    fail(cudaErrorInvalidValue,
         call + std::to_string(l.sharedBytes) +
             " bytes of dynamic shared memory, more than the 49152 a block "
             "gets without cudaFuncAttributeMaxDynamicSharedMemorySize");
    return;
  }
  if (l.parameterBytes > kMaxParameterBytes) {
    fail(cudaErrorInvalidValue,
         call + std::to_string(l.parameterBytes) +
             " bytes of kernel parameters, more than the 32764 allowed");
    return;
  }
  if (!checkStreamDevice(l.stream, call.substr(0, call.size() - 2).c_str()))
    return;
  for (int i = 0; i < l.numPointers; ++i)
    if (l.pointers[i] &&
        !checkDeviceAccessible(
            l.pointers[i], 0, ("kernel " + std::string(l.name)).c_str(),
            ("pointer argument " + std::to_string(i)).c_str())) {
      return;
    }
  installFaultHandler();
  std::shared_ptr<void> shared(owned.release(), destroy);
  const char *name = l.name;
  dim3 g = l.grid, b = l.block;
  const size_t dynamicShared = l.sharedBytes;
  const Schedule schedule = scheduleFromEnvironment();
  const uint64_t launch = launches++;
  enqueue(l.stream, name, Work::Kernel, name, [=]() -> cudaError_t {
    fillGuards(guards);
    runningKernel = name;
    race::beginKernel();
    const uint64_t blocks = static_cast<uint64_t>(g.x) * g.y * g.z;
    uint64_t random = schedule.seed ^ (launch * 0xD1B54A32D192ED03ULL);
    // Blocks in the schedule's order (a grid of more than 2^22 blocks is
    // not shuffled: forward or reverse).
    std::vector<uint64_t> order;
    const bool listed = blocks <= (uint64_t(1) << 22);
    if (listed)
      scheduleOrder(schedule, random, order, blocks);
    for (uint64_t k = 0; k < blocks; ++k) {
      uint64_t i = listed ? order[k]
                   : schedule.kind == Schedule::Forward ? k
                                                        : blocks - 1 - k;
      uint3 blockIdx = {static_cast<unsigned>(i % g.x),
                        static_cast<unsigned>((i / g.x) % g.y),
                        static_cast<unsigned>(i / (static_cast<uint64_t>(g.x) * g.y))};
      if (cudaError_t e = runBlock(name, g, b, blockIdx, dynamicShared, body,
                                   shared.get(), schedule, random)) {
        runningKernel = nullptr;
        return e;
      }
    }
    runningKernel = nullptr;
    if (std::string broken = brokenGuard(guards); !broken.empty())
      return fail(cudaErrorIllegalAddress,
                  std::string("kernel ") + name + ": " + broken);
    return cudaSuccess;
  });
}

} // namespace ampc::sim
