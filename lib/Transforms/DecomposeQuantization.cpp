//===- DecomposeQuantization.cpp - (de)quantization as elementwise ops ----===//
//
// ampc-decompose-quantization: each ampc.quantize_linear,
// ampc.dequantize_linear and ampc.dynamic_quantize_linear becomes what the
// importer once built for its node, and a dequantize_linear of a
// quantize_linear with the same scale and zero point becomes fake
// quantization with torch's straight-through gradient. The ops are built
// by a Composer (Compose.h) and so folded as they are made, as at import.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/Compose.h"
#include "ampc/Dialect/Quantization.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace ampc {
#define GEN_PASS_DEF_DECOMPOSEQUANTIZATIONPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;
using ampc::Composer;
using ampc::part;

namespace {

/// A scale or zero point `v` of a (de)quantization of `x` reshaped to
/// broadcast along `axis` (quantizationParameterShape: a per-axis value to
/// [length, 1, ...], a single value to a scalar); the op's verifier has
/// checked it.
Value alongAxis(Composer &c, Value v, Value x, int64_t axis) {
  std::string error;
  FailureOr<SmallVector<int64_t>> shape = ampc::quantizationParameterShape(
      cast<RankedTensorType>(x.getType()).getShape(),
      cast<RankedTensorType>(v.getType()).getShape(), axis, "", error);
  return ampc::reshaped(c, v, *shape);
}

/// The scale and zero point of a (de)quantization op, broadcast along its
/// axis, the zero point as the scale's float type (null where absent).
template <typename OpTy>
void parameters(Composer &c, OpTy op, Value &scale, Value &zeroFloat) {
  int64_t axis = op.getAxis();
  scale = alongAxis(c, op.getScale(), op.getX(), axis);
  zeroFloat = Value();
  if (Value zp = op.getZeroPoint()) {
    zp = alongAxis(c, zp, op.getX(), axis);
    auto zt = cast<RankedTensorType>(zp.getType());
    zeroFloat = part<ampc::CastOp>(
        c, zp, {},
        zt.clone(cast<RankedTensorType>(scale.getType()).getElementType()));
  }
}

/// saturate(round(x / scale) + zero point) as `element` (an 8-bit
/// integer); `inRange`, where given, gets where the unsaturated value was
/// in range. Null after an error.
Value quantize(Composer &c, Value x, Value scale, Value zeroFloat,
               IntegerType element, Value *inRange = nullptr) {
  Type f = cast<RankedTensorType>(x.getType()).getElementType();
  Value q = part<ampc::RoundOp>(c, part<ampc::DivOp>(c, {x, scale}));
  if (zeroFloat)
    q = part<ampc::AddOp>(c, {q, zeroFloat});
  bool isUnsigned = element.isUnsigned();
  double lo = isUnsigned ? 0.0 : -128.0, hi = isUnsigned ? 255.0 : 127.0;
  Value loV = ampc::scalarOf(c, f, lo), hiV = ampc::scalarOf(c, f, hi);
  if (inRange)
    *inRange = part<ampc::AndOp>(
        c, {part<ampc::GreaterOrEqualOp>(c, {q, loV}),
            part<ampc::LessOrEqualOp>(c, {q, hiV})});
  q = part<ampc::ClipOp>(c, {q, loV, hiV});
  if (!q)
    return Value();
  return part<ampc::CastOp>(c, q, {},
                            cast<RankedTensorType>(q.getType()).clone(element));
}

/// (x - zero point) * scale as the scale's float type. Null after an error.
Value dequantize(Composer &c, ampc::DequantizeLinearOp op) {
  Value scale, zeroFloat;
  parameters(c, op, scale, zeroFloat);
  if (!scale || (op.getZeroPoint() && !zeroFloat))
    return Value();
  auto in = cast<RankedTensorType>(op.getX().getType());
  Value y = part<ampc::CastOp>(
      c, op.getX(), {},
      in.clone(cast<RankedTensorType>(scale.getType()).getElementType()));
  if (zeroFloat)
    y = part<ampc::SubOp>(c, {y, zeroFloat});
  return part<ampc::MulOp>(c, {y, scale});
}

/// A pattern that builds its replacement with a Composer at the op, and
/// records a failure to (an error at the op, already reported) for the
/// pass.
template <typename OpTy>
struct ComposingPattern : OpRewritePattern<OpTy> {
  ComposingPattern(MLIRContext *ctx, int64_t maxTensorBytes, bool &failed)
      : OpRewritePattern<OpTy>(ctx), maxTensorBytes(maxTensorBytes),
        failed(failed) {}

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    if (!matches(op))
      return failure();
    Composer c{rewriter, op.getLoc(), maxTensorBytes, &rewriter};
    SmallVector<Value> results = compose(c, op);
    if (llvm::any_of(results, [](Value v) { return !v; })) {
      failed = true;
      return failure();
    }
    rewriter.replaceOp(op, results);
    return success();
  }

