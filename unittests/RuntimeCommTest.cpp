//===- RuntimeCommTest.cpp - the application's communicator (issue 41) ----===//
//
// `ampc_model_options.comm`: a data-parallel library given a communicator
// by the application. The MLP of unittests/models is compiled with
// --data-parallel at batch 4 and without it at batch 8 (CMakeLists.txt);
// two instances of the first, each in a thread of its own, share a fake
// communicator that sums in this process, and must train as the second
// does on the whole batches. The calls the library makes (requests,
// counts, dtypes) are logged and checked, as are the runtime's refusals.
// Also the TCP rendezvous the NCCL communicator uses without MPI
// (lib/Runtime/Rendezvous.h), its ranks as threads on 127.0.0.1.
//
//===----------------------------------------------------------------------===//

#include "ampc/Kernels/Common/Float16.h"
#include "ampc/Runtime/ampc.h"

#include "Rendezvous.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

constexpr int64_t kRankBatch = 4, kFeatures = 4, kClasses = 3;
constexpr int kSteps = 10;

/// One call a rank's library made.
struct Call {
  bool start;
  int32_t request;
  uint64_t count;
  ampc_dtype dtype;
};

/// A job of `size` ranks in one process, each a thread with its own model:
/// `start` records the rank's buffer; `wait` meets the other ranks, sums
/// the request's buffers in rank order (FP16/BF16 widened to FP32 per add
/// and rounded to nearest even, as libampc_comm_mpi.so) and writes the sum
/// into every rank's buffer.
class ThreadJob {
public:
  struct Rank {
    ThreadJob *job;
    int32_t rank;
    std::vector<Call> calls;
    std::map<int32_t, Call> started;
    std::map<int32_t, void *> buffers;
    std::string error;
  };

  explicit ThreadJob(int32_t size) : ranks(size) {
    for (int32_t r = 0; r < size; ++r)
      ranks[r] = {this, r, {}, {}, {}, ""};
  }

  ampc_comm comm(int32_t rank) {
    ampc_comm c;
    std::memset(&c, 0, sizeof(c));
    c.struct_size = sizeof(c);
    c.rank = rank;
    c.size = static_cast<int32_t>(ranks.size());
    c.handle = &ranks[rank];
    c.start = &ThreadJob::start;
    c.wait = &ThreadJob::wait;
    c.last_error = &ThreadJob::lastError;
    return c;
  }

  std::vector<Rank> ranks;

private:
  static int32_t start(void *handle, int32_t request, void *buffer,
                       uint64_t count, ampc_dtype dtype) {
    auto &r = *static_cast<Rank *>(handle);
    std::lock_guard<std::mutex> lock(r.job->mutex);
    r.calls.push_back({true, request, count, dtype});
    if (r.started.count(request)) {
      r.error = "request " + std::to_string(request) + " started twice";
      return 1;
    }
    r.started[request] = r.calls.back();
    r.buffers[request] = buffer;
    return 0;
  }

  static int32_t wait(void *handle, int32_t request) {
    auto &r = *static_cast<Rank *>(handle);
    ThreadJob &job = *r.job;
    std::unique_lock<std::mutex> lock(job.mutex);
    r.calls.push_back({false, request, 0, AMPC_DTYPE_F32});
    if (!r.started.count(request)) {
      r.error = "request " + std::to_string(request) + " never started";
      return 1;
    }
    Call mine = r.started[request];
    job.arrive(lock); // every rank has started `request`
    std::vector<double> sum(mine.count);
    for (Rank &other : job.ranks) {
      Call theirs = other.started[request];
      if (theirs.count != mine.count || theirs.dtype != mine.dtype) {
        r.error = "ranks disagree on request " + std::to_string(request);
        job.arrive(lock);
        return 1;
      }
      for (uint64_t i = 0; i < mine.count; ++i)
        sum[i] = add(mine.dtype, other.rank == 0, sum[i],
                     other.buffers[request], i);
    }
    job.arrive(lock); // every rank has read every buffer
    for (uint64_t i = 0; i < mine.count; ++i)
      store(mine.dtype, r.buffers[request], i, sum[i]);
    r.started.erase(request);
    return 0;
  }

