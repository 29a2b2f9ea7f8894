//===- RaceCheck.cpp - data races between the threads of a kernel ---------===//
//
// A cuda-sim library compiled in race-check mode (AMPC_CUDA_SIM_RACECHECK=1
// when ampc compiles it) is instrumented by the C++ compiler's
// ThreadSanitizer pass: every load and store calls __tsan_readN or
// __tsan_writeN. ThreadSanitizer's own runtime is not linked (it would
// treat the fibers as one thread and knows nothing of barriers); the hooks
// are defined here and keep a shadow of the memory a kernel touches.
//
// Two accesses race when two different CUDA threads touch the same byte,
// at least one writing, and nothing orders them:
//  - within a block, a __syncthreads released after the first access
//    (every thread takes part), or a chain of warp operations (shuffles,
//    votes, __syncwarp) that both threads took part in; a vector clock per
//    thread over the lanes of its warp follows the chains;
//  - threads of different blocks are ordered only by a grid barrier
//    (ampc::cuda::gridSync, in a cooperative launch) released between the
//    two accesses: a race in memory every block sees (device memory,
//    pinned host memory). Any other address (__shared__ variables, a
//    thread's stack) is the block's own: what an earlier block left there
//    is forgotten;
//  - a kernel is ordered after everything before it (the generated code
//    runs every kernel on one stream; kernels run one after another), so
//    the shadow is forgotten at each launch.
// Atomics are exempt: CudaSim.h's atomic functions are not instrumented;
// so are volatile accesses (a relaxed store in PTX: raiseFlag).
//
// The shadow is ThreadSanitizer's layout in a hash table: per 8-byte
// granule, up to four recent accesses (thread, block, the barrier epoch and
// the thread's warp clock, byte range, read or write). Like ThreadSanitizer
// it can miss a race whose access was evicted from a full granule; it does
// not report one that did not happen.
//
//===----------------------------------------------------------------------===//

// First, as in Execution.cpp: CUDA's headers keep its definitions.
#include "ampc/CudaSim/CudaSim.h"

#include "RaceCheck.h"
#include "Sim.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <vector>

// The built-in variables are kernel code's; here they are ThreadIndex's members.
#undef threadIdx
#undef blockIdx
#undef blockDim
#undef gridDim

namespace ampc::sim::race {
namespace {

/// One access remembered in a granule (16 bytes).
struct Cell {
  uint32_t block;  // linear index of the block in the grid
  uint32_t epoch;  // its block's epoch at the access (Detector::epochs)
  uint32_t clock;  // the thread's own warp clock at the access
  uint16_t thread; // linear index of the thread in the block
  uint8_t offset;  // first byte in the granule
  uint8_t bits;    // size (1-8) | kWrite; 0: empty

