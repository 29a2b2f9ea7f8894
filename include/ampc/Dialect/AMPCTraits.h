//===- AMPCTraits.h - per-op facts (precision, fusion) -----*- C++ -*-===//
//
// Every ampc op that computes on floating-point data carries one precision
// category trait (AMPC_Allow, AMPC_Deny, ... in AMPCOps.td), so the category
// is written once, beside the op. docs/precision.md explains the categories.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_DIALECT_AMPCTRAITS_H
#define AMPC_DIALECT_AMPCTRAITS_H

#include "ampc/Dialect/AMPCEnums.h"

#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace ampc {

// PrecisionCategory (allow, deny, fp32_output, promote, follow) is an enum
// of AMPCOps.td, with stringifyPrecisionCategory/symbolizePrecisionCategory.

/// Trait carrying an op's default precision category.
template <PrecisionCategory Category>
struct PrecisionCategoryTrait {
  template <typename ConcreteType>
  class Impl : public mlir::OpTrait::TraitBase<ConcreteType, Impl> {};
};

/// Only operand 0 and result 0 take the compute dtype; the other float
/// operands and results (BatchNormalization's scale, bias and statistics)
/// stay in the dtype they have.
template <typename ConcreteType>
class DataOperandOnly
    : public mlir::OpTrait::TraitBase<ConcreteType, DataOperandOnly> {};

/// Only operands 0-2 (attention's Q, K, V) and result 0 take the compute
/// dtype; a bias and the log-sum-exp statistics stay FP32.
template <typename ConcreteType>
class QkvDataOperands
    : public mlir::OpTrait::TraitBase<ConcreteType, QkvDataOperands> {};

/// Result element i depends only on element i of each operand, after
/// broadcasting the operands to the result's shape (ampc-fuse).
template <typename ConcreteType>
class Elementwise : public mlir::OpTrait::TraitBase<ConcreteType, Elementwise> {};

/// The result is operand 0's elements in the same order under another shape;
/// code generation gives it operand 0's buffer.
template <typename ConcreteType>
class View : public mlir::OpTrait::TraitBase<ConcreteType, View> {};

/// The op sums or compares many operand elements per result element, in
/// the accumulation type ampc-assign-accumulation records on it
/// (kAccumulateAttr).
template <typename ConcreteType>
class Accumulating
    : public mlir::OpTrait::TraitBase<ConcreteType, Accumulating> {};

/// Ops without a derivative by nature (constants, comparisons, shape
/// queries): ampc-autodiff treats their results as constants.
/// Every ampc op: its operand and result tensors are statically shaped and
/// at most kMaxTensorBytes (include/ampc/Dialect/TensorSize.h), so no size
/// computed from them overflows.
mlir::LogicalResult verifyBoundedTensors(mlir::Operation *op);
template <typename ConcreteType>
class BoundedTensors
    : public mlir::OpTrait::TraitBase<ConcreteType, BoundedTensors> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    return verifyBoundedTensors(op);
  }
};

template <typename ConcreteType>
class NonDifferentiable
    : public mlir::OpTrait::TraitBase<ConcreteType, NonDifferentiable> {};

/// The op's default precision category; std::nullopt for ops that precision
/// assignment leaves alone (constants, parameters, casts, shape queries).
std::optional<PrecisionCategory> getPrecisionCategory(mlir::Operation *op);
/// The same for an op by name (a registered ampc op).
std::optional<PrecisionCategory> getPrecisionCategory(mlir::OperationName name);

} // namespace ampc

#endif // AMPC_DIALECT_AMPCTRAITS_H
