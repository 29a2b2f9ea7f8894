//===- Nccl.cpp - the NCCL calls of the CUDA target, on the CPU over MPI --===//
//
// libampc_cudasim_nccl.so (issue 41): the part of NCCL that the CUDA
// target's communicator (lib/Runtime/NcclComm.cpp) calls, defined against
// NCCL's own declarations (nccl.h), so that the plugin built against it
// (libampc_comm_nccl_sim.so) runs a data-parallel --target=cuda-sim
// library's ranks under `mpirun`: ncclGetUniqueId, ncclCommInitRank,
// ncclAllReduce, ncclReduceScatter (ncclSum of half, bfloat16, float and
// double) and ncclAllGather (ZeRO-1's), ncclCommDestroy, ncclGetErrorString. A library of its own, so that the
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

} // extern "C"

namespace {

/// The collectives of this subset.
enum class Collective { AllReduce, ReduceScatter, AllGather };

/// Checks one collective's arguments as NCCL's and the execution's rules
/// have them, and queues it on `stream`: `sendBytes` at `sendbuff` (the
/// rank's input), `recvBytes` at `recvbuff`; `count` the elements NCCL's
/// call names (all-reduce: each buffer's; reduce-scatter: the received
/// block's; all-gather: the sent block's). In place when `sendbuff` is
/// where NCCL's in-place form puts it: the same buffer (all-reduce), the
/// rank's block of the buffer (the other two).
ncclResult_t collective(Collective kind, const char *call,
                        const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op,
                        ncclComm_t comm, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex);
  const std::string name = call;
  if (!live(comm))
    return refuse(ncclInvalidUsage,
                  name + ": the communicator is not live (never made by "
                         "ncclCommInitRank, or destroyed)");
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
                  name + ": data type " + std::to_string(datatype) +
                      " (the CUDA execution sums half, bfloat16, float "
                      "and double)");
  }
  if (kind != Collective::AllGather && op != ncclSum)
    return refuse(ncclInvalidArgument,
                  name + ": reduction " + std::to_string(op) +
                      " (the CUDA execution sums only: ncclSum)");
  const size_t ranks = static_cast<size_t>(comm->ranks);
  const size_t total = kind == Collective::AllReduce ? count : count * ranks;
  if (total > static_cast<size_t>(INT32_MAX))
    return refuse(ncclInvalidArgument,
                  name + ": " + std::to_string(total) +
                      " elements (at most 2^31 - 1 here)");
  const size_t block = count * width;
  const size_t sendBytes =
      kind == Collective::ReduceScatter ? total * width : block;
  const size_t recvBytes =
      kind == Collective::AllGather ? total * width : block;
  if (!ampc::sim::checkDevice(sendbuff, sendBytes, call, "sendbuff") ||
      !ampc::sim::checkDevice(recvbuff, recvBytes, call, "recvbuff")) {
    // NCCL answers by its result, not through CUDA's last error (the
    // check has printed the message).
    std::string detail = cudaGetErrorString(cudaGetLastError());
    lastMessage = detail.substr(detail.find(": ") + 2);
    return ncclInvalidArgument;
  }
  const size_t mine = static_cast<size_t>(comm->rank) * block;
  const void *inPlace =
      kind == Collective::AllReduce ? recvbuff
      : kind == Collective::ReduceScatter
          ? static_cast<const void *>(static_cast<const char *>(sendbuff) +
                                      mine)
          : static_cast<const void *>(static_cast<const char *>(recvbuff) +
                                      mine);
  bool isInPlace = kind == Collective::ReduceScatter ? recvbuff == inPlace
                                                     : sendbuff == inPlace;
  if (!isInPlace &&
      ampc::sim::overlaps(sendbuff, sendBytes, recvbuff, recvBytes))
    return refuse(ncclInvalidArgument,
                  name + ": sendbuff and recvbuff overlap without being "
                         "the in-place form");
  if (comm->device != ampc::sim::currentDevice())
    return refuse(ncclInvalidUsage,
                  name + ": the communicator is device " +
                      std::to_string(comm->device) +
                      "'s, the current device is " +
                      std::to_string(ampc::sim::currentDevice()));
  MPI_Comm mpi = comm->comm;
  const int rank = comm->rank;
  const int elements = static_cast<int>(count);
  cudaError_t e = ampc::sim::enqueue(
      stream, call, ampc::sim::Work::Kernel, call, [=]() -> cudaError_t {
        int code = MPI_SUCCESS;
        // The input copied first: in place, MPI's in-place forms put the
        // blocks elsewhere than NCCL's.
        std::vector<unsigned char> input(
            static_cast<const unsigned char *>(sendbuff),
            static_cast<const unsigned char *>(sendbuff) + sendBytes);
        switch (kind) {
        case Collective::AllReduce:
          std::memcpy(recvbuff, input.data(), sendBytes);
          code = MPI_Allreduce(MPI_IN_PLACE, recvbuff, elements, type, sum,
                               mpi);
          break;
        case Collective::ReduceScatter:
          code = MPI_Reduce_scatter_block(input.data(), recvbuff, elements,
                                          type, sum, mpi);
          break;
        case Collective::AllGather:
          code = MPI_Allgather(input.data(), elements, type, recvbuff,
                               elements, type, mpi);
          break;
        }
        if (code == MPI_SUCCESS)
          return cudaSuccess;
        char text[MPI_MAX_ERROR_STRING] = "";
        int length = 0;
        MPI_Error_string(code, text, &length);
        return ampc::sim::fail(cudaErrorLaunchFailure,
                               name + " on rank " + std::to_string(rank) +
                                   ": " + text);
      });
  if (e != cudaSuccess)
    return refuse(ncclUnhandledCudaError,
                  name + ": " + cudaGetErrorString(e));
  return ncclSuccess;
}

} // namespace

extern "C" {

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return collective(Collective::AllReduce, "ncclAllReduce", sendbuff,
                    recvbuff, count, datatype, op, comm, stream);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff,
                               size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return collective(Collective::ReduceScatter, "ncclReduceScatter", sendbuff,
                    recvbuff, recvcount, datatype, op, comm, stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff,
                           size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return collective(Collective::AllGather, "ncclAllGather", sendbuff,
                    recvbuff, sendcount, datatype, ncclSum, comm, stream);
}

} // extern "C"
