//===- Fuse.cpp - elementwise chains into ampc.fusion loop nests ----------===//
//
// Each function is walked backwards; an elementwise op that no group holds
// yet starts one, and producers join while they qualify (Passes.td,
// FusePass). A group of two or more ops becomes one ampc.fusion at the
// position of its last op. A producer that reads a parameter or state in
// place joins only when no store to it lies between the producer and that
// position: moved there, it would read the stored value (the emitters
// refuse such a step).
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/MemoryPlan.h"
#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace ampc {
#define GEN_PASS_DEF_FUSEPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

bool isFusible(Operation *op) {
  return op->hasTrait<ampc::Elementwise>() && op->getNumResults() == 1 &&
         isa<RankedTensorType>(op->getResult(0).getType());
}

ArrayRef<int64_t> shapeOf(Operation *op) {
  return cast<RankedTensorType>(op->getResult(0).getType()).getShape();
}

/// The group rooted at `root`: root plus every producer that qualifies,
/// grown to a fixed point (a producer whose users are not all in the group
/// yet may qualify once they are).
llvm::SetVector<Operation *> growGroup(Operation *root,
                                       const llvm::DenseSet<Operation *> &taken) {
  llvm::SetVector<Operation *> group;
  group.insert(root);
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t i = 0; i < group.size(); ++i) {
      for (Value operand : group[i]->getOperands()) {
        Operation *producer = operand.getDefiningOp();
        if (!producer || group.contains(producer) || taken.contains(producer) ||
            producer->getBlock() != root->getBlock() || !isFusible(producer) ||
            shapeOf(producer) != shapeOf(root) ||
            ampc::storedBetween(producer, root))
          continue;
        if (!llvm::all_of(producer->getUsers(), [&](Operation *user) {
              return group.contains(user);
            }))
          continue;
        group.insert(producer);
        changed = true;
      }
    }
  }
  return group;
}

/// Replaces the ops of `group` by one ampc.fusion placed at `root`.
void buildFusion(Operation *root, ArrayRef<Operation *> group) {
  SmallVector<Operation *> members(group.begin(), group.end());
  llvm::sort(members, [](Operation *a, Operation *b) {
    return a->isBeforeInBlock(b);
  });
  llvm::SmallPtrSet<Operation *, 8> inGroup(members.begin(), members.end());
  llvm::SetVector<Value> inputs;
  for (Operation *op : members)
    for (Value operand : op->getOperands())
      if (!inGroup.contains(operand.getDefiningOp()))
        inputs.insert(operand);

  OpBuilder b(root);
  auto fusion = ampc::FusionOp::create(b, root->getLoc(),
                                       root->getResult(0).getType(),
                                       inputs.getArrayRef());
  Block *body = b.createBlock(&fusion.getBody());
  IRMapping mapping;
  for (Value input : inputs)
    mapping.map(input, body->addArgument(input.getType(), input.getLoc()));
  for (Operation *op : members)
    b.clone(*op, mapping);
  ampc::YieldOp::create(b, root->getLoc(),
                        mapping.lookup(root->getResult(0)));
  root->getResult(0).replaceAllUsesWith(fusion.getOutput());
  for (Operation *op : llvm::reverse(members))
    op->erase();
}

struct Fuse : ampc::impl::FusePassBase<Fuse> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    Block &block = func.getBody().front();
    llvm::DenseSet<Operation *> taken;
    SmallVector<std::pair<Operation *, SmallVector<Operation *>>> groups;
    for (Operation &op : llvm::reverse(block)) {
      if (!isFusible(&op) || taken.contains(&op))
        continue;
      llvm::SetVector<Operation *> group = growGroup(&op, taken);
      taken.insert(group.begin(), group.end());
      if (group.size() > 1)
        groups.push_back({&op, SmallVector<Operation *>(group.getArrayRef())});
    }
    for (auto &[root, group] : groups)
      buildFusion(root, group);
  }
};

} // namespace
