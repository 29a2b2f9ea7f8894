//===- AMPCTraits.cpp - precision categories ------------------------------===//

#include "ampc/Dialect/AMPCTraits.h"
#include "ampc/Dialect/TensorSize.h"


using namespace mlir;

namespace {
constexpr ampc::PrecisionCategory kCategories[] = {
    ampc::PrecisionCategory::Allow,      ampc::PrecisionCategory::Deny,
    ampc::PrecisionCategory::Fp32Output, ampc::PrecisionCategory::Promote,
    ampc::PrecisionCategory::Follow,
};

template <ampc::PrecisionCategory C>
bool has(Operation *op) {
  return op->hasTrait<ampc::PrecisionCategoryTrait<C>::template Impl>();
}
} // namespace

StringRef ampc::stringifyPrecisionCategory(PrecisionCategory category) {
  switch (category) {
  case PrecisionCategory::Allow:
    return "allow";
  case PrecisionCategory::Deny:
    return "deny";
  case PrecisionCategory::Fp32Output:
    return "fp32_output";
  case PrecisionCategory::Promote:
    return "promote";
  case PrecisionCategory::Follow:
    return "follow";
  }
  return "";
}

std::optional<ampc::PrecisionCategory>
ampc::symbolizePrecisionCategory(StringRef name) {
  for (PrecisionCategory c : kCategories)
    if (stringifyPrecisionCategory(c) == name)
      return c;
  return std::nullopt;
}

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
