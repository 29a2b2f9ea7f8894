//===- FuseEpilogues.cpp - GEMM epilogues decided in the IR ---------------===//
//
// Marks each ampc.gemm with the epilogue a GEMM library applies while it
// stores its result (Passes.td, FuseEpiloguesPass): a row-vector C becomes
// the bias epilogue, and a lone Relu user is folded into the Gemm. The
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

struct FuseEpilogues : ampc::impl::FuseEpiloguesPassBase<FuseEpilogues> {
  void runOnOperation() override {
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
