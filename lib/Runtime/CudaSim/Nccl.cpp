//===- Nccl.cpp - the NCCL calls of the CUDA target, on the CPU over MPI --===//
//
// libampc_cudasim_nccl.so (issue 41): the part of NCCL that the CUDA
// target's communicator (lib/Runtime/NcclComm.cpp) calls, defined against
// NCCL's own declarations (nccl.h), so that the plugin built against it
// (libampc_comm_nccl_sim.so) runs a data-parallel --target=cuda-sim
// library's ranks under `mpirun`: ncclGetUniqueId, ncclCommInitRank,
// ncclAllReduce (ncclSum of half, bfloat16, float and double),
// ncclCommDestroy, ncclGetErrorString. A library of its own, so that the
// CUDA execution (libampc_cudasim) needs no MPI.
//
// As unforgiving as the execution: a communicator must be live (made by
// ncclCommInitRank, not destroyed), the buffers live device memory of
// `count` elements (in place, or not overlapping), the type and the
// operation ones this subset sums; a refusal returns ncclInvalidArgument
// (ncclInvalidUsage for a dead communicator) with a message on stderr and
// in ncclGetLastError. The ranks of a unique id find each other through
// MPI_COMM_WORLD (MPI_Comm_split by the id, ordered by rank; every rank
// must pass the same count of ranks). The sum is queued on the stream as
// the execution queues a kernel (counted as kernel "ncclAllReduce") and
// runs in stream order: MPI_Allreduce in place, FP16 and BF16 widened to
// FP32, added and rounded to nearest even per pair, as
// libampc_comm_mpi.so sums them, so the two communicators give the same
// bits.
//
//===----------------------------------------------------------------------===//

#include "Sim.h"

#include "../MpiHalfSums.h"

#include <nccl.h>

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unistd.h>
#include <vector>

struct ncclComm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, ranks = 0, device = 0;
};

namespace {

std::mutex mutex;
std::vector<std::unique_ptr<ncclComm>> comms; // live
std::string lastMessage;
/// The FP16/BF16 sums: libampc_comm_mpi.so's, so the two give the same
/// bits.
ampc::mpi::HalfSums halfSums;

ncclResult_t refuse(ncclResult_t result, const std::string &message) {
  lastMessage = message;
  std::fprintf(stderr, "ampc cuda-sim: %s\n", message.c_str());
  return result;
}

bool live(const ncclComm *comm) {
  for (auto &owned : comms)
    if (owned.get() == comm)
      return true;
  return false;
}

} // namespace

extern "C" {

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess: return "no error";
  case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
  case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
  case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
  case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case ncclRemoteError: return "remote process exited or there was a network error";
  case ncclInProgress: return "NCCL operation in progress";
  default: return "unknown result code";
  }
}

