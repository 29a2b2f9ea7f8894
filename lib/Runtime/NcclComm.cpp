//===- NcclComm.cpp - the data-parallel communicator on NCCL --------------===//
//
// libampc_comm_nccl.so (issue 41, docs/distributed.md): the ampc_abi_comm a
// data-parallel CUDA library all-reduces its gradient buckets with, on
// NCCL. The runtime loads it for a library whose target is "cuda" in a job
// of more than one rank (AMPC_COMM_LIBRARY overrides), as it loads
// libampc_comm_mpi.so for the CPU target. The rank and the number of ranks
// come from mpirun (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK) or torchrun
// (RANK, WORLD_SIZE, LOCAL_RANK); the rank binds the GPU of its local rank
// (cudaSetDevice, before the library's init allocates anything); rank 0's
// NCCL unique id reaches the others through MPI (initialized here when the
// application has not, finalized at exit) under mpirun, or through a TCP
// rendezvous (Rendezvous.h) where torchrun launched the job without MPI:
// rank 0 listens on MASTER_PORT + 1 (AMPC_RENDEZVOUS_PORT overrides;
// torchrun's own store holds MASTER_PORT) and the others connect to
// MASTER_ADDR, within AMPC_COMM_TIMEOUT seconds (default 600). The all-reduce is
// start_on_stream: ncclAllReduce(ncclSum) in place on the library's
// communication stream, which a CUDA graph captures, and a host function
// after it that counts the bytes; errors name the rank. ZeRO-1's
// reduce_scatter_on_stream and all_gather_on_stream are ncclReduceScatter
// and ncclAllGather in place (the rank's block of the buffer), counted the
// same way; the host forms of the two are NULL. Built twice: on
// NCCL (libampc_comm_nccl.so) and on the CUDA execution's NCCL subset
// (libampc_comm_nccl_sim.so, CudaSim/Nccl.cpp).
//
//===----------------------------------------------------------------------===//

#include "ampc/Runtime/ModelAbi.h"

#include "Rendezvous.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

// MPI's C API only (Open MPI's and MPICH's headers otherwise pull in the
// C++ bindings, which need a library of their own).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#define AMPC_COMM_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct NcclComm {
  ampc_abi_comm abi;
  ncclComm_t comm = nullptr;
  std::string error;
  /// Bytes of the buffers all-reduced (each rank's contribution), added
  /// by a host function after each sum: a CUDA graph replays the sums
  /// without calling start_on_stream again.
  std::atomic<uint64_t> bytes{0};
  /// Per collective and request, what its host function adds.
  struct Sent {
    NcclComm *comm;
    uint64_t bytes;
  };
  std::vector<std::unique_ptr<Sent>> sent[3];
};

void countBytes(void *data) {
  auto *sent = static_cast<NcclComm::Sent *>(data);
  sent->comm->bytes += sent->bytes;
}

/// The first of `names` set to an integer in [0, 2^20], or -1.
int environmentInt(std::initializer_list<const char *> names) {
  for (const char *name : names)
    if (const char *value = std::getenv(name)) {
      char *end = nullptr;
      long v = std::strtol(value, &end, 10);
      if (end != value && *end == '\0' && v >= 0 && v <= 1 << 20)
        return static_cast<int>(v);
    }
  return -1;
}

void finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Finalize();
}

/// The collectives a request may be (each kind numbers its requests).
enum Collective { AllReduce, ReduceScatter, AllGather, NumCollectives };

