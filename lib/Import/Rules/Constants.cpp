//===- Constants.cpp - constants and generated tensors --------------------===//
//
// Constant, ConstantOfShape, Range, EyeLike, Trilu and the window
// functions, computed at import.
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

/// column - row for a rows x cols matrix, as an int64 (rows, cols) value
/// computed from two index vectors (constants of rows + cols elements, so
/// that a huge matrix costs no huge constant at import).
Value diagonalOffsets(NodeContext &nc, int64_t rows, int64_t cols) {
  auto indices = [&](int64_t n, ArrayRef<int64_t> shape) -> Value {
    if (failed(checkComputedConstant(nc, shape, nc.b.getI64Type(),
                                     "an index vector of " + Twine(n) +
                                         " elements")))
      return Value();
    SmallVector<int64_t> values(n);
    for (int64_t i = 0; i < n; ++i)
      values[i] = i;
    auto type = RankedTensorType::get(shape, nc.b.getI64Type());
    FailureOr<Outputs> c =
        constant(nc, DenseElementsAttr::get(type, ArrayRef<int64_t>(values)));
    return failed(c) ? Value() : (*c)[0];
  };
  Value row = indices(rows, {rows, 1}), col = indices(cols, {1, cols});
  if (!row || !col)
    return Value();
  return part<ampc::SubOp>(nc, {col, row});
}

/// Trilu: Where over a mask of the last two dimensions (upper: column -
/// row >= k, lower: column - row <= k; folded to a constant when small),
/// zero elsewhere.
FailureOr<Outputs> importTrilu(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  if (in.getRank() < 2)
    return nc.error("Trilu needs a tensor of rank 2 or more");
  int64_t k = 0;
  if (nc.input(1)) {
    FailureOr<SmallVector<int64_t>> kv = nc.constantInts(1, "k");
    if (failed(kv))
      return failure();
    if (kv->size() != 1)
      return nc.error("input 1 (k) must hold one value");
    k = (*kv)[0];
  }
  bool upper = nc.getInt("upper", 1) != 0;
  int64_t rows = in.getDimSize(in.getRank() - 2),
          cols = in.getDimSize(in.getRank() - 1);
  Value offsets = diagonalOffsets(nc, rows, cols);
  // column - row lies in [1 - rows, cols - 1]: k clamped to [-rows, cols]
  // compares alike, and is exact as the double scalarOf takes (INT64_MAX
  // is not: it became INT64_MIN, and an upper Trilu kept everything).
  Value kValue = scalarOf(nc, nc.b.getI64Type(),
                          static_cast<double>(std::clamp(k, -rows, cols)));
  Value zero = scalarOf(nc, in.getElementType(), 0);
  if (!offsets || !kValue || !zero)
    return failure();
  Value mask = upper ? part<ampc::GreaterOrEqualOp>(nc, {offsets, kValue})
                     : part<ampc::LessOrEqualOp>(nc, {offsets, kValue});
  Value r = mask ? part<ampc::WhereOp>(nc, {mask, nc.input(0), zero}) : Value();
  if (!r)
    return failure();
  return Outputs{r};
}

/// EyeLike: ones on diagonal `k` of input 0's shape, in `dtype` (default:
/// the input's type): column - row == k, cast (folded when small).
FailureOr<Outputs> importEyeLike(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  if (in.getRank() != 2)
    return nc.error("EyeLike needs a rank-2 input");
  Type element = in.getElementType();
  if (nc.attr("dtype")) {
    element = elementTypeFromOnnx(nc.b.getContext(), nc.getInt("dtype", 1));
    if (!element)
      return nc.error("unsupported dtype " +
                      onnxTypeName(nc.getInt("dtype", 1)));
  }
  Value offsets = diagonalOffsets(nc, in.getDimSize(0), in.getDimSize(1));
  // Clamped as Trilu's k (column - row lies in [1 - rows, cols - 1]).
  Value kValue = scalarOf(
      nc, nc.b.getI64Type(),
      static_cast<double>(std::clamp<int64_t>(
          nc.getInt("k", 0), -in.getDimSize(0), in.getDimSize(1))));
  if (!offsets || !kValue)
    return failure();
  Value mask = part<ampc::EqualOp>(nc, {offsets, kValue});
  Value r =
      mask ? part<ampc::CastOp>(nc, mask, {}, in.clone(element)) : Value();
  if (!r)
    return failure();
  return Outputs{r};
}