  static const char *lastError(void *handle) {
    return static_cast<Rank *>(handle)->error.c_str();
  }

  /// Element i of `buffer` (the first rank's), or `sum` plus it rounded to
  /// `dtype`.
  static double add(ampc_dtype dtype, bool first, double sum,
                    const void *buffer, uint64_t i) {
    using namespace ampc::numeric;
    const auto *h = static_cast<const uint16_t *>(buffer);
    float s = static_cast<float>(sum);
    switch (dtype) {
    case AMPC_DTYPE_F64: {
      double v = static_cast<const double *>(buffer)[i];
      return first ? v : sum + v;
    }
    case AMPC_DTYPE_F16:
      return first ? f16BitsToF32(h[i])
                   : f16BitsToF32(f32ToF16Bits(s + f16BitsToF32(h[i])));
    case AMPC_DTYPE_BF16:
      return first ? bf16BitsToF32(h[i])
                   : bf16BitsToF32(f32ToBf16Bits(s + bf16BitsToF32(h[i])));
    default: {
      float v = static_cast<const float *>(buffer)[i];
      return first ? v : s + v;
    }
    }
  }

  static void store(ampc_dtype dtype, void *buffer, uint64_t i, double v) {
    using namespace ampc::numeric;
    auto *h = static_cast<uint16_t *>(buffer);
    switch (dtype) {
    case AMPC_DTYPE_F64:
      static_cast<double *>(buffer)[i] = v;
      break;
    case AMPC_DTYPE_F16:
      h[i] = f32ToF16Bits(static_cast<float>(v));
      break;
    case AMPC_DTYPE_BF16:
      h[i] = f32ToBf16Bits(static_cast<float>(v));
      break;
    default:
      static_cast<float *>(buffer)[i] = static_cast<float>(v);
    }
  }

  /// A barrier over the ranks, under `lock`.
  void arrive(std::unique_lock<std::mutex> &lock) {
    uint64_t generation = generation_;
    if (++arrived_ == ranks.size()) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return;
    }
    changed_.wait(lock, [&] { return generation_ != generation; });
  }

  std::mutex mutex;
  std::condition_variable changed_;
  size_t arrived_ = 0;
  uint64_t generation_ = 0;
};

/// The rows of step `step`'s batch of 2 * kRankBatch (deterministic).
void batch(int step, std::vector<float> &x, std::vector<int64_t> &y) {
  x.resize(2 * kRankBatch * kFeatures);
  y.resize(2 * kRankBatch);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.37f * static_cast<float>(i + 31 * step));
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = static_cast<int64_t>((i * 7 + step) % kClasses);
}

/// `steps` training steps of `model` on rows [first, first + rows) of
/// every batch; false with a gtest failure on an error.
void train(ampc_model *model, int64_t first, int64_t rows, int steps) {
  std::vector<float> x;
  std::vector<int64_t> y;
  int64_t xShape[] = {rows, kFeatures}, yShape[] = {rows};
  float loss = 0;
  ampc_tensor lossTensor = {AMPC_DTYPE_F32, 0, nullptr, &loss, sizeof(loss)};
  for (int step = 0; step < steps; ++step) {
    batch(step, x, y);
    ampc_tensor inputs[] = {
        {AMPC_DTYPE_F32, 2, xShape, x.data() + first * kFeatures,
         sizeof(float) * rows * kFeatures},
        {AMPC_DTYPE_I64, 1, yShape, y.data() + first,
         sizeof(int64_t) * rows}};
    ASSERT_EQ(ampc_model_train_step(model, inputs, 2, &lossTensor), AMPC_OK)
        << ampc_last_error();
  }
}

