//===- Quantization.cpp - QuantizeLinear and its kin ----------------------===//
//
// QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear as
// compositions, with fake-quantization detection.
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

namespace {

/// A per-axis scale or zero point `v` (1-D of the length of x's `axis`)
/// reshaped to broadcast along that axis; a scalar (or one value) as a
/// scalar, whatever the axis (ONNX reads it only for per-axis values).
/// Null after an error at the node.
Value alongAxis(NodeContext &nc, Value v, RankedTensorType x, StringRef what) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getRank() == 0 || (t.getRank() == 1 && t.getDimSize(0) == 1))
    return t.getRank() == 0 ? v : reshaped(nc, v, {});
  std::optional<int64_t> axis =
      ampc::normalizeAxis(nc.getInt("axis", 1), x.getRank());
  if (!axis) {
    (void)nc.error("axis " + Twine(nc.getInt("axis", 1)) +
                   " is out of range for rank " + Twine(x.getRank()));
    return Value();
  }
  int64_t length = x.getDimSize(*axis);
  if (t.getRank() != 1 || t.getDimSize(0) != length) {
    (void)nc.error(what + " must be a scalar or hold " + Twine(length) +
                   " values (the length of axis " + Twine(*axis) + "), got " +
                   formatDims(t.getShape()));
    return Value();
  }
  SmallVector<int64_t> shape(x.getRank() - *axis, 1);
  shape[0] = length;
  return reshaped(nc, v, shape);
}

/// The scale and zero point of a (De)QuantizeLinear node, broadcast along
/// its axis, the zero point as the scale's float type (null where absent);
/// false after an error.
bool quantizationParameters(NodeContext &nc, Value x, Value &scale,
                            Value &zeroFloat) {
  auto in = cast<RankedTensorType>(x.getType());
  scale = alongAxis(nc, nc.input(1), in, "the scale");
  if (!scale)
    return false;
  zeroFloat = Value();
  if (Value zp = nc.input(2)) {
    zp = alongAxis(nc, zp, in, "the zero point");
    if (!zp)
      return false;
    auto zt = cast<RankedTensorType>(zp.getType());
    zeroFloat = part<ampc::CastOp>(
        nc, zp, {},
        zt.clone(cast<RankedTensorType>(scale.getType()).getElementType()));
    return bool(zeroFloat);
  }
  return true;
}

/// saturate(round(x / scale) + zero point) as `element` (uint8 or int8);
/// `inRange`, where given, gets where the unsaturated value was in range.
Value quantize(NodeContext &nc, Value x, Value scale, Value zeroFloat,
               IntegerType element, Value *inRange = nullptr) {
  Type f = cast<RankedTensorType>(x.getType()).getElementType();
  Value q = part<ampc::RoundOp>(nc, part<ampc::DivOp>(nc, {x, scale}));
  if (zeroFloat)
    q = part<ampc::AddOp>(nc, {q, zeroFloat});
  bool isUnsigned = element.isUnsigned();
  double lo = isUnsigned ? 0.0 : -128.0, hi = isUnsigned ? 255.0 : 127.0;
  Value loV = scalarOf(nc, f, lo), hiV = scalarOf(nc, f, hi);
  if (inRange)
    *inRange =
        part<ampc::AndOp>(nc, {part<ampc::GreaterOrEqualOp>(nc, {q, loV}),
                               part<ampc::LessOrEqualOp>(nc, {q, hiV})});
  q = part<ampc::ClipOp>(nc, {q, loV, hiV});
  if (!q)
    return Value();
  return part<ampc::CastOp>(nc, q, {},
                            cast<RankedTensorType>(q.getType()).clone(element));
}

/// The 8-bit integer type of a quantized tensor, or an error.
FailureOr<IntegerType> quantizedType(NodeContext &nc, Type t, StringRef what) {
  auto i = dyn_cast<IntegerType>(t);
  if (i && i.getWidth() == 8)
    return i;
  std::string text;
  llvm::raw_string_ostream(text) << t;
  return nc.error(what + " must be uint8 or int8, got " + text);
}

} // namespace

