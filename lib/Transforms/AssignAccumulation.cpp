//===- AssignAccumulation.cpp - accumulation types decided in the IR ------===//
//
// Records the type every Accumulating op sums in (Passes.td,
// AssignAccumulationPass) as `ampc.accumulate`, so the targets and the
// memory plan read one decision instead of each deriving it.
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Transforms/Passes.h"
#include "ampc/Transforms/Precision.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace ampc {
#define GEN_PASS_DEF_ASSIGNACCUMULATIONPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

static bool isF64Tensor(Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  return tensor && tensor.getElementType().isF64();
}

bool ampc::accumulatesInF64(Operation *op) {
  return llvm::any_of(op->getOperandTypes(), isF64Tensor) ||
         llvm::any_of(op->getResultTypes(), isF64Tensor);
}

namespace {

struct AssignAccumulation
    : ampc::impl::AssignAccumulationPassBase<AssignAccumulation> {
  void runOnOperation() override {
    Builder b(&getContext());
    getOperation().walk([&](Operation *op) {
      if (!op->hasTrait<ampc::Accumulating>())
        return;
      bool f64 = ampc::accumulatesInF64(op);
      // An integer reduction sums, multiplies or compares exactly in int64
      // (FP32 would round past 2^24), an unsigned one in uint64 (int64
      // would compare values past 2^63 as negative).
      auto integer = dyn_cast<IntegerType>(
          cast<RankedTensorType>(op->getOperand(0).getType()).getElementType());
      if (!isa<ampc::ReduceSumOp, ampc::ReduceMeanOp, ampc::ReduceMaxOp,
               ampc::ReduceProdOp>(op))
        integer = {};
      Type type = integer && integer.isUnsigned()
                      ? Type(b.getIntegerType(64, /*isSigned=*/false))
                  : integer ? Type(b.getI64Type())
                  : f64     ? Type(b.getF64Type())
                            : Type(b.getF32Type());
      op->setAttr(ampc::kAccumulateAttr, TypeAttr::get(type));
    });
  }
};

} // namespace
