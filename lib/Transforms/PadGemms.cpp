//===- PadGemms.cpp - Tensor Core shapes as a decision (issue 37, item 11) -===//
//
// Two passes over the GEMMs (docs/design.md, Tensor Core shapes):
//
// ampc-pad-gemms (graph part, after precision assignment, before autodiff)
// pads the output features N of every FP16/BF16 ampc.gemm whose B is a
// parameter's copy (a Linear) to the next multiple of 8: B's low-precision
// copy and the bias row get zero rows, the GEMM computes the padded width
// and an ampc.slice gives every reader (the attached loss, the user's
// output, the next layer) the first N columns. The parameters keep their
// shapes. Autodiff then derives the backward from the padded forward: the
// slice's adjoint (slice_grad) gives the padded columns of dY exact zeros,
// so the backward GEMMs are padded as well and dX sums only extra +0
// terms. Each forward GEMM's decision, and the reason for every dimension
// it cannot pad, is recorded in `ampc.gemm_shape` (a string `--report`
// lists).
//
// ampc-gemm-alignment (kernel part, last before the memory plan) records on
// every ampc.gemm, ampc.batched_gemm and ampc.matmul the kernels run,
// forward and backward, `ampc.alignment`: M, N and K with the largest of
// 16/8/4/2/1 dividing each, and the multiple the operand type needs for
// Tensor Cores (8 for FP16/BF16, 1 otherwise; FP8 would need 16).
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"
#include "ampc/Transforms/Precision.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/FormatVariadic.h"

namespace ampc {
#define GEN_PASS_DEF_PADGEMMSPASS
#define GEN_PASS_DEF_GEMMALIGNMENTPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

using ampc::kAlignmentAttr;
using ampc::kGemmShapeAttr;
using ampc::kPaddingAttr;

/// The largest of 16, 8, 4, 2, 1 that divides `d`.
int64_t alignmentOf(int64_t d) {
  for (int64_t a : {16, 8, 4, 2})
    if (d % a == 0)
      return a;
  return 1;
}

/// The multiple Tensor Cores need for operands of `element`: 8 for FP16
/// and BF16; 1 (no Tensor Core requirement) for FP32/FP64.
int64_t needsFor(Type element) {
  return element.isF16() || element.isBF16() ? 8 : 1;
}

/// `v` read through casts: the parameter load it copies, or null.
ampc::LoadParameterOp parameterOf(Value v) {
  while (auto c = v.getDefiningOp<ampc::CastOp>())
    v = c.getInput();
  return v.getDefiningOp<ampc::LoadParameterOp>();
}

/// `v` read through casts and views: the function argument it is, or null.
BlockArgument argumentOf(Value v) {
  if (!v)
    return nullptr;
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<ampc::CastOp, ampc::ReshapeOp, ampc::FlattenOp>(def))
      return nullptr;
    v = def->getOperand(0);
  }
  return dyn_cast<BlockArgument>(v);
}

std::string argumentName(BlockArgument arg) {
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  if (func)
    if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      ampc::kNameAttr))
      return name.str();
  return "input" + std::to_string(arg.getArgNumber());
}

Value zeros(OpBuilder &b, Location loc, RankedTensorType type) {
  auto attr = DenseElementsAttr::get(
      type, b.getFloatAttr(type.getElementType(), 0.0));
  return ampc::ConstantOp::create(b, loc, attr);
}

/// `v` with `extra` zero rows (axis 0) or columns (axis 1) appended.
Value padWithZeros(OpBuilder &b, Location loc, Value v, int64_t axis,
                   int64_t extra) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] = extra;
  Value z = zeros(b, loc, RankedTensorType::get(shape, type.getElementType()));
  auto concat = ampc::ConcatOp::create(b, loc, ValueRange{v, z}, axis);
  concat->setAttr(kPaddingAttr, b.getUnitAttr());
  return concat;
}

struct PadGemmsPass : ampc::impl::PadGemmsPassBase<PadGemmsPass> {
  using Base::Base;

  /// Pads `gemm`'s N when it can; returns the decision's text.
  std::string decide(ampc::GemmOp gemm) {
    auto a = cast<RankedTensorType>(gemm.getA().getType());
    auto bType = cast<RankedTensorType>(gemm.getB().getType());
    bool transA = gemm.getTransA(), transB = gemm.getTransB();
    int64_t m = a.getDimSize(transA ? 1 : 0), k = a.getDimSize(transA ? 0 : 1);
    int64_t n = bType.getDimSize(transB ? 0 : 1);
    int64_t needs = needsFor(a.getElementType());
    std::string text = llvm::formatv("{0} ({1}, needs {2}): M {3}, N {4}, K {5}",
                                     ampc::onnxNodeName(gemm), a.getElementType(),
                                     needs, m, n, k);
    std::vector<std::string> notes;
    if (needs == 1) {
      notes.push_back("not padded: FP32/FP64 GEMMs do not use Tensor Cores");
    } else {
      if (m % needs)
        notes.push_back(llvm::formatv("M {0} not padded: the rows (the "
                                      "batch the caller passes)", m));
      if (k % needs) {
        if (BlockArgument arg = argumentOf(transA ? Value() : gemm.getA()))
          notes.push_back(llvm::formatv(
              "K {0} not padded: the features of '{1}', a user-visible "
              "input", k, argumentName(arg)));
        else
          notes.push_back(llvm::formatv(
              "K {0} not padded: the features A's producer computes (padding "
              "them needs that producer's output kept padded; not done)", k));
      }
      if (n % needs)
        notes.push_back(padN(gemm, n, needs));
    }
    for (const std::string &note : notes)
      text += "; " + note;
    return text;
  }