  virtual bool matches(OpTy) const { return true; }
  /// The op's replacements, a null one after an error.
  virtual SmallVector<Value> compose(Composer &c, OpTy op) const = 0;

  int64_t maxTensorBytes;
  bool &failed;
};

/// dequantize_linear(quantize_linear(x)) with the same scale and zero
/// point is fake quantization (what torch exports for quantization-aware
/// training): the dequantized value plus Where(in range, x -
/// stop_gradient(x), 0), whose gradient passes straight through to x where
/// it was in range (torch's fake_quantize backward), and the scale is
/// frozen (torch's observers set it; a zero point is an integer
/// initializer, a constant already). The quantize_linear stays, for its
/// other users and for the lowering that follows; as when the importer
/// detected the pair, the axes are not compared.
struct FakeQuantize : ComposingPattern<ampc::DequantizeLinearOp> {
  using ComposingPattern::ComposingPattern;

  static ampc::QuantizeLinearOp quantizer(ampc::DequantizeLinearOp op) {
    auto q = op.getX().getDefiningOp<ampc::QuantizeLinearOp>();
    if (!q || op.getX() != q.getY() || q.getScale() != op.getScale() ||
        q.getZeroPoint() != op.getZeroPoint())
      return nullptr;
    return q;
  }

  bool matches(ampc::DequantizeLinearOp op) const override {
    return bool(quantizer(op));
  }

  SmallVector<Value> compose(Composer &c,
                             ampc::DequantizeLinearOp op) const override {
    ampc::QuantizeLinearOp q = quantizer(op);
    Value y = dequantize(c, op);
    if (!y)
      return {Value()};
    auto type = cast<RankedTensorType>(y.getType());
    // x as y's type: int32 data is quantized as the scale's float type.
    Value x = q.getX();
    if (cast<RankedTensorType>(x.getType()).getElementType() !=
        type.getElementType())
      x = part<ampc::CastOp>(c, x, {}, type);
    Value pass =
        part<ampc::SubOp>(c, {x, part<ampc::StopGradientOp>(c, x)});
    Value zero = ampc::scalarOf(c, type.getElementType(), 0.0);
    y = part<ampc::AddOp>(
        c, {y, part<ampc::WhereOp>(c, {q.getInRange(), pass, zero})});
    if (y)
      freeze(c, op.getScale());
    return {y};
  }

  /// Marks the parameter `v` loads (if it loads one) frozen.
  static void freeze(Composer &c, Value v) {
    auto load = v.getDefiningOp<ampc::LoadParameterOp>();
    if (!load)
      return;
    auto param = SymbolTable::lookupNearestSymbolFrom<ampc::ParameterOp>(
        load, load.getParameterAttr());
    if (param)
      c.rewriter->modifyOpInPlace(param, [&] {
        param->setAttr(ampc::kFrozenAttr,
                       c.b.getStringAttr("a quantization scale"));
      });
  }
};

/// quantize_linear: saturate(round(x / scale) + zero point) as the zero
/// point's type (uint8 without one), and where it was in range.
struct LowerQuantizeLinear : ComposingPattern<ampc::QuantizeLinearOp> {
  using ComposingPattern::ComposingPattern;