  static constexpr uint8_t kWrite = 0x10;
  unsigned size() const { return bits & 0xF; }
  bool write() const { return bits & kWrite; }
};

constexpr unsigned kCells = 4;
struct Entry {
  uintptr_t granule = 0; // address / 8; 0: a free slot
  uint32_t launch = 0;   // the launch its cells belong to
  bool global = false;   // memory every block sees
  Cell cells[kCells];
};

/// The shadow and the state of the running block.
struct Detector {
  /// Whether instrumented code is loaded (its module constructor called
  /// __tsan_init). Until then there is nothing to check, and the calls from
  /// Execution.cpp return at once: a run without the race check pays
  /// neither the shadow nor the per-block clocks.
  bool active = false;
  std::vector<Entry> table; // allocated by __tsan_init
  size_t used = 0;
  uint32_t launch = 0, block = 0;
  /// Epochs, numbered over the whole run: each block that starts and each
  /// barrier takes a new one. Per running block (a slot: one in a plain
  /// launch, every block of a cooperative one), the epoch it is in: its
  /// accesses of an earlier epoch are ordered before what it does now.
  uint32_t epoch = 0;
  std::vector<uint32_t> epochs;
  /// The epoch the last grid barrier of the launch began (0: none): an
  /// access of any block from an earlier epoch is ordered before it.
  uint32_t gridEpoch = 0;
  bool cooperative = false;
  dim3 grid, blockDim;
  /// Per thread of the running blocks (slot by slot): its vector clock
  /// over its warp's lanes.
  std::vector<std::array<uint32_t, 32>> clocks;
  /// The thread `current` pointed to when `thread` was computed; its slot,
  /// and its index in `clocks`.
  const ThreadIndex *index = nullptr;
  uint32_t thread = 0, slot = 0, clock = 0;
  /// The last allocation found global (allocations do not change while a
  /// kernel runs).
  uintptr_t globalBegin = 0, globalEnd = 0;
  std::string race; // the first race found in the block
  bool stopped = false;
  uint64_t random = 0x9E3779B97F4A7C15ULL;
};
Detector d;

size_t slot(uintptr_t granule) {
  return static_cast<size_t>((granule * 0x9E3779B97F4A7C15ULL) >> 20);
}

bool isGlobal(uintptr_t address, uintptr_t &base, size_t &bytes) {
  if (address >= d.globalBegin && address < d.globalEnd) {
    base = d.globalBegin;
    bytes = d.globalEnd - d.globalBegin;
    return true;
  }
  const void *start = nullptr;
  if (!findGlobal(reinterpret_cast<const void *>(address), start, bytes))
    return false;
  base = reinterpret_cast<uintptr_t>(start);
  d.globalBegin = base;
  d.globalEnd = base + bytes;
  return true;
}

void reset(Entry &e) {
  e.launch = d.launch;
  uintptr_t base;
  size_t bytes;
  e.global = isGlobal(e.granule << 3, base, bytes);
  for (Cell &c : e.cells)
    c.bits = 0;
}

/// Twice the slots, keeping only this launch's entries (the rest is
/// forgotten anyway).
void grow() {
  std::vector<Entry> old = std::move(d.table);
  size_t live = 0;
  for (const Entry &e : old)
    live += e.granule && e.launch == d.launch;
  size_t size = old.size();
  while (live * 2 >= size / 2)
    size *= 2;
  d.table.assign(size, Entry{});
  d.used = 0;
  const size_t mask = size - 1;
  for (const Entry &e : old) {
    if (!e.granule || e.launch != d.launch)
      continue;
    size_t i = slot(e.granule) & mask;
    while (d.table[i].granule)
      i = (i + 1) & mask;
    d.table[i] = e;
    ++d.used;
  }
}

Entry &lookup(uintptr_t granule) {
  while (true) {
    const size_t mask = d.table.size() - 1;
    for (size_t i = slot(granule) & mask;; i = (i + 1) & mask) {
      Entry &e = d.table[i];
      if (e.granule == granule) {
        if (e.launch != d.launch)
          reset(e);
        return e;
      }
      if (e.granule)
        continue;
      if ((d.used + 1) * 2 > d.table.size())
        break; // grow, then look again
      e.granule = granule;
      ++d.used;
      reset(e);
      return e;
    }
    grow();
  }
}

/// Whether `earlier` is ordered before what the running thread does now.
bool ordered(const Cell &earlier) {
  if (earlier.epoch < d.gridEpoch)
    return true;
  if (earlier.block != d.block)
    return false;
  if (earlier.epoch < d.epochs[d.slot])
    return true;
  return earlier.thread / 32 == d.thread / 32 &&
         d.clocks[d.clock][earlier.thread % 32] > earlier.clock;
}

std::string describe(unsigned linear, dim3 extent) {
  const unsigned x = linear % extent.x, y = linear / extent.x % extent.y,
                 z = linear / (extent.x * extent.y);
  return "(" + std::to_string(x) + ", " + std::to_string(y) + ", " +
         std::to_string(z) + ")";
}

std::string who(unsigned thread, unsigned block) {
  return "thread " + describe(thread, d.blockDim) + " of block " +
         describe(block, d.grid);
}

void report(const Entry &e, const Cell &earlier, uintptr_t address,
            unsigned size, bool write) {
  char at[32];
  std::snprintf(at, sizeof at, "%p", reinterpret_cast<void *>(address));
  std::string where;
  uintptr_t base;
  size_t bytes;
  if (e.global && isGlobal(address, base, bytes)) {
    char start[32];
    std::snprintf(start, sizeof start, "%p", reinterpret_cast<void *>(base));
    where = std::string("device memory ") + at + " (offset " +
            std::to_string(address - base) + " of the " +
            std::to_string(bytes) + "-byte allocation at " + start + ")";
  } else {
    where = std::string("shared or local memory ") + at;
  }
  d.race =
      "data race on " + where + ": " + who(d.thread, d.block) +
      (write ? " writes " : " reads ") + std::to_string(size) + " bytes that " +
      who(earlier.thread, earlier.block) +
      (earlier.write() ? " wrote" : " read") +
      (earlier.block == d.block
           ? " with no __syncthreads or warp operation of both between"
       : d.cooperative ? " with no grid barrier (ampc::cuda::gridSync) between"
                       : " (blocks are unordered: use an atomic)");
  d.stopped = true;
}

/// One access of `size` bytes at `offset` in `granule`; false on a race.
bool access(uintptr_t granule, unsigned offset, unsigned size, bool write) {
  Entry &e = lookup(granule);
  const Cell now{d.block,
                 d.epochs[d.slot],
                 d.clocks[d.clock][d.thread % 32],
                 static_cast<uint16_t>(d.thread),
                 static_cast<uint8_t>(offset),
                 static_cast<uint8_t>(size | (write ? Cell::kWrite : 0))};
  Cell *mine = nullptr, *free = nullptr;
  for (Cell &c : e.cells) {
    if (c.bits && !e.global && c.block != d.block)
      c.bits = 0; // an earlier block's shared memory or stack
    if (!c.bits) {
      free = free ? free : &c;
      continue;
    }
    const bool self = c.block == d.block && c.thread == d.thread;
    const bool overlaps =
        c.offset < offset + size && offset < c.offset + c.size();
    const bool sameBytes = c.offset == offset && c.size() == size;
    // The thread's own access to the same bytes that this one makes
    // redundant: a later read stands for an earlier read (a write that
    // races with one races with the other), a later write for anything.
    if (self && sameBytes && (write || !c.write()))
      mine = &c;
    if (self || !overlaps || !(write || c.write()) || ordered(c))
      continue;
    report(e, c, (granule << 3) + offset, size, write);
    return false;
  }
  if (write)
    // What this write covers and is ordered after is redundant too: an
    // access that would race with it races with the write.
    for (Cell &c : e.cells)
      if (c.bits && &c != mine && c.offset >= offset &&
          c.offset + c.size() <= offset + size &&
          ((c.block == d.block && c.thread == d.thread) || ordered(c))) {
        c.bits = 0;
        free = free ? free : &c;
      }
  Cell *into = mine ? mine : free;
  if (!into) {
    // A full granule: forget a read (one already ordered before this
    // access first), else any; a race with it can then go unseen.
    Cell *read = nullptr;
    for (Cell &c : e.cells)
      if (!c.write() && (!read || ordered(c)))
        read = &c;
    into = read ? read : &e.cells[(d.random = d.random * 6364136223846793005ULL +
                                               1442695040888963407ULL) >>
                                  62];
  }
  *into = now;
  return true;
}

/// Every hook: an access of `size` bytes at `address` by the running thread.
inline void onAccess(const void *address, size_t size, bool write) {
  const ThreadIndex *index = current;
  if (!index || !d.active || d.stopped || size == 0)
    return;
  if (index != d.index) {
    d.index = index;
    d.thread = index->threadIdx.x +
               d.blockDim.x * (index->threadIdx.y +
                               d.blockDim.y * index->threadIdx.z);
    if (d.cooperative) {
      const uint3 b = index->blockIdx;
      d.block = b.x + d.grid.x * (b.y + d.grid.y * b.z);
      d.slot = d.block;
    }
    d.clock = d.slot * d.blockDim.x * d.blockDim.y * d.blockDim.z + d.thread;
  }
  uintptr_t p = reinterpret_cast<uintptr_t>(address);
  const uintptr_t end = p + size;
  while (p < end) {
    const unsigned offset = p & 7;
    const unsigned n =
        static_cast<unsigned>(std::min<uintptr_t>(end - p, 8 - offset));
    if (!access(p >> 3, offset, n, write))
      return;
    p += n;
  }
}

} // namespace

void beginKernel() {
  if (!d.active)
    return;
  ++d.launch;
  d.globalBegin = d.globalEnd = 0;
  d.gridEpoch = 0;
}

/// `blocks` blocks of `threads` threads start, each in an epoch of its own
/// (nothing of it is before it; an earlier block's cells are told apart by
/// their block).
void begin(dim3 grid, dim3 threads, uint64_t blocks, bool cooperative) {
  d.grid = grid;
  d.blockDim = threads;
  d.cooperative = cooperative;
  d.clocks.assign(blocks * threads.x * threads.y * threads.z,
                  std::array<uint32_t, 32>{});
  d.epochs.resize(blocks);
  for (uint32_t &e : d.epochs)
    e = ++d.epoch;
  d.index = nullptr;
  d.slot = 0;
  d.race.clear();
  d.stopped = false;
}

void beginBlock(uint3 index, dim3 grid, dim3 threads) {
  if (!d.active)
    return;
  begin(grid, threads, 1, false);
  d.block = index.x + grid.x * (index.y + grid.y * index.z);
}

void beginGrid(dim3 grid, dim3 threads) {
  if (!d.active)
    return;
  begin(grid, threads, static_cast<uint64_t>(grid.x) * grid.y * grid.z, true);
}

void barrier(unsigned slot) {
  if (d.active)
    d.epochs[slot] = ++d.epoch;
}

void gridBarrier() {
  if (!d.active)
    return;
  d.gridEpoch = ++d.epoch;
  for (uint32_t &e : d.epochs)
    e = d.gridEpoch;
}

void warpRelease(unsigned slot, unsigned firstThread, unsigned mask) {
  if (!d.active)
    return;
  // Each lane's own component advances (what it did before is now
  // "before the exchange"), then every lane knows what each knows.
  const size_t first =
      slot * d.blockDim.x * d.blockDim.y * d.blockDim.z + firstThread;
  std::array<uint32_t, 32> joined{};
  for (unsigned m = 0; m < 32; ++m)
    if (mask >> m & 1u) {
      std::array<uint32_t, 32> &c = d.clocks[first + m];
      ++c[m];
      for (unsigned l = 0; l < 32; ++l)
        joined[l] = std::max(joined[l], c[l]);
    }
  for (unsigned m = 0; m < 32; ++m)
    if (mask >> m & 1u)
      d.clocks[first + m] = joined;
}

void activate() {
  if (d.active)
    return;
  d.table.assign(1 << 16, Entry{});
  d.active = true;
}

void takeRace(std::string &error) {
  if (d.race.empty())
    return;
  if (error.empty())
    error = d.race;
  d.race.clear();
}

} // namespace ampc::sim::race