namespace {

/// HannWindow, HammingWindow and BlackmanWindow: a0 - a1 cos(2 pi n / N) +
/// a2 cos(4 pi n / N) for n < size, N = size when `periodic` (the default),
/// size - 1 otherwise; a constant at import (the size is a compile-time
/// input), computed in double and cast to `output_datatype`.
FailureOr<Outputs> importWindow(NodeContext &nc, double a0, double a1,
                                double a2) {
  FailureOr<SmallVector<int64_t>> size = nc.constantInts(0, "size");
  if (failed(size))
    return failure();
  if (size->size() != 1 || (*size)[0] < 0)
    return nc.error("the size must be one value >= 0, got " +
                    formatDims(*size));
  int64_t n = (*size)[0];
  Type element =
      elementTypeFromOnnx(nc.b.getContext(), nc.getInt("output_datatype", 1));
  if (!element)
    return nc.error("unsupported output_datatype " +
                    onnxTypeName(nc.getInt("output_datatype", 1)));
  auto type = RankedTensorType::get({n}, element);
  if (std::string problem =
          ampc::checkTensorSize(type, nc.importer.maxTensorBytes());
      !problem.empty())
    return nc.error("the window " + problem + " (--max-tensor-bytes)");
  // Computed here, element by element: at most 2^24 (as Range).
  constexpr int64_t kMaxWindow = kMaxComputedElements;
  if (n > kMaxWindow)
    return nc.error("a window of " + Twine(n) + " values: at most 2^24");
  double period = static_cast<double>(nc.getInt("periodic", 1) ? n : n - 1);
  SmallVector<double> values;
  for (int64_t i = 0; i < n; ++i) {
    double t = period > 0 ? 2 * M_PI * static_cast<double>(i) / period : 0;
    values.push_back(a0 - a1 * std::cos(t) + a2 * std::cos(2 * t));
  }
  FailureOr<Outputs> c = constant(
      nc, DenseElementsAttr::get(type.clone(nc.b.getF64Type()),
                                 ArrayRef<double>(values)));
  if (failed(c))
    return failure();
  if (element.isF64())
    return c;
  Value r = part<ampc::CastOp>(nc, (*c)[0], {}, type);
  if (!r)
    return failure();
  return Outputs{r};
}

} // namespace

FailureOr<Outputs> importHannWindow(NodeContext &nc) {
  return importWindow(nc, 0.5, 0.5, 0.0);
}

FailureOr<Outputs> importHammingWindow(NodeContext &nc) {
  return importWindow(nc, 25.0 / 46.0, 21.0 / 46.0, 0.0);
}

FailureOr<Outputs> importBlackmanWindow(NodeContext &nc) {
  return importWindow(nc, 0.42, 0.5, 0.08);
}

FailureOr<Outputs> importConstantOfShape(NodeContext &nc) {
  FailureOr<SmallVector<int64_t>> shape = nc.constantInts(0, "shape");
  if (failed(shape))
    return failure();
  for (int64_t d : *shape)
    if (d < 0)
      return nc.error("shape " + formatDims(*shape) + " has a negative dim");
  if (!ampc::checkedProduct(*shape))
    return nc.error("shape " + formatDims(*shape) + " has more than 2^63 "
                    "elements");
  MLIRContext *ctx = nc.b.getContext();
  Attribute element = nc.b.getF32FloatAttr(0.0f);
  if (const auto *a = nc.attr("value")) {
    std::string message;
    DenseElementsAttr v = convertTensor(ctx, a->t(), "", nc.importer.maxTensorBytes(), message);
    if (!v)
      return nc.error(message);
    if (v.getNumElements() != 1)
      return nc.error("'value' must hold exactly one element");
    element = *v.getValues<Attribute>().begin();
  }
  auto type = RankedTensorType::get(*shape, cast<TypedAttr>(element).getType());
  return constant(nc, DenseElementsAttr::get(type, element));
}

