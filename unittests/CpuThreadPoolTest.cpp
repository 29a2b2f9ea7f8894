//===- CpuThreadPoolTest.cpp - the CPU library's thread pool --------------===//
//
// ampc::cpu::ThreadPool and parallelFor (include/ampc/Kernels/Cpu/
// ThreadPool.h): empty ranges, the chunks the grain makes, every iteration
// run once, exceptions, nested calls run serially, no pool outside a scope,
// and kernels giving the same bits with 1, 2 and 4 threads.
//
//===----------------------------------------------------------------------===//

#include "ampc/Kernels/Cpu/CpuBackwardKernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

using namespace ampc::cpu;

namespace {

/// The [b, e) ranges parallelFor hands fn, sorted.
std::vector<std::pair<int64_t, int64_t>> chunksOf(ThreadPool *pool,
                                                  int64_t begin, int64_t end,
                                                  int64_t grain) {
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  PoolScope scope(pool);
  parallelFor(begin, end, grain, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mutex);
    chunks.push_back({b, e});
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

TEST(ThreadPoolTest, EmptyRangeCallsNothing) {
  ThreadPool pool(3);
  EXPECT_TRUE(chunksOf(&pool, 5, 5, 1).empty());
  EXPECT_TRUE(chunksOf(&pool, 7, 2, 1).empty());
  EXPECT_TRUE(chunksOf(nullptr, 0, 0, 4).empty());
}

TEST(ThreadPoolTest, GrainCutsChunksWhateverTheThreads) {
  using Chunks = std::vector<std::pair<int64_t, int64_t>>;
  const Chunks expected = {{3, 7}, {7, 11}, {11, 13}};
  for (int threads : {2, 3, 4, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    EXPECT_EQ(chunksOf(&pool, 3, 13, 4), expected) << threads << " threads";
  }
  // A grain below 1 counts as 1; one chunk, no pool or one thread: one
  // call over the whole range.
  ThreadPool pool(2);
  EXPECT_EQ(chunksOf(&pool, 0, 3, 0), (Chunks{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(chunksOf(&pool, 0, 10, 10), (Chunks{{0, 10}}));
  EXPECT_EQ(chunksOf(nullptr, 0, 10, 3), (Chunks{{0, 10}}));
  ThreadPool one(1);
  EXPECT_EQ(one.threads(), 1);
  EXPECT_EQ(chunksOf(&one, 0, 10, 3), (Chunks{{0, 10}}));
}

TEST(ThreadPoolTest, EveryIterationOnceOnSeveralThreads) {
  ThreadPool pool(4);
  PoolScope scope(&pool);
  for (int round = 0; round < 50; ++round) {
    std::vector<std::atomic<int>> seen(1000);
    std::mutex mutex;
    std::vector<std::thread::id> ids;
    parallelFor(0, 1000, 7, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        seen[i].fetch_add(1);
      std::lock_guard<std::mutex> lock(mutex);
      ids.push_back(std::this_thread::get_id());
    });
    for (auto &s : seen)
      ASSERT_EQ(s.load(), 1);
    EXPECT_EQ(ids.size(), 143u);
  }
}

TEST(ThreadPoolTest, ExceptionReachesTheCallerAndThePoolGoesOn) {
  ThreadPool pool(3);
  PoolScope scope(&pool);
  EXPECT_THROW(parallelFor(0, 100, 1,
                           [&](int64_t b, int64_t) {
                             if (b == 37)
                               throw std::runtime_error("chunk 37");
                           }),
               std::runtime_error);
  // The pool is current again and runs the next region whole.
  EXPECT_EQ(detail::currentPool, &pool);
  std::atomic<int64_t> sum{0};
  parallelFor(0, 100, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      sum += i;
  });
  EXPECT_EQ(sum.load(), 4950);
}

TEST(ThreadPoolTest, NestedCallsRunSerially) {
  ThreadPool pool(4);
  PoolScope scope(&pool);
  std::atomic<int> innerCalls{0};
  std::atomic<int> nullInside{0};
  parallelFor(0, 8, 1, [&](int64_t, int64_t) {
    nullInside += detail::currentPool == nullptr;
    parallelFor(0, 100, 1, [&](int64_t b, int64_t e) {
      EXPECT_EQ(b, 0);
      EXPECT_EQ(e, 100);
      ++innerCalls;
    });
  });
  EXPECT_EQ(innerCalls.load(), 8);
  EXPECT_EQ(nullInside.load(), 8);
}

TEST(ThreadPoolTest, ScopeRestoresThePreviousPool) {
  ThreadPool a(2), b(2);
  EXPECT_EQ(detail::currentPool, nullptr);
  {
    PoolScope outer(&a);
    {
      PoolScope inner(&b);
      EXPECT_EQ(detail::currentPool, &b);
    }
    EXPECT_EQ(detail::currentPool, &a);
  }
  EXPECT_EQ(detail::currentPool, nullptr);
}

TEST(ThreadPoolTest, ThreadsForZeroIsTheAvailableCores) {
  EXPECT_EQ(threadsFor(0), availableCores());
  EXPECT_GE(availableCores(), 1);
  EXPECT_EQ(threadsFor(3), 3);
}

TEST(ThreadPoolTest, LibrarySlotStartsAndStops) {
  alignas(8) unsigned char slot[8];
  std::memset(slot, 0xff, sizeof(slot));
  startThreads(slot, 1);
  EXPECT_EQ(threadsAt(slot), nullptr);
  stopThreads(slot);
  startThreads(slot, 3);
  ASSERT_NE(threadsAt(slot), nullptr);
  EXPECT_EQ(threadsAt(slot)->threads(), 3);
  stopThreads(slot);
  EXPECT_EQ(threadsAt(slot), nullptr);
}

/// Runs `kernel` with no pool and with pools of 2 and 4 threads and
/// expects the same bytes in `out` each time.
template <typename T, typename Kernel>
void expectSameBits(std::vector<T> &out, Kernel kernel) {
  kernel();
  const std::vector<T> serial = out;
  for (int threads : {2, 4}) {
    std::fill(out.begin(), out.end(), T(-7));
    ThreadPool pool(threads);
    PoolScope scope(&pool);
    kernel();
    EXPECT_EQ(std::memcmp(out.data(), serial.data(), out.size() * sizeof(T)),
              0)
        << threads << " threads";
  }
}

std::vector<float> randomData(size_t count, unsigned seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.5f, 2.0f);
  std::vector<float> v(count);
  for (float &x : v)
    x = normal(random);
  return v;
}

TEST(ThreadPoolTest, NormalisationKernelsGiveTheSameBits) {
  const int64_t n = 4, c = 6, inner = 3000;
  const std::vector<float> x = randomData(n * c * inner, 1),
                           g = randomData(n * c * inner, 2),
                           scale = randomData(c, 3), bias = randomData(c, 4);
  std::vector<float> out(2 * c + 2 * n * c * inner + 2 * c);
  expectSameBits(out, [&] {
    float *mean = out.data(), *var = mean + c, *y = var + c,
          *dx = y + n * c * inner, *gs = dx + n * c * inner, *gb = gs + c;
    std::vector<float> inv(c);
    channelStatistics<float, As<float>>(x.data(), n, c, inner, mean, var);
    batchNorm<float, As<float>, As<float>>(x.data(), y, n, c, inner,
                                           scale.data(), bias.data(), mean,
                                           var, 1e-5f, inv.data());
    batchNormGrad<float, As<float>, As<float>>(g.data(), x.data(), dx, n, c,
                                               inner, scale.data(), mean,
                                               inv.data(), true, gs, gb);
  });
}

TEST(ThreadPoolTest, ConvolutionKernelsGiveTheSameBits) {
  Window w = {2, {79, 83}, {40, 42}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}};
  const int64_t n = 3, c = 4, m = 6;
  const std::vector<float> x = randomData(n * c * w.inSize(), 5),
                           weight = randomData(m * c * w.kernelSize(), 6),
                           bias = randomData(m, 7),
                           grad = randomData(n * m * w.outSize(), 8);
  for (int64_t images : {1, 2}) {
    std::vector<float> columns(images * c * w.kernelSize() * w.outSize()),
        staging(images * m * w.outSize());
    std::vector<float> out(n * m * w.outSize() + n * c * w.inSize() +
                           m * c * w.kernelSize());
    expectSameBits(out, [&] {
      float *y = out.data(), *dx = y + n * m * w.outSize(),
            *dw = dx + n * c * w.inSize();
      conv<float>(x.data(), weight.data(), bias.data(), y, n, c, m, 1, w,
                  images, columns.data(), staging.data());
      convBackwardData<float>(grad.data(), weight.data(), dx, n, c, m, 1, w,
                              images, columns.data(), staging.data());
      convBackwardWeight<float>(x.data(), grad.data(), dw, n, c, m, 1, w,
                                columns.data());
    });
  }
}

TEST(ThreadPoolTest, ParallelForEachVisitsWhatForEachVisits) {
  // A vector (its elements split), a broadcast matrix (its rows split) and
  // a 3-d output whose chunks start mid-way through the odometer.
  struct Case {
    int rank;
    std::vector<int64_t> dims, strides;
  };
  const Case cases[] = {{1, {100000}, {1}},
                        {2, {3000, 40}, {0, 1}},
                        {3, {7, 900, 30}, {27000, 1, 900}}};
  for (const Case &c : cases) {
    int64_t total = 1;
    for (int64_t d : c.dims)
      total *= d;
    const int64_t *strides[] = {c.strides.data()};
    std::vector<int64_t> serial(total, -1);
    forEach<1>(c.rank, c.dims.data(), strides,
               [&](int64_t o, int64_t i) { serial[o] = i; });
    for (int threads : {2, 4}) {
      std::vector<int64_t> parallel(total, -1);
      ThreadPool pool(threads);
      PoolScope scope(&pool);
      parallelForEach<1>(c.rank, c.dims.data(), strides,
                         [&](int64_t o, int64_t i) { parallel[o] = i; });
      EXPECT_EQ(parallel, serial) << "rank " << c.rank << ", " << threads
                                  << " threads";
    }
  }
}

} // namespace
