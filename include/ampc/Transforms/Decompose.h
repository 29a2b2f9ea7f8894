//===- Decompose.h - the ampc-decompose-* passes' one pattern --*- C++ -*-===//
//
// The ampc-decompose-* passes (docs/design.md, "Compositions imported 1:1")
// replace each op imported 1:1 by the ops its composition builds, through a
// Composer at the op (Compose.h), so what they build folds as the importer
// folded it. decomposeEach applies one such lowering per op kind, once per
// op in program order (the walk driver, which folds nothing else: the IR
// around the ops stays as imported).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TRANSFORMS_DECOMPOSE_H
#define AMPC_TRANSFORMS_DECOMPOSE_H

#include "ampc/Dialect/Compose.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace ampc {

/// The replacement of one op: its results, empty after an error at the op
/// (already reported).
using Replacement = llvm::SmallVector<mlir::Value>;

/// The pattern of OpTy: `Lower` builds its replacement. `failed` is set
/// when an op could not be lowered.
template <typename OpTy, Replacement (*Lower)(Composer &, OpTy)>
struct DecomposePattern : mlir::OpRewritePattern<OpTy> {
  DecomposePattern(mlir::MLIRContext *ctx, int64_t maxTensorBytes,
                   bool &failed)
      : mlir::OpRewritePattern<OpTy>(ctx), maxTensorBytes(maxTensorBytes),
        failed(failed) {}

  mlir::LogicalResult
  matchAndRewrite(OpTy op, mlir::PatternRewriter &rewriter) const override {
    Composer c{rewriter, op.getLoc(), maxTensorBytes, &rewriter};
    Replacement r = Lower(c, op);
    if (r.empty()) {
      failed = true;
      return mlir::failure();
    }
    rewriter.replaceOp(op, r);
    return mlir::success();
  }

  int64_t maxTensorBytes;
  bool &failed;
};

/// Lowers every op of the kinds `Patterns` (DecomposePatterns) in `root`,
/// each once, in order; failure when one could not be lowered.
template <typename... Patterns>
mlir::LogicalResult decomposeEach(mlir::Operation *root,
                                  int64_t maxTensorBytes) {
  bool failed = false;
  mlir::RewritePatternSet patterns(root->getContext());
  patterns.add<Patterns...>(root->getContext(), maxTensorBytes, failed);
  mlir::walkAndApplyPatterns(root, std::move(patterns));
  return mlir::failure(failed);
}

} // namespace ampc

#endif // AMPC_TRANSFORMS_DECOMPOSE_H
