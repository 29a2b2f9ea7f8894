//===- Reduction.cpp - reductions and scans -------------------------------===//
//
// The Reduce ops (those ampc has and the compositions), CumSum, ArgMax,
// ArgMin and Hardmax.
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

template <typename OpTy, int64_t AxesInputSince>
FailureOr<Outputs> importReduce(NodeContext &nc) {
  FailureOr<SmallVector<int64_t>> axes = axesOf(nc, AxesInputSince);
  if (failed(axes))
    return failure();
  if (axes->empty() && nc.getInt("noop_with_empty_axes", 0))
    return Outputs{nc.input(0)};
  return nc.build<OpTy>(
      nc.input(0),
      {nc.ints("axes", *axes), nc.i64("keepdims", nc.getInt("keepdims", 1))});
}

} // namespace

FailureOr<Outputs> importReduceMean(NodeContext &nc) {
  return importReduce<ampc::ReduceMeanOp, 18>(nc);
}

FailureOr<Outputs> importReduceMax(NodeContext &nc) {
  return importReduce<ampc::ReduceMaxOp, 18>(nc);
}

FailureOr<Outputs> importReduceSum(NodeContext &nc) {
  return importReduce<ampc::ReduceSumOp, 13>(nc);
}

//===----------------------------------------------------------------------===//
// Ops imported as compositions of ampc ops: their kernels, precision
// categories and gradient rules are those of the parts (docs/ops.md).
//===----------------------------------------------------------------------===//

namespace {

/// ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp and
/// ReduceMin: ReduceSum (ReduceMax for Min) of an elementwise function of
/// the input, then one of the result. LogSumExp subtracts the maximum
/// first (kept dims), as every stable implementation does.
FailureOr<Outputs> importComposedReduce(NodeContext &nc, StringRef kind) {
  FailureOr<SmallVector<int64_t>> axes = axesOf(nc, 18);
  if (failed(axes))
    return failure();
  Value x = nc.input(0);
  bool noop = axes->empty() && nc.getInt("noop_with_empty_axes", 0);
  int64_t keep = nc.getInt("keepdims", 1);
  auto reduce = [&](auto op, Value v, int64_t keepDims) {
    if (noop)
      return v;
    return part<OpOf<decltype(op)>>(
        nc, v, {nc.ints("axes", *axes), nc.i64("keepdims", keepDims)});
  };
  auto unary = [&](auto op, Value v) {
    return v ? part<OpOf<decltype(op)>>(nc, v) : Value();
  };
  Value r;
  if (kind == "ReduceSumSquare" || kind == "ReduceL2") {
    r = reduce(opClass<ampc::ReduceSumOp>, part<ampc::MulOp>(nc, {x, x}), keep);
    if (kind == "ReduceL2")
      r = unary(opClass<ampc::SqrtOp>, r);
  } else if (kind == "ReduceL1") {
    r = reduce(opClass<ampc::ReduceSumOp>, unary(opClass<ampc::AbsOp>, x),
               keep);
  } else if (kind == "ReduceLogSum") {
    r = unary(opClass<ampc::LogOp>,
              reduce(opClass<ampc::ReduceSumOp>, x, keep));
  } else if (kind == "ReduceMin") {
    // min = flip(max(flip(x))) for an order-reversing flip that is its own
    // inverse: -x for floats; for integers ~x, as c - x with c = -1
    // (signed) or the largest value (unsigned), which never overflows
    // (-x does at the smallest signed value).
    Type element = cast<RankedTensorType>(x.getType()).getElementType();
    Value c;
    if (auto i = dyn_cast<IntegerType>(element)) {
      APInt all = APInt::getAllOnes(i.getWidth()); // -1, or the largest
      FailureOr<Outputs> k = constant(
          nc, DenseElementsAttr::get(RankedTensorType::get({}, element),
                                     ArrayRef<APInt>(all)));
      if (failed(k))
        return failure();
      c = (*k)[0];
    }
    auto flip = [&](Value v) {
      if (!v || !c)
        return unary(opClass<ampc::NegOp>, v);
      return part<ampc::SubOp>(nc, {c, v});
    };
    r = flip(reduce(opClass<ampc::ReduceMaxOp>, flip(x), keep));
  } else { // ReduceLogSumExp
    Value max = reduce(opClass<ampc::ReduceMaxOp>, x, 1);
    Value shifted = part<ampc::SubOp>(nc, {x, max});
    Value sum = reduce(opClass<ampc::ReduceSumOp>,
                       unary(opClass<ampc::ExpOp>, shifted), 1);
    r = part<ampc::AddOp>(nc, {unary(opClass<ampc::LogOp>, sum), max});
    if (r && !keep && !noop) {
      // The kept-dims result without the reduced dimensions.
      auto in = cast<RankedTensorType>(x.getType());
      SmallVector<int64_t> shape;
      for (int64_t d = 0; d < in.getRank(); ++d) {
        bool reduced = axes->empty() || llvm::any_of(*axes, [&](int64_t a) {
          return ampc::normalizeAxis(a, in.getRank()) == d;
        });
        if (!reduced)
          shape.push_back(in.getDimSize(d));
      }
      r = reshaped(nc, r, shape);
    }
  }
  if (!r)
    return failure();
  return Outputs{r};
}

} // namespace

