//===- DecomposeIndexing.cpp - the indexing ops as gathers and scatters --===//
//
// ampc-decompose-indexing: each indexing op the importer imports 1:1
// (ampc.gather_elements, ampc.scatter_elements, ampc.gather_nd,
// ampc.scatter_nd, ampc.reverse_sequence, ampc.one_hot, ampc.top_k_values)
// becomes what the importer once built for the node, one pattern per op:
// data-dependent indexing is an ampc.gather or ampc.scatter of flat
// positions into data viewed as rows, the positions computed from the
// indices by int64 elementwise ops (fused into one loop later). An index
// out of range makes its position one that Gather and Scatter refuse at run
// time, so these ops fail as Gather does. The ops are built by a Composer
// (Compose.h) and so folded as they are made, as at import.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"

#include "ampc/Analysis/KernelGeometry.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/Compose.h"
#include "ampc/Dialect/Indexing.h"
#include "ampc/Transforms/Decompose.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"

namespace ampc {
#define GEN_PASS_DEF_DECOMPOSEINDEXINGPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;
using ampc::emit::rowMajorStrides;
using ampc::alongAxes;
using ampc::Composer;
using ampc::indexVector;
using ampc::part;
using ampc::reshaped;
using ampc::scalarOf;

namespace {

//===----------------------------------------------------------------------===//
// Positions
//===----------------------------------------------------------------------===//

/// The int64 position `index` (an integer tensor) names along a dimension
/// of `size` elements, a negative index counting from the end, and
/// whether it lies in [-size, size). An index outside is given position 0,
/// and size is added to negative indices only, so that no arithmetic on a
/// hostile index (near ±2^63) overflows.
struct AxisPosition {
  Value position, valid;
};

AxisPosition axisPosition(Composer &c, Value index, int64_t size) {
  auto type = cast<RankedTensorType>(index.getType());
  Type i64 = c.b.getI64Type();
  Value wide = type.getElementType() == i64
                   ? index
                   : part<ampc::CastOp>(c, index, {}, type.clone(i64));
  Value zero = scalarOf(c, i64, 0), sizeValue = scalarOf(c, i64, size);
  Value valid = part<ampc::AndOp>(
      c, {part<ampc::GreaterOrEqualOp>(c, {wide, scalarOf(c, i64, -size)}),
          part<ampc::LessOp>(c, {wide, sizeValue})});
  Value wrapped = part<ampc::AddOp>(
      c, {wide, part<ampc::WhereOp>(c, {part<ampc::LessOp>(c, {wide, zero}),
                                        sizeValue, zero})});
  return {part<ampc::WhereOp>(c, {valid, wrapped, zero}), valid};
}

/// `offset` where `valid` holds, else -(rows + 1): outside the range of
/// every Gather or Scatter along a dimension of `rows`, so refused there at
/// run time.
Value guardedPosition(Composer &c, Value offset, Value valid, int64_t rows) {
  if (!valid)
    return offset;
  Type i64 = c.b.getI64Type();
  return part<ampc::WhereOp>(
      c, {valid, offset, scalarOf(c, i64, -static_cast<double>(rows) - 1)});
}

/// The flat (row-major) position in data of shape `dataShape` of each
/// element that GatherElements or ScatterElements reads or writes: index
/// i's value along `axis`, i's own coordinates along the other dimensions.
/// `checked`: wrap negative indices and guard against indices out of range
/// (TopK's int64 positions need neither).
Value elementPositions(Composer &c, Value indices, ArrayRef<int64_t> dataShape,
                       int64_t axis, bool checked) {
  auto type = cast<RankedTensorType>(indices.getType());
  Type i64 = c.b.getI64Type();
  int64_t rank = type.getRank();
  SmallVector<int64_t> strides = rowMajorStrides(dataShape);
  AxisPosition p = checked ? axisPosition(c, indices, dataShape[axis])
                           : AxisPosition{indices, Value()};
  Value offset =
      strides[axis] == 1
          ? p.position
          : part<ampc::MulOp>(c, {p.position, scalarOf(c, i64, strides[axis])});
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = type.getDimSize(d);
    if (d == axis || n <= 1)
      continue;
    offset = part<ampc::AddOp>(
        c, {offset, indexVector(c, n, alongAxes(rank, n, d), i64, strides[d])});
  }
  int64_t total = 1;
  for (int64_t d : dataShape)
    total *= d;
  return guardedPosition(c, offset, p.valid, total);
}

/// GatherND's and ScatterND's view of data: its first `lead` dimensions
/// flattened into rows, and for each index tuple of `indices` (shape
/// [..., k], lead = batch + k, the first `batch` dimensions those of data)
/// its row, Σ position_j × stride_j plus the batch's first row.
Value tupleRows(Composer &c, Value indices, ArrayRef<int64_t> dataShape,
                int64_t batch) {
  auto type = cast<RankedTensorType>(indices.getType());
  Type i64 = c.b.getI64Type();
  int64_t q = type.getRank(), k = type.getDimSize(q - 1);
  SmallVector<int64_t> tupleShape(type.getShape().drop_back());
  ArrayRef<int64_t> lead = dataShape.take_front(batch + k);
  SmallVector<int64_t> strides = rowMajorStrides(lead);
  Value offset, valid;
  for (int64_t j = 0; j < k; ++j) {
    Value column =
        part<ampc::SliceOp>(c, indices,
                            {c.ints("starts", {j}), c.ints("ends", {j + 1}),
                             c.ints("axes", {q - 1}), c.ints("steps", {1})});
    if (!column)
      return Value();
    AxisPosition p =
        axisPosition(c, reshaped(c, column, tupleShape), lead[batch + j]);
    int64_t stride = strides[batch + j];
    Value term =
        stride == 1
            ? p.position
            : part<ampc::MulOp>(c, {p.position, scalarOf(c, i64, stride)});
    offset = offset ? part<ampc::AddOp>(c, {offset, term}) : term;
    valid = valid ? part<ampc::AndOp>(c, {valid, p.valid}) : p.valid;
  }
  for (int64_t i = 0; i < batch; ++i) {
    int64_t n = tupleShape[i];
    if (n > 1)
      offset = part<ampc::AddOp>(
          c,
          {offset, indexVector(c, n, alongAxes(q - 1, n, i), i64, strides[i])});
  }
  int64_t rows = 1;
  for (int64_t d : lead)
    rows *= d;
  return guardedPosition(c, offset, valid, rows);
}

/// data viewed as rows of its dimensions after the first `lead`.
Value asRows(Composer &c, Value data, int64_t lead) {
  auto type = cast<RankedTensorType>(data.getType());
  int64_t rows = 1;
  for (int64_t d : type.getShape().take_front(lead))
    rows *= d;
  SmallVector<int64_t> shape = {rows};
  llvm::append_range(shape, type.getShape().drop_front(lead));
  return reshaped(c, data, shape);
}

//===----------------------------------------------------------------------===//
// The lowerings, one per op: the op's results, or none after an error at
// the op (already reported).
//===----------------------------------------------------------------------===//

using Results = ampc::Replacement;

/// A result list of `v`, empty when `v` is null.
Results resultsOf(Value v) { return v ? Results{v} : Results{}; }

Results lowerGatherElements(Composer &c, ampc::GatherElementsOp op) {
  Value data = op.getData(), indices = op.getIndices();
  auto dataType = cast<RankedTensorType>(data.getType());
  std::string error;
  FailureOr<int64_t> axis = ampc::readElementIndices(
      dataType, cast<RankedTensorType>(indices.getType()), op.getAxis(), error);
  if (failed(axis))
    return (void)c.error(error), Results{};
  Value positions = elementPositions(c, indices, dataType.getShape(), *axis,
                                     /*checked=*/true);
  Value flat = reshaped(c, data, {dataType.getNumElements()});
  return resultsOf(
      part<ampc::GatherOp>(c, {flat, positions}, {c.i64("axis", 0)}));
}

/// ReverseSequence: a GatherElements along time_axis at index len - 1 - t
/// where t < len (the batch's sequence_lens), t elsewhere.
Results lowerReverseSequence(Composer &c, ampc::ReverseSequenceOp op) {
  Value x = op.getInput(), lens = op.getSequenceLens();
  auto xt = cast<RankedTensorType>(x.getType());
  int64_t timeAxis = op.getTimeAxis(), batchAxis = op.getBatchAxis();
  int64_t steps = xt.getDimSize(timeAxis), batch = xt.getDimSize(batchAxis);
  auto i64 = c.b.getI64Type();
  SmallVector<int64_t> tShape(2, 1), lShape(2, 1);
  tShape[timeAxis] = steps;
  lShape[batchAxis] = batch;
  Value t = indexVector(c, steps, tShape, i64);
  Value len = reshaped(c, lens, lShape);
  Value reversed = part<ampc::SubOp>(
      c, {part<ampc::SubOp>(c, {len, scalarOf(c, i64, 1.0)}), t});
  Value index =
      part<ampc::WhereOp>(c, {part<ampc::LessOp>(c, {t, len}), reversed, t});
  if (!index)
    return {};
  // (T, B) or (B, T), then 1s for the other axes, expanded to x's shape.
  SmallVector<int64_t> shape2(xt.getShape().take_front(2));
  shape2.append(xt.getRank() - 2, 1);
  index = part<ampc::ExpandOp>(c, reshaped(c, index, shape2), {},
                               RankedTensorType::get(xt.getShape(), i64));
  Value positions = index ? elementPositions(c, index, xt.getShape(), timeAxis,
                                             /*checked=*/true)
                          : Value();
  return resultsOf(part<ampc::GatherOp>(
      c, {reshaped(c, x, {xt.getNumElements()}), positions},
      {c.i64("axis", 0)}));
}

/// ScatterElements: an ampc.scatter of the element positions into data
/// flattened, reshaped back.
Results lowerScatterElements(Composer &c, ampc::ScatterElementsOp op) {
  Value data = op.getData(), indices = op.getIndices(),
        updates = op.getUpdates();
  auto dataType = cast<RankedTensorType>(data.getType());
  std::string error;
  FailureOr<int64_t> axis = ampc::readElementIndices(
      dataType, cast<RankedTensorType>(indices.getType()), op.getAxis(), error);
  if (failed(axis))
    return (void)c.error(error), Results{};
  Value positions = elementPositions(c, indices, dataType.getShape(), *axis,
                                     /*checked=*/true);
  Value flat = reshaped(c, data, {dataType.getNumElements()});
  Value r = part<ampc::ScatterOp>(
      c, {flat, positions, updates},
      {c.i64("axis", 0), c.b.getNamedAttr("reduction", op.getReductionAttr())});
  return resultsOf(r ? reshaped(c, r, dataType.getShape()) : Value());
}

/// GatherND: an ampc.gather of the tuples' rows of data viewed as rows.
Results lowerGatherND(Composer &c, ampc::GatherNDOp op) {
  Value data = op.getData(), indices = op.getIndices();
  auto dataType = cast<RankedTensorType>(data.getType());
  int64_t batch = op.getBatchDims();
  std::string error;
  FailureOr<int64_t> k = ampc::readTupleIndices(
      dataType, cast<RankedTensorType>(indices.getType()), batch, error);
  if (failed(k))
    return (void)c.error(error), Results{};
  Value rows = tupleRows(c, indices, dataType.getShape(), batch);
  return resultsOf(part<ampc::GatherOp>(c, {asRows(c, data, batch + *k), rows},
                                        {c.i64("axis", 0)}));
}

/// ScatterND: an ampc.scatter of the tuples' rows into data viewed as rows,
/// reshaped back.
Results lowerScatterND(Composer &c, ampc::ScatterNDOp op) {
  Value data = op.getData(), indices = op.getIndices(),
        updates = op.getUpdates();
  auto dataType = cast<RankedTensorType>(data.getType());
  std::string error;
  FailureOr<int64_t> k = ampc::readTupleIndices(
      dataType, cast<RankedTensorType>(indices.getType()), 0, error);
  if (failed(k))
    return (void)c.error(error), Results{};
  Value rows = tupleRows(c, indices, dataType.getShape(), 0);
  Value r = part<ampc::ScatterOp>(
      c, {asRows(c, data, *k), rows, updates},
      {c.i64("axis", 0), c.b.getNamedAttr("reduction", op.getReductionAttr())});
  return resultsOf(r ? reshaped(c, r, dataType.getShape()) : Value());
}

/// OneHot: where(unsqueeze(indices, axis) == index vector, on, off), the
/// values [off, on] sliced from `values`. Negative indices count from
/// depth; others outside [-depth, depth) match nothing. Float indices are
/// compared in f64, integer ones in int64, both exact.
Results lowerOneHot(Composer &c, ampc::OneHotOp op) {
  Value indices = op.getIndices(), values = op.getValues();
  auto in = cast<RankedTensorType>(indices.getType());
  std::string error;
  FailureOr<int64_t> axis = ampc::readOneHot(
      in, cast<RankedTensorType>(values.getType()), op.getAxis(), error);
  if (failed(axis))
    return (void)c.error(error), Results{};
  int64_t depth = op.getDepth(), rank = in.getRank() + 1;
  SmallVector<int64_t> unsqueezed(in.getShape());
  unsqueezed.insert(unsqueezed.begin() + *axis, 1);
  Type compare = isa<FloatType>(in.getElementType()) ? Type(c.b.getF64Type())
                                                     : Type(c.b.getI64Type());
  Value wide = part<ampc::CastOp>(c, indices, {}, in.clone(compare));
  Value zero = scalarOf(c, compare, 0);
  Value depthScalar = scalarOf(c, compare, static_cast<double>(depth));
  Value negative = part<ampc::LessOp>(c, {wide, zero});
  Value wrapped = part<ampc::WhereOp>(
      c, {negative, part<ampc::AddOp>(c, {wide, depthScalar}), wide});
  wrapped = wrapped ? reshaped(c, wrapped, unsqueezed) : Value();
  Value index = indexVector(c, depth, alongAxes(rank, depth, *axis), compare);
  Value hit = part<ampc::EqualOp>(c, {wrapped, index});
  auto pick = [&](int64_t at) -> Value {
    Value v =
        part<ampc::SliceOp>(c, values,
                            {c.ints("starts", {at}), c.ints("ends", {at + 1}),
                             c.ints("axes", {0}), c.ints("steps", {1})});
    return v ? reshaped(c, v, {}) : Value();
  };
  return resultsOf(part<ampc::WhereOp>(c, {hit, pick(1), pick(0)}));
}

/// TopK: ampc.top_k's indices, and the values gathered at them (so their
/// gradient is Gather's).
Results lowerTopK(Composer &c, ampc::TopKValuesOp op) {
  Value x = op.getInput();
  auto type = cast<RankedTensorType>(x.getType());
  std::string error;
  FailureOr<int64_t> axis =
      ampc::readTopK(type, op.getAxis(), op.getK(), op.getLargest(), error);
  if (failed(axis))
    return (void)c.error(error), Results{};
  Value indices =
      part<ampc::TopKOp>(c, x,
                         {c.i64("k", op.getK()), c.i64("axis", *axis),
                          c.i64("largest", op.getLargest())});
  if (!indices)
    return {};
  Value positions = elementPositions(c, indices, type.getShape(), *axis,
                                     /*checked=*/false);
  Value values = part<ampc::GatherOp>(
      c, {reshaped(c, x, {type.getNumElements()}), positions},
      {c.i64("axis", 0)});
  if (!values)
    return {};
  return {values, indices};
}

//===----------------------------------------------------------------------===//
// The patterns and the pass
//===----------------------------------------------------------------------===//

struct DecomposeIndexingPass
    : ampc::impl::DecomposeIndexingPassBase<DecomposeIndexingPass> {
  using Base::Base;

  void runOnOperation() override {
    using ampc::DecomposePattern;
    if (failed(ampc::decomposeEach<
               DecomposePattern<ampc::GatherElementsOp, lowerGatherElements>,
               DecomposePattern<ampc::ScatterElementsOp, lowerScatterElements>,
               DecomposePattern<ampc::GatherNDOp, lowerGatherND>,
               DecomposePattern<ampc::ScatterNDOp, lowerScatterND>,
               DecomposePattern<ampc::ReverseSequenceOp, lowerReverseSequence>,
               DecomposePattern<ampc::OneHotOp, lowerOneHot>,
               DecomposePattern<ampc::TopKValuesOp, lowerTopK>>(
            getOperation(), maxTensorBytes)))
      signalPassFailure();
  }
};

} // namespace
