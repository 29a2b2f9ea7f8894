//===- Indexing.cpp - gathers, scatters and their kin ---------------------===//
//
// Gather, GatherElements, GatherND, ScatterElements, ScatterND,
// ReverseSequence, TopK and OneHot.
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

FailureOr<Outputs> importGather(NodeContext &nc) {
  return buildSame<ampc::GatherOp>(nc, {nc.i64("axis", nc.getInt("axis", 0))});
}

/// OneHot: where(unsqueeze(indices, axis) == index vector, on, off), the
/// values [off, on] sliced from input 2. Negative indices count from
/// `depth` (input 1, a constant; truncated when a float); others outside
/// [-depth, depth) match nothing. Float indices are compared in f64,
/// integer ones in int64, both exact.
FailureOr<Outputs> importOneHot(NodeContext &nc) {
  Value indices = nc.input(0), values = nc.input(2);
  auto in = cast<RankedTensorType>(indices.getType());
  auto valuesType = cast<RankedTensorType>(values.getType());
  if (valuesType.getRank() != 1 || valuesType.getDimSize(0) != 2)
    return nc.error("input 2 (values) must be [off_value, on_value], got " +
                    formatDims(valuesType.getShape()));
  FailureOr<DenseElementsAttr> depthValue = nc.constantInput(1, "depth");
  if (failed(depthValue))
    return failure();
  if (depthValue->getNumElements() != 1)
    return nc.error("input 1 (depth) must hold one value");
  double depthNumber;
  SmallString<32> depthText;
  if (isa<FloatType>(depthValue->getElementType())) {
    APFloat v = *depthValue->getValues<APFloat>().begin();
    v.toString(depthText);
    depthNumber = std::trunc(v.convertToDouble());
  } else {
    APInt v = *depthValue->getValues<APInt>().begin();
    bool isSigned = !depthValue->getElementType().isUnsignedInteger();
    v.toString(depthText, 10, isSigned);
    depthNumber = isSigned ? static_cast<double>(v.getSExtValue())
                           : static_cast<double>(v.getZExtValue());
  }
  int64_t rank = in.getRank() + 1;
  std::optional<int64_t> axis =
      ampc::normalizeAxis(nc.getInt("axis", -1), rank);
  if (!axis)
    return nc.error("axis " + Twine(nc.getInt("axis", -1)) +
                    " is out of range for rank " + Twine(rank));
  // A depth beyond 2^53 is not exact as a double nor a size of a tensor
  // ampc makes (the size check below refuses far less).
  if (!(depthNumber >= 1 && depthNumber <= 9007199254740992.0))
    return nc.error("depth " + depthText +
                    " must be between 1 and 2^53 (truncated to an integer)");
  int64_t depth = static_cast<int64_t>(depthNumber);
  SmallVector<int64_t> shape(in.getShape()), unsqueezed(in.getShape());
  shape.insert(shape.begin() + *axis, depth);
  unsqueezed.insert(unsqueezed.begin() + *axis, 1);
  std::string problem =
      ampc::checkTensorSize(valuesType.clone(shape), nc.importer.maxTensorBytes());
  if (!problem.empty())
    return nc.error("depth " + Twine(depth) + ": " + problem +
                    " (--max-tensor-bytes)");
  Type compare = isa<FloatType>(in.getElementType())
                     ? Type(nc.b.getF64Type())
                     : Type(nc.b.getI64Type());
  // The index vector 0 .. depth - 1 is a constant made here.
  if (failed(checkComputedConstant(nc, {depth}, compare,
                                   "depth " + Twine(depth))))
    return failure();
  Value wide = part<ampc::CastOp>(nc, indices, {}, in.clone(compare));
  Value zero = scalarOf(nc, compare, 0);
  Value depthScalar = scalarOf(nc, compare, static_cast<double>(depth));
  Value negative = part<ampc::LessOp>(nc, {wide, zero});
  Value wrapped = part<ampc::WhereOp>(
      nc, {negative, part<ampc::AddOp>(nc, {wide, depthScalar}), wide});
  wrapped = wrapped ? reshaped(nc, wrapped, unsqueezed) : Value();
  Value index =
      indexVector(nc, depth, alongAxes(rank, depth, *axis), compare);
  Value hit = part<ampc::EqualOp>(nc, {wrapped, index});
  auto pick = [&](int64_t at) -> Value {
    Value v =
        part<ampc::SliceOp>(nc, values,
                            {nc.ints("starts", {at}), nc.ints("ends", {at + 1}),
                             nc.ints("axes", {0}), nc.ints("steps", {1})});
    return v ? reshaped(nc, v, {}) : Value();
  };
  Value r = part<ampc::WhereOp>(nc, {hit, pick(1), pick(0)});
  if (!r)
    return failure();
  return Outputs{r};
}

