//===- InsertAllReduce.cpp - data-parallel gradient communication ---------===//
//
// ampc-insert-all-reduce (issue 41, docs/design.md "Data parallel"): the
// gradients the optimizer reads become their mean over the ranks. They are
// grouped into buckets in the order the backward produces them (the
// reverse of the forward, as DDP's buckets), each bucket's
// ampc.all_reduce_start placed right after its last gradient is computed,
// so its communication overlaps the rest of the backward, and every
// bucket's ampc.all_reduce_wait placed just before the first op that reads
// the gradients (the unscale, the clipping or the first optimizer update).
// Each start op records, in `ampc.overlap`, how many kernel ops of the step
// run between it and the waits: the backward work its communication can
// hide behind (`--emit=mlir` shows it). In a module marked
// ampc.shard_optimizer (ZeRO-1, --shard-optimizer) the gradients form one
// bucket, whose start carries the mark too and which the target
// reduce-scatters, and the optimizer updates are moved together, after the
// first, so that one all-gather can follow them all.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/ShardOptimizer.h"
#include "ampc/Transforms/MemoryPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace ampc {
#define GEN_PASS_DEF_INSERTALLREDUCEPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

/// The op of `block` that is or holds `op`.
Operation *inBlock(Block &block, Operation *op) {
  return op ? block.findAncestorOpInBlock(*op) : nullptr;
}

/// Whether `a` comes before `b` in `block`; a null op (a block argument's
/// definer) comes first.
bool before(Operation *a, Operation *b) {
  if (!a || !b)
    return !a && b;
  return a->isBeforeInBlock(b);
}

