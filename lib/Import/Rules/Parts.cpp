//===- Parts.cpp - the parts compositions are built from ------------------===//
//
// Helpers every family of rules uses: ops built by class, constants, index
// vectors, reshapes and transposes, each null after an error at the node.
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
#include <cstdio>
#include <limits>

using namespace mlir;

namespace ampc::detail {

std::string formatNumber(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", v);
  return buffer;
}

/// ampc.gemm's operand segments (A, B, the optional C, no ReLU mask) for
/// `operands` operands.
NamedAttribute gemmSegments(NodeContext &nc, size_t operands) {
  return nc.b.getNamedAttr(
      "operandSegmentSizes",
      nc.b.getDenseI32ArrayAttr({1, 1, operands > 2 ? 1 : 0, 0}));
}

FailureOr<Outputs> constant(NodeContext &nc, DenseElementsAttr value) {
  return nc.build<ampc::ConstantOp>({}, {nc.b.getNamedAttr("value", value)});
}

LogicalResult checkComputedConstant(NodeContext &nc, ArrayRef<int64_t> shape,
                                    Type element, const Twine &what) {
  std::optional<int64_t> count = ampc::checkedProduct(shape);
  if (!count)
    return nc.error(what + ": a constant of shape " + formatDims(shape) +
                    ", more than 2^63 elements");
  if (*count > kMaxComputedElements)
    return nc.error(what + ": a constant of " + Twine(*count) +
                    " elements, more than the 2^24 (" +
                    Twine(kMaxComputedElements) +
                    ") that ampc computes at import");
  if (std::string problem = ampc::checkTensorSize(
          RankedTensorType::get(shape, element), nc.importer.maxTensorBytes());
      !problem.empty())
    return nc.error(what + ": the constant " + problem +
                    " (--max-tensor-bytes)");
  return success();
}

/// The int64 (or, for a float `element`, f64) constant 0, step, 2 step, ...
/// of `n` elements, shaped `shape` (n elements in all).
Value indexVector(NodeContext &nc, int64_t n, ArrayRef<int64_t> shape,
                  Type element, int64_t step) {
  if (failed(checkComputedConstant(nc, shape, element,
                                   "an index vector of " + Twine(n) +
                                       " elements")))
    return Value();
  // The last value must fit too (a step of 2^62 over 4 elements wraps).
  int64_t last;
  if (n > 0 && llvm::MulOverflow(n - 1, step, last)) {
    (void)nc.error("an index vector of " + Twine(n) + " elements in steps of " +
                   Twine(step) + " goes past 2^63");
    return Value();
  }
  auto type = RankedTensorType::get(shape, element);
  DenseElementsAttr value;
  if (isa<FloatType>(element)) {
    SmallVector<double> values(n);
    for (int64_t i = 0; i < n; ++i)
      values[i] = static_cast<double>(i * step);
    value = DenseElementsAttr::get(type, ArrayRef<double>(values));
  } else {
    SmallVector<int64_t> values(n);
    for (int64_t i = 0; i < n; ++i)
      values[i] = i * step;
    value = DenseElementsAttr::get(type, ArrayRef<int64_t>(values));
  }
  FailureOr<Outputs> c = constant(nc, value);
  return failed(c) ? Value() : (*c)[0];
}

/// `shape` with ones everywhere but `n` at `axis` (and at `axis2` when
/// given): a vector along `axis` that broadcasts against a tensor of rank
/// `rank`.
SmallVector<int64_t> alongAxes(int64_t rank, int64_t n, int64_t axis,
                               int64_t axis2) {
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = n;
  if (axis2 >= 0)
    shape[axis2] = n;
  return shape;
}

/// An int64 constant of `shape` holding `values`.
Value indexConstant(NodeContext &nc, ArrayRef<int64_t> values,
                    ArrayRef<int64_t> shape) {
  if (failed(checkComputedConstant(nc, shape, nc.b.getI64Type(),
                                   "an index constant of " +
                                       Twine(values.size()) + " elements")))
    return Value();
  auto type = RankedTensorType::get(shape, nc.b.getI64Type());
  FailureOr<Outputs> c = constant(nc, DenseElementsAttr::get(type, values));
  return failed(c) ? Value() : (*c)[0];
}

/// `v` gathered along `axis` at the constant `indices` (none when they
/// read the axis as it is).
Value gatherAlong(NodeContext &nc, Value v, int64_t axis,
                  ArrayRef<int64_t> indices) {
  if (!v)
    return Value();
  auto type = cast<RankedTensorType>(v.getType());
  bool same = static_cast<int64_t>(indices.size()) == type.getDimSize(axis);
  for (auto [i, index] : llvm::enumerate(indices))
    same = same && index == static_cast<int64_t>(i);
  if (same)
    return v;
  Value idx = indexConstant(nc, indices, {static_cast<int64_t>(indices.size())});
  return idx ? part<ampc::GatherOp>(nc, {v, idx}, {nc.i64("axis", axis)})
             : Value();
}

} // namespace ampc::detail