//===----------------------------------------------------------------------===//
// Data-dependent indexing: GatherElements, GatherND, ScatterElements,
// ScatterND and TopK's values are a Gather or a Scatter (ampc.scatter) of
// flat positions into data viewed as rows, the positions computed from the
// indices by int64 elementwise ops (fused into one loop). An index out of
// range makes its position one that Gather and Scatter refuse at run time,
// so these ops fail as Gather does: an error naming the node.
//===----------------------------------------------------------------------===//

namespace {

/// Row-major strides of `shape`.
SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// The int64 position `index` (an integer tensor) names along a dimension
/// of `size` elements, a negative index counting from the end, and
/// whether it lies in [-size, size). An index outside is given position 0,
/// and size is added to negative indices only, so that no arithmetic on a
/// hostile index (near ±2^63) overflows.
struct AxisPosition {
  Value position, valid;
};

AxisPosition axisPosition(NodeContext &nc, Value index, int64_t size) {
  auto type = cast<RankedTensorType>(index.getType());
  Type i64 = nc.b.getI64Type();
  Value wide = type.getElementType() == i64
                   ? index
                   : part<ampc::CastOp>(nc, index, {}, type.clone(i64));
  Value zero = scalarOf(nc, i64, 0), sizeValue = scalarOf(nc, i64, size);
  Value valid = part<ampc::AndOp>(
      nc, {part<ampc::GreaterOrEqualOp>(nc, {wide, scalarOf(nc, i64, -size)}),
           part<ampc::LessOp>(nc, {wide, sizeValue})});
  Value wrapped = part<ampc::AddOp>(
      nc, {wide, part<ampc::WhereOp>(nc, {part<ampc::LessOp>(nc, {wide, zero}),
                                          sizeValue, zero})});
  return {part<ampc::WhereOp>(nc, {valid, wrapped, zero}), valid};
}

/// `offset` where `valid` holds, else -(rows + 1): outside the range of
/// every Gather or Scatter along a dimension of `rows`, so refused there at
/// run time.
Value guardedPosition(NodeContext &nc, Value offset, Value valid,
                      int64_t rows) {
  if (!valid)
    return offset;
  Type i64 = nc.b.getI64Type();
  return part<ampc::WhereOp>(
      nc, {valid, offset, scalarOf(nc, i64, -static_cast<double>(rows) - 1)});
}

/// The flat (row-major) position in data of shape `dataShape` of each
/// element that GatherElements or ScatterElements reads or writes: index
/// i's value along `axis`, i's own coordinates along the other dimensions.
/// `checked`: wrap negative indices and guard against indices out of range
/// (TopK's int64 positions need neither).
Value elementPositions(NodeContext &nc, Value indices,
                       ArrayRef<int64_t> dataShape, int64_t axis,
                       bool checked) {
  auto type = cast<RankedTensorType>(indices.getType());
  Type i64 = nc.b.getI64Type();
  int64_t rank = type.getRank();
  SmallVector<int64_t> strides = rowMajorStrides(dataShape);
  AxisPosition p = checked ? axisPosition(nc, indices, dataShape[axis])
                           : AxisPosition{indices, Value()};
  Value offset = strides[axis] == 1
                     ? p.position
                     : part<ampc::MulOp>(
                           nc, {p.position, scalarOf(nc, i64, strides[axis])});
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = type.getDimSize(d);
    if (d == axis || n <= 1)
      continue;
    offset = part<ampc::AddOp>(
        nc,
        {offset, indexVector(nc, n, alongAxes(rank, n, d), i64, strides[d])});
  }
  int64_t total = 1;
  for (int64_t d : dataShape)
    total *= d;
  return guardedPosition(nc, offset, p.valid, total);
}

