//===- FuseHorizontal.cpp - independent small ops as one kernel ----------===//
//
// Runs after ampc-fuse (Passes.td, FuseHorizontalPass). A run of
// independent top-level elementwise ops and fusions of one small shape,
// with only stores between them, becomes one fusion yielding every
// member's values at the first member's place (the stores after it read
// its results). Every operand of a member is defined before the run (only
// stores, which define nothing, and members, whose results no member
// reads, lie between), so moving a member up changes no value; a member
// that reads a parameter or state in place does not move past a store to
// it. What it is for: a step's bookkeeping (every BatchNorm's
// num_batches_tracked, the step counter) is one launch, not one each.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Fusible.h"
#include "ampc/Transforms/MemoryPlan.h"
#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace ampc {
#define GEN_PASS_DEF_FUSEHORIZONTALPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;
using ampc::isFusible;
using ampc::shapeOf;
using ampc::tensorOf;

namespace {

/// The largest result a member may have.
constexpr int64_t kMaxElements = 4096;

/// The most members a horizontal fusion takes (each is a kernel argument
/// or two).
constexpr size_t kMaxHorizontal = 64;

/// One fusion computing every op of `run` (fusible ops and fusions, in
/// program order), at the first one's place.
void buildHorizontal(ArrayRef<Operation *> run) {
  llvm::SetVector<Value> inputs;
  SmallVector<Type> types;
  for (Operation *op : run) {
    inputs.insert(op->operand_begin(), op->operand_end());
    llvm::append_range(types, op->getResultTypes());
  }
  OpBuilder b(run.front());
  auto fusion = ampc::FusionOp::create(b, run.front()->getLoc(), types,
                                       inputs.getArrayRef());
  Block *body = b.createBlock(&fusion.getBody());
  IRMapping mapping;
  for (Value input : inputs)
    mapping.map(input, body->addArgument(input.getType(), input.getLoc()));
  SmallVector<Value> yielded;
  for (Operation *op : run) {
    auto inner = dyn_cast<ampc::FusionOp>(op);
    if (!inner) {
      yielded.push_back(b.clone(*op, mapping)->getResult(0));
      continue;
    }
    Block &innerBody = inner.getBody().front();
    IRMapping innerMapping;
    for (auto [arg, operand] :
         llvm::zip(innerBody.getArguments(), inner.getInputs()))
      innerMapping.map(arg, mapping.lookup(operand));
    for (Operation &o : innerBody.without_terminator())
      b.clone(o, innerMapping);
    for (Value v : cast<ampc::YieldOp>(innerBody.getTerminator()).getValues())
      yielded.push_back(innerMapping.lookup(v));
  }
  ampc::YieldOp::create(b, run.front()->getLoc(), yielded);
  unsigned next = 0;
  for (Operation *op : run) {
    for (Value r : op->getResults())
      r.replaceAllUsesWith(fusion.getResult(next++));
    op->erase();
  }
}

/// The horizontal step (file comment).
void fuseHorizontally(Block &block) {
  SmallVector<Operation *> run;
  llvm::SmallPtrSet<Operation *, 16> members;
  auto flush = [&] {
    if (run.size() > 1)
      buildHorizontal(run);
    run.clear();
    members.clear();
  };
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (isa<ampc::StoreOp>(op))
      continue;
    if (!(isFusible(&op) || isa<ampc::FusionOp>(op)) || isa<ampc::CastOp>(op)) {
      flush();
      continue;
    }
    // Small results only: a launch is most of what such an op costs (a
    // counter, a scalar of the loss scaler), and merging large ones would
    // keep their buffers live from the first member on.
    if (tensorOf(op.getResult(0)).getNumElements() > kMaxElements) {
      flush();
      continue;
    }
    bool joins =
        !run.empty() && run.size() < kMaxHorizontal &&
        shapeOf(&op) == shapeOf(run.front()) &&
        llvm::none_of(op.getOperands(),
                      [&](Value v) {
                        return members.contains(v.getDefiningOp());
                      }) &&
        !ampc::storedBetween(run.front(), &op, &op);
    if (!joins)
      flush();
    run.push_back(&op);
    members.insert(&op);
  }
  flush();
}

struct FuseHorizontal
    : ampc::impl::FuseHorizontalPassBase<FuseHorizontal> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!func.isExternal())
      fuseHorizontally(func.getBody().front());
  }
};

} // namespace
