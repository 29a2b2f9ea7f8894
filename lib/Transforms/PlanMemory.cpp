//===- PlanMemory.cpp - one arena, buffers reused after their last use ----===//
//
// The static memory plan (Passes.td, PlanMemoryPass). Liveness is by
// position in the function's block: a buffer is live from the op that
// writes it to the last op that reads it or a view of it; an op's scratch
// only while it runs; the error slot always.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/MemoryPlan.h"
#include "ampc/Analysis/KernelGeometry.h"
#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>

namespace ampc {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

int64_t ampc::storageBytes(Type type) {
  if (type.isF64() || type.isInteger(64))
    return 8;
  if (type.isF32() || type.isInteger(32))
    return 4;
  if (type.isF16() || type.isBF16() || type.isInteger(16))
    return 2;
  if (type.isInteger(8) || type.isInteger(1))
    return 1;
  return 0;
}

bool ampc::isViewResult(Operation *op, unsigned index) {
  return index == 0 &&
         (op->hasTrait<ampc::View>() || isa<ampc::SubviewOp>(op)) &&
         op->getNumOperands() >= 1;
}

int64_t ampc::viewOffset(Operation *op) {
  if (auto view = dyn_cast<ampc::SubviewOp>(op))
    return view.getOffset();
  return 0;
}

StringAttr ampc::storageSymbol(Value v) {
  while (auto r = dyn_cast<OpResult>(v)) {
    Operation *op = r.getOwner();
    if (auto load = dyn_cast<ampc::LoadParameterOp>(op))
      return load.getParameterAttr().getAttr();
    if (auto load = dyn_cast<ampc::LoadStateOp>(op))
      return load.getStateAttr().getAttr();
    if (!ampc::isViewResult(op, r.getResultNumber()))
      return {};
    v = op->getOperand(0);
  }
  return {};
}

SmallVector<StringAttr, 1> ampc::storageSymbols(Value v) {
  if (StringAttr symbol = ampc::storageSymbol(v))
    return {symbol};
  while (auto r = dyn_cast<OpResult>(v)) {
    Operation *op = r.getOwner();
    if (auto load = dyn_cast<ampc::LoadPackedStateOp>(op)) {
      SmallVector<StringAttr, 1> symbols;
      for (Attribute a : load.getStates())
        symbols.push_back(cast<FlatSymbolRefAttr>(a).getAttr());
      return symbols;
    }
    if (!ampc::isViewResult(op, r.getResultNumber()))
      break;
    v = op->getOperand(0);
  }
  return {};
}

bool ampc::storedBetween(Operation *op, Operation *at) {
  return storedBetween(op, op, at);
}

bool ampc::storedBetween(Operation *from, Operation *op, Operation *at) {
  SmallVector<StringAttr> read;
  for (Value operand : op->getOperands())
    llvm::append_range(read, ampc::storageSymbols(operand));
  if (read.empty())
    return false;
  for (Operation *o = from->getNextNode(); o && o != at; o = o->getNextNode())
    if (auto store = dyn_cast<ampc::StoreOp>(o);
        store && llvm::is_contained(read, store.getTargetAttr().getAttr()))
      return true;
  return false;
}

std::optional<int64_t> ampc::planOffset(Value value) {
  auto result = dyn_cast<OpResult>(value);
  if (!result)
    return std::nullopt;
  auto offsets =
      result.getOwner()->getAttrOfType<DenseI64ArrayAttr>(kOffsetsAttr);
  if (!offsets || result.getResultNumber() >= offsets.size() ||
      offsets[result.getResultNumber()] < 0)
    return std::nullopt;
  return offsets[result.getResultNumber()];
}

int64_t ampc::reservedBytes(int64_t bytes, int64_t guard) {
  int64_t n = std::max<int64_t>(bytes, 1) + guard;
  return (n + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

namespace {

int64_t alignUp(int64_t n) {
  return (n + ampc::kBufferAlignment - 1) / ampc::kBufferAlignment *
         ampc::kBufferAlignment;
}

/// Best-fit allocation in an arena that grows as needed; freed blocks merge
/// with their neighbours.
class Arena {
public:
  int64_t allocate(int64_t bytes) {
    auto best = free.end();
    for (auto it = free.begin(); it != free.end(); ++it)
      if (it->second >= bytes && (best == free.end() || it->second < best->second))
        best = it;
    if (best == free.end()) {
      // Grow: reuse a free block at the end of the arena if there is one.
      int64_t offset = top;
      if (!free.empty()) {
        auto last = std::prev(free.end());
        if (last->first + last->second == top) {
          offset = last->first;
          free.erase(last);
        }
      }
      top = offset + bytes;
      return offset;
    }
    int64_t offset = best->first, size = best->second;
    free.erase(best);
    if (size > bytes)
      free[offset + bytes] = size - bytes;
    return offset;
  }

  void release(int64_t offset, int64_t bytes) {
    auto next = free.lower_bound(offset);
    if (next != free.end() && offset + bytes == next->first) {
      bytes += next->second;
      next = free.erase(next);
    }
    if (next != free.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        prev->second += bytes;
        return;
      }
    }
    free[offset] = bytes;
  }

  int64_t size() const { return top; }

private:
  std::map<int64_t, int64_t> free; // offset -> size
  int64_t top = 0;
};

struct PlanOptions {
  int64_t maxArenaBytes;
  ampc::KernelTarget target;
  bool stageInputs;
  int64_t guardBytes;
};

LogicalResult planFunction(func::FuncOp func, const PlanOptions &options) {
  Block &block = func.getBody().front();
  llvm::DenseMap<Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(block))
    position[&op] = static_cast<int64_t>(i);

  // The value whose buffer each value uses (itself, or what it views).
  llvm::DenseMap<Value, Value> owner;
  auto ownerOf = [&](Value v) {
    auto it = owner.find(v);
    return it == owner.end() ? v : it->second;
  };
  for (Operation &op : block)
    for (OpResult r : op.getResults())
      if (ampc::isViewResult(&op, r.getResultNumber()))
        owner[r] = ownerOf(op.getOperand(0));

  // Last position at which each buffer is read (directly or through a view;
  // uses inside a region count at the op that holds the region).
  llvm::DenseMap<Value, int64_t> lastUse;
  for (Operation &op : block)
    for (OpResult r : op.getResults()) {
      int64_t &last = lastUse[ownerOf(r)];
      last = std::max(last, position[&op]);
      for (Operation *user : r.getUsers())
        if (Operation *top = block.findAncestorOpInBlock(*user))
          last = std::max(last, position[top]);
    }

  // Buffers to release after each position.
  llvm::DenseMap<int64_t, SmallVector<std::pair<int64_t, int64_t>>> releases;
  Arena arena;
  Builder b(func.getContext());
  // `guard`: the bytes left unused after the buffer (a result's guard).
  auto allocate = [&](Operation *at, int64_t bytes, int64_t &offset,
                      int64_t guard = 0) -> LogicalResult {
    // Tensors are bounded (BoundedTensors) but a scratch layout may not be:
    // refuse before the arena's sums could overflow.
    if (bytes <= options.maxArenaBytes) {
      offset = arena.allocate(ampc::reservedBytes(bytes, guard));
      if (arena.size() <= options.maxArenaBytes)
        return success();
    }
    return at->emitError()
           << "the memory plan of @" << func.getSymName() << " needs "
           << std::max(arena.size(), bytes)
           << " bytes here, more than the limit of "
           << options.maxArenaBytes << " bytes (--max-tensor-bytes)";
  };
  auto tensorBytes = [](RankedTensorType type) {
    return type.getNumElements() * ampc::storageBytes(type.getElementType());
  };

  // The error slot first: offset 0 of every function's arena.
  int64_t errorSlot = 0;
  if (failed(allocate(func, 8, errorSlot)))
    return failure();
  func->setAttr(ampc::kErrorSlotAttr, b.getI64IntegerAttr(errorSlot));

  // Staging buffers, live from the start to the argument's last use.
  if (options.stageInputs) {
    SmallVector<int64_t> inputs;
    for (BlockArgument arg : block.getArguments()) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type) {
        inputs.push_back(-1);
        continue;
      }
      int64_t offset, last = -1;
      if (failed(allocate(func, tensorBytes(type), offset)))
        return failure();
      for (Operation *user : arg.getUsers())
        if (Operation *top = block.findAncestorOpInBlock(*user))
          last = std::max(last, position[top]);
      // Read through a view: live while the view is (lastUse of a
      // buffer counts its views' users).
      if (auto it = lastUse.find(arg); it != lastUse.end())
        last = std::max(last, it->second);
      releases[last].push_back({offset, alignUp(std::max<int64_t>(
                                            tensorBytes(type), 1))});
      inputs.push_back(offset);
    }
    func->setAttr(ampc::kInputOffsetsAttr, b.getDenseI64ArrayAttr(inputs));
  }
  for (auto [offset, bytes] : releases.lookup(-1))
    arena.release(offset, bytes);

