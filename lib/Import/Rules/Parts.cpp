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
