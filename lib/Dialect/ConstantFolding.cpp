//===- ConstantFolding.cpp - folders for shape computations ---------------===//
//
// Exported models compute reshape targets with small integer subgraphs
// (Shape, Gather, Unsqueeze, Concat, arithmetic, Where, ...). Once shapes are
// static these fold to constants here; the importer folds as it builds, and
// ampc-fold-shapes folds whatever a module still holds. Folding is limited to
// small tensors: it exists for shape arithmetic, not to precompute weights.
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/AMPCDialect.h"

#include "mlir/IR/Matchers.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace ampc;

namespace {
constexpr int64_t kMaxFoldElements = 4096;

/// A small constant operand, or null when the operand is not one.
DenseElementsAttr smallConstant(Attribute attr) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || dense.getNumElements() > kMaxFoldElements)
    return {};
  return dense;
}

/// Index of the element of a tensor of shape `in` that broadcasting maps to
/// the `flat`-th element of a tensor of shape `out`.
int64_t broadcastSourceIndex(int64_t flat, ArrayRef<int64_t> out,
                             ArrayRef<int64_t> in) {
  int64_t index = 0, stride = 1;
  size_t offset = out.size() - in.size();
  for (int64_t d = out.size() - 1; d >= 0; --d) {
    int64_t coord = flat % out[d];
    flat /= out[d];
    if (d < static_cast<int64_t>(offset))
      continue;
    int64_t inDim = in[d - offset];
    index += (inDim == 1 ? 0 : coord) * stride;
    stride *= inDim;
  }
  return index;
}

/// Builds `type` elementwise from the elements of `source` picked by `pick`.
template <typename Fn>
DenseElementsAttr rearrange(DenseElementsAttr source, RankedTensorType type,
                            Fn pick) {
  if (!type.hasStaticShape() || type.getNumElements() > kMaxFoldElements)
    return {};
  SmallVector<Attribute> all(source.getValues<Attribute>());
  SmallVector<Attribute> out;
  for (int64_t i = 0, e = type.getNumElements(); i < e; ++i)
    out.push_back(all[pick(i)]);
  return DenseElementsAttr::get(type, out);
}

/// Numeric view of a small integer or float constant.
struct Numbers {
  bool isFloat = false;
  SmallVector<int64_t> ints;
  SmallVector<double> floats;

  static std::optional<Numbers> read(DenseElementsAttr attr) {
    Numbers n;
    Type element = attr.getElementType();
    if (auto it = dyn_cast<IntegerType>(element)) {
      for (const APInt &v : attr.getValues<APInt>())
        n.ints.push_back(it.isUnsigned() || it.getWidth() == 1
                             ? static_cast<int64_t>(v.getZExtValue())
                             : v.getSExtValue());
      return n;
    }
    if (isa<FloatType>(element)) {
      n.isFloat = true;
      for (const APFloat &v : attr.getValues<APFloat>())
        n.floats.push_back(v.convertToDouble());
      return n;
    }
    return std::nullopt;
  }

  size_t size() const { return isFloat ? floats.size() : ints.size(); }
};

/// Writes `values` into a float constant of `type`, rounding to nearest even.
DenseElementsAttr writeFloats(RankedTensorType type, ArrayRef<double> values) {
  auto ft = cast<FloatType>(type.getElementType());
  SmallVector<APFloat> out;
  for (double v : values) {
    APFloat f(v);
    bool lost;
    f.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    out.push_back(f);
  }
  return DenseElementsAttr::get(type, out);
}

/// Writes `values` into an integer constant of `type`, wrapping to its width
/// as a C conversion does.
DenseElementsAttr writeInts(RankedTensorType type, ArrayRef<int64_t> values) {
  auto it = cast<IntegerType>(type.getElementType());
  SmallVector<APInt> out;
  for (int64_t v : values)
    out.push_back(APInt(it.getWidth(), static_cast<uint64_t>(v),
                        /*isSigned=*/!it.isUnsigned(), /*implicitTrunc=*/true));
  return DenseElementsAttr::get(type, out);
}

