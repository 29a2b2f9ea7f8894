//===- ScalarExpression.h - one element of an elementwise op ----*- C++ -*-===//
//
// The C++ expression computing one element of an elementwise op
// (AMPC_Elementwise) from its operands' elements, shared by the target
// emitters so every target computes the same thing.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TARGET_SCALAREXPRESSION_H
#define AMPC_TARGET_SCALAREXPRESSION_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace ampc {

/// The expression for one result element of the elementwise `op`, whose
/// operands' elements are the C++ variables `operands` (already loaded into
/// the compute type: float for f16/bf16/f32, double for f64, bool for i1,
/// the integer type otherwise); `computeType` is the result's compute type,
/// used for literals. Fails with a diagnostic on an op that is not
/// elementwise.
mlir::FailureOr<std::string>
scalarExpression(mlir::Operation *op, llvm::ArrayRef<std::string> operands,
                 llvm::StringRef computeType);

/// Relu of the C++ expression `x` (a variable: it is read twice), in
/// `computeType`: the Relu op's expression, and the CPU target's relu
/// epilogue of a GEMM.
std::string reluExpression(llvm::StringRef x, llvm::StringRef computeType);

} // namespace ampc

#endif // AMPC_TARGET_SCALAREXPRESSION_H