// ThreadSanitizer's instrumentation calls. Code outside a running kernel
// (the library's host code) is instrumented too; there `current` is null
// and the hooks return at once. Volatile accesses (told apart with
// --param=tsan-distinguish-volatile=1) are exempt as atomics are: the PTX
// memory model makes them relaxed, morally strong operations, which do not
// race (CudaKernels.cuh's raiseFlag).
using ampc::sim::race::onAccess;
#define AMPC_RACE_HOOKS(N)                                                     \
  void __tsan_read##N(void *p) { onAccess(p, N, false); }                      \
  void __tsan_write##N(void *p) { onAccess(p, N, true); }                      \
  void __tsan_unaligned_read##N(void *p) { onAccess(p, N, false); }            \
  void __tsan_unaligned_write##N(void *p) { onAccess(p, N, true); }            \
  void __tsan_volatile_read##N(void *) {}                                      \
  void __tsan_volatile_write##N(void *) {}
extern "C" {
AMPC_RACE_HOOKS(1)
AMPC_RACE_HOOKS(2)
AMPC_RACE_HOOKS(4)
AMPC_RACE_HOOKS(8)
AMPC_RACE_HOOKS(16)
void __tsan_read_range(void *p, unsigned long size) {
  onAccess(p, size, false);
}
void __tsan_write_range(void *p, unsigned long size) {
  onAccess(p, size, true);
}
// A virtual call's table pointer: read-only after construction.
void __tsan_vptr_read(void **) {}
void __tsan_vptr_update(void **p, void *) { onAccess(p, sizeof *p, true); }
// Atomic operations (std::atomic, reference counts, static guards): done,
// sequentially consistent whatever order was asked for, and not recorded,
// as the CUDA atomics are not.
#define AMPC_RACE_ATOMICS(N, T)                                                \
  T __tsan_atomic##N##_load(const volatile T *a, int) {                        \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                               \
  }                                                                            \
  void __tsan_atomic##N##_store(volatile T *a, T v, int) {                     \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                  \
  }                                                                            \
  T __tsan_atomic##N##_exchange(volatile T *a, T v, int) {                     \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                        \
  }                                                                            \
  T __tsan_atomic##N##_fetch_add(volatile T *a, T v, int) {                    \
    return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                         \
  }                                                                            \
  T __tsan_atomic##N##_fetch_sub(volatile T *a, T v, int) {                    \
    return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                         \
  }                                                                            \
  T __tsan_atomic##N##_fetch_and(volatile T *a, T v, int) {                    \
    return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                         \
  }                                                                            \
  T __tsan_atomic##N##_fetch_or(volatile T *a, T v, int) {                     \
    return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                          \
  }                                                                            \
  T __tsan_atomic##N##_fetch_xor(volatile T *a, T v, int) {                    \
    return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                         \
  }                                                                            \
  T __tsan_atomic##N##_fetch_nand(volatile T *a, T v, int) {                   \
    return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                        \
  }                                                                            \
  int __tsan_atomic##N##_compare_exchange_strong(volatile T *a, T *c, T v,     \
                                                 int, int) {                   \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST,       \
                                       __ATOMIC_SEQ_CST);                      \
  }                                                                            \
  int __tsan_atomic##N##_compare_exchange_weak(volatile T *a, T *c, T v, int,  \
                                               int) {                          \
    return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST,        \
                                       __ATOMIC_SEQ_CST);                      \
  }                                                                            \
  T __tsan_atomic##N##_compare_exchange_val(volatile T *a, T c, T v, int,      \
                                            int) {                             \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST,             \
                                __ATOMIC_SEQ_CST);                             \
    return c;                                                                  \
  }
AMPC_RACE_ATOMICS(8, char)
AMPC_RACE_ATOMICS(16, short)
AMPC_RACE_ATOMICS(32, int)
AMPC_RACE_ATOMICS(64, long)
#undef AMPC_RACE_ATOMICS
void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
void __tsan_func_entry(void *) {}
void __tsan_func_exit() {}
void __tsan_init() {
  ampc::sim::race::activate();
}
}
#undef AMPC_RACE_HOOKS
