//===- NpyFuzzer.cpp - libFuzzer target: ampc-train's .npy reader ---------===//
//
// One input is one .npy file. It is read or refused with an error; a file
// that reads is converted to every element type ampc-train feeds a model.
// A crash, a sanitizer finding, or a read array whose data does not match
// its shape stops the run.
//
//===----------------------------------------------------------------------===//

#include "Npy.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size), error;
  ampc::train::NpyArray array;
  if (!ampc::train::parseNpy(bytes, "fuzz.npy", array, error))
    return 0;
  size_t elements = 1;
  for (int64_t d : array.shape)
    elements *= static_cast<size_t>(d);
  if (array.elements() != elements) {
    std::fprintf(stderr, "an array of %zu elements with a shape of %zu\n",
                 array.elements(), elements);
    std::abort();
  }
  for (ampc_dtype dtype : {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16,
                           AMPC_DTYPE_F64, AMPC_DTYPE_I64, AMPC_DTYPE_I32,
                           AMPC_DTYPE_U64, AMPC_DTYPE_U32, AMPC_DTYPE_I16,
                           AMPC_DTYPE_U16, AMPC_DTYPE_I8, AMPC_DTYPE_U8,
                           AMPC_DTYPE_BOOL}) {
    std::vector<unsigned char> out;
    ampc::train::convertNpy(array, dtype, out, error);
  }
  return 0;
}
