//===- FuseLayerNormGrad.cpp - LayerNorm's parameter adjoints in its kernel -===//
//
// The CUDA target's LayerNorm backward as one kernel (Passes.td,
// FuseLayerNormGradPass; issue 37, item 4): autodiff writes the Scale and B
// adjoints as ReduceSums over the rows of dY·x̂ and of dY beside
// layer_norm_grad; this pass moves them into the op (`param_grads`), whose
// kernel computes them from the same read of the rows as dX, as per-group
// shares then one small ordered sum.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"

#include "ampc/Dialect/AMPCDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace ampc {
#define GEN_PASS_DEF_FUSELAYERNORMGRADPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

/// `v`, or the value a compiler-inserted cast of it converts.
Value throughCast(Value v) {
  if (auto cast = v.getDefiningOp<ampc::CastOp>())
    return cast.getInput();
  return v;
}

/// Whether `mul`'s operands are {a, b} in either order.
bool isMulOf(ampc::MulOp mul, llvm::function_ref<bool(Value)> a,
             llvm::function_ref<bool(Value)> b) {
  Value l = mul.getLhs(), r = mul.getRhs();
  return (a(l) && b(r)) || (a(r) && b(l));
}

/// A ReduceSum of `v` over exactly `axes`, without kept dimensions, of type
/// `type`, in `block` after `after` (if given).
ampc::ReduceSumOp rowSum(Value v, ArrayRef<int64_t> axes, Type type,
                         Block *block, Operation *after) {
  for (Operation *user : v.getUsers()) {
    auto sum = dyn_cast<ampc::ReduceSumOp>(user);
    if (sum && sum.getAxes() == axes && sum.getKeepdims() == 0 &&
        sum.getType() == type && sum->getBlock() == block &&
        (!after || after->isBeforeInBlock(sum)))
      return sum;
  }
  return nullptr;
}

/// One LayerNorm's backward: its X, Scale, statistics and axis, and the
/// layer_norm_grad computing its dX if autodiff wrote one (none where dX
/// is not needed: the first LayerNorm of a model reads its input).
struct Backward {
  ampc::LayerNormGradOp grad;
  Value x, scale, mean, inv;
  IntegerAttr axis;
  Location loc;
};

