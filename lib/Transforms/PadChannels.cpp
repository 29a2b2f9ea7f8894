//===- PadChannels.cpp - channel counts for Tensor Cores (issue 39) -------===//
//
// ampc-pad-channels (Passes.td, docs/design.md "Channel counts for Tensor
// Cores"). FP16/BF16 Tensor Core convolutions want the input channels C and
// the output channels M in multiples of 8; a network's first convolution
// reads 3 (RGB) and a small model's filters may be any count. After
// ampc-channels-last has stored the convolution's tensors (N, H, W, C) and
// (M, kH, kW, C), padding either count is a concatenation on one axis:
//
//   C: X and the weight's low-precision copy get zero channels (last
//      axis); the convolution then sums 0 x 0 terms, which leave its FP32
//      accumulator unchanged.
//   M: the weight copy gets zero filters (axis 0) and the bias zeros; an
//      ampc.slice gives every reader the first M channels of Y.
//
// Before autodiff, so the backward is derived from the padded forward: the
// weight gradient is computed padded and the concat's adjoint slices it
// back to the parameter's channels; the slice's adjoint writes zeros into
// dY's padded channels. The zeros are an expanded scalar (no constant of
// the image's size in the library). The parameters keep their shapes.
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/FormatVariadic.h"

namespace ampc {
#define GEN_PASS_DEF_PADCHANNELSPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

constexpr int64_t kNeeds = 8;

int64_t roundUp(int64_t d) { return (d + kNeeds - 1) / kNeeds * kNeeds; }

/// `v` with `extra` zeros appended on `axis`: an ampc.concat (marked
/// ampc.padding) of `v` and an expanded zero scalar.
Value padWithZeros(OpBuilder &b, Location loc, Value v, int64_t axis,
                   int64_t extra) {
  auto type = cast<RankedTensorType>(v.getType());
  Type element = type.getElementType();
  SmallVector<int64_t> ones(type.getRank(), 1);
  auto scalarType = RankedTensorType::get(ones, element);
  Value zero = ampc::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(scalarType, b.getFloatAttr(element, 0.0)));
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] = extra;
  Value zeros = ampc::ExpandOp::create(
      b, loc, RankedTensorType::get(shape, element), zero);
  auto concat = ampc::ConcatOp::create(b, loc, ValueRange{v, zeros}, axis);
  concat->setAttr(ampc::kPaddingAttr, b.getUnitAttr());
  return concat;
}

struct PadChannelsPass : ampc::impl::PadChannelsPassBase<PadChannelsPass> {
  /// Pads `conv`'s channel counts where it can; returns the decision.
  std::string decide(ampc::ConvOp conv) {
    auto x = cast<RankedTensorType>(conv.getInput().getType());
    auto w = cast<RankedTensorType>(conv.getWeight().getType());
    Type element = x.getElementType();
    // (N, H, W, C) by (M, kH, kW, C/group).
    int64_t c = x.getShape().back(), m = w.getDimSize(0);
    int64_t group = conv.getGroup();
    std::string text =
        llvm::formatv("{0} ({1}, needs {2}): C {3}, M {4}",
                      ampc::nodeDescription(conv), element,
                      element.isF16() || element.isBF16() ? kNeeds : 1, c, m);
    if (!element.isF16() && !element.isBF16())
      return text;
    // A network's first layer (RGB, stride 2): cuDNN's NHWC Tensor Core
    // kernels take C = 4 there, and 8 would double the padded work
    // (NVIDIA's convolution performance guide pads 3-channel images to 4).
    ArrayRef<int64_t> strides = conv.getStrides().value_or(ArrayRef<int64_t>{});
    bool firstLayerLike = c <= 4 && !strides.empty() &&
                          llvm::all_of(strides, [](int64_t s) { return s == 2; });
    int64_t cp = firstLayerLike ? 4 : roundUp(c), mp = roundUp(m);
    if (cp == c && mp == m)
      return text;
    if (group == c)
      return text + "; not padded: depthwise (one channel a group; cuDNN's "
                    "depthwise kernels do not use Tensor Cores)";
    if (group != 1)
      return text + llvm::formatv("; not padded: {0} groups (each group's "
                                  "channels would be padded; not done)",
                                  group)
                        .str();
    OpBuilder b(conv);
    Location loc = conv.getLoc();
    Value weight = conv.getWeight();
    if (cp != c) {
      conv.getInputMutable().set(
          padWithZeros(b, loc, conv.getInput(), 3, cp - c));
      weight = padWithZeros(b, loc, weight, 3, cp - c);
      text += llvm::formatv("; C {0} padded to {1} (X and the weight's copy "
                            "with {2} zero channels{3})",
                            c, cp, cp - c,
                            firstLayerLike ? "; 4, not 8: a stride-2 layer "
                                             "of at most 4 channels, which "
                                             "cuDNN's C = 4 kernels take"
                                           : "");
    }
    if (mp != m) {
      weight = padWithZeros(b, loc, weight, 0, mp - m);
      if (Value bias = conv.getBias())
        conv.getBiasMutable().assign(padWithZeros(b, loc, bias, 0, mp - m));
      text += llvm::formatv("; M {0} padded to {1} (the weight's copy with "
                            "{2} zero filters, Y sliced back to {0} channels "
                            "for every reader)",
                            m, mp, mp - m);
    }
    conv.getWeightMutable().set(weight);
    if (mp != m) {
      Value y = conv.getOutput();
      auto yType = cast<RankedTensorType>(y.getType());
      SmallVector<int64_t> shape(yType.getShape());
      shape[3] = mp;
      y.setType(RankedTensorType::get(shape, yType.getElementType()));
      b.setInsertionPointAfter(conv);
      auto slice = ampc::SliceOp::create(b, loc, y, {0}, {m}, {3}, {1});
      slice->setAttr(ampc::kPaddingAttr, b.getUnitAttr());
      y.replaceAllUsesExcept(slice.getResult(), slice);
    }
    return text;
  }

  void runOnOperation() override {
    SmallVector<ampc::ConvOp> convs;
    getOperation().walk([&](ampc::ConvOp conv) {
      if (conv.getChannelsLast())
        convs.push_back(conv);
    });
    Builder b(&getContext());
    for (ampc::ConvOp conv : convs)
      conv->setAttr(ampc::kGemmShapeAttr, b.getStringAttr(decide(conv)));
  }
};

} // namespace
