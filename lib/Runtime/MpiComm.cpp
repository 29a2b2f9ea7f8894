//===- MpiComm.cpp - the data-parallel communicator on MPI ----------------===//
//
// libampc_comm_mpi.so (issue 41, docs/distributed.md): the ampc_abi_comm a
// data-parallel CPU library all-reduces its gradient buckets with, on the
// MPI of the job (Debian's Open MPI under `mpirun`). The runtime loads it
// only when a data-parallel library is loaded in a job of more than one
// rank, so neither the runtime nor a single-process application needs MPI.
// Each communicator is a duplicate of MPI_COMM_WORLD (two models in one
// process never see each other's messages); FP16 and BF16 are summed by
// user operations that widen each pair to FP32, add and round to nearest
// even, so every rank gets the same bits (MPI's reduction is the same on
// every rank for a commutative operation). ZeRO-1's reduce-scatter and
// all-gather (--shard-optimizer) are MPI_Ireduce_scatter_block and
// MPI_Iallgather in place, on the same requests and waits. Errors return
// (MPI_ERRORS_RETURN) with the rank in the message.
//
// Failures do not hang: a wait gives up after the timeout the runtime sets
// (AMPC_COMM_TIMEOUT), asks the other ranks on a second duplicate which
// all-reduce they are in, and fails naming those that did not answer. MPI
// cannot cancel a collective, so the communicator stays broken (every later
// call fails with the same message) and at exit the plugin ends the job with
// MPI_Abort instead of an MPI_Finalize that would wait for the missing rank.
//
//===----------------------------------------------------------------------===//

#include "MpiHalfSums.h"
#include "ampc/Runtime/ModelAbi.h"

// MPI's C API only (Open MPI's and MPICH's headers otherwise pull in the
// C++ bindings, which need a library of their own).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#define AMPC_COMM_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct MpiComm {
  ampc_abi_comm abi;
  MPI_Comm comm = MPI_COMM_NULL;
  /// The ranks' answers after a timeout (which all-reduce each is in).
  MPI_Comm probe = MPI_COMM_NULL;
  std::vector<MPI_Request> requests;
  std::string error;
  /// Bytes of the buffers all-reduced or reduce-scattered, and of the
  /// blocks all-gathered (each rank's contribution).
  uint64_t bytes = 0;
  /// What a request's wait does after MPI finished it: move `bytes` at
  /// `buffer` to `buffer + to` (an in-place reduce-scatter's block).
  struct Move {
    unsigned char *buffer = nullptr;
    uint64_t to = 0, bytes = 0;
  };
  std::vector<Move> moves;
  /// All-reduces started so far; the one request r is at, for the answers.
  uint64_t started = 0;
  std::vector<uint64_t> sequence;
  /// Seconds a wait waits (0: forever).
  double timeout = 600;
  /// After a timeout: the communicator is unusable; every call fails.
  bool broken = false;
  /// The answers' buffers and requests; kept (with the communicator, which
  /// a broken one never frees) since MPI may still write into them.
  uint64_t probeSent = 0;
  std::vector<uint64_t> probeAnswers;
  std::vector<MPI_Request> probeRequests;
};

ampc::mpi::HalfSums halfSums;
/// Set by a timeout: exit ends the job (MPI_Abort) rather than finalizing.
bool abortAtExit = false;

void finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  if (abortAtExit) {
    // The missing rank may never finalize: end the job (mpirun stops the
    // other ranks) instead of waiting for it.
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
}

/// Sets `c.error` to "rank R: WHAT: MPI's message" and returns 1.
int32_t fail(MpiComm &c, const char *what, int code) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int length = 0;
  MPI_Error_string(code, text, &length);
  c.error = "rank " + std::to_string(c.abi.rank) + ": " + what + ": " + text;
  return 1;
}

/// The collectives a request may be.
enum class Collective { AllReduce, ReduceScatter, AllGather };