struct InsertAllReducePass
    : ampc::impl::InsertAllReducePassBase<InsertAllReducePass> {
  using Base::Base;

  /// The element type gradients travel in: `dtype`, or the gradient's own
  /// precision's ("auto": the step's low-precision type, else the
  /// gradients' type).
  FailureOr<Type> commType(func::FuncOp func, ValueRange grads) {
    MLIRContext *ctx = func.getContext();
    if (dtype == "fp16")
      return Type(Float16Type::get(ctx));
    if (dtype == "bf16")
      return Type(BFloat16Type::get(ctx));
    if (dtype == "fp32")
      return Type(Float32Type::get(ctx));
    if (dtype != "auto")
      return func.emitError("ampc-insert-all-reduce: dtype must be auto, "
                            "fp16, bf16 or fp32, got '")
             << dtype << "'";
    // auto: the low-precision type the step computes in, where it has one.
    Type lowp;
    func.walk([&](Operation *op) {
      for (Type t : op->getResultTypes())
        if (auto tensor = dyn_cast<RankedTensorType>(t))
          if (tensor.getElementType().isF16() ||
              tensor.getElementType().isBF16())
            lowp = tensor.getElementType();
    });
    if (lowp)
      return lowp;
    return cast<RankedTensorType>(grads.front().getType()).getElementType();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!func.getBody().hasOneBlock())
      return;
    Block &block = func.getBody().front();
    // The ops that read the gradients first: the unscale, else the
    // clipping, else the optimizer updates.
    SmallVector<Operation *> consumers;
    SetVector<Value> grads;
    for (Operation &op : block)
      if (auto u = dyn_cast<ampc::UnscaleOp>(op)) {
        consumers.push_back(u);
        grads.insert(u.getGrads().begin(), u.getGrads().end());
      }
    if (consumers.empty())
      for (Operation &op : block)
        if (auto c = dyn_cast<ampc::ClipGradNormOp>(op)) {
          consumers.push_back(c);
          grads.insert(c.getGrads().begin(), c.getGrads().end());
        }
    if (consumers.empty())
      for (Operation &op : block)
        if (auto o = dyn_cast<ampc::OptimizerUpdateOp>(op)) {
          consumers.push_back(o);
          grads.insert(o.getGrad());
        }
    if (grads.empty())
      return;
    if (func->getParentOp()->walk([](ampc::StateOp s) {
          return s.getSymName().ends_with(".accumulated_grad")
                     ? WalkResult::interrupt()
                     : WalkResult::advance();
        }).wasInterrupted()) {
      func.emitError("data-parallel training with gradient accumulation "
                     "(--accumulate) is not supported yet");
      return signalPassFailure();
    }
    // ZeRO-1: the module records --shard-optimizer.
    auto module = func->getParentOfType<ModuleOp>();
    bool shard = module && module->hasAttr(ampc::kShardOptimizerAttr);
    FailureOr<Type> comm = commType(func, grads.getArrayRef());
    if (failed(comm))
      return signalPassFailure();
    int64_t commBytes = ampc::storageBytes(*comm);

    // In the order the backward computes them.
    SmallVector<Value> order(grads.begin(), grads.end());
    auto definer = [&](Value v) { return inBlock(block, v.getDefiningOp()); };
    llvm::stable_sort(order, [&](Value a, Value b) {
      return before(definer(a), definer(b));
    });
    SmallVector<SmallVector<Value>> buckets(1);
    int64_t bytes = 0;
    for (Value g : order) {
      // ZeRO-1 shards the concatenation of every gradient: one bucket.
      if (!shard && bytes >= bucketBytes && !buckets.back().empty()) {
        buckets.emplace_back();
        bytes = 0;
      }
      buckets.back().push_back(g);
      bytes += cast<RankedTensorType>(g.getType()).getNumElements() * commBytes;
    }

    Operation *first = consumers.front();
    for (Operation *c : consumers)
      if (c->isBeforeInBlock(first))
        first = c;
    OpBuilder b(func.getContext());
    IRMapping means;
    SmallVector<ampc::AllReduceStartOp> starts;
    for (auto [index, bucket] : llvm::enumerate(buckets)) {
      Operation *last = nullptr;
      int64_t count = 0;
      for (Value g : bucket) {
        if (before(last, definer(g)))
          last = definer(g);
        count += cast<RankedTensorType>(g.getType()).getNumElements();
      }
      if (last)
        b.setInsertionPointAfter(last);
      else
        b.setInsertionPointToStart(&block);
      auto start = ampc::AllReduceStartOp::create(
          b, func.getLoc(), RankedTensorType::get({count}, *comm), bucket,
          b.getI64IntegerAttr(index));
      starts.push_back(start);
      if (shard)
        start->setAttr(ampc::kShardOptimizerAttr, b.getUnitAttr());
      // An update interleaved with the backward (a reader before a
      // gradient of the bucket is computed) leaves no place to wait.
      if (!start->isBeforeInBlock(first)) {
        first->emitError("ampc-insert-all-reduce: this op reads gradients "
                         "before the last of them is computed");
        return signalPassFailure();
      }
      b.setInsertionPoint(first);
      auto wait = ampc::AllReduceWaitOp::create(
          b, func.getLoc(), ValueRange(bucket).getTypes(), start.getPacked(),
          bucket);
      for (auto [g, m] : llvm::zip(bucket, wait.getMeans()))
        means.map(g, m);
    }
    for (Operation *c : consumers)
      for (OpOperand &use : c->getOpOperands())
        if (Value m = means.lookupOrNull(use.get()))
          use.set(m);
    // The work each bucket's communication overlaps: the ops between its
    // start and the waits.
    for (ampc::AllReduceStartOp start : starts) {
      int64_t overlap = 0;
      for (Operation *op = start->getNextNode(); op && op != first;
           op = op->getNextNode())
        if (!isa<ampc::AllReduceStartOp, ampc::AllReduceWaitOp>(op))
          ++overlap;
      start->setAttr(ampc::kOverlapAttr, b.getI64IntegerAttr(overlap));
    }
    if (shard && failed(gatherUpdates(block)))
      return signalPassFailure();
  }

  /// ZeRO-1: the optimizer updates moved together, after the first, so
  /// that the target's all-gather of the new parameters can follow the
  /// last while every reader of them comes after it.
  LogicalResult gatherUpdates(Block &block) {
    // Legal when every update reads only values computed before the first
    // (refused otherwise).
    SmallVector<ampc::OptimizerUpdateOp> updates(
        block.getOps<ampc::OptimizerUpdateOp>());
    if (updates.empty())
      return success();
    Operation *first = updates.front();
    Operation *previous = first;
    for (ampc::OptimizerUpdateOp update : llvm::drop_begin(updates)) {
      for (Value operand : update->getOperands())
        if (!before(inBlock(block, operand.getDefiningOp()), first) &&
            inBlock(block, operand.getDefiningOp()) != first)
          return update->emitError(
              "ampc-insert-all-reduce: --shard-optimizer cannot move this "
              "update next to the first (it reads a value computed after "
              "it)");
      update->moveAfter(previous);
      previous = update;
    }
    return success();
  }
};

} // namespace