/// Every parameter of `model`, concatenated.
std::vector<float> parameters(ampc_model *model) {
  ampc_model_info info;
  EXPECT_EQ(ampc_model_describe(model, &info), AMPC_OK);
  std::vector<float> all;
  for (int32_t p = 0; p < info.num_parameters; ++p) {
    ampc_tensor_info t;
    EXPECT_EQ(ampc_model_parameter_info(model, p, &t), AMPC_OK);
    size_t n = 1;
    for (int32_t d = 0; d < t.rank; ++d)
      n *= static_cast<size_t>(t.shape[d]);
    std::vector<float> value(n);
    ampc_tensor out = {t.dtype, t.rank, t.shape, value.data(),
                       sizeof(float) * n};
    EXPECT_EQ(ampc_model_get_parameter(model, p, &out), AMPC_OK)
        << ampc_last_error();
    all.insert(all.end(), value.begin(), value.end());
  }
  return all;
}

ampc_model *load(const char *path, const ampc_comm *comm) {
  ampc_model_options options;
  ampc_model_options_init(&options);
  options.comm = comm;
  ampc_model *model = nullptr;
  EXPECT_EQ(ampc_model_load(path, &options, &model), AMPC_OK)
      << ampc_last_error();
  return model;
}

struct DataParallel {
  int32_t rank = -1, size = -1;
  uint64_t bytes = 0;
};
DataParallel dataParallel(ampc_model *model) {
  DataParallel d;
  EXPECT_EQ(ampc_model_data_parallel(model, &d.rank, &d.size, &d.bytes),
            AMPC_OK);
  return d;
}

TEST(RuntimeComm, TwoRanksInThreadsTrainAsOneProcessAtTwiceTheBatch) {
  ThreadJob job(2);
  ampc_comm comms[] = {job.comm(0), job.comm(1)};
  ampc_model *ranks[] = {load(AMPC_DP_MLP_RANK_LIBRARY, &comms[0]),
                         load(AMPC_DP_MLP_RANK_LIBRARY, &comms[1])};
  ASSERT_TRUE(ranks[0] && ranks[1]);
  std::thread threads[2];
  for (int r = 0; r < 2; ++r)
    threads[r] = std::thread(
        [&, r] { train(ranks[r], r * kRankBatch, kRankBatch, kSteps); });
  for (std::thread &t : threads)
    t.join();
  ampc_model *one = load(AMPC_DP_MLP_ONE_LIBRARY, nullptr);
  ASSERT_TRUE(one);
  train(one, 0, 2 * kRankBatch, kSteps);

  std::vector<float> p0 = parameters(ranks[0]), p1 = parameters(ranks[1]),
                     reference = parameters(one);
  ASSERT_EQ(p0.size(), reference.size());
  EXPECT_EQ(0, std::memcmp(p0.data(), p1.data(), sizeof(float) * p0.size()))
      << "the ranks' parameters differ";
  float difference = 0;
  for (size_t i = 0; i < p0.size(); ++i)
    difference = std::max(difference, std::fabs(p0[i] - reference[i]));
  EXPECT_LE(difference, 1e-6f);

  // What each step asked for: every bucket started once, then waited for
  // once, FP32 (an fp32 library), the counts covering every gradient.
  for (int r = 0; r < 2; ++r) {
    const std::vector<Call> &calls = job.ranks[r].calls;
    ASSERT_EQ(calls.size() % kSteps, 0u);
    size_t perStep = calls.size() / kSteps;
    std::map<int32_t, int> starts, waits;
    uint64_t elements = 0;
    for (size_t i = 0; i < perStep; ++i) {
      const Call &c = calls[i];
      (c.start ? starts : waits)[c.request]++;
      if (c.start) {
        EXPECT_EQ(c.dtype, AMPC_DTYPE_F32);
        elements += c.count;
      }
    }
    EXPECT_GT(starts.size(), 1u) << "--bucket-mb makes several buckets";
    EXPECT_EQ(starts, waits);
    for (auto [request, n] : starts)
      EXPECT_EQ(n, 1) << "request " << request;
    EXPECT_EQ(elements, static_cast<uint64_t>(p0.size()));
    for (size_t i = perStep; i < calls.size(); ++i) {
      const Call &c = calls[i], &first = calls[i % perStep];
      EXPECT_TRUE(c.start == first.start && c.request == first.request &&
                  c.count == first.count)
          << "step " << i / perStep << " differs from step 0";
    }
    DataParallel d = dataParallel(ranks[r]);
    EXPECT_EQ(d.rank, r);
    EXPECT_EQ(d.size, 2);
    EXPECT_EQ(d.bytes, kSteps * sizeof(float) * p0.size());
  }
  ampc_model_release(ranks[0]);
  ampc_model_release(ranks[1]);
  ampc_model_release(one);
}

