//===- Quantization.cpp - QuantizeLinear and its kin, imported 1:1 --------===//
//
// QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear each become
// one op (ampc.quantize_linear, ampc.dequantize_linear,
// ampc.dynamic_quantize_linear); ampc-decompose-quantization
// (lib/Transforms/DecomposeQuantization.cpp) lowers them and makes a
// QuantizeLinear that its DequantizeLinear takes back fake quantization.
//
//===----------------------------------------------------------------------===//

#include "ImportRules.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/Quantization.h"

using namespace mlir;

namespace ampc::detail {

namespace {

/// The node's scale and zero point (where given) checked against x along
/// its axis (quantizationParameterShape): the error is the node's.
LogicalResult checkParameters(NodeContext &nc) {
  auto shape = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  };
  std::string error;
  int64_t axis = nc.getInt("axis", 1);
  if (failed(ampc::quantizationParameterShape(
          shape(nc.input(0)), shape(nc.input(1)), axis, "the scale", error)))
    return nc.error(error);
  if (Value zp = nc.input(2))
    if (failed(ampc::quantizationParameterShape(
            shape(nc.input(0)), shape(zp), axis, "the zero point", error)))
      return nc.error(error);
  return success();
}

/// The (De)QuantizeLinear node as OpTy (of `numResults` results) on its
/// inputs and axis; its first result is the node's.
template <typename OpTy>
FailureOr<Outputs> quantizationOp(NodeContext &nc, unsigned numResults) {
  FailureOr<Outputs> r = buildSame<OpTy>(
      nc, {nc.i64("axis", nc.getInt("axis", 1))}, numResults);
  if (failed(r))
    return failure();
  return Outputs{r->front()};
}

} // namespace

FailureOr<Outputs> importQuantizeLinear(NodeContext &nc) {
  if (failed(checkParameters(nc)))
    return failure();
  std::string error;
  Type zp = nc.input(2) ? cast<RankedTensorType>(nc.input(2).getType())
                              .getElementType()
                        : Type();
  if (failed(ampc::quantizedElementType(nc.b.getContext(), zp, error)))
    return nc.error(error);
  // The second result, where x was in range, is for fake quantization.
  return quantizationOp<ampc::QuantizeLinearOp>(nc, 2);
}

FailureOr<Outputs> importDequantizeLinear(NodeContext &nc) {
  if (failed(checkParameters(nc)))
    return failure();
  return quantizationOp<ampc::DequantizeLinearOp>(nc, 1);
}

FailureOr<Outputs> importDynamicQuantizeLinear(NodeContext &nc) {
  Type f = cast<RankedTensorType>(nc.input(0).getType()).getElementType();
  if (std::string error = ampc::checkDynamicQuantizeInput(f); !error.empty())
    return nc.error(error);
  return buildSame<ampc::DynamicQuantizeLinearOp>(nc, {}, 3);
}

} // namespace ampc::detail
