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

  double asDouble(int64_t i) const { return isFloat ? floats[i] : ints[i]; }
  int64_t asInt(int64_t i) const {
    return isFloat ? static_cast<int64_t>(floats[i]) : ints[i];
  }
};

/// Writes numbers computed by `value(i)` (as double for float results, as
/// int64 otherwise) into a constant of `type`.
template <typename Fn>
DenseElementsAttr writeNumbers(RankedTensorType type, Fn value) {
  Type element = type.getElementType();
  int64_t n = type.getNumElements();
  if (auto ft = dyn_cast<FloatType>(element)) {
    SmallVector<APFloat> out;
    for (int64_t i = 0; i < n; ++i) {
      APFloat f(static_cast<double>(value(i)));
      bool lost;
      f.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      out.push_back(f);
    }
    return DenseElementsAttr::get(type, out);
  }
  auto it = dyn_cast<IntegerType>(element);
  if (!it)
    return {};
  SmallVector<APInt> out;
  for (int64_t i = 0; i < n; ++i)
    out.push_back(APInt(it.getWidth(), static_cast<uint64_t>(value(i)),
                        /*isSigned=*/!it.isUnsigned(), /*implicitTrunc=*/true));
  return DenseElementsAttr::get(type, out);
}

/// Folds a broadcasting binary op on two small numeric constants.
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
  if (!a || !b)
    return {};
  ArrayRef<int64_t> shape = type.getShape();
  ArrayRef<int64_t> sa = lhs.getType().getShape(), sb = rhs.getType().getShape();
  bool failedElement = false;
  DenseElementsAttr result = writeNumbers(type, [&](int64_t i) -> double {
    int64_t ia = broadcastSourceIndex(i, shape, sa);
    int64_t ib = broadcastSourceIndex(i, shape, sb);
    if (a->isFloat)
      return floatFn(a->asDouble(ia), b->asDouble(ib));
    std::optional<int64_t> v = intFn(a->asInt(ia), b->asInt(ib));
    if (!v) {
      failedElement = true;
      return 0;
    }
    return static_cast<double>(*v);
  });
  if (failedElement)
    return {};
  return result;
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

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      *this, adaptor.getOperands(),
      [](int64_t a, int64_t b) -> std::optional<int64_t> { return a + b; },
      [](double a, double b) { return a + b; });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      *this, adaptor.getOperands(),
      [](int64_t a, int64_t b) -> std::optional<int64_t> { return a - b; },
      [](double a, double b) { return a - b; });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      *this, adaptor.getOperands(),
      [](int64_t a, int64_t b) -> std::optional<int64_t> { return a * b; },
      [](double a, double b) { return a * b; });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      *this, adaptor.getOperands(),
      [](int64_t a, int64_t b) -> std::optional<int64_t> {
        if (b == 0)
          return std::nullopt;
        return a / b;
      },
      [](double a, double b) { return a / b; });
}

OpFoldResult EqualOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      *this, adaptor.getOperands(),
      [](int64_t a, int64_t b) -> std::optional<int64_t> { return a == b; },
      [](double a, double b) -> double { return a == b; });
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
  if (type.getElementType().isInteger(1))
    return writeNumbers(type, [&](int64_t i) -> double {
      return n->asDouble(i) != 0.0;
    });
  if (isa<FloatType>(type.getElementType()))
    return writeNumbers(type, [&](int64_t i) { return n->asDouble(i); });
  return writeNumbers(type, [&](int64_t i) -> double { return n->asInt(i); });
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
                      : std::clamp<int64_t>(v, 0, dim - 1);
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