/// Folds a broadcasting binary op on two small numeric constants. Integer
/// operands are computed in int64 (never through double: shape arithmetic
/// uses INT64_MAX as "to the end"); `intFn` returns nullopt where the result
/// is undefined (overflow, division by zero) and the op is left alone.
template <typename IntFn, typename FloatFn>
OpFoldResult foldBinary(Operation *op, ArrayRef<Attribute> operands,
                        IntFn intFn, FloatFn floatFn) {
  DenseElementsAttr lhs = smallConstant(operands[0]);
  DenseElementsAttr rhs = smallConstant(operands[1]);
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  if (!lhs || !rhs || !type.hasStaticShape() ||
      type.getNumElements() > kMaxFoldElements)
    return {};
  std::optional<Numbers> a = Numbers::read(lhs), b = Numbers::read(rhs);
  if (!a || !b || a->isFloat != b->isFloat)
    return {};
  ArrayRef<int64_t> shape = type.getShape();
  ArrayRef<int64_t> sa = lhs.getType().getShape(), sb = rhs.getType().getShape();
  bool floatResult = isa<FloatType>(type.getElementType());
  SmallVector<int64_t> ints;
  SmallVector<double> floats;
  for (int64_t i = 0, e = type.getNumElements(); i < e; ++i) {
    int64_t ia = broadcastSourceIndex(i, shape, sa);
    int64_t ib = broadcastSourceIndex(i, shape, sb);
    if (a->isFloat) {
      double v = floatFn(a->floats[ia], b->floats[ib]);
      if (floatResult)
        floats.push_back(v);
      else
        ints.push_back(v != 0.0); // comparisons
      continue;
    }
    std::optional<int64_t> v = intFn(a->ints[ia], b->ints[ib]);
    if (!v)
      return {};
    ints.push_back(*v);
  }
  if (floatResult)
    return writeFloats(type, floats);
  if (!isa<IntegerType>(type.getElementType()))
    return {};
  return writeInts(type, ints);
}

/// Folds an op that only reinterprets its operand's shape.
OpFoldResult foldReshapeLike(Operation *op, Attribute input) {
  Value operand = op->getOperand(0);
  if (operand.getType() == op->getResult(0).getType())
    return operand;
  auto dense = dyn_cast_or_null<DenseElementsAttr>(input);
  if (!dense)
    return {};
  return dense.reshape(cast<ShapedType>(op->getResult(0).getType()));
}
} // namespace

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult IdentityOp::fold(FoldAdaptor) { return getInput(); }

// -x of a small constant (integers: not the most negative value).
OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr in = smallConstant(adaptor.getInput());
  auto type = cast<RankedTensorType>(getType());
  if (!in || !type.hasStaticShape())
    return {};
  std::optional<Numbers> n = Numbers::read(in);
  if (!n)
    return {};
  if (n->isFloat) {
    SmallVector<double> values;
    for (double v : n->floats)
      values.push_back(-v);
    return writeFloats(type, values);
  }
  if (!isa<IntegerType>(type.getElementType()) || type.getElementType().isInteger(1))
    return {};
  SmallVector<int64_t> values;
  for (int64_t v : n->ints) {
    if (v == std::numeric_limits<int64_t>::min())
      return {};
    values.push_back(-v);
  }
  return writeInts(type, values);
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      *this, adaptor.getOperands(),
      [](int64_t a, int64_t b) -> std::optional<int64_t> {
        int64_t r;
        if (__builtin_add_overflow(a, b, &r))
          return std::nullopt;
        return r;
      },
      [](double a, double b) { return a + b; });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      *this, adaptor.getOperands(),
      [](int64_t a, int64_t b) -> std::optional<int64_t> {
        int64_t r;
        if (__builtin_sub_overflow(a, b, &r))
          return std::nullopt;
        return r;
      },
      [](double a, double b) { return a - b; });
}