const char *ncclGetLastError(ncclComm_t) { return lastMessage.c_str(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
  if (!uniqueId)
    return refuse(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  // Unique per call: the process, the time and a counter.
  static uint64_t calls = 0;
  std::memset(uniqueId, 0, sizeof *uniqueId);
  uint64_t words[3] = {
      static_cast<uint64_t>(getpid()),
      static_cast<uint64_t>(
          std::chrono::steady_clock::now().time_since_epoch().count()),
      ++calls};
  std::memcpy(uniqueId->internal, words, sizeof words);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks,
                              ncclUniqueId commId, int rank) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!comm)
    return refuse(ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return refuse(ncclInvalidArgument,
                  "ncclCommInitRank: rank " + std::to_string(rank) + " of " +
                      std::to_string(nranks) + " ranks");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    return refuse(ncclInvalidUsage, "ncclCommInitRank: the CUDA execution's "
                                    "NCCL runs over MPI, which is not "
                                    "initialized");
  halfSums.create();
  // The ranks of this id: a colour from its bytes, ordered by `rank`.
  uint32_t colour = 2166136261u;
  for (char c : commId.internal)
    colour = (colour ^ static_cast<unsigned char>(c)) * 16777619u;
  auto owned = std::make_unique<ncclComm>();
  if (MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(colour & 0x7fffffff),
                     rank, &owned->comm) != MPI_SUCCESS)
    return refuse(ncclSystemError, "ncclCommInitRank: MPI_Comm_split failed");
  MPI_Comm_set_errhandler(owned->comm, MPI_ERRORS_RETURN);
  int size = 0, mine = 0, most = 0, least = 0;
  MPI_Comm_size(owned->comm, &size);
  MPI_Comm_rank(owned->comm, &mine);
  MPI_Allreduce(&nranks, &most, 1, MPI_INT, MPI_MAX, owned->comm);
  MPI_Allreduce(&nranks, &least, 1, MPI_INT, MPI_MIN, owned->comm);
  if (size != nranks || mine != rank || most != least) {
    MPI_Comm_free(&owned->comm);
    return refuse(ncclInvalidUsage,
                  "ncclCommInitRank: rank " + std::to_string(rank) + " of " +
                      std::to_string(nranks) + ", but " +
                      std::to_string(size) +
                      " processes passed this unique id (ranks " +
                      std::to_string(least) + " to " + std::to_string(most) +
                      ")");
  }
  owned->rank = rank;
  owned->ranks = nranks;
  owned->device = ampc::sim::currentDevice();
  *comm = owned.get();
  comms.push_back(std::move(owned));
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!live(comm))
    return refuse(ncclInvalidUsage, "ncclCommDestroy: the communicator is "
                                    "not live");
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Comm_free(&comm->comm);
  for (auto it = comms.begin(); it != comms.end(); ++it)
    if (it->get() == comm) {
      comms.erase(it);
      break;
    }
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!live(comm))
    return refuse(ncclInvalidUsage,
                  "ncclAllReduce: the communicator is not live (never made "
                  "by ncclCommInitRank, or destroyed)");
  MPI_Datatype type = MPI_FLOAT;
  MPI_Op sum = MPI_SUM;
  size_t width = 4;
  switch (datatype) {
  case ncclFloat32:
    break;
  case ncclFloat64:
    type = MPI_DOUBLE, width = 8;
    break;
  case ncclFloat16:
    type = MPI_UINT16_T, sum = halfSums.f16, width = 2;
    break;
  case ncclBfloat16:
    type = MPI_UINT16_T, sum = halfSums.bf16, width = 2;
    break;
  default:
    return refuse(ncclInvalidArgument,
                  "ncclAllReduce: data type " + std::to_string(datatype) +
                      " (the CUDA execution sums half, bfloat16, float "
                      "and double)");
  }
  if (op != ncclSum)
    return refuse(ncclInvalidArgument,
                  "ncclAllReduce: reduction " + std::to_string(op) +
                      " (the CUDA execution sums only: ncclSum)");
  if (count > static_cast<size_t>(INT32_MAX))
    return refuse(ncclInvalidArgument,
                  "ncclAllReduce: " + std::to_string(count) +
                      " elements (at most 2^31 - 1 here)");
  const size_t bytes = count * width;
  if (!ampc::sim::checkDevice(sendbuff, bytes, "ncclAllReduce", "sendbuff") ||
      !ampc::sim::checkDevice(recvbuff, bytes, "ncclAllReduce", "recvbuff")) {
    // NCCL answers by its result, not through CUDA's last error (the
    // check has printed the message).
    std::string detail = cudaGetErrorString(cudaGetLastError());
    lastMessage = detail.substr(detail.find(": ") + 2);
    return ncclInvalidArgument;
  }
  if (sendbuff != recvbuff &&
      ampc::sim::overlaps(sendbuff, bytes, recvbuff, bytes))
    return refuse(ncclInvalidArgument,
                  "ncclAllReduce: sendbuff and recvbuff overlap without "
                  "being the same buffer");
  if (comm->device != ampc::sim::currentDevice())
    return refuse(ncclInvalidUsage,
                  "ncclAllReduce: the communicator is device " +
                      std::to_string(comm->device) +
                      "'s, the current device is " +
                      std::to_string(ampc::sim::currentDevice()));
  MPI_Comm mpi = comm->comm;
  const int rank = comm->rank;
  cudaError_t e = ampc::sim::enqueue(
      stream, "ncclAllReduce", ampc::sim::Work::Kernel, "ncclAllReduce",
      [=]() -> cudaError_t {
        if (sendbuff != recvbuff)
          std::memcpy(recvbuff, sendbuff, bytes);
        int code = MPI_Allreduce(MPI_IN_PLACE, recvbuff,
                                 static_cast<int>(count), type, sum, mpi);
        if (code == MPI_SUCCESS)
          return cudaSuccess;
        char text[MPI_MAX_ERROR_STRING] = "";
        int length = 0;
        MPI_Error_string(code, text, &length);
        return ampc::sim::fail(cudaErrorLaunchFailure,
                               "ncclAllReduce on rank " +
                                   std::to_string(rank) + ": " + text);
      });
  if (e != cudaSuccess)
    return refuse(ncclUnhandledCudaError,
                  std::string("ncclAllReduce: ") + cudaGetErrorString(e));
  return ncclSuccess;
}

} // extern "C"
