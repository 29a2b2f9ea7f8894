//===- AMPCTraits.cpp - precision categories ------------------------------===//

#include "ampc/Dialect/AMPCTraits.h"
#include "ampc/Dialect/TensorSize.h"

using namespace mlir;

namespace {
template <ampc::PrecisionCategory C>
bool has(Operation *op) {
  return op->hasTrait<ampc::PrecisionCategoryTrait<C>::template Impl>();
}
} // namespace

std::optional<ampc::PrecisionCategory>
ampc::getPrecisionCategory(Operation *op) {
  if (has<PrecisionCategory::Allow>(op))
    return PrecisionCategory::Allow;
  if (has<PrecisionCategory::Deny>(op))
    return PrecisionCategory::Deny;
  if (has<PrecisionCategory::Fp32Output>(op))
    return PrecisionCategory::Fp32Output;
  if (has<PrecisionCategory::Promote>(op))
    return PrecisionCategory::Promote;
  if (has<PrecisionCategory::Follow>(op))
    return PrecisionCategory::Follow;
  return std::nullopt;
}

LogicalResult ampc::verifyBoundedTensors(Operation *op) {
  for (Type t : llvm::concat<const Type>(op->getOperandTypes(),
                                         op->getResultTypes())) {
    std::string problem = checkTensorSize(t, kMaxTensorBytes);
    if (!problem.empty())
      return op->emitOpError("tensor too large: ") << problem;
  }
  return success();
}
