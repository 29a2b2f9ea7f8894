//===- OnnxImporter.h - ONNX models into the ampc dialect -------*- C++ -*-===//
//
// Reads a binary .onnx (protobuf) or a textual .onnxtext model and builds a
// module holding ampc.parameter symbols and func @forward. Errors are
// reported through the context's diagnostics at a NameLoc carrying the ONNX
// node name (nested in a FileLineColLoc naming the model file); the import
// then returns null. Nothing here asserts or aborts on bad input.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_IMPORT_ONNXIMPORTER_H
#define AMPC_IMPORT_ONNXIMPORTER_H

#include "ampc/Import/ImportOptions.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <vector>
#include <string>

namespace ampc {

/// Imports the model at `path`: binary protobuf, or ONNX textual syntax when
/// the name ends in ".onnxtext" or the contents start with '<'.
mlir::OwningOpRef<mlir::ModuleOp> importOnnxFile(mlir::MLIRContext &context,
                                                 llvm::StringRef path,
                                                 const ImportOptions &options);

/// Imports a model held in memory. `displayName` names it in messages;
/// external tensor data is looked up under `baseDir`.
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxBuffer(mlir::MLIRContext &context, llvm::StringRef contents,
                 llvm::StringRef displayName, llvm::StringRef baseDir,
                 const ImportOptions &options);

/// The ONNX op types the importer understands, sorted.
llvm::SmallVector<llvm::StringRef> supportedOnnxOps();
/// The kinds of ONNX attributes (AttributeProto's INT, FLOAT, ...).
enum class OnnxAttributeKind { Int, Float, String, Ints, Floats, Strings, Tensor };
struct SupportedAttribute {
  llvm::StringRef name;
  OnnxAttributeKind kind;
};
/// Each supported ONNX op type with the ampc op that computes it, the
/// lowest opset the importer reads directly (older ones are converted) and
/// the attributes it reads (any other is refused).
struct SupportedOp {
  llvm::StringRef onnxOp, ampcOp;
  int64_t minOpset;
  std::vector<SupportedAttribute> attributes;
};
std::vector<SupportedOp> supportedOnnxOpTable();

/// Inputs of an ONNX op type whose values decide a shape or an attribute, so
/// they must be constants at import (Reshape's shape, Slice's starts, ...).
llvm::ArrayRef<int> compileTimeInputs(llvm::StringRef opType);

/// Highest default-domain opset the importer accepts.
constexpr int64_t kMaxOnnxOpset = 21;
/// The newest ONNX IR version the importer reads (ONNX 1.18's).
constexpr int64_t kMaxOnnxIrVersion = 11;

} // namespace ampc

#endif // AMPC_IMPORT_ONNXIMPORTER_H