TEST(RuntimeComm, ALibraryWithoutDataParallelIgnoresIt) {
  ThreadJob job(2);
  ampc_comm comm = job.comm(1);
  ampc_model *model = load(AMPC_DP_MLP_ONE_LIBRARY, &comm);
  ASSERT_TRUE(model);
  train(model, 0, 2 * kRankBatch, 2);
  EXPECT_TRUE(job.ranks[1].calls.empty());
  DataParallel d = dataParallel(model);
  EXPECT_EQ(d.rank, 0);
  EXPECT_EQ(d.size, 1);
  EXPECT_EQ(d.bytes, 0u);
  ampc_model_release(model);
}

/// A communicator of rank 1 of 2 whose `start` fails.
int32_t failingStart(void *, int32_t, void *, uint64_t, ampc_dtype) {
  return 3;
}
int32_t neverWait(void *, int32_t) { return 0; }
const char *linkDown(void *) { return "fake: link down"; }
const char *noMessage(void *) { return nullptr; }

TEST(RuntimeComm, ItsFailuresEndTheStepWithItsMessage) {
  ampc_comm comm;
  std::memset(&comm, 0, sizeof(comm));
  comm.struct_size = sizeof(comm);
  comm.rank = 1;
  comm.size = 2;
  comm.start = failingStart;
  comm.wait = neverWait;
  comm.last_error = linkDown;
  ampc_model *model = load(AMPC_DP_MLP_RANK_LIBRARY, &comm);
  ASSERT_TRUE(model);
  std::vector<float> x(kRankBatch * kFeatures, 0.5f);
  std::vector<int64_t> y(kRankBatch, 1);
  int64_t xShape[] = {kRankBatch, kFeatures}, yShape[] = {kRankBatch};
  ampc_tensor inputs[] = {
      {AMPC_DTYPE_F32, 2, xShape, x.data(), sizeof(float) * x.size()},
      {AMPC_DTYPE_I64, 1, yShape, y.data(), sizeof(int64_t) * y.size()}};
  float loss;
  ampc_tensor lossTensor = {AMPC_DTYPE_F32, 0, nullptr, &loss, sizeof(loss)};
  EXPECT_EQ(ampc_model_train_step(model, inputs, 2, &lossTensor),
            AMPC_ERROR_EXECUTION);
  EXPECT_NE(std::strstr(ampc_last_error(), "rank 1: fake: link down"),
            nullptr)
      << ampc_last_error();
  EXPECT_EQ(dataParallel(model).bytes, 0u) << "a failed start sent nothing";
  ampc_model_release(model);

  comm.last_error = noMessage;
  model = load(AMPC_DP_MLP_RANK_LIBRARY, &comm);
  ASSERT_TRUE(model);
  EXPECT_EQ(ampc_model_train_step(model, inputs, 2, &lossTensor),
            AMPC_ERROR_EXECUTION);
  EXPECT_NE(std::strstr(ampc_last_error(),
                        "rank 1: the application's communicator failed (no "
                        "message)"),
            nullptr)
      << ampc_last_error();
  ampc_model_release(model);
}