struct FuseLayerNormGrad
    : ampc::impl::FuseLayerNormGradPassBase<FuseLayerNormGrad> {
  void runOnOperation() override {
    SmallVector<Backward> work;
    getOperation().walk([&](ampc::LayerNormGradOp g) {
      if (g.getParamGrads() == 0)
        work.push_back({g, g.getInput(), g.getScale(), g.getMean(),
                        g.getInvStdDev(), g.getAxisAttr(), g.getLoc()});
    });
    getOperation().walk([&](ampc::LayerNormalizationOp ln) {
      bool hasGrad = llvm::any_of(ln.getMean().getUsers(), [](Operation *u) {
        return isa<ampc::LayerNormGradOp>(u);
      });
      if (!hasGrad)
        work.push_back({nullptr, ln.getInput(), ln.getScale(), ln.getMean(),
                        ln.getInvStdDev(), ln.getAxisAttr(), ln.getLoc()});
    });
    for (Backward &w : work)
      fuse(w);
  }

  void fuse(Backward w) {
    Value x = w.x;
    auto xType = cast<RankedTensorType>(x.getType());
    // FP32/FP64 data only: the kernel then computes dY·x̂ exactly as the
    // elementwise ops did, only the sums' order differs.
    Type element = xType.getElementType();
    if (!element.isF32() && !element.isF64())
      return;
    int64_t rank = xType.getRank();
    int64_t axis = w.axis.getInt();
    if (axis < 0)
      axis += rank;
    ArrayRef<int64_t> normalized = xType.getShape().drop_front(axis);
    // Scale of the normalised shape: its adjoint sums over the rows only.
    if (cast<RankedTensorType>(w.scale.getType()).getShape() != normalized)
      return;
    SmallVector<int64_t> rows = llvm::to_vector(llvm::seq<int64_t>(0, axis));
    auto paramType = RankedTensorType::get(normalized, element);

    // x̂ = (X - Mean) · InvStdDev, the statistics maybe cast to X's type;
    // the Scale adjoint sums dY·x̂ over the rows.
    auto isXhat = [&](Value v) {
      auto mul = v.getDefiningOp<ampc::MulOp>();
      return mul &&
             isMulOf(
                 mul,
                 [&](Value d) {
                   auto sub = d.getDefiningOp<ampc::SubOp>();
                   return sub && sub.getLhs() == x &&
                          throughCast(sub.getRhs()) == w.mean;
                 },
                 [&](Value s) { return throughCast(s) == w.inv; });
    };
    Value dy;
    ampc::ReduceSumOp scaleSum;
    auto tryProduct = [&](Operation *user, Value gradient) {
      auto mul = dyn_cast<ampc::MulOp>(user);
      if (!mul || (w.grad && mul->getBlock() != w.grad->getBlock()))
        return false;
      // dY · x̂ in either order.
      Value candidate;
      for (auto [a, b] : {std::pair{mul.getLhs(), mul.getRhs()},
                          std::pair{mul.getRhs(), mul.getLhs()}})
        if (isXhat(b) && a.getType() == x.getType() &&
            (!gradient || a == gradient)) {
          candidate = a;
          break;
        }
      if (!candidate)
        return false;
      scaleSum = rowSum(mul, rows, paramType, mul->getBlock(), w.grad);
      dy = candidate;
      return static_cast<bool>(scaleSum);
    };
    if (w.grad) {
      for (Operation *user : w.grad.getGrad().getUsers())
        if (tryProduct(user, w.grad.getGrad()))
          break;
    } else {
      // dY is what multiplies x̂: found from the statistics' users.
      SmallVector<Value> means{w.mean};
      for (Operation *u : w.mean.getUsers())
        if (auto cast = dyn_cast<ampc::CastOp>(u))
          means.push_back(cast);
      for (Value m : means) {
        for (Operation *u : m.getUsers()) {
          auto sub = dyn_cast<ampc::SubOp>(u);
          if (!sub || sub.getLhs() != x)
            continue;
          for (Operation *xh : sub->getUsers())
            if (isa<ampc::MulOp>(xh) && isXhat(xh->getResult(0)))
              for (Operation *prod : xh->getUsers())
                if (tryProduct(prod, Value()))
                  goto found;
        }
      }
    found:;
    }
    if (!scaleSum)
      return;
    ampc::ReduceSumOp biasSum = rowSum(dy, rows, paramType,
                                       scaleSum->getBlock(), w.grad);

    // Where autodiff wrote a layer_norm_grad, in its place; else before the
    // first of the sums (dY, X and the statistics are defined by then).
    Operation *at = w.grad;
    if (!at)
      at = biasSum && biasSum->isBeforeInBlock(scaleSum)
               ? biasSum.getOperation()
               : scaleSum.getOperation();
    OpBuilder b(at);
    auto fused = ampc::LayerNormGradOp::create(
        b, w.grad ? w.grad.getLoc() : scaleSum.getLoc(), dy, x, w.scale,
        w.mean, w.inv, w.axis, b.getI64IntegerAttr(biasSum ? 2 : 1));
    if (w.grad) {
      fused->setDiscardableAttrs(w.grad->getDiscardableAttrDictionary());
      w.grad.getOutput().replaceAllUsesWith(fused.getOutput());
      w.grad->erase();
    }
    scaleSum.getOutput().replaceAllUsesWith(fused.getGradParams()[0]);
    if (biasSum)
      biasSum.getOutput().replaceAllUsesWith(fused.getGradParams()[1]);
    // The sums go; the products they read go where nothing else reads
    // them.
    SmallVector<Operation *> worklist{scaleSum.getInput().getDefiningOp()};
    scaleSum->erase();
    if (biasSum)
      biasSum->erase();
    llvm::SmallPtrSet<Operation *, 8> erased;
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!op || erased.contains(op) || !op->use_empty() ||
          !isa<ampc::MulOp, ampc::SubOp, ampc::CastOp>(op))
        continue;
      for (Value operand : op->getOperands())
        worklist.push_back(operand.getDefiningOp());
      erased.insert(op);
      op->erase();
    }
  }
};

} // namespace