/// Queues collective `kind` of `count` elements of `dtype` at `buffer` in
/// place on `stream`, and the host function that counts its bytes.
int32_t queue(NcclComm &c, Collective kind, int32_t request, void *buffer,
              uint64_t count, int32_t dtype, void *stream) {
  static const char *const names[] = {"all-reduce", "reduce-scatter",
                                      "all-gather"};
  static const char *const calls[] = {"ncclAllReduce", "ncclReduceScatter",
                                      "ncclAllGather"};
  const std::string rank = "rank " + std::to_string(c.abi.rank) + ": ";
  ncclDataType_t type;
  uint64_t width;
  switch (dtype) {
  case AMPC_DTYPE_F32:
    type = ncclFloat32, width = 4;
    break;
  case AMPC_DTYPE_F64:
    type = ncclFloat64, width = 8;
    break;
  case AMPC_DTYPE_F16:
    type = ncclFloat16, width = 2;
    break;
  case AMPC_DTYPE_BF16:
    type = ncclBfloat16, width = 2;
    break;
  default:
    c.error = rank + names[kind] + " of dtype " + std::to_string(dtype) +
              ", which the communicator does not " +
              (kind == AllGather ? "gather" : "sum");
    return 1;
  }
  if (request < 0) {
    c.error = rank + names[kind] + " request " + std::to_string(request);
    return 1;
  }
  const uint64_t ranks = static_cast<uint64_t>(c.abi.size);
  if (kind != AllReduce && count % ranks != 0) {
    c.error = rank + names[kind] + " request " + std::to_string(request) +
              " of " + std::to_string(count) +
              " elements, not a multiple of the " + std::to_string(ranks) +
              " ranks";
    return 1;
  }
  // In place, NCCL's way: the rank's block of the buffer.
  const uint64_t block = count / ranks;
  char *mine = static_cast<char *>(buffer) + c.abi.rank * block * width;
  auto *on = static_cast<cudaStream_t>(stream);
  ncclResult_t r =
      kind == AllReduce
          ? ncclAllReduce(buffer, buffer, count, type, ncclSum, c.comm, on)
      : kind == ReduceScatter
          ? ncclReduceScatter(buffer, mine, block, type, ncclSum, c.comm, on)
          : ncclAllGather(mine, buffer, block, type, c.comm, on);
  if (r != ncclSuccess) {
    const char *detail = ncclGetLastError(c.comm);
    c.error = rank + calls[kind] + " of request " + std::to_string(request) +
              ": " + ncclGetErrorString(r) +
              (detail && *detail ? std::string(" (") + detail + ")" : "");
    return 1;
  }
  auto &sent = c.sent[kind];
  if (static_cast<size_t>(request) >= sent.size())
    sent.resize(request + 1);
  if (!sent[request])
    sent[request].reset(new NcclComm::Sent{&c, 0});
  sent[request]->bytes = (kind == AllGather ? block : count) * width;
  if (cudaError_t e = cudaLaunchHostFunc(on, countBytes, sent[request].get());
      e != cudaSuccess) {
    c.error = rank + "cudaLaunchHostFunc: " + cudaGetErrorString(e);
    return 1;
  }
  return 0;
}

int32_t startOnStream(void *handle, int32_t request, void *buffer,
                      uint64_t count, int32_t dtype, void *stream) {
  return queue(*static_cast<NcclComm *>(handle), AllReduce, request, buffer,
               count, dtype, stream);
}

int32_t reduceScatterOnStream(void *handle, int32_t request, void *buffer,
                              uint64_t count, int32_t dtype, void *stream) {
  return queue(*static_cast<NcclComm *>(handle), ReduceScatter, request,
               buffer, count, dtype, stream);
}

int32_t allGatherOnStream(void *handle, int32_t request, void *buffer,
                          uint64_t count, int32_t dtype, void *stream) {
  return queue(*static_cast<NcclComm *>(handle), AllGather, request, buffer,
               count, dtype, stream);
}

/// Host memory (the runtime's check at load that every rank loaded the
/// same library: a few values): copied to the device, summed on a stream
/// of its own and copied back before it returns, so `wait` has nothing
/// left to do. The step's buckets use start_on_stream.
int32_t start(void *handle, int32_t request, void *buffer, uint64_t count,
              int32_t dtype) {
  auto &c = *static_cast<NcclComm *>(handle);
  const uint64_t width = dtype == AMPC_DTYPE_F64   ? 8
                         : dtype == AMPC_DTYPE_F32 ? 4
                                                   : 2;
  const size_t bytes = count * width;
  cudaStream_t stream = nullptr;
  void *device = nullptr;
  std::string failed;
  auto check = [&](const char *call, cudaError_t e) {
    if (e != cudaSuccess && failed.empty())
      failed = std::string(call) + ": " + cudaGetErrorString(e);
    return failed.empty();
  };
  int32_t code = 0;
  if (check("cudaStreamCreateWithFlags",
            cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) &&
      check("cudaMalloc", cudaMalloc(&device, bytes ? bytes : 1)) &&
      check("cudaMemcpyAsync", cudaMemcpyAsync(device, buffer, bytes,
                                               cudaMemcpyHostToDevice,
                                               stream))) {
    code = startOnStream(handle, request, device, count, dtype, stream);
    if (code == 0 &&
        check("cudaMemcpyAsync", cudaMemcpyAsync(buffer, device, bytes,
                                                 cudaMemcpyDeviceToHost,
                                                 stream)))
      check("cudaStreamSynchronize", cudaStreamSynchronize(stream));
  }
  if (device)
    cudaFree(device);
  if (stream)
    cudaStreamDestroy(stream);
  if (code != 0)
    return code;
  if (!failed.empty()) {
    c.error = "rank " + std::to_string(c.abi.rank) + ": a host buffer's " +
              "all-reduce: " + failed;
    return 1;
  }
  return 0;
}
/// A host buffer's sum was finished by `start`.
int32_t wait(void *, int32_t) { return 0; }

const char *lastError(void *handle) {
  return static_cast<NcclComm *>(handle)->error.c_str();
}