FailureOr<Outputs> importRange(NodeContext &nc) {
  // One message per node: stop at the first operand that is not constant.
  FailureOr<DenseElementsAttr> start = nc.constantInput(0, "start");
  if (failed(start))
    return failure();
  FailureOr<DenseElementsAttr> limit = nc.constantInput(1, "limit");
  if (failed(limit))
    return failure();
  FailureOr<DenseElementsAttr> delta = nc.constantInput(2, "delta");
  if (failed(delta))
    return failure();
  Type element = start->getElementType();
  for (DenseElementsAttr a : {*start, *limit, *delta})
    if (a.getNumElements() != 1 || a.getElementType() != element)
      return nc.error("start, limit and delta must be scalars of one type");
  // ONNX defines the count and the values in the inputs' own type:
  // ceil((limit - start) / delta) and start + i * delta, so f32 ranges are
  // computed in float, not double.
  auto scalar = [](DenseElementsAttr a) -> Attribute {
    return *a.getValues<Attribute>().begin();
  };
  // The values are written as raw data: an Attribute per element would
  // intern up to 2^24 of them in the context.
  int64_t count = 0;
  constexpr int64_t kMaxRange = kMaxComputedElements;
  if (!element.isIntOrFloat() || element.getIntOrFloatBitWidth() < 8 ||
      element.getIntOrFloatBitWidth() % 8)
    return nc.error("start, limit and delta must be integers or floats");
  unsigned width = element.getIntOrFloatBitWidth() / 8;
  std::vector<char> raw;
  auto append = [&](const APInt &bits) {
    for (unsigned byte = 0; byte < width; ++byte)
      raw.push_back(static_cast<char>(bits.extractBitsAsZExtValue(8, 8 * byte)));
  };
  if (auto ft = dyn_cast<FloatType>(element)) {
    auto compute = [&](auto s, auto l, auto d) -> LogicalResult {
      if (d == 0)
        return nc.error("delta must not be 0");
      auto c = std::ceil((l - s) / d);
      if (!(c <= kMaxRange))
        return nc.error("range is too large or not finite");
      count = c > 0 ? static_cast<int64_t>(c) : 0;
      raw.reserve(count * width);
      for (int64_t i = 0; i < count; ++i) {
        APFloat v(static_cast<double>(s + static_cast<decltype(s)>(i) * d));
        bool lost;
        v.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
        append(v.bitcastToAPInt());
      }
      return success();
    };
    double s = cast<FloatAttr>(scalar(*start)).getValueAsDouble();
    double l = cast<FloatAttr>(scalar(*limit)).getValueAsDouble();
    double d = cast<FloatAttr>(scalar(*delta)).getValueAsDouble();
    LogicalResult ok = ft.isF32() ? compute(float(s), float(l), float(d))
                                  : compute(s, l, d);
    if (failed(ok))
      return failure();
  } else {
    bool isSigned = !element.isUnsignedInteger();
    auto valueOf = [&](DenseElementsAttr a) -> __int128 {
      APInt v = cast<IntegerAttr>(scalar(a)).getValue();
      return isSigned ? static_cast<__int128>(v.getSExtValue())
                      : static_cast<__int128>(v.getZExtValue());
    };
    __int128 s = valueOf(*start), l = valueOf(*limit), d = valueOf(*delta);
    if (d == 0)
      return nc.error("delta must not be 0");
    __int128 span = l - s;
    __int128 c = span / d + ((span % d != 0) && ((span > 0) == (d > 0)));
    if (c > kMaxRange)
      return nc.error("range of more than " + Twine(kMaxRange) +
                      " elements is too large");
    count = c > 0 ? static_cast<int64_t>(c) : 0;
    raw.reserve(count * width);
    // Every value lies between start and limit, so it fits the type; the
    // product is taken in 128 bits (i * delta alone can pass 2^63).
    for (int64_t i = 0; i < count; ++i)
      append(APInt(8 * width, static_cast<uint64_t>(s + i * d),
                   /*isSigned=*/false, /*implicitTrunc=*/true));
  }
  return constant(nc, DenseElementsAttr::getFromRawBuffer(
                          RankedTensorType::get({count}, element), raw));
}

FailureOr<Outputs> importConstant(NodeContext &nc) {
  if (nc.node.attribute_size() != 1)
    return nc.error("needs exactly one value attribute");
  const onnx::AttributeProto &a = nc.node.attribute(0);
  MLIRContext *ctx = nc.b.getContext();
  OpBuilder &b = nc.b;
  if (a.name() == "value") {
    std::string message;
    DenseElementsAttr v = convertTensor(ctx, a.t(), "", nc.importer.maxTensorBytes(), message);
    if (!v)
      return nc.error(message);
    return constant(nc, v);
  }
  if (a.name() == "value_float")
    return constant(nc, DenseElementsAttr::get(
                            RankedTensorType::get({}, b.getF32Type()), a.f()));
  if (a.name() == "value_int")
    return constant(nc, DenseElementsAttr::get(
                            RankedTensorType::get({}, b.getI64Type()),
                            static_cast<int64_t>(a.i())));
  if (a.name() == "value_floats")
    return constant(nc, DenseElementsAttr::get(
                            RankedTensorType::get({a.floats_size()},
                                                  b.getF32Type()),
                            ArrayRef<float>(a.floats().data(), a.floats_size())));
  if (a.name() == "value_ints") {
    SmallVector<int64_t> v(a.ints().begin(), a.ints().end());
    return constant(nc, DenseElementsAttr::get(
                            RankedTensorType::get({a.ints_size()},
                                                  b.getI64Type()),
                            ArrayRef<int64_t>(v)));
  }
  return nc.error("'" + a.name() + "' constants are not supported");
}

} // namespace ampc::detail
