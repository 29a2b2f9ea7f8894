//===- FuseEpilogues.cpp - GEMM epilogues decided in the IR ---------------===//
//
// Marks each ampc.gemm with the epilogue a GEMM library applies while it
// stores its result (Passes.td, FuseEpiloguesPass): a row-vector C becomes
// the bias epilogue, and a lone Relu user is folded into the Gemm. First, a
// Linear on an N-D input (a MatMul of [..., K] by a [K, N] weight, the Add
// of a bias over the last axis, a Relu) becomes one 2-D Gemm over every row
// between two reshapes (views), so that it gets the same epilogues. The
// targets only print what the attribute says, and the memory plan, which
// runs after this pass, keeps the fused result apart from the Gemm's
// operands because it is the Gemm's own result.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace ampc {
#define GEN_PASS_DEF_FUSEEPILOGUESPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;
using ampc::GemmEpilogue;

namespace {

/// Whether C is added as a bias: a row vector of the output's type added
/// once (beta 1) to a result of more than one column.
bool isBias(ampc::GemmOp gemm) {
  Value c = gemm.getC();
  if (!c || gemm.getBeta().convertToFloat() != 1.0f)
    return false;
  auto out = cast<RankedTensorType>(gemm.getType());
  auto cType = cast<RankedTensorType>(c.getType());
  int64_t n = out.getDimSize(1);
  ArrayRef<int64_t> cs = cType.getShape();
  bool rowVector = (cs.size() == 1 && cs[0] == n) ||
                   (cs.size() == 2 && cs[0] == 1 && cs[1] == n);
  return rowVector && n > 1 &&
         cType.getElementType() == out.getElementType();
}

/// The Relu that may be folded into `gemm`: its only user, of the same
/// type, in the same block.
ampc::ReluOp foldableRelu(ampc::GemmOp gemm) {
  if (!gemm->hasOneUse())
    return nullptr;
  auto relu = dyn_cast<ampc::ReluOp>(*gemm->getUsers().begin());
  if (!relu || relu.getType() != gemm.getType() ||
      relu->getBlock() != gemm->getBlock())
    return nullptr;
  return relu;
}

/// The one user of `v`, if it has exactly one, in `v`'s block.
Operation *soleUser(Value v) {
  if (!v.hasOneUse())
    return nullptr;
  Operation *user = *v.getUsers().begin();
  return user->getBlock() == v.getParentBlock() ? user : nullptr;
}

/// A MatMul of an N-D [..., K] by a 2-D [K, N] as reshape to [rows, K],
/// Gemm, reshape back (issue 37, item 3). The Add of a bias (a vector of N,
/// or [1, ..., 1, N], of the result's type) that is the MatMul's only user
/// becomes the Gemm's C (beta 1), and a Relu that is the only user of the
/// sum moves before the reshape; the loop below then fuses them. The Gemm
/// keeps the MatMul's location and attributes (its precision decision).
void flattenLinear(ampc::MatMulOp mm) {
  auto aType = cast<RankedTensorType>(mm.getLhs().getType());
  auto wType = cast<RankedTensorType>(mm.getRhs().getType());
  auto outType = cast<RankedTensorType>(mm.getType());
  if (aType.getRank() < 3 || wType.getRank() != 2 ||
      !aType.hasStaticShape() || !wType.hasStaticShape())
    return;
  Type element = outType.getElementType();
  if (aType.getElementType() != element || wType.getElementType() != element)
    return;
  int64_t k = aType.getShape().back(), n = outType.getShape().back();
  int64_t rows = 1;
  for (int64_t d : aType.getShape().drop_back())
    rows *= d;
  // The bias: the other operand of the Add that is the MatMul's only user.
  Value bias;
  Operation *last = mm;
  if (auto add = dyn_cast_or_null<ampc::AddOp>(soleUser(mm.getResult()))) {
    Value other = add.getLhs() == mm.getResult() ? add.getRhs() : add.getLhs();
    auto bType = cast<RankedTensorType>(other.getType());
    bool rowVector = bType.getRank() >= 1 && bType.getShape().back() == n &&
                     bType.getRank() <= outType.getRank();
    for (int64_t d : bType.getShape().drop_back())
      rowVector = rowVector && d == 1;
    if (other != mm.getResult() && rowVector && n > 1 &&
        bType.getElementType() == element && add.getType() == outType) {
      bias = other;
      last = add;
    }
  }
  auto relu = dyn_cast_or_null<ampc::ReluOp>(soleUser(last->getResult(0)));
  if (relu && relu.getType() != outType)
    relu = nullptr;
  if (relu)
    last = relu;
  // Built where the chain ends: the bias may be defined after the MatMul.
  OpBuilder b(last);
  Location loc = mm.getLoc();
  auto matrix = [&](int64_t r, int64_t c) {
    return RankedTensorType::get({r, c}, element);
  };
  Value a = mm.getLhs();
  if (auto inner = a.getDefiningOp<ampc::ReshapeOp>())
    a = inner.getInput(); // a reshape of a reshape is one view
  a = ampc::ReshapeOp::create(b, loc, matrix(rows, k), a);
  if (bias && cast<RankedTensorType>(bias.getType()).getRank() != 1)
    bias = ampc::ReshapeOp::create(
        b, loc, RankedTensorType::get({n}, element), bias);
  auto gemm = ampc::GemmOp::create(b, loc, a, mm.getRhs(), bias,
                                   APFloat(1.0f), APFloat(1.0f), 0, 0);
  for (NamedAttribute attr : mm->getDiscardableAttrs())
    gemm->setAttr(attr.getName(), attr.getValue());
  Value result = gemm.getResult();
  if (relu)
    result = ampc::ReluOp::create(b, relu.getLoc(), result).getResult();
  Value out = ampc::ReshapeOp::create(b, loc, outType, result);
  last->getResult(0).replaceAllUsesWith(out);
  if (relu)
    relu->erase();
  if (bias)
    mm.getResult().getUses().begin()->getOwner()->erase(); // the Add
  mm->erase();
}

struct FuseEpilogues : ampc::impl::FuseEpiloguesPassBase<FuseEpilogues> {
  void runOnOperation() override {
    SmallVector<ampc::MatMulOp> matmuls;
    getOperation().walk([&](ampc::MatMulOp mm) { matmuls.push_back(mm); });
    for (ampc::MatMulOp mm : matmuls)
      flattenLinear(mm);
    // Collected first: folding erases the Relu the walk would visit next.
    SmallVector<ampc::GemmOp> gemms;
    getOperation().walk([&](ampc::GemmOp gemm) { gemms.push_back(gemm); });
    for (ampc::GemmOp gemm : gemms) {
      if (gemm.getEpilogue() != GemmEpilogue::None)
        continue;
      bool bias = isBias(gemm);
      // A C that is not a bias is added before the epilogue would see the
      // sum; keep the Relu apart then.
      ampc::ReluOp relu = (bias || !gemm.getC()) ? foldableRelu(gemm) : nullptr;
      if (relu) {
        gemm.setEpilogue(bias ? GemmEpilogue::ReluBias : GemmEpilogue::Relu);
        relu.getResult().replaceAllUsesWith(gemm.getResult());
        relu->erase();
      } else if (bias) {
        gemm.setEpilogue(GemmEpilogue::Bias);
      }
    }
  }
};

} // namespace