/// Indices of the gathers and scatters are int32 or int64 (ONNX's type
/// constraint).
LogicalResult checkIndexType(NodeContext &nc, RankedTensorType indices) {
  Type t = indices.getElementType();
  if (t.isSignlessInteger(32) || t.isSignlessInteger(64))
    return success();
  std::string name;
  llvm::raw_string_ostream os(name);
  os << t;
  return nc.error("indices must be int32 or int64, got " + name);
}

/// Checks GatherElements' and ScatterElements' shapes: indices of data's
/// rank, no longer than data off the axis. Returns the axis.
FailureOr<int64_t> checkElementIndices(NodeContext &nc, RankedTensorType data,
                                       RankedTensorType indices) {
  if (failed(checkIndexType(nc, indices)))
    return failure();
  if (data.getRank() == 0)
    return nc.error("data must have rank >= 1");
  if (indices.getRank() != data.getRank())
    return nc.error("indices " + formatDims(indices.getShape()) +
                    " must have the rank of data " +
                    formatDims(data.getShape()));
  std::optional<int64_t> axis =
      ampc::normalizeAxis(nc.getInt("axis", 0), data.getRank());
  if (!axis)
    return nc.error("axis " + Twine(nc.getInt("axis", 0)) +
                    " is out of range for rank " + Twine(data.getRank()));
  for (int64_t d = 0; d < data.getRank(); ++d)
    if (d != *axis && indices.getDimSize(d) > data.getDimSize(d))
      return nc.error("indices " + formatDims(indices.getShape()) +
                      " are longer than data " + formatDims(data.getShape()) +
                      " along dimension " + Twine(d) + " (not the axis)");
  return *axis;
}

} // namespace

FailureOr<Outputs> importGatherElements(NodeContext &nc) {
  Value data = nc.input(0), indices = nc.input(1);
  auto dataType = cast<RankedTensorType>(data.getType());
  auto indexType = cast<RankedTensorType>(indices.getType());
  FailureOr<int64_t> axis = checkElementIndices(nc, dataType, indexType);
  if (failed(axis))
    return failure();
  Value positions = elementPositions(nc, indices, dataType.getShape(), *axis,
                                     /*checked=*/true);
  Value flat = reshaped(nc, data, {dataType.getNumElements()});
  Value r = part<ampc::GatherOp>(nc, {flat, positions}, {nc.i64("axis", 0)});
  if (!r)
    return failure();
  return Outputs{r};
}

