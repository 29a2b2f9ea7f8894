//===- ThreadPool.h - the CPU library's worker threads ---------*- C++ -*-===//
//
// Issue 43: each instance of a CPU model library owns a pool of
// ampc_abi_config.num_threads threads (0: the cores sched_getaffinity gives
// the process), created by its `init`, joined by its `release`. The kernels
// split their work with parallelFor, which runs on the pool of the step the
// calling thread is running (PoolScope, set by the generated `infer` and
// `trainStep`) and serially anywhere else: without a pool, inside another
// parallelFor (nested calls) and with one thread.
//
// Determinism: parallelFor hands out chunks of `grain` iterations, and
// every kernel that uses it computes each output element wholly inside one
// chunk, with the arithmetic of the serial loop; no reduction is split. So
// the bits do not depend on the thread count (test/Target/Cpu/threads.test).
// GEMMs stay outside parallel regions and use OpenBLAS's own threads, whose
// count the pool sets (openblas_set_num_threads, process-global); OpenBLAS
// splits a product over output tiles, so its bits do not depend on its
// thread count either (docs/design.md, "CPU threads").
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_KERNELS_CPU_THREADPOOL_H
#define AMPC_KERNELS_CPU_THREADPOOL_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

namespace ampc::cpu {

/// The cores the process may run on (sched_getaffinity), at least 1.
inline int availableCores() {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int count = CPU_COUNT(&set);
    if (count > 0)
      return count;
  }
#endif
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware ? static_cast<int>(hardware) : 1;
}

/// The threads a library uses for a requested `num_threads`: 0 means
/// every available core.
inline int threadsFor(int32_t requested) {
  return requested > 0 ? requested : availableCores();
}

/// `threads` - 1 workers and the calling thread. run(chunks, fn) calls
/// fn(i) once for each i in [0, chunks), on the caller and the workers, and
/// returns when all calls have returned. The first exception a call throws
/// is rethrown by run (chunks not yet started are then skipped).
class ThreadPool {
public:
  explicit ThreadPool(int threads) {
    try {
      for (int i = 1; i < threads; ++i)
        workers.emplace_back([this] { serve(); });
    } catch (...) {
      stop();
      throw;
    }
  }
  ~ThreadPool() { stop(); }
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int threads() const { return static_cast<int>(workers.size()) + 1; }

  template <typename Fn> void run(int64_t chunks, Fn &fn) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      job = [](void *context, int64_t i) { (*static_cast<Fn *>(context))(i); };
      context = &fn;
      total = chunks;
      next.store(0, std::memory_order_relaxed);
      error = nullptr;
      open = true;
      ++generation;
    }
    wake.notify_all();
    drain();
    std::exception_ptr failure;
    {
      std::unique_lock<std::mutex> lock(mutex);
      // Workers that have not joined by now find nothing left: they may
      // not join any more, and those that did finish their chunks.
      open = false;
      finished.wait(lock, [this] { return active == 0; });
      failure = error;
      error = nullptr;
    }
    if (failure)
      std::rethrow_exception(failure);
  }

private:
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    for (std::thread &t : workers)
      t.join();
  }

  void drain() {
    for (;;) {
      const int64_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= total)
        return;
      try {
        job(context, i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error)
          error = std::current_exception();
        next.store(total, std::memory_order_relaxed);
      }
    }
  }

  void serve() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      wake.wait(lock,
                [&] { return stopping || (open && generation != seen); });
      if (stopping)
        return;
      seen = generation;
      ++active;
      lock.unlock();
      drain();
      lock.lock();
      if (--active == 0)
        finished.notify_all();
    }
  }

  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable wake, finished;
  void (*job)(void *, int64_t) = nullptr;
  void *context = nullptr;
  int64_t total = 0;
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  uint64_t generation = 0;
  int active = 0;
  bool open = false, stopping = false;
};

namespace detail {
/// The pool parallelFor runs on in this thread: the running step's, null
/// outside a step and inside a parallel region.
inline thread_local ThreadPool *currentPool = nullptr;
} // namespace detail

/// Calls fn(b, e) over [begin, end) cut into chunks of `grain` (>= 1)
/// iterations, the last one shorter, in parallel on the current pool; with
/// no pool, one thread or a single chunk, fn(begin, end) once on the
/// calling thread. fn must give each iteration the same result whichever
/// chunk runs it. Calls inside fn run serially.
template <typename Fn>
void parallelFor(int64_t begin, int64_t end, int64_t grain, Fn &&fn) {
  if (end <= begin)
    return;
  if (grain < 1)
    grain = 1;
  ThreadPool *pool = detail::currentPool;
  const int64_t chunks = (end - begin + grain - 1) / grain;
  if (!pool || pool->threads() == 1 || chunks == 1) {
    fn(begin, end);
    return;
  }
  detail::currentPool = nullptr;
  auto chunk = [&](int64_t i) {
    const int64_t b = begin + i * grain;
    fn(b, end - b < grain ? end : b + grain);
  };
  try {
    pool->run(chunks, chunk);
  } catch (...) {
    detail::currentPool = pool;
    throw;
  }
  detail::currentPool = pool;
}

/// The grain that gives chunks of about `work` units (elements touched) when
/// an iteration costs `perIteration` of them: what a chunk must amount to
/// for its hand-off to pay.
inline int64_t grainFor(int64_t perIteration, int64_t work = 32768) {
  return perIteration >= work ? 1 : work / (perIteration > 0 ? perIteration : 1);
}

/// Makes `pool` the current pool of the calling thread for the scope (the
/// generated `infer` and `trainStep`).
class PoolScope {
public:
  explicit PoolScope(ThreadPool *pool) : saved(detail::currentPool) {
    detail::currentPool = pool;
  }
  ~PoolScope() { detail::currentPool = saved; }
  PoolScope(const PoolScope &) = delete;
  PoolScope &operator=(const PoolScope &) = delete;

private:
  ThreadPool *saved;
};

} // namespace ampc::cpu

#endif // AMPC_KERNELS_CPU_THREADPOOL_H
