//===- Fusible.h - what ampc-fuse and ampc-fold-casts may merge -*- C++ -*-===//
//
// The facts the two passes that move elementwise work into fused kernels
// share (Fuse.cpp, FoldCasts.cpp): which ops a fusion body may hold, how
// many ops a pass copies to give a consumer its own chain, and the order
// copies are made in. Whether a copy may move past a store is
// ampc::storedBetween (MemoryPlan.h).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TRANSFORMS_FUSIBLE_H
#define AMPC_TRANSFORMS_FUSIBLE_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace ampc {

/// The most ops either pass copies for one consumer: a copy recomputes
/// work the original already does, so chains stay short.
constexpr unsigned kMaxCopiedOps = 16;

/// Elementwise (AMPC_Elementwise) with one ranked result: what an
/// ampc.fusion body holds. Null is not fusible.
bool isFusible(mlir::Operation *op);

/// The ranked tensor type of `v`, and the shape of `op`'s first result:
/// what the fusion passes compare.
inline mlir::RankedTensorType tensorOf(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType());
}
inline llvm::ArrayRef<int64_t> shapeOf(mlir::Operation *op) {
  return tensorOf(op->getResult(0)).getShape();
}

/// `ops` (all in one block) in program order, the order copies of them
/// are made in.
llvm::SmallVector<mlir::Operation *>
inProgramOrder(llvm::ArrayRef<mlir::Operation *> ops);

} // namespace ampc

#endif // AMPC_TRANSFORMS_FUSIBLE_H