const char *nameOf(Collective kind) {
  switch (kind) {
  case Collective::AllReduce:
    return "all-reduce";
  case Collective::ReduceScatter:
    return "reduce-scatter";
  case Collective::AllGather:
    return "all-gather";
  }
  return "collective";
}

/// Starts collective `kind` of `count` elements of `dtype` at `buffer` in
/// place as request `request`.
int32_t post(MpiComm &c, Collective kind, int32_t request, void *buffer,
             uint64_t count, int32_t dtype) {
  if (c.broken)
    return 1;
  std::string rank = "rank " + std::to_string(c.abi.rank) + ": ";
  MPI_Datatype type = MPI_FLOAT;
  MPI_Op op = MPI_SUM;
  uint64_t width = 4;
  switch (dtype) {
  case AMPC_DTYPE_F32:
    break;
  case AMPC_DTYPE_F64:
    type = MPI_DOUBLE, width = 8;
    break;
  case AMPC_DTYPE_F16:
    type = MPI_UINT16_T, op = halfSums.f16, width = 2;
    break;
  case AMPC_DTYPE_BF16:
    type = MPI_UINT16_T, op = halfSums.bf16, width = 2;
    break;
  default:
    c.error = rank + nameOf(kind) + " of dtype " + std::to_string(dtype) +
              ", which the communicator does not " +
              (kind == Collective::AllGather ? "gather" : "sum");
    return 1;
  }
  if (request < 0 || count > static_cast<uint64_t>(INT32_MAX)) {
    c.error = rank + nameOf(kind) + " request " + std::to_string(request) +
              " of " + std::to_string(count) + " elements is out of range";
    return 1;
  }
  uint64_t size = static_cast<uint64_t>(c.abi.size);
  if (kind != Collective::AllReduce && count % size != 0) {
    c.error = rank + nameOf(kind) + " request " + std::to_string(request) +
              " of " + std::to_string(count) +
              " elements, not a multiple of the " + std::to_string(size) +
              " ranks";
    return 1;
  }
  if (static_cast<size_t>(request) >= c.requests.size()) {
    c.requests.resize(request + 1, MPI_REQUEST_NULL);
    c.sequence.resize(request + 1, 0);
    c.moves.resize(request + 1);
  }
  if (c.requests[request] != MPI_REQUEST_NULL) {
    c.error = rank + nameOf(kind) + " request " + std::to_string(request) +
              " started twice";
    return 1;
  }
  int block = static_cast<int>(count / size);
  int code = MPI_SUCCESS;
  const char *call = "MPI_Iallreduce";
  c.moves[request] = {};
  switch (kind) {
  case Collective::AllReduce:
    code = MPI_Iallreduce(MPI_IN_PLACE, buffer, static_cast<int>(count), type,
                          op, c.comm, &c.requests[request]);
    c.bytes += count * width;
    break;
  case Collective::ReduceScatter:
    // MPI leaves an in-place reduce-scatter's block at the buffer's start;
    // the wait moves it to the rank's place (the ABI's, NCCL's).
    call = "MPI_Ireduce_scatter_block";
    code = MPI_Ireduce_scatter_block(MPI_IN_PLACE, buffer, block, type, op,
                                     c.comm, &c.requests[request]);
    c.moves[request] = {static_cast<unsigned char *>(buffer),
                        static_cast<uint64_t>(c.abi.rank) * block * width,
                        block * width};
    c.bytes += count * width;
    break;
  case Collective::AllGather:
    call = "MPI_Iallgather";
    code = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer, block,
                          type, c.comm, &c.requests[request]);
    c.bytes += block * width;
    break;
  }
  if (code != MPI_SUCCESS)
    return fail(c, call, code);
  c.sequence[request] = ++c.started;
  return 0;
}

int32_t start(void *handle, int32_t request, void *buffer, uint64_t count,
              int32_t dtype) {
  return post(*static_cast<MpiComm *>(handle), Collective::AllReduce, request,
              buffer, count, dtype);
}

