//===- OptimizeCasts.cpp - one cast per value and dtype, no round trips ---===//
//
// ampc-assign-precision gives every use its own cast; this pass leaves one
// cast per (value, dtype) and removes the casts that change nothing. Only
// compiler-inserted casts (ampc.autocast) are rewritten or erased: a user's
// own Cast is semantics and stays, though inserted casts may reuse it.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"
#include "ampc/Transforms/Precision.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"

namespace ampc {
#define GEN_PASS_DEF_OPTIMIZECASTSPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

Type elementOf(Value v) { return cast<ShapedType>(v.getType()).getElementType(); }

/// Whether every value of `from` is exactly representable in `to`, so that
/// casting to `to` and back gives the value unchanged.
bool widensExactly(Type from, Type to) {
  if (from.isF16() || from.isBF16())
    return to.isF32() || to.isF64();
  if (from.isF32())
    return to.isF64();
  return false;
}

struct OptimizeCasts : ampc::impl::OptimizeCastsPassBase<OptimizeCasts> {
  using Base::Base;

  /// cast(cast(x: A -> B): B -> C) with A -> B exact: x itself when C is A,
  /// otherwise one cast from x. Returns true when it changed something.
  static bool foldRoundTrip(ampc::CastOp cast) {
    auto inner = cast.getInput().getDefiningOp<ampc::CastOp>();
    if (!inner)
      return false;
    Value source = inner.getInput();
    if (!widensExactly(elementOf(source), elementOf(inner.getOutput())))
      return false;
    if (source.getType() == cast.getType())
      cast.replaceAllUsesWith(source);
    else
      cast.getInputMutable().assign(source);
    return true;
  }

  /// A cast of a small constant becomes a constant of the new dtype (the
  /// cast's folder rounds to nearest even); null when it does not fold.
  static Value foldConstant(ampc::CastOp cast) {
    Attribute value;
    if (!matchPattern(cast.getInput(), m_Constant(&value)))
      return {};
    SmallVector<OpFoldResult> folded;
    if (failed(cast->fold({value}, folded)) || folded.size() != 1)
      return {};
    auto elements = dyn_cast_if_present<ElementsAttr>(
        dyn_cast_if_present<Attribute>(folded.front()));
    if (!elements)
      return {};
    OpBuilder b(cast);
    return ampc::ConstantOp::create(b, cast.getLoc(), elements);
  }

  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      // Round trips and identities first: they expose more casts of the
      // same value to the same dtype.
      bool changed = true;
      while (changed) {
        changed = false;
        for (auto cast : block.getOps<ampc::CastOp>()) {
          if (!ampc::isAutocast(cast) || cast.use_empty())
            continue;
          if (cast.getInput().getType() == cast.getType()) {
            cast.replaceAllUsesWith(cast.getInput());
            changed = true;
          } else if (Value folded = foldConstant(cast)) {
            cast.replaceAllUsesWith(folded);
            changed = true;
          } else {
            changed |= foldRoundTrip(cast);
          }
        }
      }
      // One cast per (value, dtype): in a block, the first cast of a value
      // comes before the users of every later one.
      llvm::DenseMap<std::pair<Value, Type>, ampc::CastOp> first;
      for (auto cast : block.getOps<ampc::CastOp>()) {
        if (cast.use_empty() && ampc::isAutocast(cast))
          continue;
        auto [it, inserted] =
            first.try_emplace({cast.getInput(), cast.getType()}, cast);
        if (!inserted && ampc::isAutocast(cast))
          cast.replaceAllUsesWith(it->second.getOutput());
      }
      // Backwards, so that a cast whose only user was a folded cast is
      // seen after that user is gone.
      llvm::SetVector<Operation *> constants;
      for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block))) {
        auto cast = dyn_cast<ampc::CastOp>(op);
        if (!cast || !ampc::isAutocast(cast) || !cast.use_empty())
          continue;
        if (auto constant = cast.getInput().getDefiningOp<ampc::ConstantOp>())
          constants.insert(constant);
        cast.erase();
      }
      // A constant whose casts all folded is dead now.
      for (Operation *constant : constants)
        if (constant->use_empty())
          constant->erase();
    }
  }
};
} // namespace