/// ReverseSequence: a GatherElements along time_axis at index len - 1 - t
/// where t < len (the batch's sequence_lens), t elsewhere.
FailureOr<Outputs> importReverseSequence(NodeContext &nc) {
  Value x = nc.input(0), lens = nc.input(1);
  auto xt = cast<RankedTensorType>(x.getType());
  auto lt = cast<RankedTensorType>(lens.getType());
  int64_t timeAxis = nc.getInt("time_axis", 0),
          batchAxis = nc.getInt("batch_axis", 1);
  if (xt.getRank() < 2)
    return nc.error("input must have rank 2 or more");
  if (!((timeAxis == 0 && batchAxis == 1) || (timeAxis == 1 && batchAxis == 0)))
    return nc.error("time_axis and batch_axis must be 0 and 1 in some order, "
                    "got " + Twine(timeAxis) + " and " + Twine(batchAxis));
  int64_t steps = xt.getDimSize(timeAxis), batch = xt.getDimSize(batchAxis);
  if (lt.getRank() != 1 || lt.getDimSize(0) != batch ||
      !lt.getElementType().isInteger(64))
    return nc.error("sequence_lens must be int64 [" + Twine(batch) +
                    "] (one length per batch entry), got " +
                    formatDims(lt.getShape()));
  auto i64 = nc.b.getI64Type();
  SmallVector<int64_t> tShape(2, 1), lShape(2, 1);
  tShape[timeAxis] = steps;
  lShape[batchAxis] = batch;
  Value t = indexVector(nc, steps, tShape, i64);
  Value len = reshaped(nc, lens, lShape);
  Value reversed = part<ampc::SubOp>(
      nc, {part<ampc::SubOp>(nc, {len, scalarOf(nc, i64, 1.0)}), t});
  Value index =
      part<ampc::WhereOp>(nc, {part<ampc::LessOp>(nc, {t, len}), reversed, t});
  if (!index)
    return failure();
  // (T, B) or (B, T), then 1s for the other axes, expanded to x's shape.
  SmallVector<int64_t> shape2(xt.getShape().take_front(2));
  shape2.append(xt.getRank() - 2, 1);
  index = part<ampc::ExpandOp>(nc, reshaped(nc, index, shape2), {},
                               RankedTensorType::get(xt.getShape(), i64));
  Value positions = index ? elementPositions(nc, index, xt.getShape(),
                                             timeAxis, /*checked=*/true)
                          : Value();
  Value r = part<ampc::GatherOp>(
      nc, {reshaped(nc, x, {xt.getNumElements()}), positions},
      {nc.i64("axis", 0)});
  if (!r)
    return failure();
  return Outputs{r};
}

namespace {

/// The reduction attribute of ScatterElements and ScatterND: none, add and
/// mul from opset 16, max and min from 18.
FailureOr<NamedAttribute> scatterReduction(NodeContext &nc) {
  std::string r = nc.getString("reduction", "none");
  bool known = r == "none" || r == "add" || r == "mul" ||
               (nc.opset >= 18 && (r == "max" || r == "min"));
  if (!known)
    return nc.error("'reduction' must be none, add, mul" +
                    Twine(nc.opset >= 18 ? ", max or min" : "") + ", got '" +
                    r + "'");
  return nc.b.getNamedAttr("reduction", nc.b.getStringAttr(r));
}

} // namespace

/// ScatterElements (and the Scatter of opsets 9 and 10).
FailureOr<Outputs> importScatterElements(NodeContext &nc) {
  Value data = nc.input(0), indices = nc.input(1), updates = nc.input(2);
  auto dataType = cast<RankedTensorType>(data.getType());
  auto indexType = cast<RankedTensorType>(indices.getType());
  auto updateType = cast<RankedTensorType>(updates.getType());
  FailureOr<int64_t> axis = checkElementIndices(nc, dataType, indexType);
  if (failed(axis))
    return failure();
  if (updateType.getShape() != indexType.getShape())
    return nc.error("updates " + formatDims(updateType.getShape()) +
                    " must have the shape of indices " +
                    formatDims(indexType.getShape()));
  FailureOr<NamedAttribute> reduction = scatterReduction(nc);
  if (failed(reduction))
    return failure();
  Value positions = elementPositions(nc, indices, dataType.getShape(), *axis,
                                     /*checked=*/true);
  Value flat = reshaped(nc, data, {dataType.getNumElements()});
  Value r = part<ampc::ScatterOp>(nc, {flat, positions, updates},
                                  {nc.i64("axis", 0), *reduction});
  r = r ? reshaped(nc, r, dataType.getShape()) : Value();
  if (!r)
    return failure();
  return Outputs{r};
}