TEST(RuntimeComm, MisuseIsRefusedAtLoadWithOneLine) {
  ThreadJob job(2);
  struct Case {
    void (*change)(ampc_comm &);
    const char *message;
  };
  const Case cases[] = {
      {[](ampc_comm &c) { c.struct_size = 8; },
       "options->comm->struct_size is 8, this runtime knows"},
      {[](ampc_comm &c) { c.rank = 2; },
       "options->comm has rank 2 of size 2, expected 0 <= rank < size"},
      {[](ampc_comm &c) { c.rank = -1; }, "options->comm has rank -1 of size 2"},
      {[](ampc_comm &c) { c.size = 0, c.rank = 0; },
       "options->comm has rank 0 of size 0"},
      {[](ampc_comm &c) { c.start = nullptr; }, "options->comm->start is NULL"},
      {[](ampc_comm &c) { c.wait = nullptr; }, "options->comm->wait is NULL"},
      {[](ampc_comm &c) { c.last_error = nullptr; },
       "options->comm->last_error is NULL"},
  };
  for (const Case &c : cases) {
    ampc_comm comm = job.comm(0);
    c.change(comm);
    ampc_model_options options;
    ampc_model_options_init(&options);
    options.comm = &comm;
    ampc_model *model = nullptr;
    EXPECT_EQ(ampc_model_load(AMPC_DP_MLP_RANK_LIBRARY, &options, &model),
              AMPC_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(model, nullptr);
    std::string error = ampc_last_error();
    EXPECT_EQ(error.rfind(std::string("ampc_model_load: ") + c.message, 0),
              0u)
        << error;
    EXPECT_EQ(error.find('\n'), std::string::npos);
  }
}

TEST(RuntimeComm, OptionsOfTheHeaderBeforeItMeanNone) {
  ampc_model_options options;
  ampc_model_options_init(&options);
  options.struct_size = offsetof(ampc_model_options, comm);
  // Past the older struct: never read.
  options.comm = reinterpret_cast<const ampc_comm *>(uintptr_t{8});
  ampc_model *model = nullptr;
  ASSERT_EQ(ampc_model_load(AMPC_DP_MLP_RANK_LIBRARY, &options, &model),
            AMPC_OK)
      << ampc_last_error();
  DataParallel d = dataParallel(model);
  EXPECT_EQ(d.size, 1);
  ampc_model_release(model);
}

TEST(RuntimeComm, ItReplacesMpirunsCommunicator) {
  // In mpirun's environment the runtime would load libampc_comm_mpi.so
  // (here a path that does not exist); the application's is used instead.
  const char *names[] = {"OMPI_COMM_WORLD_SIZE", "AMPC_COMM_LIBRARY"};
  std::string saved[2];
  bool had[2];
  for (int i = 0; i < 2; ++i) {
    const char *value = std::getenv(names[i]);
    had[i] = value != nullptr;
    saved[i] = value ? value : "";
  }
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  setenv("AMPC_COMM_LIBRARY", "/nonexistent/libampc_comm_mpi.so", 1);

  ampc_model *model = nullptr;
  EXPECT_EQ(ampc_model_load(AMPC_DP_MLP_RANK_LIBRARY, nullptr, &model),
            AMPC_ERROR_UNSUPPORTED)
      << "without a communicator the runtime wants the job's";
  ThreadJob job(2);
  ampc_comm comm = job.comm(1);
  model = load(AMPC_DP_MLP_RANK_LIBRARY, &comm);
  EXPECT_NE(model, nullptr);
  if (model) {
    DataParallel d = dataParallel(model);
    EXPECT_EQ(d.rank, 1);
    EXPECT_EQ(d.size, 2);
    ampc_model_release(model);
  }
  for (int i = 0; i < 2; ++i)
    if (had[i])
      setenv(names[i], saved[i].c_str(), 1);
    else
      unsetenv(names[i]);
}

//===----------------------------------------------------------------------===//
// The TCP rendezvous
//===----------------------------------------------------------------------===//

/// A TCP port nothing listens on now (the kernel's choice for port 0).
int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&address), length), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr *>(&address), &length),
            0);
  ::close(fd);
  return ntohs(address.sin_port);
}

