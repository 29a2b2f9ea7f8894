//===- AMPCDialect.h - the ampc dialect and its ops -------------*- C++ -*-===//

#ifndef AMPC_DIALECT_AMPCDIALECT_H
#define AMPC_DIALECT_AMPCDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ampc/Dialect/AMPCTraits.h"
#include "ampc/Dialect/AMPCOpsDialect.h.inc"
#include "ampc/Dialect/AMPCEnums.h"
#define GET_ATTRDEF_CLASSES
#include "ampc/Dialect/AMPCAttrs.h.inc"
#include "ampc/Dialect/AMPCInterfaces.h.inc"

#define GET_OP_CLASSES
#include "ampc/Dialect/AMPCOps.h.inc"

namespace ampc {

/// Unit attribute on the casts the compiler inserted (by precision
/// assignment, or as the adjoint of a cast in the backward pass); a user's
/// own ONNX Cast never carries it and is never removed.
constexpr llvm::StringLiteral kAutocastAttr = "ampc.autocast";

/// Normalises an ONNX axis (negative counts from the end) into [0, rank);
/// returns std::nullopt when it is out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

/// Multidirectional (numpy) broadcast of shapes; std::nullopt when two
/// dimensions differ and neither is 1.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<llvm::ArrayRef<int64_t>> shapes);

} // namespace ampc

#endif // AMPC_DIALECT_AMPCDIALECT_H