FailureOr<Outputs> importQuantizeLinear(NodeContext &nc) {
  Value x = nc.input(0), scale, zeroFloat;
  if (!quantizationParameters(nc, x, scale, zeroFloat))
    return failure();
  // int32 data (opsets 10 to 18) is quantized as the scale's float type.
  auto xt = cast<RankedTensorType>(x.getType());
  Type f = cast<RankedTensorType>(scale.getType()).getElementType();
  if (isa<IntegerType>(xt.getElementType()))
    x = part<ampc::CastOp>(nc, x, {}, xt.clone(f));
  // Without a zero point the result is uint8 (ONNX's default).
  Type element = nc.input(2)
                     ? cast<RankedTensorType>(nc.input(2).getType())
                           .getElementType()
                     : IntegerType::get(nc.b.getContext(), 8,
                                        IntegerType::Unsigned);
  FailureOr<IntegerType> q = quantizedType(nc, element, "the zero point");
  if (failed(q))
    return failure();
  Value inRange;
  Value r = quantize(nc, x, scale, zeroFloat, *q, &inRange);
  if (!r || !inRange)
    return failure();
  nc.importer.quantized[r] = {x, inRange, nc.input(1), nc.input(2)};
  return Outputs{r};
}

FailureOr<Outputs> importDequantizeLinear(NodeContext &nc) {
  Value x = nc.input(0), scale, zeroFloat;
  if (!quantizationParameters(nc, x, scale, zeroFloat))
    return failure();
  auto in = cast<RankedTensorType>(x.getType());
  Value y = part<ampc::CastOp>(
      nc, x, {},
      in.clone(cast<RankedTensorType>(scale.getType()).getElementType()));
  if (zeroFloat)
    y = part<ampc::SubOp>(nc, {y, zeroFloat});
  y = part<ampc::MulOp>(nc, {y, scale});
  if (!y)
    return failure();
  // A QuantizeLinear's result dequantized with its own scale and zero
  // point is fake quantization (what torch exports for quantization-aware
  // training): the gradient passes straight through to the float input
  // where it was in range (torch's fake_quantize backward), and the scale
  // is frozen (torch's observers set it; a zero point is an integer
  // initializer, a constant already).
  auto found = nc.importer.quantized.find(x);
  if (found != nc.importer.quantized.end() &&
      found->second.scale == nc.input(1) &&
      found->second.zeroPoint == nc.input(2)) {
    const auto &q = found->second;
    // q.input has y's type: QuantizeLinear divided it by this same scale.
    Value pass = part<ampc::SubOp>(
        nc, {q.input, part<ampc::StopGradientOp>(nc, q.input)});
    Value zero = scalarOf(nc, cast<RankedTensorType>(y.getType())
                                  .getElementType(), 0.0);
    y = part<ampc::AddOp>(
        nc, {y, part<ampc::WhereOp>(nc, {q.inRange, pass, zero})});
    if (!y)
      return failure();
    nc.importer.freezeParameter(nc.input(1));
  }
  return Outputs{y};
}

/// DynamicQuantizeLinear: uint8 with the scale and zero point of x's range
/// widened to hold 0: scale = (max(x, 0) - min(x, 0)) / 255, zero point =
/// round(clip(-min / scale, 0, 255)).
FailureOr<Outputs> importDynamicQuantizeLinear(NodeContext &nc) {
  Value x = nc.input(0);
  Type f = cast<RankedTensorType>(x.getType()).getElementType();
  if (!isa<FloatType>(f)) {
    std::string text;
    llvm::raw_string_ostream(text) << f;
    return nc.error("x must be a float tensor, got " + text);
  }
  auto all = [&](auto op, Value v) {
    return part<OpOf<decltype(op)>>(
        nc, v, {nc.ints("axes", {}), nc.i64("keepdims", 0)});
  };
  Value zero = scalarOf(nc, f, 0.0);
  Value max = part<ampc::MaxOp>(nc, {all(opClass<ampc::ReduceMaxOp>, x), zero});
  Value negMin = part<ampc::MaxOp>(
      nc, {all(opClass<ampc::ReduceMaxOp>, part<ampc::NegOp>(nc, x)), zero});
  Value scale = part<ampc::DivOp>(
      nc, {part<ampc::AddOp>(nc, {max, negMin}), scalarOf(nc, f, 255.0)});
  Value zeroFloat = part<ampc::RoundOp>(
      nc, part<ampc::ClipOp>(nc, {part<ampc::DivOp>(nc, {negMin, scale}), zero,
                                  scalarOf(nc, f, 255.0)}));
  auto u8 = IntegerType::get(nc.b.getContext(), 8, IntegerType::Unsigned);
  Value y = quantize(nc, x, scale, zeroFloat, u8);
  Value zp = zeroFloat ? part<ampc::CastOp>(nc, zeroFloat, {},
                                            RankedTensorType::get({}, u8))
                       : Value();
  if (!y || !zp)
    return failure();
  return Outputs{y, scale, zp};
}

} // namespace ampc::detail