/// Whether `attr` is a constant splat of one (float or integer).
static bool isSplatOne(Attribute attr) {
  auto dense = dyn_cast_if_present<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat())
    return false;
  if (isa<FloatType>(dense.getElementType()))
    return dense.getSplatValue<APFloat>().isExactlyValue(1.0);
  if (dense.getElementType().isInteger(1))
    return false;
  if (isa<IntegerType>(dense.getElementType()))
    return dense.getSplatValue<APInt>().isOne();
  return false;
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  // x * 1 is x, bit for bit (NaN and -0 included), where no broadcast
  // changes the shape: the loss seed under loss scaling is scale * 1.
  if (isSplatOne(adaptor.getRhs()) && getLhs().getType() == getType())
    return getLhs();
  if (isSplatOne(adaptor.getLhs()) && getRhs().getType() == getType())
    return getRhs();
  return foldBinary(
      *this, adaptor.getOperands(),
      [](int64_t a, int64_t b) -> std::optional<int64_t> {
        int64_t r;
        if (__builtin_mul_overflow(a, b, &r))
          return std::nullopt;
        return r;
      },
      [](double a, double b) { return a * b; });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      *this, adaptor.getOperands(),
      [](int64_t a, int64_t b) -> std::optional<int64_t> {
        if (b == 0 || (a == std::numeric_limits<int64_t>::min() && b == -1))
          return std::nullopt;
        return a / b;
      },
      [](double a, double b) { return a / b; });
}

// ONNX Mod: with fmod = 0 (integers only) the result takes the divisor's
// sign, as Python's %; with fmod = 1 the dividend's, as C's fmod and %. A
// zero integer divisor is left for the kernel.
OpFoldResult ModOp::fold(FoldAdaptor adaptor) {
  bool cStyle = getFmod() != 0;
  return foldBinary(
      *this, adaptor.getOperands(),
      [cStyle](int64_t a, int64_t b) -> std::optional<int64_t> {
        if (b == 0 || (a == std::numeric_limits<int64_t>::min() && b == -1))
          return std::nullopt;
        int64_t r = a % b;
        if (!cStyle && r != 0 && ((r < 0) != (b < 0)))
          r += b;
        return r;
      },
      [](double a, double b) { return std::fmod(a, b); });
}

OpFoldResult EqualOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      *this, adaptor.getOperands(),
      [](int64_t a, int64_t b) -> std::optional<int64_t> { return a == b; },
      [](double a, double b) -> double { return a == b; });
}

// Folded like Equal (shape arithmetic and masks built from constants).
#define AMPC_COMPARISON_FOLD(OP, EXPR)                                         \
  OpFoldResult OP::fold(FoldAdaptor adaptor) {                                 \
    return foldBinary(                                                         \
        *this, adaptor.getOperands(),                                          \
        [](int64_t a, int64_t b) -> std::optional<int64_t> { return EXPR; },   \
        [](double a, double b) -> double { return EXPR; });                    \
  }
AMPC_COMPARISON_FOLD(GreaterOp, a > b)
AMPC_COMPARISON_FOLD(LessOp, a < b)
AMPC_COMPARISON_FOLD(GreaterOrEqualOp, a >= b)
AMPC_COMPARISON_FOLD(LessOrEqualOp, a <= b)
AMPC_COMPARISON_FOLD(AndOp, a && b)
AMPC_COMPARISON_FOLD(OrOp, a || b)
AMPC_COMPARISON_FOLD(XorOp, (a != 0) != (b != 0))
#undef AMPC_COMPARISON_FOLD

OpFoldResult MaxOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      *this, adaptor.getOperands(),
      [](int64_t a, int64_t b) -> std::optional<int64_t> {
        return std::max(a, b);
      },
      [](double a, double b) { return a > b || std::isnan(a) ? a : b; });
}

