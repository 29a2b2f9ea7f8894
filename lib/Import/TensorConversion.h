//===- TensorConversion.h - ONNX TensorProto to MLIR attributes -*- C++ -*-===//

#ifndef AMPC_LIB_IMPORT_TENSORCONVERSION_H
#define AMPC_LIB_IMPORT_TENSORCONVERSION_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <onnx/onnx_pb.h>

#include <string>

namespace ampc::detail {

/// The MLIR element type of an ONNX TensorProto data type; null for types
/// ampc does not support (strings, complex, float8).
mlir::Type elementTypeFromOnnx(mlir::MLIRContext *ctx, int dataType);

/// Name of an ONNX data type for messages ("FLOAT16", "STRING").
std::string onnxTypeName(int dataType);

/// Converts a tensor (inline, typed fields or external data under
/// `baseDir`) of at most `maxBytes` bytes. On failure returns null and sets
/// `error`.
mlir::DenseElementsAttr convertTensor(mlir::MLIRContext *ctx,
                                      const onnx::TensorProto &tensor,
                                      llvm::StringRef baseDir,
                                      int64_t maxBytes, std::string &error);

} // namespace ampc::detail

#endif // AMPC_LIB_IMPORT_TENSORCONVERSION_H
