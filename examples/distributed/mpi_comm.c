/*===- mpi_comm.c - a data-parallel library on the application's MPI_Comm -===*
 *
 * An application that runs MPI itself gives the library its own
 * communicator (ampc.h's ampc_comm, `ampc_model_options.comm`) instead of
 * letting the runtime create one over MPI_COMM_WORLD: here a duplicate of
 * MPI_COMM_WORLD, in a real application whatever MPI_Comm_split made.
 * Each rank trains the library (compiled with --data-parallel) on its own
 * rows of every batch and rank 0 prints the parameters.
 *
 *   ampc model.onnx -o train.so --data-parallel --batch 4
 *   mpicc -Iinclude examples/distributed/mpi_comm.c -Lbuild/lib \
 *         -lampc_runtime -o mpi_comm
 *   mpirun -np 2 ./mpi_comm train.so [runtime]
 *
 * `runtime` loads the library without a communicator, so the runtime's own
 * (libampc_comm_mpi.so) is used: the parameters printed are the same bits.
 * Inputs must be f32 (filled with a fixed pattern) or i64 (labels: row % 3).
 *
 *===----------------------------------------------------------------------===*/

#include "ampc/Runtime/ampc.h"

#include <mpi.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The handle of the ampc_comm: the MPI_Comm and one request per bucket. */
typedef struct {
  MPI_Comm comm;
  MPI_Request *requests;
  int num_requests;
  char error[MPI_MAX_ERROR_STRING + 64];
} MpiComm;

/* FP16 and BF16 sums as ampc.h asks: each pair widened to FP32, added, and
 * rounded to nearest even (_Float16's conversion; BF16 by hand). */
static float bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}
static uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) /* NaN stays a quiet NaN */
    return (uint16_t)((bits >> 16) | 0x40);
  return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}
static void sum_f16(void *in, void *inout, int *len, MPI_Datatype *type) {
  const _Float16 *a = in;
  _Float16 *b = inout;
  (void)type;
  for (int i = 0; i < *len; ++i)
    b[i] = (_Float16)((float)a[i] + (float)b[i]);
}
static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *type) {
  const uint16_t *a = in;
  uint16_t *b = inout;
  (void)type;
  for (int i = 0; i < *len; ++i)
    b[i] = f32_to_bf16(bf16_to_f32(a[i]) + bf16_to_f32(b[i]));
}
static MPI_Op op_f16, op_bf16;

static int32_t fail(MpiComm *c, const char *what, int code) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int length = 0;
  MPI_Error_string(code, text, &length);
  snprintf(c->error, sizeof(c->error), "%s: %s", what, text);
  return 1;
}

static int32_t start(void *handle, int32_t request, void *buffer,
                     uint64_t count, ampc_dtype dtype) {
  MpiComm *c = handle;
  MPI_Datatype type = MPI_FLOAT;
  MPI_Op op = MPI_SUM;
  if (dtype == AMPC_DTYPE_F64)
    type = MPI_DOUBLE;
  else if (dtype == AMPC_DTYPE_F16)
    type = MPI_UINT16_T, op = op_f16;
  else if (dtype == AMPC_DTYPE_BF16)
    type = MPI_UINT16_T, op = op_bf16;
  if (request >= c->num_requests) {
    c->requests = realloc(c->requests, sizeof(MPI_Request) * (request + 1));
    for (int i = c->num_requests; i <= request; ++i)
      c->requests[i] = MPI_REQUEST_NULL;
    c->num_requests = request + 1;
  }
  int code = MPI_Iallreduce(MPI_IN_PLACE, buffer, (int)count, type, op,
                            c->comm, &c->requests[request]);
  return code == MPI_SUCCESS ? 0 : fail(c, "MPI_Iallreduce", code);
}

static int32_t wait(void *handle, int32_t request) {
  MpiComm *c = handle;
  int code = MPI_Wait(&c->requests[request], MPI_STATUS_IGNORE);
  return code == MPI_SUCCESS ? 0 : fail(c, "MPI_Wait", code);
}

static const char *last_error(void *handle) {
  return ((MpiComm *)handle)->error;
}