OpFoldResult MinOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      *this, adaptor.getOperands(),
      [](int64_t a, int64_t b) -> std::optional<int64_t> {
        return std::min(a, b);
      },
      [](double a, double b) { return a < b || std::isnan(a) ? a : b; });
}

OpFoldResult WhereOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr cond = smallConstant(adaptor.getCondition());
  DenseElementsAttr x = smallConstant(adaptor.getX());
  DenseElementsAttr y = smallConstant(adaptor.getY());
  if (!cond || !x || !y)
    return {};
  auto type = cast<RankedTensorType>(getType());
  SmallVector<bool> c(cond.getValues<bool>());
  SmallVector<Attribute> xs(x.getValues<Attribute>()),
      ys(y.getValues<Attribute>());
  if (!type.hasStaticShape() || type.getNumElements() > kMaxFoldElements)
    return {};
  SmallVector<Attribute> out;
  ArrayRef<int64_t> shape = type.getShape();
  for (int64_t i = 0, e = type.getNumElements(); i < e; ++i) {
    bool pickX =
        c[broadcastSourceIndex(i, shape, cond.getType().getShape())];
    out.push_back(
        pickX ? xs[broadcastSourceIndex(i, shape, x.getType().getShape())]
              : ys[broadcastSourceIndex(i, shape, y.getType().getShape())]);
  }
  return DenseElementsAttr::get(type, out);
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  DenseElementsAttr input = smallConstant(adaptor.getInput());
  if (!input)
    return {};
  std::optional<Numbers> n = Numbers::read(input);
  auto type = cast<RankedTensorType>(getType());
  if (!n)
    return {};
  Type element = type.getElementType();
  if (isa<FloatType>(element)) {
    SmallVector<double> out;
    for (size_t i = 0, e = n->size(); i < e; ++i)
      out.push_back(n->isFloat ? n->floats[i] : static_cast<double>(n->ints[i]));
    return writeFloats(type, out);
  }
  if (!isa<IntegerType>(element))
    return {};
  SmallVector<int64_t> out;
  for (size_t i = 0, e = n->size(); i < e; ++i) {
    if (!n->isFloat) {
      out.push_back(element.isInteger(1) ? n->ints[i] != 0 : n->ints[i]);
      continue;
    }
    double v = n->floats[i];
    if (element.isInteger(1)) {
      out.push_back(v != 0.0);
      continue;
    }
    // Float to integer is undefined outside the int64 range: leave it.
    if (!(v > -9.2233720368547758e18 && v < 9.2233720368547758e18))
      return {};
    out.push_back(static_cast<int64_t>(v));
  }
  return writeInts(type, out);
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(*this, adaptor.getInput());
}

OpFoldResult FlattenOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(*this, adaptor.getInput());
}

OpFoldResult SqueezeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(*this, adaptor.getInput());
}

OpFoldResult UnsqueezeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(*this, adaptor.getInput());
}

