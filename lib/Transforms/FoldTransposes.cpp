//===- FoldTransposes.cpp - transposes around GEMMs become matrix layouts -===//
//
// Layout decisions in the IR (Passes.td, FoldTransposesPass). A GEMM library
// reads each operand through a leading dimension, a transpose flag and one
// batch stride, and writes its result the same way; a transpose (with the
// reshapes around it) that only feeds GEMMs, or that only consumes a GEMM's
// result, is such a layout, and copying it is wasted work. The GEMM becomes
// an ampc.batched_gemm that reads the transpose's input, or writes the
// transpose's result, in place; the transposes left without users go.
// Likewise a channels-last convolution's weight gradient transposed back to
// the weight's layout for the loss scaler: the unscale reads it in place.
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/ChannelsLast.h"
#include "ampc/Transforms/Passes.h"

#include "ampc/Analysis/KernelGeometry.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace ampc {
#define GEN_PASS_DEF_FOLDTRANSPOSESPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;
using ampc::emit::rowMajorStrides;

namespace {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// A reshape that moves no element: ampc.reshape, flatten, squeeze and
/// unsqueeze (the View ops).
bool isReshapeView(Operation *op) {
  return op && op->hasTrait<ampc::View>() && op->getNumOperands() == 1 &&
         op->getNumResults() == 1;
}

bool isLayoutOp(Operation *op) {
  return isReshapeView(op) || isa_and_nonnull<ampc::TransposeOp>(op);
}

/// The strides of a tensor of `shape` that views the elements a tensor of
/// `fromShape` with `fromStrides` holds, in the same row-major order; none
/// when the reshape splits or merges dimensions the strides do not keep
/// together (then it is a copy, not a view).
std::optional<SmallVector<int64_t>> reshapeStrides(ArrayRef<int64_t> fromShape,
                                                   ArrayRef<int64_t> fromStrides,
                                                   ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 0);
  if (fromShape.empty()) {
    for (int64_t size : shape)
      if (size != 1)
        return std::nullopt;
    return strides;
  }
  // Runs of dimensions that are contiguous among themselves (a chunk) may
  // be split or merged freely; a new dimension must not straddle two.
  int64_t newDim = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunkStride = fromStrides.back(), chunkElements = 1,
          newElements = 1;
  for (int64_t d = static_cast<int64_t>(fromShape.size()) - 1; d >= 0; --d) {
    chunkElements *= fromShape[d];
    bool chunkEnds = d == 0 || (fromShape[d - 1] != 1 &&
                                fromStrides[d - 1] != chunkElements * chunkStride);
    if (!chunkEnds)
      continue;
    while (newDim >= 0 && (newElements < chunkElements || shape[newDim] == 1)) {
      strides[newDim] = newElements * chunkStride;
      newElements *= shape[newDim];
      --newDim;
    }
    if (newElements != chunkElements)
      return std::nullopt;
    if (d > 0) {
      chunkStride = fromStrides[d - 1];
      chunkElements = 1;
      newElements = 1;
    }
  }
  if (newDim != -1)
    return std::nullopt;
  return strides;
}

/// A tensor's elements as a strided view of another value's buffer.
struct StridedView {
  Value buffer;
  SmallVector<int64_t> strides;
};

/// Whether `v` reaches only GEMM operands A and B through reshapes and
/// transposes: then a transpose producing it is no copy anyone else needs.
bool onlyFeedsGemms(Value v) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (isLayoutOp(user)) {
      if (!onlyFeedsGemms(user->getResult(0)))
        return false;
      continue;
    }
    if (!isa<ampc::MatMulOp, ampc::GemmOp, ampc::BatchedGemmOp>(user) ||
        use.getOperandNumber() > 1)
      return false;
  }
  return true;
}

/// Operand `v` as a view of the buffer its reshapes and transposes read:
/// back through every transpose that only feeds GEMMs and the reshapes
/// around it. Without such a transpose, `v` itself (row-major).
StridedView operandView(Value v) {
  SmallVector<Operation *> chain;
  Value root = v;
  bool folds = false;
  while (Operation *def = root.getDefiningOp()) {
    if (!isLayoutOp(def))
      break;
    if (isa<ampc::TransposeOp>(def)) {
      if (!onlyFeedsGemms(def->getResult(0)))
        break;
      folds = true;
    }
    chain.push_back(def);
    root = def->getOperand(0);
  }
  if (!folds)
    return {v, rowMajorStrides(shapeOf(v))};
  // Forward from the root, which is row-major.
  SmallVector<int64_t> strides = rowMajorStrides(shapeOf(root));
  for (Operation *op : llvm::reverse(chain)) {
    if (auto t = dyn_cast<ampc::TransposeOp>(op)) {
      SmallVector<int64_t> permuted;
      for (int64_t p : t.getPerm())
        permuted.push_back(strides[p]);
      strides = std::move(permuted);
      continue;
    }
    std::optional<SmallVector<int64_t>> next = reshapeStrides(
        shapeOf(op->getOperand(0)), strides, shapeOf(op->getResult(0)));
    if (!next)
      return {v, rowMajorStrides(shapeOf(v))};
    strides = std::move(*next);
  }
  return {root, strides};
}