namespace {

/// GatherND's and ScatterND's view of data: its first `lead` dimensions
/// flattened into rows, and for each index tuple of `indices` (shape
/// [..., k], lead = batch + k, the first `batch` dimensions those of data)
/// its row, Σ position_j × stride_j plus the batch's first row.
Value tupleRows(NodeContext &nc, Value indices, ArrayRef<int64_t> dataShape,
                int64_t batch) {
  auto type = cast<RankedTensorType>(indices.getType());
  Type i64 = nc.b.getI64Type();
  int64_t q = type.getRank(), k = type.getDimSize(q - 1);
  SmallVector<int64_t> tupleShape(type.getShape().drop_back());
  ArrayRef<int64_t> lead = dataShape.take_front(batch + k);
  SmallVector<int64_t> strides = rowMajorStrides(lead);
  Value offset, valid;
  for (int64_t j = 0; j < k; ++j) {
    Value c =
        part<ampc::SliceOp>(nc, indices,
                            {nc.ints("starts", {j}), nc.ints("ends", {j + 1}),
                             nc.ints("axes", {q - 1}), nc.ints("steps", {1})});
    if (!c)
      return Value();
    AxisPosition p =
        axisPosition(nc, reshaped(nc, c, tupleShape), lead[batch + j]);
    int64_t stride = strides[batch + j];
    Value term =
        stride == 1
            ? p.position
            : part<ampc::MulOp>(nc, {p.position, scalarOf(nc, i64, stride)});
    offset = offset ? part<ampc::AddOp>(nc, {offset, term}) : term;
    valid = valid ? part<ampc::AndOp>(nc, {valid, p.valid}) : p.valid;
  }
  for (int64_t i = 0; i < batch; ++i) {
    int64_t n = tupleShape[i];
    if (n > 1)
      offset = part<ampc::AddOp>(
          nc, {offset,
               indexVector(nc, n, alongAxes(q - 1, n, i), i64, strides[i])});
  }
  int64_t rows = 1;
  for (int64_t d : lead)
    rows *= d;
  return guardedPosition(nc, offset, valid, rows);
}

/// Checks GatherND's and ScatterND's shapes; returns k, the length of an
/// index tuple.
FailureOr<int64_t> checkTupleIndices(NodeContext &nc, RankedTensorType data,
                                     RankedTensorType indices, int64_t batch) {
  if (failed(checkIndexType(nc, indices)))
    return failure();
  int64_t r = data.getRank(), q = indices.getRank();
  if (r == 0 || q == 0)
    return nc.error("data " + formatDims(data.getShape()) + " and indices " +
                    formatDims(indices.getShape()) + " must have rank >= 1");
  if (batch < 0 || batch >= std::min(r, q))
    return nc.error("batch_dims " + Twine(batch) +
                    " must be at least 0 and less than the ranks of data (" +
                    Twine(r) + ") and indices (" + Twine(q) + ")");
  int64_t k = indices.getDimSize(q - 1);
  if (k < 1 || k > r - batch)
    return nc.error("indices " + formatDims(indices.getShape()) +
                    " hold index tuples of " + Twine(k) +
                    " elements, but data " + formatDims(data.getShape()) +
                    " takes tuples of 1 to " + Twine(r - batch));
  if (indices.getShape().take_front(batch) !=
      data.getShape().take_front(batch))
    return nc.error("indices " + formatDims(indices.getShape()) +
                    " and data " + formatDims(data.getShape()) +
                    " must agree on the first " + Twine(batch) +
                    " (batch) dimensions");
  return k;
}

/// data viewed as rows of its dimensions after the first `lead`.
Value asRows(NodeContext &nc, Value data, int64_t lead) {
  auto type = cast<RankedTensorType>(data.getType());
  int64_t rows = 1;
  for (int64_t d : type.getShape().take_front(lead))
    rows *= d;
  SmallVector<int64_t> shape = {rows};
  llvm::append_range(shape, type.getShape().drop_front(lead));
  return reshaped(nc, data, shape);
}

} // namespace