FailureOr<Outputs> importReduceL1(NodeContext &nc) {
  return importComposedReduce(nc, "ReduceL1");
}

FailureOr<Outputs> importReduceL2(NodeContext &nc) {
  return importComposedReduce(nc, "ReduceL2");
}

FailureOr<Outputs> importReduceSumSquare(NodeContext &nc) {
  return importComposedReduce(nc, "ReduceSumSquare");
}

FailureOr<Outputs> importReduceLogSum(NodeContext &nc) {
  return importComposedReduce(nc, "ReduceLogSum");
}

FailureOr<Outputs> importReduceLogSumExp(NodeContext &nc) {
  return importComposedReduce(nc, "ReduceLogSumExp");
}

FailureOr<Outputs> importReduceMin(NodeContext &nc) {
  auto element = cast<RankedTensorType>(nc.input(0).getType()).getElementType();
  if (element.isInteger(1))
    return nc.error("ReduceMin of boolean data is not supported (it is "
                    "computed as ~ReduceMax(~x))");
  return importComposedReduce(nc, "ReduceMin");
}

//===----------------------------------------------------------------------===//
// Quantization: QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear
// as compositions (Div, Round, Add, Clip, Cast; Sub, Mul; the reductions).
// Round is not differentiable, so a quantized value alone is a constant to
// autodiff; a QuantizeLinear its DequantizeLinear takes back is fake
// quantization, with torch's straight-through gradient (below).
//===----------------------------------------------------------------------===//

