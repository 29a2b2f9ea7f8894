//===- Fuse.cpp - elementwise chains into ampc.fusion loop nests ----------===//
//
// Each function is walked backwards; an elementwise op starts a group, and
// producers join while they qualify (Passes.td, FusePass). A group of two
// or more ops becomes one ampc.fusion at the position of its last op (the
// root) at once, so the producers a group leaves behind are seen with the
// readers they still have when the walk reaches the groups before it.
//
// A producer joins in one of three ways:
// - moved: it has the root's shape and every reader is in the group, as
//   when the pass began;
// - copied as a broadcast: its result is small and broadcasts to the
//   root's shape (a per-row mask, a scalar of the loss); each group that
//   reads it computes it again per element, its operands widened by
//   ampc.expand, so the fusion body keeps the result's shape everywhere;
// - recomputed: a chain of the root's shape that other kernels read too
//   (the erf GELU's div and erf, which its backward reads) is copied when
//   the group then reads no more bytes of full-size tensors than before.
// A copied producer stays for the readers it still has; one that has none
// left is erased. Copies compute the original ops on the original operands,
// and a fusion rounds every intermediate to its type (emitScalarOps), so
// they give the original's bits.
//
// A producer that reads a parameter or state in place joins only when no
// store to it lies between the producer and the root: moved there, it
// would read the stored value (the emitters refuse such a step).
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Fusible.h"
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
using ampc::isFusible;
using ampc::shapeOf;
using ampc::tensorOf;

namespace {

/// A broadcast producer whose result has at most this many elements is
/// copied into the groups that read it. Its operands broadcast to its
/// result, so they are no larger.
constexpr int64_t kMaxBroadcastElements = 4096;

bool broadcastsTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  std::optional<SmallVector<int64_t>> b = ampc::broadcastShapes({from, to});
  return b && ArrayRef<int64_t>(*b) == to;
}

ArrayRef<int64_t> withoutLeadingOnes(ArrayRef<int64_t> shape) {
  return shape.drop_while([](int64_t d) { return d == 1; });
}

/// `v` seen through reshapes that only add or drop leading unit
/// dimensions: broadcast to a shape of higher rank, a value and such a
/// reshape of it give every element the same value.
Value throughUnitReshapes(Value v) {
  while (auto r = v.getDefiningOp<ampc::ReshapeOp>()) {
    if (withoutLeadingOnes(tensorOf(r.getInput()).getShape()) !=
        withoutLeadingOnes(tensorOf(r.getOutput()).getShape()))
      break;
    v = r.getInput();
  }
  return v;
}

/// Erases `op`, and the reshapes of it, once nothing reads them.
void eraseIfUnused(Operation *op) {
  for (Operation *user : llvm::make_early_inc_range(op->getUsers()))
    if (isa<ampc::ReshapeOp>(user))
      eraseIfUnused(user);
  if (op->use_empty())
    op->erase();
}

/// The ops that become one fusion at `root`, grown from it.
class Group {
public:
  explicit Group(Operation *root)
      : root(root), shape(shapeOf(root)),
        elements(tensorOf(root->getResult(0)).getNumElements()) {
    members.insert(root);
  }

  /// Adds producers until none qualifies (one that does not may qualify
  /// once more of its readers have joined).
  void grow();

  size_t size() const { return members.size(); }

  /// Replaces the group by one ampc.fusion placed at the root and erases
  /// the members nothing else reads; returns the fusion.
  Operation *build();

private:
  /// The op whose result a member reads as `operand` (a small operand
  /// through unit reshapes, which the fusion does not need), or null.
  Operation *producerOf(Value operand) const;
  /// Whether `op` may join at all: elementwise, in the root's block, not a
  /// member yet, and not moved past a store to what it reads.
  bool mayJoin(Operation *op) const;
  /// Moved: the root's shape, and every reader is a member that is not a
  /// copy (a copy keeps the original, which keeps reading `op`).
  bool movesIn(Operation *op) const;
  /// Copied as a broadcast: a small result that broadcasts to the root's.
  bool broadcastsIn(Operation *op) const;
  /// The chain of the root's shape, from `op` up its producers, whose copy
  /// makes the group read fewer bytes of full-size tensors; empty when
  /// none does (or the copy cap is reached).
  SmallVector<Operation *> recomputedChain(Operation *op) const;
  /// The bytes of full-size tensors (the root's number of elements; smaller
  /// operands broadcast and stay cached) the members and `extra` read
  /// from outside them.
  int64_t fullReadBytes(ArrayRef<Operation *> extra) const;

  Operation *root;
  ArrayRef<int64_t> shape;
  int64_t elements;
  llvm::SetVector<Operation *> members;
  /// Recomputed members: their originals stay for other readers.
  llvm::SmallPtrSet<Operation *, 8> copies;
  /// Members copied rather than moved, against ampc::kMaxCopiedOps.
  unsigned copied = 0;
};

Operation *Group::producerOf(Value operand) const {
  if (tensorOf(operand).getNumElements() < elements)
    operand = throughUnitReshapes(operand);
  return operand.getDefiningOp();
}

bool Group::mayJoin(Operation *op) const {
  return isFusible(op) && !members.contains(op) &&
         op->getBlock() == root->getBlock() && !ampc::storedBetween(op, root);
}

bool Group::movesIn(Operation *op) const {
  return shapeOf(op) == shape &&
         llvm::all_of(op->getUsers(), [&](Operation *user) {
           return members.contains(user) && !copies.contains(user);
         });
}

