//===- Fusible.cpp - what ampc-fuse and ampc-fold-casts may merge ---------===//

#include "ampc/Transforms/Fusible.h"
#include "ampc/Dialect/AMPCDialect.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace ampc {

bool isFusible(Operation *op) {
  return op && op->hasTrait<Elementwise>() && op->getNumResults() == 1 &&
         isa<RankedTensorType>(op->getResult(0).getType());
}

SmallVector<Operation *> inProgramOrder(ArrayRef<Operation *> ops) {
  SmallVector<Operation *> ordered(ops.begin(), ops.end());
  llvm::sort(ordered, [](Operation *a, Operation *b) {
    return a->isBeforeInBlock(b);
  });
  return ordered;
}

} // namespace ampc