/// CumSum: x with the axis (n elements) spread over a second one,
/// where(mask, x, 0), reduced over the first: out[j] sums the x[i] whose
/// mask[i, j] holds, a triangle of index vectors (j - i >= 0; > 0
/// exclusive; <= 0 / < 0 reverse). ReduceSum is an FP32-output op, so the
/// sums are in f32 at fp16 and bf16 (as autocast runs CumSum); the spread
/// tensor has n times x's elements and is refused when that is more than
/// --max-tensor-bytes.
FailureOr<Outputs> importCumSum(NodeContext &nc) {
  Value x = nc.input(0);
  auto in = cast<RankedTensorType>(x.getType());
  if (in.getRank() == 0)
    return nc.error("CumSum needs a tensor of rank 1 or more");
  FailureOr<SmallVector<int64_t>> axisValue = nc.constantInts(1, "axis");
  if (failed(axisValue))
    return failure();
  if (axisValue->size() != 1)
    return nc.error("input 1 (axis) must hold one value");
  std::optional<int64_t> axis =
      ampc::normalizeAxis(axisValue->front(), in.getRank());
  if (!axis)
    return nc.error("axis " + Twine(axisValue->front()) +
                    " is out of range for rank " + Twine(in.getRank()));
  int64_t n = in.getDimSize(*axis);
  SmallVector<int64_t> column(in.getShape()), spread(in.getShape());
  column.insert(column.begin() + *axis + 1, 1);
  spread.insert(spread.begin() + *axis + 1, n);
  std::string problem = ampc::checkTensorSize(
      in.clone(spread), nc.importer.maxTensorBytes());
  if (!problem.empty())
    return nc.error("CumSum along an axis of " + Twine(n) +
                    " elements spreads the input over a second such axis, "
                    "and " + problem + " (--max-tensor-bytes)");
  bool exclusive = nc.getInt("exclusive", 0) != 0;
  bool reverse = nc.getInt("reverse", 0) != 0;
  // Integers are summed in f64 (exact up to 2^53) and cast back: ampc's
  // reductions accumulate integers in f32.
  bool integer = !isa<FloatType>(in.getElementType());
  Type element = integer ? Type(nc.b.getF64Type()) : in.getElementType();
  if (integer)
    x = part<ampc::CastOp>(nc, x, {}, in.clone(element));
  Value offsets = diagonalOffsets(nc, n, n);
  Value zero64 = scalarOf(nc, nc.b.getI64Type(), 0);
  Value zero = scalarOf(nc, element, 0);
  Value mask =
      reverse
          ? (exclusive ? part<ampc::LessOp>(nc, {offsets, zero64})
                       : part<ampc::LessOrEqualOp>(nc, {offsets, zero64}))
          : (exclusive ? part<ampc::GreaterOp>(nc, {offsets, zero64})
                       : part<ampc::GreaterOrEqualOp>(nc, {offsets, zero64}));
  // (n, n, 1, ...): the two axes, then one for each dimension after them.
  SmallVector<int64_t> maskShape(in.getRank() - *axis + 1, 1);
  maskShape[0] = maskShape[1] = n;
  mask = mask ? reshaped(nc, mask, maskShape) : Value();
  Value spreadX =
      x ? part<ampc::WhereOp>(nc, {mask, reshaped(nc, x, column), zero})
        : Value();
  Value r = part<ampc::ReduceSumOp>(
      nc, spreadX, {nc.ints("axes", {*axis}), nc.i64("keepdims", 0)});
  if (r && integer)
    r = part<ampc::CastOp>(nc, r, {}, in);
  if (!r)
    return failure();
  return Outputs{r};
}

namespace {

/// The index along `axis` of the first (or last) maximum of x, as f64:
/// where(x == reduce_max(x), index, fill) reduced by ReduceMax; the first
/// index is found as the maximum of negated indices. Integer and boolean
/// data are compared in f64 (exact up to 2^53; ampc's reductions
/// accumulate integers in f32), and the indices are f64 so that their
/// reduction is exact for any axis. With `keepDims` the axis stays (size
/// 1).
Value maxIndex(NodeContext &nc, Value x, int64_t axis, bool last,
               bool keepDims) {
  auto in = cast<RankedTensorType>(x.getType());
  int64_t n = in.getDimSize(axis);
  Type f64 = nc.b.getF64Type();
  if (!isa<FloatType>(in.getElementType()))
    x = part<ampc::CastOp>(nc, x, {}, in.clone(f64));
  Value max = part<ampc::ReduceMaxOp>(
      nc, x, {nc.ints("axes", {axis}), nc.i64("keepdims", 1)});
  Value mask = part<ampc::EqualOp>(nc, {x, max});
  Value index = indexVector(nc, n, alongAxes(in.getRank(), n, axis), f64,
                            last ? 1 : -1);
  Value fill = scalarOf(nc, f64, last ? -1.0 : -static_cast<double>(n));
  Value picked = part<ampc::WhereOp>(nc, {mask, index, fill});
  Value r = part<ampc::ReduceMaxOp>(
      nc, picked, {nc.ints("axes", {axis}), nc.i64("keepdims", keepDims)});
  return last ? r : part<ampc::NegOp>(nc, r);
}

/// ArgMax and ArgMin (int64 indices; no derivative). ArgMin is the ArgMax
/// of -x, integer and boolean data first cast to f64 (where negation
/// cannot overflow).
FailureOr<Outputs> importArgMaxMin(NodeContext &nc, bool min) {
  Value x = nc.input(0);
  auto in = cast<RankedTensorType>(x.getType());
  if (in.getRank() == 0)
    return nc.error("needs a tensor of rank 1 or more");
  std::optional<int64_t> axis =
      ampc::normalizeAxis(nc.getInt("axis", 0), in.getRank());
  if (!axis)
    return nc.error("axis " + Twine(nc.getInt("axis", 0)) +
                    " is out of range for rank " + Twine(in.getRank()));
  if (in.getDimSize(*axis) == 0)
    return nc.error("the axis has no elements (no index to return)");
  if (min) {
    if (!isa<FloatType>(in.getElementType()))
      x = part<ampc::CastOp>(nc, x, {}, in.clone(nc.b.getF64Type()));
    x = part<ampc::NegOp>(nc, x);
  }
  Value r = x ? maxIndex(nc, x, *axis, nc.getInt("select_last_index", 0) != 0,
                         nc.getInt("keepdims", 1) != 0)
              : Value();
  if (r)
    r = part<ampc::CastOp>(
        nc, r, {},
        cast<RankedTensorType>(r.getType()).clone(nc.b.getI64Type()));
  if (!r)
    return failure();
  return Outputs{r};
}

} // namespace