bool Group::broadcastsIn(Operation *op) const {
  int64_t n = tensorOf(op->getResult(0)).getNumElements();
  return n < elements && n <= kMaxBroadcastElements &&
         broadcastsTo(shapeOf(op), shape);
}

int64_t Group::fullReadBytes(ArrayRef<Operation *> extra) const {
  llvm::SmallPtrSet<Operation *, 16> inside(members.begin(), members.end());
  inside.insert(extra.begin(), extra.end());
  llvm::SmallDenseSet<Value, 8> read;
  int64_t bytes = 0;
  for (Operation *op : inside)
    for (Value operand : op->getOperands()) {
      RankedTensorType t = tensorOf(operand);
      if (t.getNumElements() != elements ||
          inside.contains(operand.getDefiningOp()) ||
          !read.insert(operand).second)
        continue;
      bytes += t.getNumElements() * ampc::storageBytes(t.getElementType());
    }
  return bytes;
}

SmallVector<Operation *> Group::recomputedChain(Operation *op) const {
  llvm::SetVector<Operation *> chain;
  chain.insert(op);
  int64_t before = fullReadBytes({});
  int64_t now = fullReadBytes(chain.getArrayRef());
  // Up the producers while the reads do not grow: one link may only trade
  // a tensor for another, and a later one end the chain on a tensor the
  // group reads already (erf(x/sqrt2)+1 -> erf(x/sqrt2) -> x/sqrt2 -> x).
  for (size_t i = 0; i < chain.size(); ++i)
    for (Value operand : chain[i]->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (copied + chain.size() >= ampc::kMaxCopiedOps)
        break;
      if (!mayJoin(producer) || chain.contains(producer) ||
          shapeOf(producer) != shape)
        continue;
      chain.insert(producer);
      int64_t with = fullReadBytes(chain.getArrayRef());
      if (with > now)
        chain.pop_back();
      else
        now = with;
    }
  if (now >= before || copied + chain.size() > ampc::kMaxCopiedOps)
    return {};
  return chain.takeVector();
}

void Group::grow() {
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t i = 0; i < members.size(); ++i) {
      for (Value operand : members[i]->getOperands()) {
        Operation *producer = producerOf(operand);
        if (!mayJoin(producer))
          continue;
        if (movesIn(producer)) {
          members.insert(producer);
          changed = true;
          continue;
        }
        if (copied >= ampc::kMaxCopiedOps)
          continue;
        if (shapeOf(producer) != shape) {
          if (broadcastsIn(producer)) {
            members.insert(producer);
            ++copied;
            changed = true;
          }
          continue;
        }
        for (Operation *link : recomputedChain(producer)) {
          members.insert(link);
          copies.insert(link);
          ++copied;
          changed = true;
        }
      }
    }
  }
}

Operation *Group::build() {
  SmallVector<Operation *> ordered =
      ampc::inProgramOrder(members.getArrayRef());
  llvm::SetVector<Value> inputs;
  for (Operation *op : ordered)
    for (Value operand : op->getOperands())
      if (!members.contains(producerOf(operand)))
        inputs.insert(operand);

  OpBuilder b(root);
  auto fusion = ampc::FusionOp::create(b, root->getLoc(),
                                       TypeRange{root->getResult(0).getType()},
                                       inputs.getArrayRef());
  Block *body = b.createBlock(&fusion.getBody());
  IRMapping mapping;
  for (Value input : inputs)
    mapping.map(input, body->addArgument(input.getType(), input.getLoc()));
  // A broadcast producer's copy computes at the root's shape: the verifier
  // wants every body value to have it, and computing a value once per
  // element it broadcasts to gives the same bits. Each operand is
  // expanded once.
  llvm::DenseMap<Value, Value> expanded;
  auto toRootShape = [&](Value v) {
    if (tensorOf(v).getShape() == shape)
      return v;
    Value &e = expanded[v];
    if (!e)
      e = ampc::ExpandOp::create(b, root->getLoc(), tensorOf(v).clone(shape),
                                 v);
    return e;
  };
  for (Operation *op : ordered) {
    bool widen = shapeOf(op) != shape;
    SmallVector<Value> operands;
    for (Value operand : op->getOperands()) {
      Operation *producer = producerOf(operand);
      Value v = members.contains(producer)
                    ? mapping.lookup(producer->getResult(0))
                    : mapping.lookup(operand);
      operands.push_back(widen ? toRootShape(v) : v);
    }
    // An expand of a copy that already has the root's shape is that copy.
    if (isa<ampc::ExpandOp>(op) && tensorOf(operands[0]).getShape() == shape) {
      mapping.map(op->getResult(0), operands[0]);
      continue;
    }
    Operation *copy = b.clone(*op);
    copy->setOperands(operands);
    if (widen)
      copy->getResult(0).setType(tensorOf(op->getResult(0)).clone(shape));
    mapping.map(op->getResult(0), copy->getResult(0));
  }
  ampc::YieldOp::create(b, root->getLoc(),
                        mapping.lookup(root->getResult(0)));
  root->getResult(0).replaceAllUsesWith(fusion.getResult(0));
  for (Operation *op : llvm::reverse(ordered))
    eraseIfUnused(op);
  return fusion;
}

struct Fuse : ampc::impl::FusePassBase<Fuse> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    Block &block = func.getBody().front();
    Operation *op = block.empty() ? nullptr : &block.back();
    while (op) {
      if (!isFusible(op)) {
        op = op->getPrevNode();
        continue;
      }
      Group group(op);
      group.grow();
      op = group.size() > 1 ? group.build()->getPrevNode() : op->getPrevNode();
    }
  }
};

} // namespace
