/*===- RuntimeHeaderC99.c - the runtime headers compile as strict C99 ------===*
 *
 * Compiled with -std=c99 -pedantic-errors (unittests/CMakeLists.txt), so a
 * C++-ism in ampc.h, ModelAbi.h or CudaSim/Counters.h breaks the build.
 * RuntimeTest compares the struct layouts this C compiler sees with the C++
 * compiler's.
 *
 *===----------------------------------------------------------------------===*/

#include "ampc/CudaSim/Counters.h"
#include "ampc/Runtime/ModelAbi.h"
#include "ampc/Runtime/ampc.h"

#include <stddef.h>

size_t runtime_test_c_layout(size_t *out);

/* Writes the sizes and offsets RuntimeTest.cpp lists in the same order and
 * returns how many. */
size_t runtime_test_c_layout(size_t *out) {
  size_t n = 0;
  out[n++] = sizeof(ampc_status);
  out[n++] = sizeof(ampc_dtype);
  out[n++] = sizeof(ampc_model_options);
  out[n++] = offsetof(ampc_model_options, cuda_stream);
  out[n++] = sizeof(ampc_model_info);
  out[n++] = offsetof(ampc_model_info, num_parameters);
  out[n++] = sizeof(ampc_tensor_info);
  out[n++] = offsetof(ampc_tensor_info, shape);
  out[n++] = sizeof(ampc_tensor);
  out[n++] = offsetof(ampc_tensor, size_bytes);
  out[n++] = sizeof(ampc_abi_tensor);
  out[n++] = sizeof(ampc_abi_config);
  out[n++] = sizeof(ampc_model_abi);
  out[n++] = offsetof(ampc_model_abi, state_size);
  out[n++] = offsetof(ampc_model_abi, release);
  out[n++] = offsetof(ampc_model_options, comm);
  out[n++] = sizeof(ampc_comm);
  out[n++] = offsetof(ampc_comm, last_error);
  return n;
}
