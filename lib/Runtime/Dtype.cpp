//===- Dtype.cpp - element types of the runtime C API ----------------------===//
//
// ampc_dtype_size and ampc_dtype_name: part of the C API (ampc.h), defined
// in the runtime's support library because the checkpoint code names
// dtypes too, and every user of that library (the runtime, the compiler's
// ONNX export, the unit tests, the fuzzers) must find them there.
//
//===----------------------------------------------------------------------===//

#include "ampc/Runtime/ampc.h"

extern "C" {

size_t ampc_dtype_size(ampc_dtype dtype) {
  switch (dtype) {
  case AMPC_DTYPE_U8:
  case AMPC_DTYPE_I8:
  case AMPC_DTYPE_BOOL:
    return 1;
  case AMPC_DTYPE_F16:
  case AMPC_DTYPE_BF16:
  case AMPC_DTYPE_U16:
  case AMPC_DTYPE_I16:
    return 2;
  case AMPC_DTYPE_F32:
  case AMPC_DTYPE_I32:
  case AMPC_DTYPE_U32:
    return 4;
  case AMPC_DTYPE_I64:
  case AMPC_DTYPE_U64:
  case AMPC_DTYPE_F64:
    return 8;
  }
  return 0;
}

const char *ampc_dtype_name(ampc_dtype dtype) {
  switch (dtype) {
  case AMPC_DTYPE_F32:
    return "f32";
  case AMPC_DTYPE_U8:
    return "u8";
  case AMPC_DTYPE_I8:
    return "i8";
  case AMPC_DTYPE_U16:
    return "u16";
  case AMPC_DTYPE_I16:
    return "i16";
  case AMPC_DTYPE_I32:
    return "i32";
  case AMPC_DTYPE_U32:
    return "u32";
  case AMPC_DTYPE_U64:
    return "u64";
  case AMPC_DTYPE_I64:
    return "i64";
  case AMPC_DTYPE_BOOL:
    return "bool";
  case AMPC_DTYPE_F16:
    return "f16";
  case AMPC_DTYPE_F64:
    return "f64";
  case AMPC_DTYPE_BF16:
    return "bf16";
  }
  return "unknown";
}

} // extern "C"