  SmallVector<Value> compose(Composer &c,
                             ampc::QuantizeLinearOp op) const override {
    Value scale, zeroFloat;
    parameters(c, op, scale, zeroFloat);
    if (!scale || (op.getZeroPoint() && !zeroFloat))
      return {Value(), Value()};
    // int32 data is quantized as the scale's float type.
    Value x = op.getX();
    auto xt = cast<RankedTensorType>(x.getType());
    Type f = cast<RankedTensorType>(scale.getType()).getElementType();
    if (isa<IntegerType>(xt.getElementType()))
      x = part<ampc::CastOp>(c, x, {}, xt.clone(f));
    Value inRange;
    auto element = cast<IntegerType>(op.getY().getType().getElementType());
    Value y = x ? quantize(c, x, scale, zeroFloat, element, &inRange)
                : Value();
    return {y, y ? inRange : Value()};
  }
};

/// dequantize_linear: (x - zero point) * scale.
struct LowerDequantizeLinear : ComposingPattern<ampc::DequantizeLinearOp> {
  using ComposingPattern::ComposingPattern;

  SmallVector<Value> compose(Composer &c,
                             ampc::DequantizeLinearOp op) const override {
    return {dequantize(c, op)};
  }
};

/// dynamic_quantize_linear: uint8 with the scale and zero point of x's
/// range widened to hold 0: scale = (max(x, 0) - min(x, 0)) / 255, zero
/// point = round(clip(-min / scale, 0, 255)).
struct LowerDynamicQuantizeLinear
    : ComposingPattern<ampc::DynamicQuantizeLinearOp> {
  using ComposingPattern::ComposingPattern;

  SmallVector<Value>
  compose(Composer &c, ampc::DynamicQuantizeLinearOp op) const override {
    Value x = op.getX();
    Type f = cast<RankedTensorType>(x.getType()).getElementType();
    auto all = [&](Value v) {
      return part<ampc::ReduceMaxOp>(
          c, v, {c.ints("axes", {}), c.i64("keepdims", 0)});
    };
    Value zero = ampc::scalarOf(c, f, 0.0);
    Value max = part<ampc::MaxOp>(c, {all(x), zero});
    Value negMin =
        part<ampc::MaxOp>(c, {all(part<ampc::NegOp>(c, x)), zero});
    Value scale = part<ampc::DivOp>(
        c, {part<ampc::AddOp>(c, {max, negMin}), ampc::scalarOf(c, f, 255.0)});
    Value zeroFloat = part<ampc::RoundOp>(
        c, part<ampc::ClipOp>(c, {part<ampc::DivOp>(c, {negMin, scale}), zero,
                                  ampc::scalarOf(c, f, 255.0)}));
    auto u8 = cast<IntegerType>(op.getY().getType().getElementType());
    Value y =
        zeroFloat ? quantize(c, x, scale, zeroFloat, u8) : Value();
    Value zp = zeroFloat ? part<ampc::CastOp>(c, zeroFloat, {},
                                              RankedTensorType::get({}, u8))
                         : Value();
    if (!y || !zp)
      return {Value()};
    return {y, scale, zp};
  }
};

struct DecomposeQuantizationPass
    : ampc::impl::DecomposeQuantizationPassBase<DecomposeQuantizationPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    bool failed = false;
    // Fake quantization first, while each dequantize_linear still sees the
    // quantize_linear it takes back; then the lowerings. The walk driver
    // applies a pattern once per op, in order, and folds nothing else: the
    // IR around the ops stays as imported.
    RewritePatternSet fake(ctx);
    fake.add<FakeQuantize>(ctx, maxTensorBytes, failed);
    walkAndApplyPatterns(getOperation(), std::move(fake));
    RewritePatternSet lower(ctx);
    lower.add<LowerQuantizeLinear, LowerDequantizeLinear,
              LowerDynamicQuantizeLinear>(ctx, maxTensorBytes, failed);
    if (!failed)
      walkAndApplyPatterns(getOperation(), std::move(lower));
    if (failed)
      signalPassFailure();
  }
};

} // namespace
