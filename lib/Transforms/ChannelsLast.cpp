//===- ChannelsLast.cpp - CNN images stored (N, H, W, C) ------------------===//
//
// Issue 39, item 3 (Passes.td, ChannelsLastPass). The layout of a CNN's
// images is a decision in the IR: after precision assignment, before
// autodiff, every 2-D convolution, BatchNorm, MaxPool and AveragePool of a
// function takes `channels_last` (their images (N, H, W, C), a
// convolution's weight (M, kH, kW, C/group)), GlobalAveragePool becomes a
// ReduceMean over H and W, and the elementwise ops between them (ReLU, the
// residual add, casts) compute on the channels-last images as they are.
// A transpose (marked `ampc.layout`) is inserted only where an image
// crosses into or out of that region: a model's NCHW input into its first
// convolution, a result an op without a channels-last form reads (Flatten
// after the pooling: a (N, 1, 1, C) image is its NCHW form reshaped, so
// that crossing is a reshape), a convolution's weight (its low-precision
// copy, which ampc-attach-optimizer then keeps in that layout). Autodiff
// derives the backward from this forward: the backward convolutions,
// BatchNorm and pooling adjoints are channels-last too, and the transposes'
// adjoints are transposes. Every value the function returns keeps its
// type, so the library's inputs, outputs and parameters are unchanged.
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/ChannelsLast.h"
#include "ampc/Analysis/KernelGeometry.h"
#include "ampc/Transforms/Fusible.h"
#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"

namespace ampc {
#define GEN_PASS_DEF_CHANNELSLASTPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

/// (N, C, H, W) -> (N, H, W, C), and back: ampc.transpose's `perm`.
const SmallVector<int64_t> kToLast = ampc::channelsLastPerm(4);
const SmallVector<int64_t> kToFirst = ampc::channelsFirstPerm(4);

RankedTensorType permuted(Type type, ArrayRef<int64_t> perm) {
  auto t = cast<RankedTensorType>(type);
  return RankedTensorType::get(ampc::permuteShape(t.getShape(), perm),
                               t.getElementType());
}

/// Whether transposing `type` by `perm` moves only unit dimensions: the
/// same bytes, so a reshape.
bool movesOnlyUnitDims(Type type, ArrayRef<int64_t> perm) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> order;
  for (int64_t p : perm)
    if (t.getDimSize(p) != 1)
      order.push_back(p);
  return llvm::is_sorted(order);
}

/// `v` transposed by `perm` (a reshape where that moves only unit
/// dimensions), marked with why.
Value relayout(OpBuilder &b, Value v, ArrayRef<int64_t> perm,
               const std::string &why) {
  Operation *op;
  if (movesOnlyUnitDims(v.getType(), perm)) {
    op = ampc::ReshapeOp::create(b, v.getLoc(), permuted(v.getType(), perm), v);
    op->setAttr(ampc::kLayoutAttr, b.getStringAttr(why + " (a reshape)"));
  } else {
    op = ampc::TransposeOp::create(b, v.getLoc(), v,
                                   b.getDenseI64ArrayAttr(perm));
    op->setAttr(ampc::kLayoutAttr, b.getStringAttr(why));
  }
  return op->getResult(0);
}

bool isImage(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getRank() == 4;
}

/// Whether `op` has a channels-last form this pass gives it: 2-D images
/// only, a convolution the CUDA target runs on cuDNN (its im2col path is
/// NCHW only: uneven pads, an f64 model), a MaxPool whose Indices nothing
/// reads (the library never returns indices in another layout than
/// ONNX's).
bool hasChannelsLastForm(Operation *op) {
  if (op->hasAttr("channels_last") || op->getNumOperands() == 0 ||
      !isImage(op->getOperand(0)))
    return false;
  // Decided before any rewrite (the geometry reads the op's types).
  if (auto conv = dyn_cast<ampc::ConvOp>(op))
    return isImage(conv.getWeight()) && ampc::emit::cudnnConvolves(conv);
  if (auto bn = dyn_cast<ampc::BatchNormalizationOp>(op))
    return !bn.getResidual();
  if (auto pool = dyn_cast<ampc::MaxPoolOp>(op))
    return pool.getStorageOrder() == 0 && pool.getIndices().use_empty();
  return isa<ampc::AveragePoolOp>(op);
}

/// An operand an elementwise op may read beside channels-last images: an
/// image (transposed if it is not one already) or a value of all-unit
/// dimensions (a scalar), which broadcasts the same in either layout.
bool isScalarLike(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && llvm::all_of(t.getShape(), [](int64_t d) { return d == 1; });
}

struct ChannelsLast : ampc::impl::ChannelsLastPassBase<ChannelsLast> {
  /// Each value now stored channels-last (its type permuted in place).
  llvm::DenseSet<Value> last;
  /// The channels-last copy of an NCHW value, and the NCHW copy of a
  /// channels-last one, made once each.
  llvm::DenseMap<Value, Value> toLast, toFirst;

