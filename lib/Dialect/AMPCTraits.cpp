//===- AMPCTraits.cpp - precision categories ------------------------------===//

#include "ampc/Dialect/AMPCTraits.h"
#include "ampc/Dialect/TensorSize.h"

using namespace mlir;

namespace {
template <ampc::PrecisionCategory C>
bool has(OperationName name) {
  return name.hasTrait<ampc::PrecisionCategoryTrait<C>::template Impl>();
}
} // namespace

std::optional<ampc::PrecisionCategory>
ampc::getPrecisionCategory(Operation *op) {
  return getPrecisionCategory(op->getName());
}

std::optional<ampc::PrecisionCategory>
ampc::getPrecisionCategory(OperationName name) {
  if (has<PrecisionCategory::Allow>(name))
    return PrecisionCategory::Allow;
  if (has<PrecisionCategory::Deny>(name))
    return PrecisionCategory::Deny;
  if (has<PrecisionCategory::Fp32Output>(name))
    return PrecisionCategory::Fp32Output;
  if (has<PrecisionCategory::Promote>(name))
    return PrecisionCategory::Promote;
  if (has<PrecisionCategory::Follow>(name))
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
