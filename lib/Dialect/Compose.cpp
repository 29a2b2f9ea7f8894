//===- Compose.cpp - building ampc ops one by one, folded as they go ------===//

#include "ampc/Dialect/Compose.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/TensorSize.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

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

Value scalarOf(Composer &c, Type element, double value) {
  auto type = RankedTensorType::get({}, element);
  Attribute attr = isa<FloatType>(element)
                       ? Attribute(c.b.getFloatAttr(element, value))
                       : Attribute(c.b.getIntegerAttr(
                             element, static_cast<int64_t>(value)));
  FailureOr<SmallVector<Value>> r = c.build<ConstantOp>(
      {}, {c.b.getNamedAttr("value", DenseElementsAttr::get(type, attr))});
  return failed(r) ? Value() : (*r)[0];
}

std::string formatDims(ArrayRef<int64_t> dims) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(dims))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

} // namespace ampc
