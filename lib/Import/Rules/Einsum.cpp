//===- Einsum.cpp - Einsum, imported 1:1 as ampc.einsum -------------------===//
//
// The node becomes one ampc.einsum; ampc-decompose-einsum
// (lib/Transforms/DecomposeEinsum.cpp) lowers it to transposes, reductions
// and batched matmuls.
//
//===----------------------------------------------------------------------===//

#include "ImportRules.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/Einsum.h"

using namespace mlir;

namespace ampc::detail {

/// Einsum: the equation read against the operands (readEinsum), whose
/// complaint is the node's, then one ampc.einsum.
FailureOr<Outputs> importEinsum(NodeContext &nc) {
  if (!nc.attr("equation"))
    return nc.error("attribute 'equation' is required");
  std::string equation = nc.getString("equation", "");
  SmallVector<ArrayRef<int64_t>> shapes;
  for (Value v : nc.inputs)
    shapes.push_back(cast<RankedTensorType>(v.getType()).getShape());
  std::string error;
  if (failed(ampc::readEinsum(equation, shapes, error)))
    return nc.error(error);
  return nc.build<ampc::EinsumOp>(
      nc.inputs, {nc.b.getNamedAttr("equation", nc.b.getStringAttr(equation))});
}

} // namespace ampc::detail