FailureOr<Outputs> importArgMax(NodeContext &nc) {
  return importArgMaxMin(nc, /*min=*/false);
}

FailureOr<Outputs> importArgMin(NodeContext &nc) {
  return importArgMaxMin(nc, /*min=*/true);
}

/// Hardmax: 1 at the first maximum along `axis`, 0 elsewhere, in x's type
/// (index == maxIndex, cast). Before opset 13 the input is coerced to 2-D
/// at `axis` (default 1) and the maximum taken over the second dimension.
FailureOr<Outputs> importHardmax(NodeContext &nc) {
  Value x = nc.input(0);
  auto in = cast<RankedTensorType>(x.getType());
  if (in.getRank() == 0)
    return nc.error("Hardmax needs a tensor of rank 1 or more");
  bool coerce = nc.opset < 13;
  int64_t given = nc.getInt("axis", coerce ? 1 : -1);
  std::optional<int64_t> axis =
      coerce ? (given >= -in.getRank() && given <= in.getRank()
                    ? std::optional<int64_t>(given < 0 ? given + in.getRank()
                                                       : given)
                    : std::nullopt)
             : ampc::normalizeAxis(given, in.getRank());
  if (!axis)
    return nc.error("axis " + Twine(given) + " is out of range for rank " +
                    Twine(in.getRank()));
  if (coerce) {
    // The products are factors of x's element count... unless a dimension
    // is 0, so check them.
    std::optional<int64_t> outer =
        ampc::checkedProduct(in.getShape().take_front(*axis));
    std::optional<int64_t> inner =
        ampc::checkedProduct(in.getShape().drop_front(*axis));
    if (!outer || !inner)
      return nc.error("the 2-D view of " + formatDims(in.getShape()) +
                      " has a dimension of more than 2^63 elements");
    x = reshaped(nc, x, {*outer, *inner});
  }
  int64_t along = coerce ? 1 : *axis;
  auto view = cast<RankedTensorType>(x.getType());
  int64_t n = view.getDimSize(along);
  if (n == 0)
    return Outputs{part<ampc::IdentityOp>(nc, nc.input(0))};
  Value first = maxIndex(nc, x, along, /*last=*/false, /*keepDims=*/true);
  Value index = indexVector(nc, n, alongAxes(view.getRank(), n, along),
                            nc.b.getF64Type());
  Value hit = part<ampc::EqualOp>(nc, {index, first});
  Value r = part<ampc::CastOp>(nc, hit, {}, view);
  if (r && coerce)
    r = reshaped(nc, r, in.getShape());
  if (!r)
    return failure();
  return Outputs{r};
}

FailureOr<Outputs> importReduceProd(NodeContext &nc) {
  return importReduce<ampc::ReduceProdOp, 18>(nc);
}

} // namespace ampc::detail