/// The GEMM's result as a view of the last transpose of the chain of
/// reshapes and transposes that is its only user (each link used once):
/// the GEMM then writes that transpose's result in place. None without one.
std::optional<StridedView> resultView(Value result,
                                      SmallVector<Operation *> &chain) {
  Value v = result;
  SmallVector<Operation *> links;
  while (v.hasOneUse() && isLayoutOp(*v.getUsers().begin())) {
    Operation *user = *v.getUsers().begin();
    links.push_back(user);
    if (isa<ampc::TransposeOp>(user))
      chain = links;
    v = user->getResult(0);
  }
  if (chain.empty())
    return std::nullopt;
  Value written = chain.back()->getResult(0);
  // Backward from the written tensor, which is row-major.
  SmallVector<int64_t> strides = rowMajorStrides(shapeOf(written));
  for (Operation *op : llvm::reverse(chain)) {
    if (auto t = dyn_cast<ampc::TransposeOp>(op)) {
      SmallVector<int64_t> unpermuted(strides.size());
      for (auto [d, p] : llvm::enumerate(t.getPerm()))
        unpermuted[p] = strides[d];
      strides = std::move(unpermuted);
      continue;
    }
    std::optional<SmallVector<int64_t>> next = reshapeStrides(
        shapeOf(op->getResult(0)), strides, shapeOf(op->getOperand(0)));
    if (!next)
      return std::nullopt;
    strides = std::move(*next);
  }
  return StridedView{written, strides};
}

/// The batch dimensions `dims` (strides `strides`) as one count and one
/// stride, the only batch form a matrix layout has; none when the strides
/// are not uniform over them.
std::optional<int64_t> uniformBatchStride(ArrayRef<int64_t> dims,
                                          ArrayRef<int64_t> strides) {
  std::optional<int64_t> stride;
  int64_t inner = 1;
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    if (dims[d] == 1)
      continue;
    if (!stride)
      stride = strides[d];
    else if (strides[d] != *stride * inner)
      return std::nullopt;
    inner *= dims[d];
  }
  return stride.value_or(0);
}

/// One operand's matrix layout: stored transposed or not, leading
/// dimension, batch stride.
struct Layout {
  bool transposed = false;
  int64_t ld = 0, stride = 0;
};

/// The layout of a strided matrix [batch..., rows, cols] whose batch
/// dimensions broadcast to `batch` (missing or size-1 dimensions repeat
/// the matrix).
std::optional<Layout> layoutOf(ArrayRef<int64_t> shape,
                               ArrayRef<int64_t> strides,
                               ArrayRef<int64_t> batch) {
  size_t rank = shape.size();
  int64_t rows = shape[rank - 2], cols = shape[rank - 1];
  int64_t rowStride = strides[rank - 2], colStride = strides[rank - 1];
  SmallVector<int64_t> batchStrides(batch.size(), 0);
  for (size_t i = 0; i + 2 < rank; ++i)
    if (shape[i] != 1)
      batchStrides[batch.size() - (rank - 2) + i] = strides[i];
  Layout l;
  std::optional<int64_t> stride = uniformBatchStride(batch, batchStrides);
  if (!stride)
    return std::nullopt;
  l.stride = *stride;
  if (cols == 1 || colStride == 1) {
    l.ld = rows == 1 ? std::max<int64_t>(cols, 1) : rowStride;
    if (l.ld >= std::max<int64_t>(cols, 1))
      return l;
  }
  if (rows == 1 || rowStride == 1) {
    l.transposed = true;
    l.ld = cols == 1 ? std::max<int64_t>(rows, 1) : colStride;
    if (l.ld >= std::max<int64_t>(rows, 1))
      return l;
  }
  return std::nullopt;
}

