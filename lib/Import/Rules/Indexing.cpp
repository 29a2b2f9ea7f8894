//===- Indexing.cpp - gathers, scatters and their kin ---------------------===//
//
// Gather, GatherElements, GatherND, ScatterElements, ScatterND,
// ReverseSequence, TopK and OneHot. Gather is one ampc.gather; the others
// are compositions, imported 1:1 (ampc.gather_elements, ampc.gather_nd,
// ampc.scatter_elements, ampc.scatter_nd, ampc.reverse_sequence,
// ampc.one_hot, ampc.top_k_values) and lowered by ampc-decompose-indexing
// (lib/Transforms/DecomposeIndexing.cpp). The rules check the node
// (include/ampc/Dialect/Indexing.h, which the ops' shape rules share) so
// that a bad node is refused at import with its one-line error.
//
//===----------------------------------------------------------------------===//

#include "ImportRules.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/Indexing.h"
#include "ampc/Dialect/TensorSize.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/Twine.h"

#include <cmath>

using namespace mlir;

namespace ampc::detail {

FailureOr<Outputs> importGather(NodeContext &nc) {
  return buildSame<ampc::GatherOp>(nc, {nc.i64("axis", nc.getInt("axis", 0))});
}

namespace {

/// The type of input `i`.
RankedTensorType typeOf(NodeContext &nc, size_t i) {
  return cast<RankedTensorType>(nc.input(i).getType());
}

} // namespace

/// OneHot: one ampc.one_hot, its depth (input 1, a constant; truncated
/// when a float) read here. Negative indices count from depth; others
/// outside [-depth, depth) match nothing (ampc-decompose-indexing).
FailureOr<Outputs> importOneHot(NodeContext &nc) {
  RankedTensorType in = typeOf(nc, 0), valuesType = typeOf(nc, 2);
  std::string error;
  FailureOr<int64_t> axis =
      ampc::readOneHot(in, valuesType, nc.getInt("axis", -1), error);
  if (failed(axis))
    return nc.error(error);
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
  // A depth beyond 2^53 is not exact as a double nor a size of a tensor
  // ampc makes (the size check below refuses far less).
  if (!(depthNumber >= 1 && depthNumber <= 9007199254740992.0))
    return nc.error("depth " + depthText +
                    " must be between 1 and 2^53 (truncated to an integer)");
  int64_t depth = static_cast<int64_t>(depthNumber);
  SmallVector<int64_t> shape(in.getShape());
  shape.insert(shape.begin() + *axis, depth);
  std::string problem =
      ampc::checkTensorSize(valuesType.clone(shape), nc.maxTensorBytes);
  if (!problem.empty())
    return nc.error("depth " + Twine(depth) + ": " + problem +
                    " (--max-tensor-bytes)");
  // The lowering's index vector 0 .. depth - 1 is a constant computed
  // from the model's number.
  Type compare = isa<FloatType>(in.getElementType()) ? Type(nc.b.getF64Type())
                                                     : Type(nc.b.getI64Type());
  if (failed(
          checkComputedConstant(nc, {depth}, compare, "depth " + Twine(depth))))
    return failure();
  return nc.build<ampc::OneHotOp>(
      {nc.input(0), nc.input(2)},
      {nc.i64("depth", depth), nc.i64("axis", nc.getInt("axis", -1))});
}

FailureOr<Outputs> importGatherElements(NodeContext &nc) {
  std::string error;
  int64_t axis = nc.getInt("axis", 0);
  if (failed(
          ampc::readElementIndices(typeOf(nc, 0), typeOf(nc, 1), axis, error)))
    return nc.error(error);
  return nc.build<ampc::GatherElementsOp>({nc.input(0), nc.input(1)},
                                          {nc.i64("axis", axis)});
}

FailureOr<Outputs> importReverseSequence(NodeContext &nc) {
  std::string error;
  int64_t timeAxis = nc.getInt("time_axis", 0),
          batchAxis = nc.getInt("batch_axis", 1);
  if (failed(ampc::checkReverseSequence(typeOf(nc, 0), typeOf(nc, 1), timeAxis,
                                        batchAxis, error)))
    return nc.error(error);
  return nc.build<ampc::ReverseSequenceOp>(
      {nc.input(0), nc.input(1)},
      {nc.i64("time_axis", timeAxis), nc.i64("batch_axis", batchAxis)});
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
  std::string error;
  int64_t axis = nc.getInt("axis", 0);
  if (failed(ampc::readElementIndices(typeOf(nc, 0), typeOf(nc, 1), axis,
                                      error)) ||
      failed(ampc::checkElementUpdates(typeOf(nc, 1), typeOf(nc, 2), error)))
    return nc.error(error);
  FailureOr<NamedAttribute> reduction = scatterReduction(nc);
  if (failed(reduction))
    return failure();
  return nc.build<ampc::ScatterElementsOp>(nc.inputs,
                                           {nc.i64("axis", axis), *reduction});
}

FailureOr<Outputs> importGatherND(NodeContext &nc) {
  std::string error;
  int64_t batch = nc.getInt("batch_dims", 0);
  if (failed(
          ampc::readTupleIndices(typeOf(nc, 0), typeOf(nc, 1), batch, error)))
    return nc.error(error);
  return nc.build<ampc::GatherNDOp>({nc.input(0), nc.input(1)},
                                    {nc.i64("batch_dims", batch)});
}

FailureOr<Outputs> importScatterND(NodeContext &nc) {
  std::string error;
  RankedTensorType data = typeOf(nc, 0), indices = typeOf(nc, 1);
  FailureOr<int64_t> k = ampc::readTupleIndices(data, indices, 0, error);
  if (failed(k) ||
      failed(ampc::checkTupleUpdates(data, indices, typeOf(nc, 2), *k, error)))
    return nc.error(error);
  FailureOr<NamedAttribute> reduction = scatterReduction(nc);
  if (failed(reduction))
    return failure();
  return nc.build<ampc::ScatterNDOp>(nc.inputs, {*reduction});
}

/// TopK: one ampc.top_k_values (values and indices). K is input 1 from
/// opset 10, an attribute before.
FailureOr<Outputs> importTopK(NodeContext &nc) {
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
  std::string error;
  int64_t axis = nc.getInt("axis", -1), largest = nc.getInt("largest", 1);
  if (failed(ampc::readTopK(typeOf(nc, 0), axis, k, largest, error)))
    return nc.error(error);
  return nc.build<ampc::TopKValuesOp>(
      nc.input(0),
      {nc.i64("k", k), nc.i64("axis", axis), nc.i64("largest", largest)}, 2);
}

} // namespace ampc::detail