int32_t reduceScatter(void *handle, int32_t request, void *buffer,
                      uint64_t count, int32_t dtype) {
  return post(*static_cast<MpiComm *>(handle), Collective::ReduceScatter,
              request, buffer, count, dtype);
}

int32_t allGather(void *handle, int32_t request, void *buffer, uint64_t count,
                  int32_t dtype) {
  return post(*static_cast<MpiComm *>(handle), Collective::AllGather, request,
              buffer, count, dtype);
}

/// After request `request` finished: a reduce-scatter's block moved from
/// the buffer's start to the rank's place.
void finish(MpiComm &c, int32_t request) {
  MpiComm::Move &m = c.moves[request];
  if (m.buffer && m.to)
    std::memmove(m.buffer + m.to, m.buffer, m.bytes);
  m = {};
}

/// After request `request` timed out: every rank that timed out too sends
/// the all-reduce it waits in (its count of started all-reduces) to every
/// other; the ranks that do not answer within a grace period (1 s, at most
/// the timeout) never reached it. Breaks the communicator with the message.
int32_t timedOut(MpiComm &c, int32_t request) {
  int size = c.abi.size, rank = c.abi.rank;
  const uint64_t mine = c.probeSent = c.sequence[request];
  std::vector<uint64_t> &theirs = c.probeAnswers;
  std::vector<MPI_Request> &pending = c.probeRequests;
  theirs.assign(size, 0);
  pending.assign(2 * size, MPI_REQUEST_NULL);
  for (int peer = 0, i = 0; peer < size; ++peer) {
    if (peer == rank)
      continue;
    MPI_Irecv(&theirs[peer], 1, MPI_UINT64_T, peer, 0, c.probe, &pending[i]);
    MPI_Isend(&c.probeSent, 1, MPI_UINT64_T, peer, 0, c.probe,
              &pending[i + 1]);
    i += 2;
  }
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(std::min(c.timeout, 1.0));
  std::vector<bool> answered(size, false);
  answered[rank] = true;
  int left = size - 1;
  while (left > 0 && std::chrono::steady_clock::now() < deadline) {
    for (int i = 0, peer = 0; peer < size; ++peer) {
      if (peer == rank)
        continue;
      int done = 0;
      if (!answered[peer] && pending[i] != MPI_REQUEST_NULL &&
          MPI_Test(&pending[i], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
          done)
        answered[peer] = true, --left;
      i += 2;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::string missing, elsewhere;
  for (int peer = 0; peer < size; ++peer) {
    if (!answered[peer])
      missing += (missing.empty() ? "" : ", ") + std::to_string(peer);
    else if (peer != rank && theirs[peer] != mine)
      elsewhere += (elsewhere.empty() ? "" : ", ") + std::to_string(peer) +
                   " (in all-reduce " + std::to_string(theirs[peer]) + ")";
  }
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", c.timeout);
  c.error = "rank " + std::to_string(rank) + ": the all-reduce of bucket " +
            std::to_string(request) + " (all-reduce " + std::to_string(mine) +
            " of this communicator) did not finish within " + seconds +
            " s (AMPC_COMM_TIMEOUT)";
  if (!missing.empty())
    c.error += "; rank" + std::string(missing.find(',') == std::string::npos
                                          ? " "
                                          : "s ") +
               missing + " did not reach it (stopped, failed or slower than "
                         "the timeout)";
  if (!elsewhere.empty())
    c.error += "; in another all-reduce: rank " + elsewhere;
  c.broken = true;
  abortAtExit = true;
  return 1;
}

int32_t wait(void *handle, int32_t request) {
  auto &c = *static_cast<MpiComm *>(handle);
  if (c.broken)
    return 1;
  if (request < 0 || static_cast<size_t>(request) >= c.requests.size() ||
      c.requests[request] == MPI_REQUEST_NULL) {
    c.error = "rank " + std::to_string(c.abi.rank) + ": all-reduce request " +
              std::to_string(request) + " waited for but never started";
    return 1;
  }
  if (c.timeout <= 0) {
    int code = MPI_Wait(&c.requests[request], MPI_STATUS_IGNORE);
    c.requests[request] = MPI_REQUEST_NULL;
    if (code != MPI_SUCCESS)
      return fail(c, "MPI_Wait", code);
    finish(c, request);
    return 0;
  }
  // MPI_Test until done or the deadline; after a while of spinning, with
  // short sleeps (a long wait is another rank's lag, not the network's).
  auto begin = std::chrono::steady_clock::now();
  auto deadline = begin + std::chrono::duration<double>(c.timeout);
  for (;;) {
    int done = 0;
    int code = MPI_Test(&c.requests[request], &done, MPI_STATUS_IGNORE);
    if (code != MPI_SUCCESS) {
      c.requests[request] = MPI_REQUEST_NULL;
      return fail(c, "MPI_Test", code);
    }
    if (done) {
      finish(c, request);
      return 0;
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      return timedOut(c, request);
    if (now - begin > std::chrono::milliseconds(10))
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

const char *lastError(void *handle) {
  return static_cast<MpiComm *>(handle)->error.c_str();
}

} // namespace

/// A communicator over every rank of the MPI job (MPI initialized here
/// when the application has not, and finalized at exit); null with a
/// one-line message in `error`.
AMPC_COMM_EXPORT const ampc_abi_comm *ampc_comm_mpi_create(char *error,
                                                            size_t size) {
  auto refuse = [&](const std::string &message) -> const ampc_abi_comm * {
    std::snprintf(error, size, "%s", message.c_str());
    return nullptr;
  };
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) !=
        MPI_SUCCESS)
      return refuse("MPI_Init_thread failed");
    std::atexit(finalize);
  }
  halfSums.create();
  auto *c = new MpiComm();
  if (MPI_Comm_dup(MPI_COMM_WORLD, &c->comm) != MPI_SUCCESS ||
      MPI_Comm_dup(MPI_COMM_WORLD, &c->probe) != MPI_SUCCESS) {
    delete c;
    return refuse("MPI_Comm_dup of MPI_COMM_WORLD failed");
  }
  MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(c->probe, MPI_ERRORS_RETURN);
  MPI_Comm_rank(c->comm, &c->abi.rank);
  MPI_Comm_size(c->comm, &c->abi.size);
  c->abi.struct_size = sizeof(ampc_abi_comm);
  c->abi.handle = c;
  c->abi.start = start;
  c->abi.wait = wait;
  c->abi.last_error = lastError;
  c->abi.reduce_scatter = reduceScatter;
  c->abi.all_gather = allGather;
  return &c->abi;
}

/// The bytes `comm` has all-reduced so far (this rank's buffers).
AMPC_COMM_EXPORT uint64_t ampc_comm_mpi_bytes(const ampc_abi_comm *comm) {
  return static_cast<const MpiComm *>(comm->handle)->bytes;
}

/// Sets how long a wait waits before it fails (seconds; 0: forever).
AMPC_COMM_EXPORT void ampc_comm_mpi_set_timeout(const ampc_abi_comm *comm,
                                                double seconds) {
  static_cast<MpiComm *>(comm->handle)->timeout = seconds;
}

AMPC_COMM_EXPORT void ampc_comm_mpi_release(const ampc_abi_comm *comm) {
  auto *c = static_cast<MpiComm *>(comm->handle);
  // A broken communicator's requests never finish: its buffers stay with
  // MPI, which the exit aborts.
  if (c->broken)
    return;
  for (MPI_Request &r : c->requests)
    if (r != MPI_REQUEST_NULL)
      MPI_Wait(&r, MPI_STATUS_IGNORE);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    MPI_Comm_free(&c->comm);
    MPI_Comm_free(&c->probe);
  }
  delete c;
}
