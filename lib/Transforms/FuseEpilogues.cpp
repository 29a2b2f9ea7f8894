//===- FuseEpilogues.cpp - GEMM epilogues decided in the IR ---------------===//
//
// Marks each ampc.gemm with the epilogue a GEMM library applies while it
// stores its result (Passes.td, FuseEpiloguesPass): a row-vector C becomes
// the bias epilogue, and a lone Relu user is folded into the Gemm. First, a
// Linear on an N-D input (a MatMul of [..., K] by a [K, N] weight, the Add
// of a bias over the last axis, a Relu) becomes one 2-D Gemm over every row
// between two reshapes (views), so that it gets the same epilogues. With
// `backward` (the CUDA target), bias gradients and a Relu's gradient become
// epilogues of the backward GEMMs (BGRADA/B, DRELU(_BGRAD)). The
// targets only print what the attribute says, and the memory plan, which
// runs after this pass, keeps the fused result apart from the Gemm's
// operands because it is the Gemm's own result.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"
#include "ampc/Transforms/Precision.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace ampc {
#define GEN_PASS_DEF_FUSEEPILOGUESPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;
using ampc::GemmEpilogue;

namespace {

/// Whether C is added as a bias: a row vector of the output's type added
/// once (beta 1) to a result of more than one column.
bool isBias(ampc::GemmOp gemm) {
  Value c = gemm.getC();
  if (!c || gemm.getBeta().convertToFloat() != 1.0f)
    return false;
  auto out = cast<RankedTensorType>(gemm.getOutput().getType());
  auto cType = cast<RankedTensorType>(c.getType());
  int64_t n = out.getDimSize(1);
  ArrayRef<int64_t> cs = cType.getShape();
  bool rowVector = (cs.size() == 1 && cs[0] == n) ||
                   (cs.size() == 2 && cs[0] == 1 && cs[1] == n);
  return rowVector && n > 1 &&
         cType.getElementType() == out.getElementType();
}

/// The Relu that may be folded into `gemm`: its only user, of the same
/// type, in the same block.
ampc::ReluOp foldableRelu(ampc::GemmOp gemm) {
  if (!gemm->hasOneUse())
    return nullptr;
  auto relu = dyn_cast<ampc::ReluOp>(*gemm->getUsers().begin());
  if (!relu || relu.getType() != gemm.getOutput().getType() ||
      relu->getBlock() != gemm->getBlock())
    return nullptr;
  return relu;
}

/// The one user of `v`, if it has exactly one, in `v`'s block.
Operation *soleUser(Value v) {
  if (!v.hasOneUse())
    return nullptr;
  Operation *user = *v.getUsers().begin();
  return user->getBlock() == v.getParentBlock() ? user : nullptr;
}

/// A MatMul of an N-D [..., K] by a 2-D [K, N] as reshape to [rows, K],
/// Gemm, reshape back (issue 37, item 3). The Add of a bias (a vector of N,
/// or [1, ..., 1, N], of the result's type) that is the MatMul's only user
/// becomes the Gemm's C (beta 1), and a Relu that is the only user of the
/// sum moves before the reshape; the loop below then fuses them. The Gemm
/// keeps the MatMul's location and attributes (its precision decision).
void flattenLinear(ampc::MatMulOp mm) {
  auto aType = cast<RankedTensorType>(mm.getLhs().getType());
  auto wType = cast<RankedTensorType>(mm.getRhs().getType());
  auto outType = cast<RankedTensorType>(mm.getType());
  if (aType.getRank() < 3 || wType.getRank() != 2 ||
      !aType.hasStaticShape() || !wType.hasStaticShape())
    return;
  Type element = outType.getElementType();
  if (aType.getElementType() != element || wType.getElementType() != element)
    return;
  int64_t k = aType.getShape().back(), n = outType.getShape().back();
  int64_t rows = 1;
  for (int64_t d : aType.getShape().drop_back())
    rows *= d;
  // The bias: the other operand of the Add that is the MatMul's only user.
  Value bias;
  Operation *last = mm;
  if (auto add = dyn_cast_or_null<ampc::AddOp>(soleUser(mm.getResult()))) {
    Value other = add.getLhs() == mm.getResult() ? add.getRhs() : add.getLhs();
    auto bType = cast<RankedTensorType>(other.getType());
    bool rowVector = bType.getRank() >= 1 && bType.getShape().back() == n &&
                     bType.getRank() <= outType.getRank();
    for (int64_t d : bType.getShape().drop_back())
      rowVector = rowVector && d == 1;
    if (other != mm.getResult() && rowVector && n > 1 &&
        bType.getElementType() == element && add.getType() == outType) {
      bias = other;
      last = add;
    }
  }
  auto relu = dyn_cast_or_null<ampc::ReluOp>(soleUser(last->getResult(0)));
  if (relu && relu.getType() != outType)
    relu = nullptr;
  if (relu)
    last = relu;
  // Built where the chain ends: the bias may be defined after the MatMul.
  OpBuilder b(last);
  Location loc = mm.getLoc();
  auto matrix = [&](int64_t r, int64_t c) {
    return RankedTensorType::get({r, c}, element);
  };
  Value a = mm.getLhs();
  if (auto inner = a.getDefiningOp<ampc::ReshapeOp>())
    a = inner.getInput(); // a reshape of a reshape is one view
  a = ampc::ReshapeOp::create(b, loc, matrix(rows, k), a);
  if (bias && cast<RankedTensorType>(bias.getType()).getRank() != 1)
    bias = ampc::ReshapeOp::create(
        b, loc, RankedTensorType::get({n}, element), bias);
  auto gemm = ampc::GemmOp::create(b, loc, a, mm.getRhs(), bias, Value(),
                                   APFloat(1.0f), APFloat(1.0f), 0, 0);
  for (NamedAttribute attr : mm->getDiscardableAttrs())
    gemm->setAttr(attr.getName(), attr.getValue());
  Value result = gemm.getOutput();
  if (relu)
    result = ampc::ReluOp::create(b, relu.getLoc(), result).getResult();
  Value out = ampc::ReshapeOp::create(b, loc, outType, result);
  last->getResult(0).replaceAllUsesWith(out);
  if (relu)
    relu->erase();
  if (bias)
    mm.getResult().getUses().begin()->getOwner()->erase(); // the Add
  mm->erase();
}

/// A Gemm like `gemm` (attributes, location) with other operands, flags,
/// result types and epilogue, built where `gemm` is.
ampc::GemmOp rebuild(ampc::GemmOp gemm, Value a, Value b, bool ta, bool tb,
                     TypeRange types, GemmEpilogue epilogue) {
  OpBuilder builder(gemm);
  auto fresh = ampc::GemmOp::create(builder, gemm.getLoc(), types, a, b,
                                    gemm.getC(), gemm.getReluMask(),
                                    gemm.getAlpha(),
                                    gemm.getBeta(), ta, tb, epilogue);
  for (NamedAttribute attr : gemm->getDiscardableAttrs())
    fresh->setAttr(attr.getName(), attr.getValue());
  return fresh;
}

/// The compiler's cast of `v` to FP32 that is the only user of the 16-bit
/// `v`, or null. A user's own Cast is semantics (the rounding to 16 bits is
/// the model's) and is never folded.
ampc::CastOp soleWideningCast(Value v) {
  Type element = cast<RankedTensorType>(v.getType()).getElementType();
  if (!(element.isF16() || element.isBF16()))
    return nullptr;
  auto widen = dyn_cast_or_null<ampc::CastOp>(soleUser(v));
  if (!widen || !ampc::isAutocast(widen) ||
      !cast<RankedTensorType>(widen.getType()).getElementType().isF32())
    return nullptr;
  return widen;
}

/// `v` -> slice -> the compiler's cast to FP32 (each the only user) becomes
/// `v` -> cast -> slice: exact (a cast commutes with a slice), and the cast
/// is then `v`'s only user, which the widening below folds. ampc-pad-gemms
/// leaves a padded weight gradient so: the Gemm's rows sliced back to the
/// weight's (issue 37, item 11).
void castBeforeSlice(Value v) {
  auto slice = dyn_cast_or_null<ampc::SliceOp>(soleUser(v));
  if (!slice)
    return;
  ampc::CastOp widen = soleWideningCast(slice.getOutput());
  if (!widen)
    return;
  Type f32 = cast<RankedTensorType>(widen.getType()).getElementType();
  auto retype = [&](Value x) {
    x.setType(RankedTensorType::get(
        cast<RankedTensorType>(x.getType()).getShape(), f32));
  };
  widen.getResult().replaceAllUsesWith(slice.getOutput());
  widen->moveBefore(slice);
  widen.getInputMutable().assign(v);
  widen.getResult().setType(
      RankedTensorType::get(cast<RankedTensorType>(v.getType()).getShape(), f32));
  slice.getInputMutable().assign(widen.getResult());
  retype(slice.getOutput());
}

/// A ReduceSum of FP16/BF16 whose only user is the compiler's cast to FP32
/// writes its FP32 accumulator (issue 37, item 3: a bias gradient without
/// the rounding to 16 bits; the CUDA target's bias-gradient epilogue then
/// writes it in the FP32 weight gradient's type).
void widenSum(ampc::ReduceSumOp sum) {
  ampc::CastOp widen = soleWideningCast(sum.getResult());
  if (!widen)
    return;
  sum.getResult().setType(widen.getType());
  widen.getResult().replaceAllUsesWith(sum.getResult());
  widen->erase();
}

/// A Gemm of FP16/BF16 operands whose only user is the compiler's cast to
/// FP32 writes FP32 (issue 37, item 3: a weight gradient without the
/// rounding to 16 bits and the cast kernel); a 2-D transpose that is then
/// the only user swaps the operands instead ((A B)^T = B^T A^T, no C to
/// transpose).
ampc::GemmOp widenOutput(ampc::GemmOp gemm, bool widenToFp32) {
  auto out = cast<RankedTensorType>(gemm.getOutput().getType());
  Type element = out.getElementType();
  // A weight gradient contracts over the rows (op(A) = Aᵀ: Xᵀ dY, or dYᵀ
  // X); an input gradient (dY W) keeps its 16-bit result, as it did.
  if (gemm.getEpilogue() != GemmEpilogue::None || gemm.getC() ||
      gemm.getTransA() == 0)
    return gemm;
  ampc::CastOp widen = soleWideningCast(gemm.getOutput());
  if (!widen)
    return gemm;
  Operation *last = widen;
  auto transpose =
      dyn_cast_or_null<ampc::TransposeOp>(soleUser(widen.getResult()));
  bool swap = transpose &&
              transpose.getPerm() == ArrayRef<int64_t>{1, 0};
  Value a = gemm.getA(), b = gemm.getB();
  bool ta = gemm.getTransA() != 0, tb = gemm.getTransB() != 0;
  if (swap) {
    std::swap(a, b);
    std::tie(ta, tb) = std::make_pair(!tb, !ta);
    last = transpose;
  }
  if (!widenToFp32 && !swap)
    return gemm;
  Type type = last->getResult(0).getType();
  // Without widening the Gemm writes the transposed 16-bit result and the
  // cast follows it (a cast commutes with a transpose).
  if (!widenToFp32)
    type = RankedTensorType::get(cast<RankedTensorType>(type).getShape(),
                                 element);
  ampc::GemmOp fresh = rebuild(gemm, a, b, ta, tb, {type}, GemmEpilogue::None);
  Value result = fresh.getOutput();
  if (!widenToFp32) {
    OpBuilder builder(fresh->getBlock(), ++Block::iterator(fresh));
    result = ampc::CastOp::create(builder, widen.getLoc(),
                                  last->getResult(0).getType(), result)
                 .getResult();
    for (NamedAttribute attr : widen->getDiscardableAttrs())
      result.getDefiningOp()->setAttr(attr.getName(), attr.getValue());
  }
  last->getResult(0).replaceAllUsesWith(result);
  if (swap)
    transpose->erase();
  widen->erase();
  gemm->erase();
  return fresh;
}

/// The ReduceSum over the leading axes of the tensor that one k-major
/// operand of `gemm` views (op(A) = Aᵀ, or op(B) = B, the operand that
/// tensor or a reshape of it to [k, columns]), in the output's type or
/// cast to it once, becomes the Gemm's bias gradient (`bgrad_a` /
/// `bgrad_b`) where every use of it comes after the Gemm.
void fuseBiasGradient(ampc::GemmOp gemm) {
  if (gemm.getEpilogue() != GemmEpilogue::None || gemm.getC() ||
      !gemm.getAlpha().isExactlyValue(1.0))
    return;
  Type element =
      cast<RankedTensorType>(gemm.getOutput().getType()).getElementType();
  Block *block = gemm->getBlock();
  auto after = [&](Value v) {
    return llvm::all_of(v.getUsers(), [&](Operation *user) {
      return user->getBlock() == block && gemm->isBeforeInBlock(user);
    });
  };
  for (bool sideA : {true, false}) {
    Value operand = sideA ? gemm.getA() : gemm.getB();
    bool kMajor = sideA ? gemm.getTransA() != 0 : gemm.getTransB() == 0;
    if (!kMajor)
      continue;
    int64_t columns = cast<RankedTensorType>(operand.getType()).getDimSize(1);
    Value source = operand;
    if (auto view = operand.getDefiningOp<ampc::ReshapeOp>())
      source = view.getInput();
    auto sourceType = cast<RankedTensorType>(source.getType());
    int64_t rank = sourceType.getRank();
    if (rank < 2 || sourceType.getShape().back() != columns)
      continue;
    SmallVector<int64_t> leading =
        llvm::to_vector(llvm::seq<int64_t>(0, rank - 1));
    for (Operation *user : source.getUsers()) {
      auto sum = dyn_cast<ampc::ReduceSumOp>(user);
      if (!sum || sum->getBlock() != block || sum.getKeepdims() != 0 ||
          sum.getAxes() != ArrayRef<int64_t>(leading))
        continue;
      Value grad = sum.getResult();
      ampc::CastOp narrow;
      Type sumElement = cast<RankedTensorType>(grad.getType()).getElementType();
      if (sumElement != element) {
        // Only a cast that rounds the sum once to D's narrower type is the
        // epilogue's own rounding; a widening cast would drop the sum's.
        narrow = dyn_cast_or_null<ampc::CastOp>(soleUser(grad));
        if (!narrow ||
            cast<RankedTensorType>(narrow.getType()).getElementType() !=
                element ||
            sumElement.getIntOrFloatBitWidth() <=
                element.getIntOrFloatBitWidth())
          continue;
        grad = narrow.getResult();
      }
      // A cast of the sum before the Gemm (to the gradient's FP32) moves
      // after it when its own users come after.
      ampc::CastOp follower;
      if (!after(grad)) {
        follower = dyn_cast_or_null<ampc::CastOp>(soleUser(grad));
        if (!follower || !after(follower.getResult()))
          continue;
      }
      ampc::GemmOp fresh = rebuild(
          gemm, gemm.getA(), gemm.getB(), gemm.getTransA() != 0,
          gemm.getTransB() != 0, {gemm.getOutput().getType(), grad.getType()},
          sideA ? GemmEpilogue::BiasGradA : GemmEpilogue::BiasGradB);
      gemm.getOutput().replaceAllUsesWith(fresh.getOutput());
      grad.replaceAllUsesWith(fresh.getBiasGrad());
      if (follower)
        follower->moveAfter(fresh);
      if (narrow)
        narrow->erase();
      sum->erase();
      gemm->erase();
      return;
    }
  }
}

/// The Relu's backward `relu_grad(dH, Y)`, where Y is a Gemm's output
/// with a Relu epilogue and dH the output of the next layer's input
/// gradient Gemm (read by nothing else), becomes that Gemm's `drelu`
/// epilogue on the ReLU bit mask the forward Gemm then writes as well
/// (`relu_aux` / `relu_aux_bias`; issue 37, item 3: cuBLASLt's RELU_AUX
/// and DRELU). A ReduceSum of the masked gradient over its rows in D's
/// type, every use after the Gemm, becomes its `drelu_bgrad` bias
/// gradient (a sum in another type, e.g. FP32 of an FP16 gradient, is
/// left to the weight gradient's `bgrad_a`: cuBLASLt writes DRELU_BGRAD's
/// sum in D's type).
void fuseReluGradient(ampc::ReluGradOp grad) {
  if (!grad.getAlpha().isZero())
    return;
  Block *block = grad->getBlock();
  auto forward = grad.getInput().getDefiningOp<ampc::GemmOp>();
  auto backward = grad.getGrad().getDefiningOp<ampc::GemmOp>();
  if (!forward || !backward || forward->getBlock() != block ||
      backward->getBlock() != block || !forward->isBeforeInBlock(backward) ||
      !grad.getGrad().hasOneUse() ||
      backward.getEpilogue() != GemmEpilogue::None || backward.getC() ||
      !backward.getAlpha().isExactlyValue(1.0))
    return;
  GemmEpilogue relu = forward.getEpilogue();
  if (relu != GemmEpilogue::Relu && relu != GemmEpilogue::ReluBias &&
      relu != GemmEpilogue::ReluAux && relu != GemmEpilogue::ReluAuxBias)
    return;
  auto type = cast<RankedTensorType>(grad.getType());
  // The bias gradient: the masked gradient's sum over its rows.
  ampc::ReduceSumOp sum;
  for (Operation *user : grad.getResult().getUsers()) {
    auto s = dyn_cast<ampc::ReduceSumOp>(user);
    if (s && s->getBlock() == block && s.getKeepdims() == 0 &&
        s.getAxes() == ArrayRef<int64_t>{0} &&
        cast<RankedTensorType>(s.getType()).getElementType() ==
            type.getElementType() &&
        llvm::all_of(s.getResult().getUsers(), [&](Operation *u) {
          return u->getBlock() == block && backward->isBeforeInBlock(u);
        })) {
      sum = s;
      break;
    }
  }
  Value mask = forward.getReluMaskOut();
  if (!mask) {
    ampc::GemmOp fresh = rebuild(
        forward, forward.getA(), forward.getB(), forward.getTransA() != 0,
        forward.getTransB() != 0,
        {forward.getOutput().getType(),
         ampc::reluMaskType(forward.getContext(), type.getDimSize(0),
                            type.getDimSize(1))},
        relu == GemmEpilogue::Relu ? GemmEpilogue::ReluAux
                                   : GemmEpilogue::ReluAuxBias);
    forward.getOutput().replaceAllUsesWith(fresh.getOutput());
    forward->erase();
    mask = fresh.getReluMaskOut();
  }
  SmallVector<Type> types = {type};
  if (sum)
    types.push_back(sum.getType());
  OpBuilder builder(backward);
  auto fused = ampc::GemmOp::create(
      builder, backward.getLoc(), types, backward.getA(), backward.getB(),
      Value(), mask, backward.getAlpha(), backward.getBeta(),
      backward.getTransA(), backward.getTransB(),
      sum ? GemmEpilogue::DReluBiasGrad : GemmEpilogue::DRelu);
  for (NamedAttribute attr : backward->getDiscardableAttrs())
    fused->setAttr(attr.getName(), attr.getValue());
  grad.getResult().replaceAllUsesWith(fused.getOutput());
  if (sum) {
    sum.getResult().replaceAllUsesWith(fused.getBiasGrad());
    sum->erase();
  }
  grad->erase();
  backward->erase();
}

struct FuseEpilogues : ampc::impl::FuseEpiloguesPassBase<FuseEpilogues> {
  using FuseEpiloguesPassBase::FuseEpiloguesPassBase;
  void runOnOperation() override {
    SmallVector<ampc::MatMulOp> matmuls;
    getOperation().walk([&](ampc::MatMulOp mm) { matmuls.push_back(mm); });
    for (ampc::MatMulOp mm : matmuls)
      flattenLinear(mm);
    // Collected first: folding erases the Relu the walk would visit next.
    SmallVector<ampc::GemmOp> gemms;
    getOperation().walk([&](ampc::GemmOp gemm) { gemms.push_back(gemm); });
    for (ampc::GemmOp gemm : gemms) {
      if (gemm.getEpilogue() != GemmEpilogue::None)
        continue;
      bool bias = isBias(gemm);
      // A C that is not a bias is added before the epilogue would see the
      // sum; keep the Relu apart then.
      ampc::ReluOp relu = (bias || !gemm.getC()) ? foldableRelu(gemm) : nullptr;
      if (relu) {
        gemm.setEpilogue(bias ? GemmEpilogue::ReluBias : GemmEpilogue::Relu);
        relu.getResult().replaceAllUsesWith(gemm.getOutput());
        relu->erase();
      } else if (bias) {
        gemm.setEpilogue(GemmEpilogue::Bias);
      }
    }
    // The FP32 gradients change the numbers, so every target takes them
    // (the CPU target is the reference); the bias-gradient epilogues are
    // the CUDA target's.
    if (fp32WeightGradients) {
      // Collected first: widening erases the cast the walk may visit next.
      SmallVector<ampc::ReduceSumOp> sums;
      getOperation().walk([&](ampc::ReduceSumOp sum) { sums.push_back(sum); });
      for (ampc::ReduceSumOp sum : sums) {
        castBeforeSlice(sum.getResult());
        widenSum(sum);
      }
    }
    if (!backward && !fp32WeightGradients)
      return;
    if (backward) {
      // Collected first: fusing erases the relu_grad and the Gemms.
      SmallVector<ampc::ReluGradOp> grads;
      getOperation().walk([&](ampc::ReluGradOp g) { grads.push_back(g); });
      for (ampc::ReluGradOp g : grads)
        fuseReluGradient(g);
    }
    gemms.clear();
    getOperation().walk([&](ampc::GemmOp gemm) { gemms.push_back(gemm); });
    for (ampc::GemmOp gemm : gemms) {
      if (fp32WeightGradients && gemm.getEpilogue() == GemmEpilogue::None &&
          !gemm.getC())
        castBeforeSlice(gemm.getOutput());
      ampc::GemmOp widened = widenOutput(gemm, fp32WeightGradients);
      if (backward)
        fuseBiasGradient(widened);
    }
  }
};

} // namespace
