//===- Compose.cpp - building ampc ops one by one, folded as they go ------===//

#include "ampc/Dialect/Compose.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/TensorSize.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;

namespace ampc {

void Composer::erase(Operation *op) {
  if (rewriter)
    rewriter->eraseOp(op);
  else
    op->erase();
}

FailureOr<SmallVector<Value>> Composer::finish(Operation *op, bool infer) {
  MLIRContext *ctx = b.getContext();
  if (infer) {
    auto iface = cast<InferTypeOpInterface>(op);
    SmallVector<Type> types;
    if (failed(iface.inferReturnTypes(
            ctx, loc, op->getOperands(), op->getRawDictionaryAttrs(),
            op->getPropertiesStorage(), op->getRegions(), types))) {
      erase(op);
      return failure();
    }
    for (auto [result, type] : llvm::zip(op->getResults(), types))
      result.setType(type);
  }
  // Verified here, before folding can replace it, so an invalid node is
  // reported at its own location; the importer verifies the module once
  // more at the end for what spans nodes (the return, symbol uses).
  if (failed(mlir::verify(op))) {
    erase(op);
    return failure();
  }
  for (Type t : op->getResultTypes())
    if (std::string problem = ampc::checkTensorSize(t, maxTensorBytes);
        !problem.empty()) {
      erase(op);
      return emitError(loc)
             << "the result " << problem << " (--max-tensor-bytes)";
    }
  // Fold at once when every operand is constant: shape computations become
  // constants before the ops that need their values are reached.
  SmallVector<Attribute> constants;
  for (Value v : op->getOperands()) {
    Attribute c;
    matchPattern(v, m_Constant(&c));
    constants.push_back(c);
  }
  SmallVector<OpFoldResult> folded;
  SmallVector<Value> results(op->getResults());
  if (!op->hasTrait<OpTrait::ConstantLike>() &&
      succeeded(op->fold(constants, folded)) && !folded.empty()) {
    SmallVector<Value> replacements;
    for (auto [ofr, result] : llvm::zip(folded, op->getResults())) {
      if (auto v = dyn_cast<Value>(ofr)) {
        replacements.push_back(v);
        continue;
      }
      Operation *c = op->getDialect()->materializeConstant(
          b, cast<Attribute>(ofr), result.getType(), loc);
      if (!c)
        return results; // keep the unfolded op
      replacements.push_back(c->getResult(0));
    }
    erase(op);
    return replacements;
  }
  return results;
}

Value reshaped(Composer &c, Value v, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getShape() == shape)
    return v;
  return part<ReshapeOp>(c, v, {}, type.clone(shape));
}

Value transposed(Composer &c, Value v, ArrayRef<int64_t> perm) {
  if (!v || llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return v;
  return part<TransposeOp>(c, v, {c.ints("perm", perm)});
}

std::string formatDims(ArrayRef<int64_t> dims) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(dims))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

/// A constant op holding `value`; null after an error.
static Value constantOf(Composer &c, DenseElementsAttr value) {
  FailureOr<SmallVector<Value>> r =
      c.build<ConstantOp>({}, {c.b.getNamedAttr("value", value)});
  return failed(r) ? Value() : (*r)[0];
}

Value scalarOf(Composer &c, Type element, double value) {
  auto type = RankedTensorType::get({}, element);
  Attribute attr = isa<FloatType>(element)
                       ? Attribute(c.b.getFloatAttr(element, value))
                       : Attribute(c.b.getIntegerAttr(
                             element, static_cast<int64_t>(value)));
  return constantOf(c, DenseElementsAttr::get(type, attr));
}

LogicalResult checkComputedConstant(Composer &c, ArrayRef<int64_t> shape,
                                    Type element, const Twine &what) {
  std::optional<int64_t> count = ampc::checkedProduct(shape);
  if (!count)
    return c.error(what + ": a constant of shape " + formatDims(shape) +
                   ", more than 2^63 elements");
  if (*count > kMaxComputedElements)
    return c.error(what + ": a constant of " + Twine(*count) +
                   " elements, more than the 2^24 (" +
                   Twine(kMaxComputedElements) +
                   ") that ampc computes at import");
  if (std::string problem = ampc::checkTensorSize(
          RankedTensorType::get(shape, element), c.maxTensorBytes);
      !problem.empty())
    return c.error(what + ": the constant " + problem +
                   " (--max-tensor-bytes)");
  return success();
}

/// The int64 (or, for a float `element`, f64) constant 0, step, 2 step, ...
/// of `n` elements, shaped `shape` (n elements in all).
Value indexVector(Composer &c, int64_t n, ArrayRef<int64_t> shape,
                  Type element, int64_t step) {
  if (failed(checkComputedConstant(c, shape, element,
                                   "an index vector of " + Twine(n) +
                                       " elements")))
    return Value();
  // The last value must fit too (a step of 2^62 over 4 elements wraps).
  int64_t last;
  if (n > 0 && llvm::MulOverflow(n - 1, step, last)) {
    (void)c.error("an index vector of " + Twine(n) + " elements in steps of " +
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
  return constantOf(c, value);
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

} // namespace ampc