/// `op` again, reading `input` and giving `type` (a transpose or cast
/// moved to the other side of its neighbour, attributes kept).
Value recreate(OpBuilder &builder, Operation *op, Value input, Type type) {
  Operation *copy = builder.clone(*op);
  copy->setOperand(0, input);
  copy->getResult(0).setType(type);
  return copy->getResult(0);
}

RankedTensorType withElement(Value shape, Value element) {
  return cast<RankedTensorType>(shape.getType())
      .clone(cast<RankedTensorType>(element.getType()).getElementType());
}

/// Autocast puts a cast between a transposed weight and its GEMM, and
/// between a GEMM and the transpose of its result; a cast commutes with a
/// transpose, so each pair is swapped where that puts the transpose next
/// to a GEMM that can absorb it (the cast costs the same on either side).
void moveTransposesNextToGemms(func::FuncOp func) {
  SmallVector<ampc::CastOp> casts;
  func.walk([&](ampc::CastOp c) { casts.push_back(c); });
  for (ampc::CastOp c : casts) {
    Value in = c.getInput();
    Operation *def = in.getDefiningOp();
    // transpose -> cast -> GEMMs: cast first.
    if (isa_and_nonnull<ampc::TransposeOp>(def) && in.hasOneUse() &&
        onlyFeedsGemms(c.getResult())) {
      OpBuilder builder(c);
      Value source = def->getOperand(0);
      Value cast = recreate(builder, c, source, withElement(source, c));
      Value transposed = recreate(builder, def, cast, c.getType());
      c.getResult().replaceAllUsesWith(transposed);
      c->erase();
      def->erase();
      continue;
    }
    // GEMM -> cast -> transpose: transpose first.
    if (isa_and_nonnull<ampc::MatMulOp, ampc::GemmOp>(def) && in.hasOneUse() &&
        c->hasOneUse() && isa<ampc::TransposeOp>(*c->getUsers().begin())) {
      Operation *t = *c->getUsers().begin();
      OpBuilder builder(t);
      Value transposed = recreate(builder, t, in, withElement(t->getResult(0), in));
      Value cast = recreate(builder, c, transposed, t->getResult(0).getType());
      t->getResult(0).replaceAllUsesWith(cast);
      t->erase();
      c->erase();
    }
  }
}

/// A weight gradient (M, k..., C) of a channels-last convolution
/// (ampc-channels-last) transposed back to the weight's layout (M, C, k...)
/// and, perhaps widened by a cast, read only by the loss scaler's unscale:
/// the unscale reads the gradient channels-last instead (its
/// `channels_last`), the cast applied to it untransposed (a cast commutes
/// with a transpose; ampc-fold-casts then folds it into the unscale).
void foldIntoUnscale(ampc::TransposeOp t) {
  int64_t rank = t.getPerm().size();
  if (rank < 3 || !t->hasOneUse() ||
      t.getPerm() != ArrayRef<int64_t>(ampc::channelsFirstPerm(rank)))
    return;
  OpOperand *use = &*t->use_begin();
  auto widen = dyn_cast<ampc::CastOp>(use->getOwner());
  if (widen) {
    if (!widen->hasOneUse())
      return;
    use = &*widen->use_begin();
  }
  auto unscale = dyn_cast<ampc::UnscaleOp>(use->getOwner());
  if (!unscale || use->getOperandNumber() == 0)
    return;
  unsigned i = use->getOperandNumber() - 1;
  Value grad = t.getInput();
  if (widen) {
    OpBuilder b(widen);
    auto cast = ampc::CastOp::create(
        b, widen.getLoc(),
        RankedTensorType::get(shapeOf(grad),
                              widen.getOutput().getType().getElementType()),
        grad);
    cast->setDiscardableAttrs(widen->getDiscardableAttrDictionary());
    grad = cast.getOutput();
  }
  use->set(grad);
  SmallVector<int64_t> list;
  if (auto old = unscale.getChannelsLast())
    list.assign(old->begin(), old->end());
  list.push_back(i);
  unscale.setChannelsLast(list);
  if (widen)
    widen.erase();
  t.erase();
}