/// The communicator of `rank` of `ranks` on the unique id every rank now
/// holds; null with a one-line message in `error`.
const ampc_abi_comm *createOn(const ncclUniqueId &id, int rank, int ranks,
                              char *error, size_t size) {
  auto *c = new NcclComm();
  if (ncclResult_t r = ncclCommInitRank(&c->comm, ranks, id, rank);
      r != ncclSuccess) {
    delete c;
    std::snprintf(error, size, "rank %d: ncclCommInitRank: %s", rank,
                  ncclGetErrorString(r));
    return nullptr;
  }
  c->abi.struct_size = sizeof(ampc_abi_comm);
  c->abi.rank = rank;
  c->abi.size = ranks;
  c->abi.handle = c;
  c->abi.start = start;
  c->abi.wait = wait;
  c->abi.last_error = lastError;
  c->abi.start_on_stream = startOnStream;
  c->abi.reduce_scatter_on_stream = reduceScatterOnStream;
  c->abi.all_gather_on_stream = allGatherOnStream;
  return &c->abi;
}

} // namespace

/// A communicator over every rank of the job, on the GPU of this rank's
/// local rank; null with a one-line message (naming the rank) in `error`.
AMPC_COMM_EXPORT const ampc_abi_comm *ampc_comm_nccl_create(char *error,
                                                            size_t size) {
  int rank = environmentInt({"OMPI_COMM_WORLD_RANK", "RANK"});
  int ranks = environmentInt({"OMPI_COMM_WORLD_SIZE", "WORLD_SIZE"});
  int local = environmentInt({"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK"});
  auto refuse = [&](const std::string &message) -> const ampc_abi_comm * {
    std::snprintf(error, size, "rank %d: %s", rank, message.c_str());
    return nullptr;
  };
  if (rank < 0 || ranks < 1 || rank >= ranks)
    return refuse("the job's rank and size are not in the environment "
                  "(OMPI_COMM_WORLD_RANK/SIZE or RANK/WORLD_SIZE)");
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1)
    return refuse("no CUDA device");
  int device = local < 0 ? 0 : local;
  if (device >= devices)
    return refuse("local rank " + std::to_string(device) + " has no GPU (" +
                  std::to_string(devices) + " on this host)");
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess)
    return refuse(std::string("cudaSetDevice: ") + cudaGetErrorString(e));
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  // torchrun without mpirun: rank 0's unique id over TCP.
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMI_SIZE") &&
      std::getenv("MASTER_ADDR")) {
    int port = environmentInt({"AMPC_RENDEZVOUS_PORT"});
    if (port < 0) {
      const int master = environmentInt({"MASTER_PORT"});
      port = master < 0 ? -1 : master + 1;
    }
    if (port <= 0 || port > 65535)
      return refuse("MASTER_ADDR is set but neither AMPC_RENDEZVOUS_PORT nor "
                    "MASTER_PORT gives a TCP port for NCCL's rendezvous");
    double seconds = 600;
    if (const char *text = std::getenv("AMPC_COMM_TIMEOUT"))
      seconds = std::strtod(text, nullptr);
    const int timeoutMs = seconds <= 0 || seconds > 2e6
                              ? 2000000000
                              : static_cast<int>(seconds * 1000);
    if (rank == 0)
      if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
        return refuse(std::string("ncclGetUniqueId: ") +
                      ncclGetErrorString(r));
    std::string failed = ampc::tcpBroadcast(std::getenv("MASTER_ADDR"), port,
                                            rank, ranks, &id, sizeof id,
                                            timeoutMs);
    if (!failed.empty()) {
      std::snprintf(error, size, "NCCL's unique id over TCP: %s",
                    failed.c_str());
      return nullptr;
    }
    return createOn(id, rank, ranks, error, size);
  }
  // Rank 0's unique id, broadcast through MPI.
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) !=
        MPI_SUCCESS)
      return refuse("MPI_Init_thread failed (NCCL's unique id is exchanged "
                    "through MPI: launch with mpirun)");
    std::atexit(finalize);
  }
  int mpiRank = -1, mpiSize = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpiRank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpiSize);
  if (mpiRank != rank || mpiSize != ranks)
    return refuse("MPI's rank " + std::to_string(mpiRank) + " of " +
                  std::to_string(mpiSize) + " is not the environment's " +
                  std::to_string(rank) + " of " + std::to_string(ranks));
  if (rank == 0)
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
      return refuse(std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
  if (MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
    return refuse("MPI_Bcast of NCCL's unique id failed");
  return createOn(id, rank, ranks, error, size);
}

/// The bytes `comm` has all-reduced so far (this rank's buffers).
AMPC_COMM_EXPORT uint64_t ampc_comm_nccl_bytes(const ampc_abi_comm *comm) {
  return static_cast<const NcclComm *>(comm->handle)->bytes;
}

AMPC_COMM_EXPORT void ampc_comm_nccl_release(const ampc_abi_comm *comm) {
  auto *c = static_cast<NcclComm *>(comm->handle);
  if (c->comm)
    ncclCommDestroy(c->comm);
  delete c;
}