/// Runs `size` ranks as threads; each gets its own buffer (rank 0's holds
/// the bytes) and its error.
struct Ranks {
  std::vector<std::vector<unsigned char>> buffers;
  std::vector<std::string> errors;
};
Ranks broadcast(int size, int port, int timeoutMs,
                const std::vector<int> &present, int claimedSize = -1) {
  Ranks ranks;
  ranks.buffers.assign(size, std::vector<unsigned char>(128, 0));
  for (size_t i = 0; i < 128; ++i)
    ranks.buffers[0][i] = static_cast<unsigned char>(i * 7 + 3);
  ranks.errors.assign(size, "(not run)");
  std::vector<std::thread> threads;
  for (int rank : present)
    threads.emplace_back([&, rank] {
      ranks.errors[rank] = ampc::tcpBroadcast(
          "127.0.0.1", port, rank,
          rank == size - 1 && claimedSize > 0 ? claimedSize : size,
          ranks.buffers[rank].data(), 128, timeoutMs);
    });
  for (std::thread &t : threads)
    t.join();
  return ranks;
}

TEST(RuntimeRendezvous, RankZerosBytesReachEveryRank) {
  // Ranks 3, 2 and 1 start before rank 0 listens: they retry.
  Ranks ranks = broadcast(4, freePort(), 20000, {3, 2, 1, 0});
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(ranks.errors[rank], "") << "rank " << rank;
    EXPECT_EQ(ranks.buffers[rank], ranks.buffers[0]) << "rank " << rank;
  }
  EXPECT_EQ(ranks.buffers[0][5], 5 * 7 + 3);
  // One rank alone has nothing to exchange.
  unsigned char byte = 1;
  EXPECT_EQ(ampc::tcpBroadcast("127.0.0.1", 1, 0, 1, &byte, 1, 0), "");
}

TEST(RuntimeRendezvous, AMissingRankIsNamedAfterTheTimeout) {
  const int port = freePort();
  Ranks ranks = broadcast(3, port, 600, {0, 1});
  EXPECT_EQ(ranks.errors[1], "");
  EXPECT_EQ(ranks.errors[0],
            "rank 0 (port " + std::to_string(port) +
                "): rank 2 did not connect before the timeout");
  // Without rank 0, a rank gives up.
  unsigned char bytes[4];
  const std::string alone =
      ampc::tcpBroadcast("127.0.0.1", freePort(), 1, 2, bytes, 4, 300);
  EXPECT_NE(alone.find("rank 1: could not reach rank 0 at 127.0.0.1:"),
            std::string::npos)
      << alone;
  EXPECT_NE(alone.find("before the timeout"), std::string::npos) << alone;
}

TEST(RuntimeRendezvous, RanksThatDisagreeAreRefused) {
  // The last rank believes the job has 5 ranks.
  Ranks ranks = broadcast(3, freePort(), 2000, {0, 1, 2}, 5);
  const std::string &served = ranks.errors[0];
  EXPECT_NE(served.find("rank 2 says the job has 5 ranks, rank 0 3"),
            std::string::npos)
      << served;
  EXPECT_NE(ranks.errors[2].find(
                "rank 2: rank 0 refused it: rank 2 says the job has 5 ranks"),
            std::string::npos)
      << ranks.errors[2];
  unsigned char byte = 0;
  EXPECT_EQ(ampc::tcpBroadcast("127.0.0.1", 70000, 0, 2, &byte, 1, 10),
            "rank 0: port 70000 is not a TCP port");
  EXPECT_EQ(ampc::tcpBroadcast("127.0.0.1", 1000, 3, 2, &byte, 1, 10),
            "rank 3 is not in a job of 2");
}

} // namespace