  /// Pads N of `gemm` to a multiple of `needs`, or says why not.
  std::string padN(ampc::GemmOp gemm, int64_t n, int64_t needs) {
    if (!parameterOf(gemm.getB()))
      return llvm::formatv("N {0} not padded: B is computed, not a "
                           "parameter (only a Linear's weight is padded)", n);
    Value c = gemm.getC();
    if (c && (cast<RankedTensorType>(c.getType()).getRank() != 1 ||
              cast<RankedTensorType>(c.getType()).getDimSize(0) != n))
      return llvm::formatv("N {0} not padded: C is not a bias row of {0}", n);
    if (gemm.getEpilogue() != ampc::GemmEpilogue::None)
      return llvm::formatv("N {0} not padded: the GEMM has an epilogue", n);
    if (n < minN)
      return llvm::formatv("N {0} not padded: below {1} under "
                           "--pad-gemms=auto (the pad and slice copies cost "
                           "more than the unaligned GEMM; --pad-gemms=on "
                           "pads it)", n, static_cast<int64_t>(minN));
    int64_t padded = (n + needs - 1) / needs * needs;
    OpBuilder b(gemm);
    Location loc = gemm.getLoc();
    bool transB = gemm.getTransB();
    Value bPadded = padWithZeros(b, loc, gemm.getB(), transB ? 0 : 1,
                                 padded - n);
    Value cPadded = c ? padWithZeros(b, loc, c, 0, padded - n) : Value();
    Operation *wide = b.clone(*gemm);
    wide->setOperand(1, bPadded);
    if (c)
      wide->setOperand(2, cPadded);
    auto out = cast<RankedTensorType>(gemm.getOutput().getType());
    wide->getResult(0).setType(
        RankedTensorType::get({out.getDimSize(0), padded},
                              out.getElementType()));
    auto slice = ampc::SliceOp::create(b, loc, wide->getResult(0), {0}, {n},
                                       {1}, {1});
    slice->setAttr(kPaddingAttr, b.getUnitAttr());
    gemm.getOutput().replaceAllUsesWith(slice.getResult());
    std::string text = llvm::formatv(
        "N {0} padded to {1} (the weight's low-precision copy and the bias "
        "with {2} zero rows; the result sliced back to {0} columns for every "
        "reader)", n, padded, padded - n);
    gemm.erase();
    padded_ = wide;
    return text;
  }

  void runOnOperation() override {
    SmallVector<ampc::GemmOp> gemms;
    getOperation().walk([&](ampc::GemmOp g) { gemms.push_back(g); });
    for (ampc::GemmOp g : gemms) {
      padded_ = nullptr;
      Builder b(&getContext());
      std::string text = decide(g);
      Operation *target = padded_ ? padded_ : g.getOperation();
      target->setAttr(kGemmShapeAttr, b.getStringAttr(text));
    }
  }

  Operation *padded_ = nullptr;
};

struct GemmAlignmentPass
    : ampc::impl::GemmAlignmentPassBase<GemmAlignmentPass> {
  void runOnOperation() override {
    Builder b(&getContext());
    auto record = [&](Operation *op, int64_t m, int64_t n, int64_t k,
                      Type element) {
      auto entry = [&](StringRef name, int64_t d) {
        return b.getNamedAttr(name, b.getDenseI64ArrayAttr(
                                        {d, alignmentOf(d)}));
      };
      op->setAttr(kAlignmentAttr,
                  b.getDictionaryAttr(
                      {entry("m", m), entry("n", n), entry("k", k),
                       b.getNamedAttr("needs", b.getI64IntegerAttr(
                                                   needsFor(element)))}));
    };
    getOperation().walk([&](Operation *op) {
      if (auto g = dyn_cast<ampc::GemmOp>(op)) {
        auto a = cast<RankedTensorType>(g.getA().getType());
        auto bt = cast<RankedTensorType>(g.getB().getType());
        record(op, a.getDimSize(g.getTransA() ? 1 : 0),
               bt.getDimSize(g.getTransB() ? 0 : 1),
               a.getDimSize(g.getTransA() ? 0 : 1), a.getElementType());
      } else if (auto g = dyn_cast<ampc::BatchedGemmOp>(op)) {
        record(op, g.getM(), g.getN(), g.getK(),
               cast<RankedTensorType>(g.getA().getType()).getElementType());
      } else if (auto g = dyn_cast<ampc::MatMulOp>(op)) {
        auto a = cast<RankedTensorType>(g.getLhs().getType());
        auto bt = cast<RankedTensorType>(g.getRhs().getType());
        int64_t m = a.getRank() >= 2 ? a.getDimSize(a.getRank() - 2) : 1;
        int64_t n = bt.getRank() >= 2 ? bt.getDimSize(bt.getRank() - 1) : 1;
        record(op, m, n, a.getDimSize(a.getRank() - 1), a.getElementType());
      }
    });
  }
};

} // namespace
