//===- PackQkv.cpp - Q, K and V projections as one GEMM -------------------===//
//
// Issue 37, item 3 (Passes.td, PackQkvPass). A transformer's attention
// reads three projections of one input, each a Linear: three GEMMs
// forward, and backward three dX GEMMs summed and three weight-gradient
// GEMMs. Their 16-bit weight copies (training state the optimizer writes)
// can be laid out one after the other, so one GEMM against the packed
// [3n, K] weight computes Q | K | V in each row of its output; attention
// reads the three in place (ampc.attention's packed_qkv), its adjoint
// writes dQ | dK | dV the same way, and the backward is one dX GEMM (the
// sum of the three comes from its k loop) and one weight-gradient GEMM
// whose rows are the three weight gradients (ampc.subview each).
//
// All or nothing per attention op: every piece must match (the forward
// GEMMs, the one adjoint, the dX GEMMs summed by adds alone, the weight-
// gradient GEMMs), else the IR is left as it was.
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace ampc {
#define GEN_PASS_DEF_PACKQKVPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// `v` with the reshapes that produce it looked through; `chain` (when
/// given) gets them, last first.
Value throughReshapes(Value v, SmallVectorImpl<Operation *> *chain = nullptr) {
  while (auto r = v.getDefiningOp<ampc::ReshapeOp>()) {
    if (chain)
      chain->push_back(r);
    v = r.getInput();
  }
  return v;
}

/// The single user of `v`, or null.
Operation *onlyUser(Value v) {
  return v.hasOneUse() ? *v.getUsers().begin() : nullptr;
}

/// One of the three projections: its forward GEMM and, when the step
/// trains, its backward.
struct Projection {
  ampc::BatchedGemmOp forward;
  SmallVector<Operation *> forwardViews; // GEMM result -> attention operand
  ampc::LoadStateOp weight, bias;
  // Backward.
  SmallVector<Operation *> gradViews; // adjoint result -> [m, n] matrix
  ampc::BatchedGemmOp inputGrad;       // dX
  SmallVector<Operation *> inputGradChain; // dX -> the leaf the adds sum
  ampc::GemmOp weightGrad;             // dW and the bias gradient
};

bool sameGemmShape(ampc::BatchedGemmOp a, ampc::BatchedGemmOp b) {
  return a.getM() == b.getM() && a.getN() == b.getN() && a.getK() == b.getK() &&
         a.getLda() == b.getLda() && a.getLdb() == b.getLdb() &&
         a.getLdd() == b.getLdd() && a.getAlpha() == b.getAlpha() &&
         a.getEpilogue() == b.getEpilogue() && a.getTransA() == b.getTransA() &&
         a.getTransB() == b.getTransB() && a.getBatch() == b.getBatch() &&
         a.getType() == b.getType();
}

/// The forward GEMM behind attention operand `x`: a Linear's
/// `x W^T (+ b)` over every row, its 16-bit weight (and bias) read from
/// state.
LogicalResult matchForward(Value x, Projection &p) {
  Value g = throughReshapes(x, &p.forwardViews);
  p.forward = g.getDefiningOp<ampc::BatchedGemmOp>();
  if (!p.forward ||
      p.forward.getEpilogue() != (p.forward.getBias()
                                      ? ampc::GemmEpilogue::Bias
                                      : ampc::GemmEpilogue::None) ||
      p.forward.getBatch() != 1 || p.forward.getTransA() ||
      !p.forward.getTransB() || p.forward.getLdd() != p.forward.getN())
    return failure();
  p.weight = p.forward.getB().getDefiningOp<ampc::LoadStateOp>();
  if (Value bias = p.forward.getBias()) {
    p.bias = bias.getDefiningOp<ampc::LoadStateOp>();
    if (!p.bias)
      return failure();
  }
  if (!p.weight)
    return failure();
  // Nothing but the chain reads the GEMM's result or its views (the
  // operand itself, forwardViews.front()'s result, is checked by the
  // caller).
  for (Operation *view : llvm::drop_begin(p.forwardViews))
    if (!view->getResult(0).hasOneUse())
      return failure();
  return success(g.hasOneUse());
}

/// Walks the single-use views from `v`; returns the last value.
Value throughSingleUseViews(Value v, SmallVectorImpl<Operation *> &chain) {
  while (Operation *user = onlyUser(v)) {
    if (!isa<ampc::ReshapeOp>(user))
      break;
    chain.push_back(user);
    v = user->getResult(0);
  }
  return v;
}

/// The backward of projection `p` from its adjoint result `grad`: the
/// views to the [m, n] matrix, which a dX GEMM (against the same weight)
/// and a weight-gradient GEMM alone read.
LogicalResult matchBackward(Value grad, Projection &p) {
  Value matrix = throughSingleUseViews(grad, p.gradViews);
  auto forward = p.forward;
  int64_t rows = forward.getM(), columns = forward.getN();
  if (typeOf(matrix).getShape() != ArrayRef<int64_t>{rows, columns})
    return failure();
  for (Operation *user : matrix.getUsers()) {
    if (auto g = dyn_cast<ampc::BatchedGemmOp>(user);
        g && !p.inputGrad && g.getA() == matrix && !g.getBias() &&
        g.getB().getDefiningOp<ampc::LoadStateOp>() &&
        g.getB().getDefiningOp<ampc::LoadStateOp>().getState() ==
            p.weight.getState() &&
        g.getBatch() == 1 &&
        !g.getTransA() && !g.getTransB() &&
        g.getEpilogue() == ampc::GemmEpilogue::None &&
        g.getM() == forward.getM() && g.getK() == forward.getN() &&
        g.getN() == forward.getK() && g.getLda() == forward.getN() &&
        g.getLdb() == forward.getK() && g.getLdd() == forward.getK()) {
      p.inputGrad = g;
      continue;
    }
    if (auto g = dyn_cast<ampc::GemmOp>(user);
        g && !p.weightGrad && g.getA() == matrix && !g.getC() &&
        g.getTransA() == 1 && g.getTransB() == 0 &&
        g.getEpilogue() == (p.bias ? ampc::GemmEpilogue::BiasGradA
                                   : ampc::GemmEpilogue::None) &&
        g.getAlpha().convertToFloat() == 1.0f &&
        throughReshapes(g.getB()) ==
            throughReshapes(p.forward.getA()) &&
        typeOf(g.getB()).getShape() == typeOf(p.forward.getA()).getShape()) {
      p.weightGrad = g;
      continue;
    }
    return failure();
  }
  if (!p.inputGrad || !p.weightGrad)
    return failure();
  // dX's views and casts up to the value the adds sum.
  Value v = p.inputGrad.getResult();
  while (Operation *user = onlyUser(v)) {
    if (!isa<ampc::ReshapeOp, ampc::CastOp>(user))
      break;
    p.inputGradChain.push_back(user);
    v = user->getResult(0);
  }
  return success();
}

/// The last value of a projection's dX chain.
Value leafOf(Projection &p) {
  if (p.inputGradChain.empty())
    return p.inputGrad.getResult();
  return p.inputGradChain.back()->getResult(0);
}

/// The leaves under `add` when it is a tree of single-use adds over
/// `leaves` alone; failure otherwise.
LogicalResult collectLeaves(ampc::AddOp add, ArrayRef<Value> leaves,
                            SmallVectorImpl<Value> &found,
                            SmallVectorImpl<Operation *> &adds) {
  adds.push_back(add);
  for (Value operand : add->getOperands()) {
    if (llvm::is_contained(leaves, operand)) {
      found.push_back(operand);
      continue;
    }
    auto inner = operand.getDefiningOp<ampc::AddOp>();
    if (!inner || !inner->hasOneUse() ||
        failed(collectLeaves(inner, leaves, found, adds)))
      return failure();
  }
  return success();
}

/// The add at the top of the tree that sums exactly `leaves` (single-use
/// adds over them alone), and the tree's adds; null when they are not
/// summed that way.
ampc::AddOp sumOf(ArrayRef<Value> leaves, SmallVectorImpl<Operation *> &adds) {
  for (Value leaf : leaves)
    if (!leaf.hasOneUse() || !isa<ampc::AddOp>(onlyUser(leaf)) ||
        typeOf(leaf) != typeOf(leaves.front()))
      return {};
  // Up from the first leaf's add until the tree below holds every leaf.
  auto node = cast<ampc::AddOp>(onlyUser(leaves.front()));
  while (node) {
    SmallVector<Value> found;
    adds.clear();
    if (failed(collectLeaves(node, leaves, found, adds)))
      return {}; // something else is summed in, here and above
    if (found.size() == leaves.size() &&
        llvm::all_of(leaves,
                     [&](Value l) { return llvm::count(found, l) == 1; }))
      return node;
    node = dyn_cast_or_null<ampc::AddOp>(onlyUser(node.getResult()));
  }
  return {};
}

/// Packs Q, K and V of `attention` when everything matches.
LogicalResult pack(ampc::AttentionOp attention) {
  if (attention.getPackedQkv())
    return failure();
  Value q = attention.getQ(), k = attention.getK(), v = attention.getV();
  ArrayRef<int64_t> perm = attention.getQPerm();
  if (q == k || q == v || k == v || attention.getKPerm() != perm ||
      attention.getVPerm() != perm || perm != ArrayRef<int64_t>{0, 2, 1, 3} ||
      typeOf(k) != typeOf(q) || typeOf(v) != typeOf(q))
    return failure();
  // Physical [B, S, H, D]: rows b·S + s of the GEMMs, columns h·D + d.
  ArrayRef<int64_t> shape = typeOf(q).getShape();
  Projection p[3];
  Value operands[3] = {q, k, v};
  for (int i = 0; i < 3; ++i)
    if (failed(matchForward(operands[i], p[i])))
      return failure();
  for (int i = 1; i < 3; ++i)
    if (!sameGemmShape(p[i].forward, p[0].forward) ||
        throughReshapes(p[i].forward.getA()) !=
            throughReshapes(p[0].forward.getA()) ||
        typeOf(p[i].weight.getResult()) != typeOf(p[0].weight.getResult()) ||
        !p[i].bias != !p[0].bias ||
        (p[0].bias &&
         typeOf(p[i].bias.getResult()) != typeOf(p[0].bias.getResult())) ||
        p[i].weight.getState() == p[0].weight.getState())
      return failure();
  int64_t m = p[0].forward.getM(), n = p[0].forward.getN(),
          kDim = p[0].forward.getK();
  if (m != shape[0] * shape[1] || n != shape[2] * shape[3])
    return failure();

  // The operands' users: the attention and at most one adjoint.
  ampc::AttentionGradOp adjoint;
  for (Value x : operands)
    for (Operation *user : x.getUsers()) {
      if (user == attention.getOperation())
        continue;
      auto grad = dyn_cast<ampc::AttentionGradOp>(user);
      if (!grad || (adjoint && grad != adjoint) || grad.getQ() != q ||
          grad.getK() != k || grad.getV() != v || grad.getPackedQkv() ||
          grad.getO() != attention.getO() ||
          grad.getLse() != attention.getLse())
        return failure();
      adjoint = grad;
    }
  SmallVector<Operation *> sumAdds;
  ampc::AddOp sum;
  // The last weight-gradient GEMM: the packed one goes there.
  Operation *lastWeightGrad = nullptr;
  if (adjoint) {
    Value grads[3] = {adjoint.getGradQ(), adjoint.getGradK(),
                      adjoint.getGradV()};
    for (int i = 0; i < 3; ++i)
      if (failed(matchBackward(grads[i], p[i])))
        return failure();
    SmallVector<Value> leaves = {leafOf(p[0]), leafOf(p[1]), leafOf(p[2])};
    sum = sumOf(leaves, sumAdds);
    if (!sum)
      return failure();
    // The rewrite orders the ops it replaces by their place in one block.
    SmallVector<Operation *> backward(sumAdds);
    backward.push_back(adjoint);
    for (auto &x : p) {
      llvm::append_range(backward, ArrayRef<Operation *>{x.inputGrad,
                                                         x.weightGrad});
      llvm::append_range(backward, x.inputGradChain);
      llvm::append_range(backward, x.gradViews);
    }
    if (llvm::any_of(backward, [&](Operation *op) {
          return op->getBlock() != attention->getBlock();
        }))
      return failure();
    // The weight gradients are read after the last of their GEMMs.
    lastWeightGrad = p[0].weightGrad;
    for (auto &x : p)
      if (lastWeightGrad->isBeforeInBlock(x.weightGrad))
        lastWeightGrad = x.weightGrad;
    for (auto &x : p)
      for (Value r : x.weightGrad->getResults())
        for (Operation *user : r.getUsers())
          if (user->getBlock() != lastWeightGrad->getBlock() ||
              !lastWeightGrad->isBeforeInBlock(user))
            return failure();
  }

  // Rewrite. The packed loads and the forward GEMM where the first
  // projection's GEMM was.
  Projection *first = &p[0];
  for (auto &x : p)
    if (x.forward->isBeforeInBlock(first->forward))
      first = &x;
  MLIRContext *ctx = attention.getContext();
  OpBuilder b(first->forward);
  Location loc = attention.getLoc();
  auto states = [&](auto member) {
    SmallVector<Attribute> symbols;
    for (auto &x : p)
      symbols.push_back(member(x).getStateAttr());
    return ArrayAttr::get(ctx, symbols);
  };
  RankedTensorType wt = typeOf(p[0].weight.getResult());
  Value weights = ampc::LoadPackedStateOp::create(
      b, loc, RankedTensorType::get({3 * n, kDim}, wt.getElementType()),
      states([](Projection &x) { return x.weight; }));
  IRMapping map;
  map.map(first->forward.getB(), weights);
  if (p[0].bias) {
    RankedTensorType bt = typeOf(p[0].bias.getResult());
    map.map(first->forward.getBias(),
            ampc::LoadPackedStateOp::create(
                b, loc, RankedTensorType::get({3 * n}, bt.getElementType()),
                states([](Projection &x) { return x.bias; })));
  }
  Operation *gemm = b.clone(*first->forward, map);
  gemm->setAttr("n", b.getI64IntegerAttr(3 * n));
  gemm->setAttr("ldd", b.getI64IntegerAttr(3 * n));
  RankedTensorType yt = typeOf(first->forward.getResult());
  gemm->getResult(0).setType(
      RankedTensorType::get({m, 3 * n}, yt.getElementType()));
  auto qt = typeOf(q);
  auto packedType = RankedTensorType::get(
      {shape[0], shape[1], 3 * shape[2], shape[3]}, qt.getElementType());
  Value packed =
      ampc::ReshapeOp::create(b, loc, packedType, gemm->getResult(0));

  b.setInsertionPoint(attention);
  IRMapping operandsOfAttention;
  for (Value x : operands)
    operandsOfAttention.map(x, packed);
  Operation *packedAttention = b.clone(*attention, operandsOfAttention);
  packedAttention->setAttr("packed_qkv", b.getBoolAttr(true));
  attention->replaceAllUsesWith(packedAttention->getResults());

  llvm::SetVector<Operation *> dead;
  if (adjoint) {
    b.setInsertionPoint(adjoint);
    SmallVector<Value> operands(adjoint->getOperands());
    for (Value &operand : operands)
      if (operand == q || operand == k || operand == v)
        operand = packed;
    OperationState state(adjoint.getLoc(), adjoint->getName());
    state.addOperands(operands);
    state.addAttributes(adjoint->getAttrs());
    state.addTypes(packedType);
    Operation *packedAdjoint = b.create(state);
    packedAdjoint->setAttr("packed_qkv", b.getBoolAttr(true));
    Value gradMatrix = ampc::ReshapeOp::create(
        b, loc, RankedTensorType::get({m, 3 * n}, qt.getElementType()),
        packedAdjoint->getResult(0));
    // dX: one GEMM over the packed k = 3n (the sum of the three), then
    // the views and casts the three had before their adds.
    IRMapping dx;
    dx.map(p[0].inputGrad.getA(), gradMatrix);
    dx.map(p[0].inputGrad.getB(), weights);
    Operation *inputGrad = b.clone(*p[0].inputGrad, dx);
    inputGrad->setAttr("k", b.getI64IntegerAttr(3 * n));
    inputGrad->setAttr("lda", b.getI64IntegerAttr(3 * n));
    for (Operation *op : p[0].inputGradChain)
      b.clone(*op, dx);
    sum.getResult().replaceAllUsesWith(
        dx.lookupOrDefault(leafOf(p[0])));
    // The weight gradients: one GEMM, each projection's rows of it.
    b.setInsertionPoint(lastWeightGrad);
    IRMapping dw;
    dw.map(p[0].weightGrad.getA(), gradMatrix);
    Operation *weightGrad = b.clone(*p[0].weightGrad, dw);
    auto dwt = typeOf(p[0].weightGrad.getOutput());
    weightGrad->getResult(0).setType(
        RankedTensorType::get({3 * n, kDim}, dwt.getElementType()));
    bool biasGrads = weightGrad->getNumResults() == 2;
    if (biasGrads)
      weightGrad->getResult(1).setType(RankedTensorType::get(
          {3 * n}, typeOf(p[0].weightGrad.getBiasGrad()).getElementType()));
    for (auto [i, x] : llvm::enumerate(p)) {
      int64_t row = static_cast<int64_t>(i) * n;
      x.weightGrad.getOutput().replaceAllUsesWith(ampc::SubviewOp::create(
          b, loc, dwt, weightGrad->getResult(0), row * kDim));
      if (biasGrads)
        x.weightGrad.getBiasGrad().replaceAllUsesWith(ampc::SubviewOp::create(
            b, loc, typeOf(x.weightGrad.getBiasGrad()),
            weightGrad->getResult(1), row));
    }
    for (Operation *op : sumAdds)
      dead.insert(op);
    for (auto &x : p) {
      dead.insert(x.weightGrad);
      for (Operation *op : x.inputGradChain)
        dead.insert(op);
      dead.insert(x.inputGrad);
      for (Operation *op : x.gradViews)
        dead.insert(op);
    }
    dead.insert(adjoint);
  }
  dead.insert(attention);
  for (auto &x : p) {
    for (Operation *op : x.forwardViews)
      dead.insert(op);
    dead.insert(x.forward);
  }
  // The replaced ops, users before what they use (all in the attention's
  // block, whose order is the def-use order), then the loads nothing reads
  // now.
  SmallVector<Operation *> replaced = dead.takeVector();
  llvm::sort(replaced,
             [](Operation *a, Operation *b) { return b->isBeforeInBlock(a); });
  for (Operation *op : replaced) {
    assert(op->use_empty() && "a replaced op still has users");
    op->erase();
  }
  for (auto &x : p)
    for (Operation *load : {x.weight.getOperation(), x.bias.getOperation()})
      if (load && load->use_empty())
        load->erase();
  return success();
}

struct PackQkv : ampc::impl::PackQkvPassBase<PackQkv> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    SmallVector<ampc::AttentionOp> attentions;
    for (Operation &op : func.getBody().front())
      if (auto a = dyn_cast<ampc::AttentionOp>(op))
        attentions.push_back(a);
    for (ampc::AttentionOp a : attentions)
      (void)pack(a);
  }
};

} // namespace
