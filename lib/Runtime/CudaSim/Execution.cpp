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
// A cooperative launch (ampc::cuda::launchCooperative) runs every block at
// once instead: each round runs the blocks in the schedule's order, each
// block's threads in its own, and ampc::cuda::gridSync waits for every
// thread of the grid. Its grid may not exceed what the device holds at
// once (blocksPerMultiprocessor times kMultiprocessors, Sim.h), which is
// what bounds the fibers it needs; a gridSync some threads of the grid
// never reach, or one in a kernel not launched cooperatively, fails it.
//
//===----------------------------------------------------------------------===//

#include "ampc/CudaSim/CudaSim.h"

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

#include <algorithm>
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

enum class State { Runnable, AtBarrier, AtWarp, AtGridBarrier, Done };

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

/// A block's shared memory: the launch's dynamic part first, then each
/// AMPC_SHARED array where the block first reaches it; every byte a block
/// is handed starts as kUninitialisedByte, whatever an earlier block left.
struct SharedMemory {
  alignas(256) unsigned char bytes[kMaxSharedBytes];
};
/// One block's at a time, as a plain launch's blocks run one at a time (a
/// cooperative launch gives each block its own).
SharedMemory sharedMemory;

/// The block being run, and the thread of it that runs now.
struct Block {
  std::vector<Thread> threads;
  Thread *running = nullptr;
  std::string error; // a failure found by a thread: the kernel stops
  unsigned char *shared = sharedMemory.bytes;
  /// Shared memory handed out: the dynamic part's size, then the arrays
  /// (the static that identifies each, and its offset in `shared`).
  size_t sharedUsed = 0, dynamicBytes = 0;
  std::vector<std::pair<const void *, size_t>> sharedArrays;
  /// The race check's index of the block among those running at once (0
  /// in a plain launch, its linear index in a cooperative one).
  unsigned slot = 0;
};
Block *block = nullptr;
const char *runningKernel = nullptr;
/// Whether the running kernel was launched cooperatively.
bool cooperative = false;

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
      race::warpRelease(b.slot, warp * 32, mask);
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
    race::barrier(b.slot);
    return true;
  }
  return false;
}

