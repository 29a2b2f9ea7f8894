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
// every rank for a commutative operation). Errors return (MPI_ERRORS_RETURN)
// with the rank in the message.
//
//===----------------------------------------------------------------------===//

#include "ampc/Kernels/Common/Float16.h"
#include "ampc/Runtime/ModelAbi.h"

// MPI's C API only (Open MPI's and MPICH's headers otherwise pull in the
// C++ bindings, which need a library of their own).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define AMPC_COMM_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct MpiComm {
  ampc_abi_comm abi;
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<MPI_Request> requests;
  std::string error;
  /// Bytes of the buffers all-reduced (each rank's contribution).
  uint64_t bytes = 0;
};

MPI_Op sumF16 = MPI_OP_NULL, sumBf16 = MPI_OP_NULL;

template <float (*Load)(uint16_t), uint16_t (*Store)(float)>
void sumHalves(void *in, void *inout, int *len, MPI_Datatype *) {
  const auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = Store(Load(a[i]) + Load(b[i]));
}

void finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
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

int32_t start(void *handle, int32_t request, void *buffer, uint64_t count,
              int32_t dtype) {
  auto &c = *static_cast<MpiComm *>(handle);
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
    type = MPI_UINT16_T, op = sumF16, width = 2;
    break;
  case AMPC_DTYPE_BF16:
    type = MPI_UINT16_T, op = sumBf16, width = 2;
    break;
  default:
    c.error = "rank " + std::to_string(c.abi.rank) +
              ": all-reduce of dtype " + std::to_string(dtype) +
              ", which the communicator does not sum";
    return 1;
  }
  if (request < 0 || count > static_cast<uint64_t>(INT32_MAX)) {
    c.error = "rank " + std::to_string(c.abi.rank) + ": all-reduce request " +
              std::to_string(request) + " of " + std::to_string(count) +
              " elements is out of range";
    return 1;
  }
  if (static_cast<size_t>(request) >= c.requests.size())
    c.requests.resize(request + 1, MPI_REQUEST_NULL);
  if (c.requests[request] != MPI_REQUEST_NULL) {
    c.error = "rank " + std::to_string(c.abi.rank) + ": all-reduce request " +
              std::to_string(request) + " started twice";
    return 1;
  }
  int code = MPI_Iallreduce(MPI_IN_PLACE, buffer, static_cast<int>(count),
                            type, op, c.comm, &c.requests[request]);
  if (code != MPI_SUCCESS)
    return fail(c, "MPI_Iallreduce", code);
  c.bytes += count * width;
  return 0;
}

int32_t wait(void *handle, int32_t request) {
  auto &c = *static_cast<MpiComm *>(handle);
  if (request < 0 || static_cast<size_t>(request) >= c.requests.size() ||
      c.requests[request] == MPI_REQUEST_NULL) {
    c.error = "rank " + std::to_string(c.abi.rank) + ": all-reduce request " +
              std::to_string(request) + " waited for but never started";
    return 1;
  }
  int code = MPI_Wait(&c.requests[request], MPI_STATUS_IGNORE);
  c.requests[request] = MPI_REQUEST_NULL;
  if (code != MPI_SUCCESS)
    return fail(c, "MPI_Wait", code);
  return 0;
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
  if (sumF16 == MPI_OP_NULL) {
    MPI_Op_create(&sumHalves<ampc::numeric::f16BitsToF32,
                             ampc::numeric::f32ToF16Bits>,
                  /*commute=*/1, &sumF16);
    MPI_Op_create(&sumHalves<ampc::numeric::bf16BitsToF32,
                             ampc::numeric::f32ToBf16Bits>,
                  /*commute=*/1, &sumBf16);
  }
  auto *c = new MpiComm();
  if (MPI_Comm_dup(MPI_COMM_WORLD, &c->comm) != MPI_SUCCESS) {
    delete c;
    return refuse("MPI_Comm_dup of MPI_COMM_WORLD failed");
  }
  MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(c->comm, &c->abi.rank);
  MPI_Comm_size(c->comm, &c->abi.size);
  c->abi.struct_size = sizeof(ampc_abi_comm);
  c->abi.handle = c;
  c->abi.start = start;
  c->abi.wait = wait;
  c->abi.last_error = lastError;
  return &c->abi;
}

/// The bytes `comm` has all-reduced so far (this rank's buffers).
AMPC_COMM_EXPORT uint64_t ampc_comm_mpi_bytes(const ampc_abi_comm *comm) {
  return static_cast<const MpiComm *>(comm->handle)->bytes;
}

AMPC_COMM_EXPORT void ampc_comm_mpi_release(const ampc_abi_comm *comm) {
  auto *c = static_cast<MpiComm *>(comm->handle);
  for (MPI_Request &r : c->requests)
    if (r != MPI_REQUEST_NULL)
      MPI_Wait(&r, MPI_STATUS_IGNORE);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Comm_free(&c->comm);
  delete c;
}