OpFoldResult ExpandOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput());
  if (!dense)
    return {};
  auto type = cast<RankedTensorType>(getType());
  if (dense.isSplat())
    return DenseElementsAttr::get(type, dense.getSplatValue<Attribute>());
  ArrayRef<int64_t> in = dense.getType().getShape();
  return rearrange(dense, type, [&](int64_t i) {
    return broadcastSourceIndex(i, type.getShape(), in);
  });
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1 && getInputs()[0].getType() == getType())
    return getInputs()[0];
  auto type = cast<RankedTensorType>(getType());
  if (!type.hasStaticShape() || type.getNumElements() > kMaxFoldElements)
    return {};
  SmallVector<SmallVector<Attribute>> parts;
  SmallVector<int64_t> sizes;
  for (Attribute a : adaptor.getInputs()) {
    DenseElementsAttr d = smallConstant(a);
    if (!d)
      return {};
    parts.emplace_back(d.getValues<Attribute>());
    sizes.push_back(d.getType().getDimSize(
        *normalizeAxis(getAxis(), type.getRank())));
  }
  int64_t axis = *normalizeAxis(getAxis(), type.getRank());
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < type.getRank(); ++d)
    inner *= type.getDimSize(d);
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= type.getDimSize(d);
  SmallVector<Attribute> out;
  for (int64_t o = 0; o < outer; ++o)
    for (auto [part, size] : llvm::zip(parts, sizes))
      for (int64_t i = 0; i < size * inner; ++i)
        out.push_back(part[o * size * inner + i]);
  return DenseElementsAttr::get(type, out);
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType()) {
    // A slice that keeps every element in order is the identity.
    bool identity = llvm::all_of(getSteps(), [](int64_t s) { return s == 1; });
    if (identity)
      return getInput();
  }
  DenseElementsAttr input = smallConstant(adaptor.getInput());
  if (!input)
    return {};
  auto inType = cast<RankedTensorType>(input.getType());
  auto type = cast<RankedTensorType>(getType());
  int64_t rank = inType.getRank();
  // Per-dimension start and step of the slice, after ONNX clamping.
  SmallVector<int64_t> start(rank, 0), step(rank, 1);
  for (auto [s, axis, st] : llvm::zip(getStarts(), getAxes(), getSteps())) {
    int64_t a = *normalizeAxis(axis, rank), dim = inType.getDimSize(a);
    int64_t v = s < 0 ? s + dim : s;
    start[a] = st > 0 ? std::clamp<int64_t>(v, 0, dim)
                      : std::min<int64_t>(std::max<int64_t>(v, 0), dim - 1);
    step[a] = st;
  }
  return rearrange(input, type, [&](int64_t flat) {
    int64_t index = 0, stride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t coord = flat % type.getDimSize(d);
      flat /= type.getDimSize(d);
      index += (start[d] + coord * step[d]) * stride;
      stride *= inType.getDimSize(d);
    }
    return index;
  });
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr data = smallConstant(adaptor.getData());
  DenseElementsAttr indices = smallConstant(adaptor.getIndices());
  if (!data || !indices)
    return {};
  auto dataType = cast<RankedTensorType>(data.getType());
  int64_t axis = *normalizeAxis(getAxis(), dataType.getRank());
  int64_t axisDim = dataType.getDimSize(axis);
  SmallVector<int64_t> ids;
  for (const APInt &v : indices.getValues<APInt>()) {
    int64_t id = v.getSExtValue();
    if (id < -axisDim || id >= axisDim)
      return {}; // out of range: left for the runtime to report
    ids.push_back(id < 0 ? id + axisDim : id);
  }
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < dataType.getRank(); ++d)
    inner *= dataType.getDimSize(d);
  int64_t numIds = ids.size();
  auto type = cast<RankedTensorType>(getType());
  return rearrange(data, type, [&](int64_t flat) {
    int64_t in = flat % inner;
    int64_t id = ids[(flat / inner) % numIds];
    int64_t outer = flat / inner / numIds;
    return (outer * axisDim + id) * inner + in;
  });
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> perm = getPerm();
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return getInput();
  DenseElementsAttr input = smallConstant(adaptor.getInput());
  if (!input)
    return {};
  auto inType = cast<RankedTensorType>(input.getType());
  auto type = cast<RankedTensorType>(getType());
  // Output dimension d is input dimension perm[d].
  SmallVector<int64_t> inStrides(inType.getRank(), 1);
  for (int64_t d = inType.getRank() - 2; d >= 0; --d)
    inStrides[d] = inStrides[d + 1] * inType.getDimSize(d + 1);
  return rearrange(input, type, [&](int64_t flat) {
    int64_t index = 0;
    for (int64_t d = type.getRank() - 1; d >= 0; --d) {
      index += (flat % type.getDimSize(d)) * inStrides[perm[d]];
      flat /= type.getDimSize(d);
    }
    return index;
  });
}