struct FoldTransposes : ampc::impl::FoldTransposesPassBase<FoldTransposes> {
  void runOnOperation() override {
    SmallVector<ampc::TransposeOp> transposes;
    getOperation().walk([&](ampc::TransposeOp t) { transposes.push_back(t); });
    for (ampc::TransposeOp t : transposes)
      foldIntoUnscale(t);
    moveTransposesNextToGemms(getOperation());
    SmallVector<Operation *> gemms;
    getOperation().walk([&](Operation *op) {
      // Not a Gemm with a bias gradient or a ReLU mask (a second result
      // or operand the batched form does not have; ampc-fuse-epilogues,
      // issue 37 item 3).
      auto g = dyn_cast<ampc::GemmOp>(op);
      if (isa<ampc::MatMulOp>(op) || (g && !g.getAux() && !g.getReluMask()))
        gemms.push_back(op);
    });
    for (Operation *gemm : gemms)
      fold(gemm);
    // The transposes and reshapes whose every user now reads their input.
    SmallVector<Operation *> dead;
    getOperation().walk([&](Operation *op) {
      if (isLayoutOp(op))
        dead.push_back(op);
    });
    for (Operation *op : llvm::reverse(dead))
      if (op->use_empty())
        op->erase();
  }

  void fold(Operation *gemm) {
    Value a = gemm->getOperand(0), b = gemm->getOperand(1);
    Value out = gemm->getResult(0);
    if (shapeOf(a).size() < 2 || shapeOf(b).size() < 2)
      return;
    bool transA = false, transB = false;
    float alpha = 1.0f;
    Value bias;
    ampc::GemmEpilogue epilogue = ampc::GemmEpilogue::None;
    if (auto g = dyn_cast<ampc::GemmOp>(gemm)) {
      epilogue = g.getEpilogue();
      bool hasBias = epilogue == ampc::GemmEpilogue::Bias ||
                     epilogue == ampc::GemmEpilogue::ReluBias;
      // A C added otherwise is added into the result first: keep it.
      if (g.getC() && !hasBias)
        return;
      bias = hasBias ? g.getC() : Value();
      transA = g.getTransA() != 0;
      transB = g.getTransB() != 0;
      alpha = g.getAlpha().convertToFloat();
    }
    StridedView av = operandView(a), bv = operandView(b);
    SmallVector<Operation *> resultChain;
    std::optional<StridedView> dv = resultView(out, resultChain);
    if (av.buffer == a && bv.buffer == b && !dv)
      return;
    if (!dv)
      dv = StridedView{out, rowMajorStrides(shapeOf(out))};

    ArrayRef<int64_t> outShape = shapeOf(out);
    ArrayRef<int64_t> batch = outShape.drop_back(2);
    std::optional<Layout> la = layoutOf(shapeOf(a), av.strides, batch);
    std::optional<Layout> lb = layoutOf(shapeOf(b), bv.strides, batch);
    std::optional<Layout> ld = layoutOf(outShape, dv->strides, batch);
    if (!la || !lb || !ld)
      return;
    int64_t m = outShape[outShape.size() - 2], n = outShape.back();
    int64_t k = transA ? shapeOf(a)[0] : shapeOf(a).back();
    bool opA = transA != la->transposed, opB = transB != lb->transposed;
    if (ld->transposed) {
      // D is written as stored, so a transposed D is computed as
      // D^T = op(B)^T op(A)^T. A bias would then run along D^T's rows.
      if (bias)
        return;
      std::swap(av, bv);
      std::swap(la, lb);
      std::swap(m, n);
      std::tie(opA, opB) = std::make_pair(!opB, !opA);
    }

    OpBuilder builder(gemm);
    auto i64 = [&](int64_t v) { return builder.getI64IntegerAttr(v); };
    auto folded = ampc::BatchedGemmOp::create(
        builder, gemm->getLoc(), dv->buffer.getType(), av.buffer, bv.buffer,
        bias, i64(m), i64(n), i64(k), i64(product(batch)),
        builder.getBoolAttr(opA), builder.getBoolAttr(opB), i64(la->ld),
        i64(lb->ld), i64(ld->ld), i64(la->stride), i64(lb->stride),
        i64(ld->stride), builder.getF32FloatAttr(alpha),
        ampc::GemmEpilogueAttr::get(builder.getContext(), epilogue));
    // Attributes the pipeline put on the GEMM (its precision decision)
    // travel with it.
    for (NamedAttribute attr : gemm->getDiscardableAttrs())
      folded->setAttr(attr.getName(), attr.getValue());
    if (dv->buffer == out) {
      out.replaceAllUsesWith(folded.getResult());
    } else {
      dv->buffer.replaceAllUsesWith(folded.getResult());
      for (Operation *op : llvm::reverse(resultChain))
        op->erase();
    }
    gemm->erase();
  }

  static int64_t product(ArrayRef<int64_t> dims) {
    int64_t p = 1;
    for (int64_t d : dims)
      p *= d;
    return p;
  }
};

} // namespace