FailureOr<Outputs> importGatherND(NodeContext &nc) {
  Value data = nc.input(0), indices = nc.input(1);
  auto dataType = cast<RankedTensorType>(data.getType());
  int64_t batch = nc.getInt("batch_dims", 0);
  FailureOr<int64_t> k = checkTupleIndices(
      nc, dataType, cast<RankedTensorType>(indices.getType()), batch);
  if (failed(k))
    return failure();
  Value rows = tupleRows(nc, indices, dataType.getShape(), batch);
  Value r = part<ampc::GatherOp>(nc, {asRows(nc, data, batch + *k), rows},
                                 {nc.i64("axis", 0)});
  if (!r)
    return failure();
  return Outputs{r};
}

FailureOr<Outputs> importScatterND(NodeContext &nc) {
  Value data = nc.input(0), indices = nc.input(1), updates = nc.input(2);
  auto dataType = cast<RankedTensorType>(data.getType());
  auto indexType = cast<RankedTensorType>(indices.getType());
  auto updateType = cast<RankedTensorType>(updates.getType());
  FailureOr<int64_t> k = checkTupleIndices(nc, dataType, indexType, 0);
  if (failed(k))
    return failure();
  SmallVector<int64_t> expected(indexType.getShape().drop_back());
  llvm::append_range(expected, dataType.getShape().drop_front(*k));
  if (updateType.getShape() != ArrayRef<int64_t>(expected))
    return nc.error("updates " + formatDims(updateType.getShape()) +
                    " must have shape " + formatDims(expected) +
                    " (indices' but the last, then data's after the first " +
                    Twine(*k) + ")");
  FailureOr<NamedAttribute> reduction = scatterReduction(nc);
  if (failed(reduction))
    return failure();
  Value rows = tupleRows(nc, indices, dataType.getShape(), 0);
  Value r = part<ampc::ScatterOp>(nc, {asRows(nc, data, *k), rows, updates},
                                  {nc.i64("axis", 0), *reduction});
  r = r ? reshaped(nc, r, dataType.getShape()) : Value();
  if (!r)
    return failure();
  return Outputs{r};
}

/// TopK: ampc.top_k's indices, and the values gathered at them (so their
/// gradient is Gather's). K is input 1 from opset 10, an attribute before.
FailureOr<Outputs> importTopK(NodeContext &nc) {
  Value x = nc.input(0);
  auto type = cast<RankedTensorType>(x.getType());
  int64_t k;
  if (nc.opset >= 10) {
    if (!nc.input(1))
      return nc.error("input 1 (K) is required from opset 10");
    FailureOr<SmallVector<int64_t>> values = nc.constantInts(1, "K");
    if (failed(values))
      return failure();
    if (values->size() != 1)
      return nc.error("input 1 (K) must hold one value, got " +
                      Twine(values->size()));
    k = (*values)[0];
  } else {
    if (!nc.attr("k"))
      return nc.error("attribute 'k' is required before opset 10");
    k = nc.getInt("k", 0);
  }
  if (type.getRank() == 0)
    return nc.error("input must have rank >= 1");
  std::optional<int64_t> axis =
      ampc::normalizeAxis(nc.getInt("axis", -1), type.getRank());
  if (!axis)
    return nc.error("axis " + Twine(nc.getInt("axis", -1)) +
                    " is out of range for rank " + Twine(type.getRank()));
  int64_t n = type.getDimSize(*axis);
  if (k < 0 || k > n)
    return nc.error("K " + Twine(k) + " must be between 0 and " + Twine(n) +
                    ", the size of axis " + Twine(*axis));
  int64_t largest = nc.getInt("largest", 1);
  if (largest != 0 && largest != 1)
    return nc.error("'largest' must be 0 or 1, got " + Twine(largest));
  Value indices = part<ampc::TopKOp>(
      nc, x,
      {nc.i64("k", k), nc.i64("axis", *axis), nc.i64("largest", largest)});
  if (!indices)
    return failure();
  Value positions = elementPositions(nc, indices, type.getShape(), *axis,
                                     /*checked=*/false);
  Value values = part<ampc::GatherOp>(
      nc, {reshaped(nc, x, {type.getNumElements()}), positions},
      {nc.i64("axis", 0)});
  if (!values)
    return failure();
  return Outputs{values, indices};
}

} // namespace ampc::detail