/// Why the threads of a block cannot go on.
std::string deadlock(const Block &b) {
  unsigned atBarrier = 0, done = 0, atWarp = 0, atGrid = 0;
  const Thread *warpWaiter = nullptr;
  for (const Thread &t : b.threads) {
    atBarrier += t.state == State::AtBarrier;
    done += t.state == State::Done;
    atGrid += t.state == State::AtGridBarrier;
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
         std::to_string(done) + " returned without reaching it" +
         (atGrid
              ? ", " + std::to_string(atGrid) + " wait at ampc::cuda::gridSync"
              : "") +
         ": a divergent barrier)";
}

/// Gives block `b` its `n` threads, each on a fiber that has not started.
void makeThreads(Block &b, unsigned n, dim3 grid, dim3 blockDim, uint3 blockIdx,
                 void (*body)(void *), void *arguments) {
  b.threads.resize(n);
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
}

/// Runs, in the schedule's order (a new one each round: a kernel must not
/// depend on it), each runnable thread of `b` until it waits or returns;
/// false when one failed (b.error).
bool runRound(Block &b, const Schedule &schedule, uint64_t &random,
              std::vector<uint64_t> &order) {
  scheduleOrder(schedule, random, order, b.threads.size());
  for (uint64_t i : order) {
    Thread &t = b.threads[i];
    if (t.state != State::Runnable)
      continue;
    block = &b;
    b.running = &t;
    current = &t.index;
    resume(t);
    race::takeRace(b.error);
    if (!b.error.empty())
      return false;
  }
  return true;
}

bool allDone(const Block &b) {
  for (const Thread &t : b.threads)
    if (t.state != State::Done)
      return false;
  return true;
}

/// The kernel failed with `error`: each thread of `blocks` not done unwinds
/// its fiber (one that never ran returns at once), switching stacks as a
/// resume does; returns the failure.
cudaError_t abandonKernel(const char *name, Block *blocks, size_t count,
                          const std::string &error, const Schedule &schedule) {
  std::string message = std::string("kernel ") + name + ": " + error;
  if (!schedule.text.empty())
    message += " (AMPC_CUDA_SIM_SEED=" + schedule.text + ")";
  for (size_t k = 0; k < count; ++k) {
    for (Thread &t : blocks[k].threads)
      if (t.state != State::Done) {
        t.abandon = true;
        resume(t);
      }
    blocks[k].threads.clear();
  }
  return fail(std::exchange(faulted, false) ? cudaErrorIllegalAddress
                                            : cudaErrorLaunchFailure,
              message);
}

/// Runs every thread of one block to the end.
cudaError_t runBlock(const char *name, dim3 grid, dim3 blockDim, uint3 blockIdx,
                     size_t dynamicShared, void (*body)(void *),
                     void *arguments, const Schedule &schedule,
                     uint64_t &random) {
  const unsigned n = blockDim.x * blockDim.y * blockDim.z;
  Block b;
  b.dynamicBytes = b.sharedUsed = dynamicShared;
  std::memset(b.shared, kUninitialisedByte, dynamicShared);
  makeThreads(b, n, grid, blockDim, blockIdx, body, arguments);
  Block *outer = block;
  race::beginBlock(blockIdx, grid, blockDim);
  std::vector<uint64_t> order;
  while (runRound(b, schedule, random, order) && !allDone(b))
    if (!release(b, n)) {
      if (b.error.empty())
        b.error = deadlock(b);
      break;
    }
  block = outer;
  current = nullptr;
  if (!b.error.empty())
    return abandonKernel(name, &b, 1, b.error, schedule);
  return cudaSuccess;
}

/// Runs the blocks of a plain launch one after another, in the schedule's
/// order (a grid of more than 2^22 blocks is not shuffled: forward or
/// reverse).
cudaError_t runBlocks(const char *name, dim3 grid, dim3 blockDim,
                      size_t dynamicShared, void (*body)(void *),
                      void *arguments, const Schedule &schedule,
                      uint64_t &random) {
  const uint64_t blocks = static_cast<uint64_t>(grid.x) * grid.y * grid.z;
  std::vector<uint64_t> order;
  const bool listed = blocks <= (uint64_t(1) << 22);
  if (listed)
    scheduleOrder(schedule, random, order, blocks);
  for (uint64_t k = 0; k < blocks; ++k) {
    uint64_t i = listed ? order[k]
                 : schedule.kind == Schedule::Forward ? k
                                                      : blocks - 1 - k;
    uint3 blockIdx = {
        static_cast<unsigned>(i % grid.x),
        static_cast<unsigned>((i / grid.x) % grid.y),
        static_cast<unsigned>(i / (static_cast<uint64_t>(grid.x) * grid.y))};
    if (cudaError_t e = runBlock(name, grid, blockDim, blockIdx, dynamicShared,
                                 body, arguments, schedule, random))
      return e;
  }
  return cudaSuccess;
}

std::string describe(const Thread &t) {
  return "thread " + describe(t.index.threadIdx) + " of block " +
         describe(t.index.blockIdx);
}

/// Releases ampc::cuda::gridSync once every thread of the grid waits at it,
/// from one call site (as __syncthreads must be one for the block); false
/// when they do not all wait (or, with `error` set, not at one site).
bool releaseGrid(std::vector<Block> &blocks, std::string &error) {
  const Thread *first = nullptr;
  for (Block &b : blocks)
    for (Thread &t : b.threads) {
      if (t.state != State::AtGridBarrier)
        return false;
      if (!first) {
        first = &t;
      } else if (t.site.line != first->site.line ||
                 std::strcmp(t.site.file, first->site.file) != 0) {
        error = "ampc::cuda::gridSync: " + describe(*first) + " is at " +
                describe(first->site) + " and " + describe(t) + " at " +
                describe(t.site) + ": one grid barrier for the whole grid";
        return false;
      }
    }
  for (Block &b : blocks)
    for (Thread &t : b.threads)
      t.state = State::Runnable;
  race::gridBarrier();
  return true;
}

/// Why the threads of a cooperative grid cannot go on: a block stuck at
/// one of its own barriers or warp operations, else a grid barrier that
/// some threads returned without reaching.
std::string gridDeadlock(const std::vector<Block> &blocks) {
  uint64_t atGrid = 0, done = 0, threads = 0;
  for (const Block &b : blocks)
    for (const Thread &t : b.threads) {
      if (t.state == State::AtBarrier || t.state == State::AtWarp)
        return deadlock(b);
      atGrid += t.state == State::AtGridBarrier;
      done += t.state == State::Done;
      ++threads;
    }
  return "ampc::cuda::gridSync reached by " + std::to_string(atGrid) +
         " of the grid's " + std::to_string(threads) + " threads (" +
         std::to_string(done) +
         " returned without reaching it: a divergent grid barrier)";
}

/// Runs every block of a cooperative launch at once, each round every
/// block (in the schedule's order) until its threads wait or return.
cudaError_t runGrid(const char *name, dim3 grid, dim3 blockDim,
                    size_t dynamicShared, void (*body)(void *), void *arguments,
                    const Schedule &schedule, uint64_t &random) {
  const unsigned n = blockDim.x * blockDim.y * blockDim.z;
  const uint64_t count = static_cast<uint64_t>(grid.x) * grid.y * grid.z;
  std::vector<Block> blocks(count);
  std::vector<std::unique_ptr<SharedMemory>> shared(count);
  for (uint64_t i = 0; i < count; ++i) {
    Block &b = blocks[i];
    shared[i].reset(new SharedMemory); // its bytes are set as handed out
    b.shared = shared[i]->bytes;
    b.dynamicBytes = b.sharedUsed = dynamicShared;
    std::memset(b.shared, kUninitialisedByte, dynamicShared);
    b.slot = static_cast<unsigned>(i);
    const uint3 blockIdx = {
        static_cast<unsigned>(i % grid.x),
        static_cast<unsigned>((i / grid.x) % grid.y),
        static_cast<unsigned>(i / (static_cast<uint64_t>(grid.x) * grid.y))};
    makeThreads(b, n, grid, blockDim, blockIdx, body, arguments);
  }
  Block *outer = block;
  const bool outerCooperative = std::exchange(cooperative, true);
  race::beginGrid(grid, blockDim);
  std::string error;
  std::vector<uint64_t> blockOrder, order;
  while (error.empty()) {
    scheduleOrder(schedule, random, blockOrder, count);
    bool done = true;
    for (uint64_t k : blockOrder) {
      Block &b = blocks[k];
      if (!runRound(b, schedule, random, order)) {
        error = b.error;
        break;
      }
      done &= allDone(b);
    }
    if (!error.empty() || done)
      break;
    bool released = false;
    for (Block &b : blocks) {
      released |= release(b, n);
      if (!b.error.empty()) {
        error = b.error;
        break;
      }
    }
    if (error.empty() && !released && !releaseGrid(blocks, error) &&
        error.empty())
      error = gridDeadlock(blocks);
  }
  block = outer;
  current = nullptr;
  cooperative = outerCooperative;
  if (!error.empty())
    return abandonKernel(name, blocks.data(), blocks.size(), error, schedule);
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

void gridSync(CallSite site) {
  if (!block)
    std::abort();
  Thread &t = *block->running;
  t.op = "ampc::cuda::gridSync";
  t.site = site;
  if (!cooperative) {
    // On a GPU the blocks of a plain launch need not all be resident: the
    // barrier could wait for a block that cannot start.
    block->error = "ampc::cuda::gridSync (" + describe(site) +
                   ") in a kernel not launched cooperatively "
                   "(ampc::cuda::launchCooperative)";
    suspend(State::AtBarrier); // unwinds: the kernel has failed
  }
  suspend(State::AtGridBarrier);
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
      return b.shared + offset;
  const size_t offset = (b.sharedUsed + align - 1) / align * align;
  if (offset + bytes > kMaxSharedBytes) {
    b.error = "needs " + std::to_string(offset + bytes) +
              " bytes of shared memory (" + std::to_string(b.dynamicBytes) +
              " of them dynamic), more than the 49152 a block gets";
    suspend(State::AtBarrier); // unwinds: the kernel has failed
  }
  std::memset(b.shared + offset, kUninitialisedByte, bytes);
  b.sharedUsed = offset + bytes;
  b.sharedArrays.push_back({key, offset});
  return b.shared + offset;
}

void *dynamicShared() {
  if (!block)
    std::abort();
  return block->shared;
}

int blocksPerMultiprocessor(int threadsPerBlock, size_t dynamicSharedBytes) {
  constexpr int kThreadsPerMultiprocessor = 2048, kBlocksPerMultiprocessor = 32;
  constexpr size_t kSharedPerMultiprocessor = 228 << 10;
  // What a GPU reserves per block (1 KiB from compute capability 8.0 on).
  constexpr size_t kReservedSharedPerBlock = 1 << 10;
  if (threadsPerBlock <= 0 || threadsPerBlock > int(kMaxThreadsPerBlock) ||
      dynamicSharedBytes > kMaxSharedBytes)
    return 0;
  // Threads are given to a block in whole warps.
  const int warps = (threadsPerBlock + 31) / 32;
  int blocks = std::min(kBlocksPerMultiprocessor,
                        kThreadsPerMultiprocessor / (warps * 32));
  return std::min<int>(
      blocks, static_cast<int>(kSharedPerMultiprocessor /
                               (dynamicSharedBytes + kReservedSharedPerBlock)));
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
  if (l.cooperative) {
    const uint64_t blocks =
        static_cast<uint64_t>(l.grid.x) * l.grid.y * l.grid.z;
    const unsigned threads = l.block.x * l.block.y * l.block.z;
    const int perMultiprocessor =
        blocksPerMultiprocessor(static_cast<int>(threads), l.sharedBytes);
    const uint64_t resident =
        static_cast<uint64_t>(perMultiprocessor) * kMultiprocessors;
    if (blocks > resident) {
      fail(cudaErrorCooperativeLaunchTooLarge,
           call + "a cooperative grid of " + std::to_string(blocks) +
               " blocks of " + std::to_string(threads) +
               " threads, more than the " + std::to_string(resident) +
               " the device holds at once (" +
               std::to_string(kMultiprocessors) + " multiprocessors of " +
               std::to_string(perMultiprocessor) +
               ": cudaOccupancyMaxActiveBlocksPerMultiprocessor)");
      return;
    }
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
  const bool together = l.cooperative;
  enqueue(l.stream, name, Work::Kernel, name, [=]() -> cudaError_t {
    fillGuards(guards);
    runningKernel = name;
    race::beginKernel();
    uint64_t random = schedule.seed ^ (launch * 0xD1B54A32D192ED03ULL);
    const cudaError_t e = together ? runGrid(name, g, b, dynamicShared, body,
                                             shared.get(), schedule, random)
                                   : runBlocks(name, g, b, dynamicShared, body,
                                               shared.get(), schedule, random);
    runningKernel = nullptr;
    if (e)
      return e;
    if (std::string broken = brokenGuard(guards); !broken.empty())
      return fail(cudaErrorIllegalAddress,
                  std::string("kernel ") + name + ": " + broken);
    return cudaSuccess;
  });
}

} // namespace ampc::sim
