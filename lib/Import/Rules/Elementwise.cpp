//===- Elementwise.cpp - elementwise ONNX ops -----------------------------===//
//
// Unary and binary ops, activations with attributes, the variadic Max, Min,
// Sum and Mean, Clip and the casts.
//
//===----------------------------------------------------------------------===//

#include "ImportRules.h"
#include "TensorConversion.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/TensorSize.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

using namespace mlir;

namespace ampc::detail {

FailureOr<Outputs> importLeakyRelu(NodeContext &nc) {
  return buildSame<ampc::LeakyReluOp>(
      nc, {nc.f32("alpha", nc.getFloat("alpha", 0.01f))});
}

FailureOr<Outputs> importGelu(NodeContext &nc) {
  FailureOr<NamedAttribute> approximate =
      nc.enumAttr<ampc::GeluApproximate, ampc::GeluApproximateAttr>(
          "approximate", "none");
  if (failed(approximate))
    return failure();
  return buildSame<ampc::GeluOp>(nc, {*approximate});
}

namespace {

/// An activation with float attributes: each (ONNX name, default) becomes
/// the op's f32 attribute of the same name.
template <typename OpTy>
FailureOr<Outputs>
withFloats(NodeContext &nc,
           std::initializer_list<std::pair<const char *, float>> attrs) {
  SmallVector<NamedAttribute> named;
  for (auto [name, dflt] : attrs)
    named.push_back(nc.f32(name, nc.getFloat(name, dflt)));
  return buildSame<OpTy>(nc, named);
}

} // namespace

FailureOr<Outputs> importElu(NodeContext &nc) {
  return withFloats<ampc::EluOp>(nc, {{"alpha", 1.0f}});
}

FailureOr<Outputs> importCelu(NodeContext &nc) {
  return withFloats<ampc::CeluOp>(nc, {{"alpha", 1.0f}});
}

FailureOr<Outputs> importSelu(NodeContext &nc) {
  return withFloats<ampc::SeluOp>(nc, {{"alpha", 1.67326319217681884765625f},
                                       {"gamma", 1.05070102214813232421875f}});
}

FailureOr<Outputs> importHardSigmoid(NodeContext &nc) {
  return withFloats<ampc::HardSigmoidOp>(nc, {{"alpha", 0.2f}, {"beta", 0.5f}});
}

FailureOr<Outputs> importThresholdedRelu(NodeContext &nc) {
  return withFloats<ampc::ThresholdedReluOp>(nc, {{"alpha", 1.0f}});
}

FailureOr<Outputs> importShrink(NodeContext &nc) {
  if (!isa<FloatType>(
          cast<RankedTensorType>(nc.input(0).getType()).getElementType()))
    return nc.error("Shrink of integer data is not supported (floats only)");
  return withFloats<ampc::ShrinkOp>(nc, {{"lambd", 0.5f}, {"bias", 0.0f}});
}

/// BitShift: `direction` LEFT or RIGHT as the op's `left`.
FailureOr<Outputs> importBitShift(NodeContext &nc) {
  std::string direction = nc.getString("direction", "");
  if (direction != "LEFT" && direction != "RIGHT")
    return nc.error("'direction' must be LEFT or RIGHT, got '" + direction +
                    "'");
  return buildSame<ampc::BitShiftOp>(
      nc, {nc.i64("left", direction == "LEFT" ? 1 : 0)});
}

FailureOr<Outputs> importIsInf(NodeContext &nc) {
  return buildSame<ampc::IsInfOp>(
      nc, {nc.i64("detect_negative", nc.getInt("detect_negative", 1)),
           nc.i64("detect_positive", nc.getInt("detect_positive", 1))});
}

FailureOr<Outputs> importMod(NodeContext &nc) {
  return buildSame<ampc::ModOp>(nc, {nc.i64("fmod", nc.getInt("fmod", 0))});
}

/// PRelu: the slope broadcasts to x (numpy, from opset 7); a 1-D slope of
/// x's channel count that does not is a per-channel slope as opset 6 and
/// torch.nn.PReLU meant it, reshaped to (C, 1, ...).
FailureOr<Outputs> importPRelu(NodeContext &nc) {
  Value x = nc.input(0), slope = nc.input(1);
  auto xt = cast<RankedTensorType>(x.getType());
  auto st = cast<RankedTensorType>(slope.getType());
  if (!ampc::broadcastShapes({xt.getShape(), st.getShape()}) &&
      st.getRank() == 1 && xt.getRank() >= 2 &&
      st.getDimSize(0) == xt.getDimSize(1)) {
    SmallVector<int64_t> shape(xt.getRank() - 1, 1);
    shape[0] = st.getDimSize(0);
    FailureOr<Outputs> r =
        nc.build<ampc::ReshapeOp>(slope, {}, 1, st.clone(shape));
    if (failed(r))
      return failure();
    slope = (*r)[0];
  }
  return nc.build<ampc::PReluOp>({x, slope});
}

namespace {

/// Max, Min, Sum and Mean: one input is itself; more fold left through the
/// binary op (`opName`), broadcasting as they go; Mean then divides by the
/// count.
template <typename OpTy>
FailureOr<Outputs> variadic(NodeContext &nc, bool mean = false) {
  Value acc = nc.input(0);
  for (size_t i = 1; i < nc.inputs.size(); ++i) {
    FailureOr<Outputs> next = nc.build<OpTy>({acc, nc.input(i)});
    if (failed(next))
      return failure();
    acc = (*next)[0];
  }
  if (!mean || nc.inputs.size() == 1)
    return Outputs{acc};
  auto type = cast<RankedTensorType>(acc.getType());
  auto scalar = RankedTensorType::get({}, type.getElementType());
  FailureOr<Outputs> count = constant(
      nc, DenseElementsAttr::get(
              scalar, nc.b.getFloatAttr(type.getElementType(),
                                        static_cast<double>(nc.inputs.size()))));
  if (failed(count))
    return failure();
  return nc.build<ampc::DivOp>({acc, (*count)[0]});
}

} // namespace

FailureOr<Outputs> importMax(NodeContext &nc) {
  return variadic<ampc::MaxOp>(nc);
}

FailureOr<Outputs> importMin(NodeContext &nc) {
  return variadic<ampc::MinOp>(nc);
}

FailureOr<Outputs> importSum(NodeContext &nc) {
  return variadic<ampc::AddOp>(nc);
}

FailureOr<Outputs> importMean(NodeContext &nc) {
  return variadic<ampc::AddOp>(nc, /*mean=*/true);
}

/// Clip: the bounds are inputs 1 and 2 from opset 11 (attributes min and
/// max before); a missing bound is the type's extreme, so ampc.clip always
/// has both.
FailureOr<Outputs> importClip(NodeContext &nc) {
  Value x = nc.input(0);
  Type element = cast<RankedTensorType>(x.getType()).getElementType();
  auto scalar = RankedTensorType::get({}, element);
  auto bound = [&](size_t index, StringRef name, bool upper) -> Value {
    if (nc.opset >= 11) {
      if (Value v = nc.input(index))
        return v;
    } else if (nc.attr(name)) {
      FailureOr<Outputs> c = constant(
          nc, DenseElementsAttr::get(
                  scalar, nc.b.getFloatAttr(element, nc.getFloat(name, 0))));
      return failed(c) ? Value() : (*c)[0];
    }
    Attribute extreme;
    if (auto f = dyn_cast<FloatType>(element))
      extreme = nc.b.getFloatAttr(
          element, APFloat::getInf(f.getFloatSemantics(), /*Negative=*/!upper));
    else if (auto i = dyn_cast<IntegerType>(element))
      extreme = nc.b.getIntegerAttr(
          element, upper ? (i.isUnsigned() ? APInt::getMaxValue(i.getWidth())
                                           : APInt::getSignedMaxValue(i.getWidth()))
                         : (i.isUnsigned() ? APInt::getMinValue(i.getWidth())
                                           : APInt::getSignedMinValue(i.getWidth())));
    else
      return Value();
    FailureOr<Outputs> c =
        constant(nc, DenseElementsAttr::get(scalar, extreme));
    return failed(c) ? Value() : (*c)[0];
  };
  Value lo = bound(1, "min", false), hi = bound(2, "max", true);
  if (!lo || !hi)
    return nc.error("Clip needs a float or integer input");
  return nc.build<ampc::ClipOp>({x, lo, hi});
}

/// CastLike: a Cast to input 1's element type.
FailureOr<Outputs> importCastLike(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  Type element = cast<RankedTensorType>(nc.input(1).getType()).getElementType();
  return nc.build<ampc::CastOp>(nc.input(0), {}, 1, in.clone(element));
}

FailureOr<Outputs> importCast(NodeContext &nc) {
  if (!nc.attr("to"))
    return nc.error("attribute 'to' is required");
  int64_t to = nc.getInt("to", 0);
  Type element = elementTypeFromOnnx(nc.b.getContext(), to);
  if (!element)
    return nc.error("cannot cast to unsupported type " + onnxTypeName(to));
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  return nc.build<ampc::CastOp>(nc.input(0), {}, 1,
                                RankedTensorType::get(in.getShape(), element));
}

} // namespace ampc::detail