  for (Operation &op : block) {
    if (op.getNumResults() == 0 || isa<ampc::ConstantOp, ampc::LoadParameterOp, ampc::LoadStateOp,
            ampc::LoadPackedStateOp>(op))
      continue;
    SmallVector<int64_t> offsets;
    bool any = false;
    for (OpResult r : op.getResults()) {
      auto type = dyn_cast<RankedTensorType>(r.getType());
      if (!type || ampc::isViewResult(&op, r.getResultNumber())) {
        offsets.push_back(-1);
        continue;
      }
      int64_t offset;
      if (failed(allocate(&op, tensorBytes(type), offset, options.guardBytes)))
        return failure();
      offsets.push_back(offset);
      releases[lastUse.lookup(r)].push_back(
          {offset, ampc::reservedBytes(tensorBytes(type), options.guardBytes)});
      any = true;
    }
    if (any)
      op.setAttr(ampc::kOffsetsAttr,
                 DenseI64ArrayAttr::get(op.getContext(), offsets));
    // Scratch after the results, so it overlaps neither them nor the
    // operands (still live), and free again once the op has run; sized by
    // the launch decisions (ampc-assign-launch-geometry).
    if (failed(ampc::emit::checkLaunchGeometry(&op, options.target)))
      return failure();
    int64_t scratchBytes =
        ampc::emit::scratchLayout(&op, options.target).bytes();
    if (scratchBytes > 0) {
      int64_t offset;
      if (failed(allocate(&op, scratchBytes, offset)))
        return failure();
      op.setAttr(ampc::kScratchAttr,
                 b.getDenseI64ArrayAttr({offset, scratchBytes}));
      arena.release(offset, alignUp(scratchBytes));
    }
    for (auto [offset, bytes] : releases.lookup(position[&op]))
      arena.release(offset, bytes);
  }
  if (options.guardBytes > 0)
    func->setAttr(ampc::kGuardBytesAttr, b.getI64IntegerAttr(options.guardBytes));
  func->setAttr(ampc::kArenaBytesAttr,
                IntegerAttr::get(IntegerType::get(func.getContext(), 64),
                                 arena.size()));
  return success();
}

struct PlanMemory : ampc::impl::PlanMemoryPassBase<PlanMemory> {
  using Base::Base;
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (failed(ampc::checkEnumOption(target, func.getLoc(), getArgument())))
      return signalPassFailure();
    if (!func.isExternal() &&
        failed(planFunction(func, {maxArenaBytes, target, stageInputs,
                                             guardBytes})))
      signalPassFailure();
  }
};

} // namespace