static int check(ampc_status status, int rank) {
  if (status != AMPC_OK)
    fprintf(stderr, "rank %d: %s\n", rank, ampc_last_error());
  return status != AMPC_OK;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: mpirun -np N %s train.so [runtime]\n", argv[0]);
    return 2;
  }
  MPI_Init(&argc, &argv);
  MPI_Op_create(sum_f16, 1, &op_f16);
  MPI_Op_create(sum_bf16, 1, &op_bf16);

  MpiComm mpi = {MPI_COMM_NULL, NULL, 0, ""};
  MPI_Comm_dup(MPI_COMM_WORLD, &mpi.comm);
  MPI_Comm_set_errhandler(mpi.comm, MPI_ERRORS_RETURN);
  ampc_comm comm;
  memset(&comm, 0, sizeof(comm));
  comm.struct_size = sizeof(comm);
  MPI_Comm_rank(mpi.comm, &comm.rank);
  MPI_Comm_size(mpi.comm, &comm.size);
  comm.handle = &mpi;
  comm.start = start;
  comm.wait = wait;
  comm.last_error = last_error;

  ampc_model_options options;
  ampc_model_options_init(&options);
  if (argc < 3 || strcmp(argv[2], "runtime") != 0)
    options.comm = &comm;
  ampc_model *model = NULL;
  int rank = comm.rank, failed = check(ampc_model_load(argv[1], &options,
                                                       &model), rank);
  ampc_model_info info;
  failed = failed || check(ampc_model_describe(model, &info), rank);

  /* Rank r's rows of every batch of size * B rows: rows r*B .. r*B+B-1. */
  enum { kMaxInputs = 8, kSteps = 20 };
  ampc_tensor inputs[kMaxInputs];
  ampc_tensor_info input_info[kMaxInputs];
  for (int i = 0; !failed && i < info.num_inputs && i < kMaxInputs; ++i) {
    failed = check(ampc_model_input_info(model, i, &input_info[i]), rank);
    size_t n = 1;
    for (int d = 0; !failed && d < input_info[i].rank; ++d)
      n *= (size_t)input_info[i].shape[d];
    ampc_tensor t = {input_info[i].dtype, input_info[i].rank,
                     input_info[i].shape, NULL,
                     n * ampc_dtype_size(input_info[i].dtype)};
    t.data = malloc(t.size_bytes);
    inputs[i] = t;
  }
  float loss = 0;
  ampc_tensor loss_tensor = {AMPC_DTYPE_F32, 0, NULL, &loss, sizeof(loss)};
  for (int step = 0; !failed && step < kSteps; ++step) {
    for (int i = 0; i < info.num_inputs; ++i) {
      int64_t rows = inputs[i].shape[0];
      size_t n = inputs[i].size_bytes / ampc_dtype_size(inputs[i].dtype);
      size_t per_row = n / (size_t)rows;
      for (size_t e = 0; e < n; ++e) {
        int64_t row = rank * rows + (int64_t)(e / per_row);
        size_t at = (size_t)row * per_row + e % per_row;
        if (inputs[i].dtype == AMPC_DTYPE_F32)
          ((float *)inputs[i].data)[e] = sinf(0.37f * (float)(at + 31 * step));
        else if (inputs[i].dtype == AMPC_DTYPE_I64)
          ((int64_t *)inputs[i].data)[e] = (row + step) % 3;
      }
    }
    failed = check(ampc_model_train_step(model, inputs, info.num_inputs,
                                         &loss_tensor), rank);
  }
  int32_t dp_rank = 0, dp_size = 0;
  uint64_t bytes = 0;
  failed = failed || check(ampc_model_data_parallel(model, &dp_rank, &dp_size,
                                                    &bytes), rank);
  if (!failed && rank == 0) {
    printf("rank %d of %d: %d steps, %llu bytes all-reduced\n", dp_rank,
           dp_size, kSteps, (unsigned long long)bytes);
    for (int p = 0; p < info.num_parameters; ++p) {
      ampc_tensor_info pi;
      ampc_model_parameter_info(model, p, &pi);
      size_t n = 1;
      for (int d = 0; d < pi.rank; ++d)
        n *= (size_t)pi.shape[d];
      float *value = malloc(n * sizeof(float));
      ampc_tensor out = {pi.dtype, pi.rank, pi.shape, value,
                         n * sizeof(float)};
      if (pi.dtype == AMPC_DTYPE_F32 &&
          ampc_model_get_parameter(model, p, &out) == AMPC_OK) {
        printf("%s:", pi.name);
        for (size_t e = 0; e < n; ++e)
          printf(" %a", value[e]);
        printf("\n");
      }
      free(value);
    }
  }
  ampc_model_release(model); /* before the communicator goes */
  MPI_Comm_free(&mpi.comm);
  free(mpi.requests);
  MPI_Finalize();
  return failed;
}