  /// `v` (an NCHW image, or a convolution's weight) channels-last.
  Value channelsLastOf(Value v, StringRef what, Operation *reader) {
    if (last.contains(v))
      return v;
    if (Value done = toLast.lookup(v))
      return done;
    OpBuilder b(reader->getContext());
    b.setInsertionPointAfterValue(v);
    Value r = relayout(b, v, kToLast,
                       llvm::formatv("{0} of {1} to channels-last", what,
                                     ampc::nodeDescription(reader)));
    toLast[v] = r;
    return r;
  }

  /// `v` (channels-last) in its NCHW form for `reader`.
  Value channelsFirstOf(Value v, Operation *reader) {
    if (Value done = toFirst.lookup(v))
      return done;
    OpBuilder b(reader->getContext());
    b.setInsertionPointAfterValue(v);
    Value r = relayout(b, v, kToFirst,
                       llvm::formatv("back to NCHW for {0}",
                                     ampc::nodeDescription(reader)));
    toFirst[v] = r;
    return r;
  }

  /// Gives `op` (hasChannelsLastForm) its channels-last form in place.
  void convert(Operation *op) {
    OpOperand &image = op->getOpOperand(0);
    image.set(channelsLastOf(image.get(), "X", op));
    if (auto conv = dyn_cast<ampc::ConvOp>(op))
      conv.getWeightMutable().set(channelsLastOf(conv.getWeight(), "W", op));
    op->setAttr("channels_last", UnitAttr::get(op->getContext()));
    // Y, and MaxPool's Indices.
    for (Value r : op->getResults())
      if (isImage(r)) {
        r.setType(permuted(r.getType(), kToLast));
        last.insert(r);
      }
  }

  /// GlobalAveragePool of a channels-last image as a ReduceMean over H
  /// and W, keeping the op's attributes (its precision decision).
  void convertGlobalPool(ampc::GlobalAveragePoolOp pool) {
    OpBuilder b(pool);
    auto mean = ampc::ReduceMeanOp::create(b, pool.getLoc(), pool.getInput(),
                                           b.getDenseI64ArrayAttr({1, 2}),
                                           b.getI64IntegerAttr(1));
    mean->setDiscardableAttrs(pool->getDiscardableAttrDictionary());
    last.insert(mean.getResult());
    // Its readers see the channels-last result until their turn.
    pool.getOutput().replaceAllUsesWith(mean.getResult());
    pool->erase();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // What takes the layout, decided on the NCHW function; only a
    // function with such a 2-D convolution changes.
    llvm::DenseSet<Operation *> eligible;
    func.walk([&](Operation *op) {
      if (hasChannelsLastForm(op))
        eligible.insert(op);
    });
    if (!llvm::any_of(eligible,
                      [](Operation *op) { return isa<ampc::ConvOp>(op); }))
      return;
    last.clear();
    toLast.clear();
    toFirst.clear();
    Block &block = func.getBody().front();
    for (Operation &op : llvm::make_early_inc_range(block)) {
      if (eligible.contains(&op)) {
        convert(&op);
        continue;
      }
      if (auto pool = dyn_cast<ampc::GlobalAveragePoolOp>(op);
          pool && last.contains(pool.getInput())) {
        convertGlobalPool(pool);
        continue;
      }
      // The transposes this pass made read what they should.
      if (op.hasAttr(ampc::kLayoutAttr))
        continue;
      bool readsLast = llvm::any_of(op.getOperands(), [&](Value v) {
        return last.contains(v);
      });
      if (!readsLast)
        continue;
      // An elementwise op of images computes on them as they are laid out.
      bool elementwise =
          ampc::isFusible(&op) && isImage(op.getResult(0)) &&
          llvm::all_of(op.getOperands(), [&](Value v) {
            return isImage(v) || isScalarLike(v);
          });
      if (elementwise) {
        for (OpOperand &operand : op.getOpOperands())
          if (isImage(operand.get()))
            operand.set(channelsLastOf(operand.get(), "an operand", &op));
        Value r = op.getResult(0);
        r.setType(permuted(r.getType(), kToLast));
        last.insert(r);
        continue;
      }
      for (OpOperand &operand : op.getOpOperands())
        if (last.contains(operand.get()))
          operand.set(channelsFirstOf(operand.get(), &op));
    }
    // An op nested in a region (a loop's body) reads the NCHW form.
    for (Value v : llvm::to_vector(last))
      for (OpOperand &use : llvm::make_early_inc_range(v.getUses()))
        if (use.getOwner()->getBlock() != &block)
          use.set(channelsFirstOf(v, use.getOwner()));
  }
};

} // namespace
