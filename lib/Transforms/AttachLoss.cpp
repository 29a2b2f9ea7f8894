//===- AttachLoss.cpp - make @forward return a scalar training loss first -===//
//
// ampc-autodiff differentiates the first result of @forward. Models exported
// for training often end in a loss already; inference exports end in
// logits or predictions, and get a cross-entropy or MSE loss against a new
// label input here. Runs before precision assignment, which then decides
// the loss ops like any other (losses are deny ops: FP32).
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"

namespace ampc {
#define GEN_PASS_DEF_ATTACHLOSSPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

/// The node name of the ops this pass adds (diagnostics, the precision
/// report, and node: rules name it).
constexpr llvm::StringLiteral kLossNode = "ampc.loss";

Value throughCasts(Value v) {
  while (auto cast = v.getDefiningOp<ampc::CastOp>())
    v = cast.getInput();
  return v;
}

bool isScalar(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  return type.hasStaticShape() && type.getNumElements() == 1 &&
         isa<FloatType>(type.getElementType());
}

/// Whether `v` is a squared difference: Mul(d, d) or Pow(d, 2), d a Sub.
bool isSquaredDifference(Value v) {
  Value base;
  if (auto mul = v.getDefiningOp<ampc::MulOp>()) {
    if (mul.getLhs() != mul.getRhs())
      return false;
    base = mul.getLhs();
  } else if (auto pow = v.getDefiningOp<ampc::PowOp>()) {
    DenseElementsAttr exponent;
    if (!matchPattern(pow.getRhs(), m_Constant(&exponent)) ||
        !exponent.isSplat())
      return false;
    Attribute two = exponent.getSplatValue<Attribute>();
    auto f = dyn_cast<FloatAttr>(two);
    auto i = dyn_cast<IntegerAttr>(two);
    if (!(f && f.getValueAsDouble() == 2.0) && !(i && i.getInt() == 2))
      return false;
    base = pow.getLhs();
  } else {
    return false;
  }
  return static_cast<bool>(throughCasts(base).getDefiningOp<ampc::SubOp>());
}

/// Whether a result of @forward already is a training loss.
bool isLoss(Value v) {
  if (!isScalar(v))
    return false;
  v = throughCasts(v);
  Operation *def = v.getDefiningOp();
  if (isa_and_present<ampc::SoftmaxCrossEntropyLossOp,
                      ampc::NegativeLogLikelihoodLossOp>(def))
    return cast<OpResult>(v).getResultNumber() == 0;
  if (auto mean = dyn_cast_if_present<ampc::ReduceMeanOp>(def))
    return isSquaredDifference(throughCasts(mean.getInput()));
  return false;
}

class AttachLoss : public ampc::impl::AttachLossPassBase<AttachLoss> {
public:
  using Base::Base;
  void runOnOperation() override;

private:
  FailureOr<Value> crossEntropy(OpBuilder &b, Value output, Value label);
  Value meanSquaredError(OpBuilder &b, Value output, Value label);
  /// The type of the label input the loss needs for `output`.
  FailureOr<RankedTensorType> labelType(Value output);

  Location lossLoc(StringRef opType) {
    MLIRContext *ctx = &getContext();
    return NameLoc::get(StringAttr::get(ctx, kLossNode),
                        FusedLoc::get(ctx, {forwardLoc},
                                      StringAttr::get(ctx, opType)));
  }

  /// `v` in FP32 (f64 stays f64), through a compiler-inserted cast.
  Value toFp32(OpBuilder &b, Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    Type element = type.getElementType();
    if (element.isF32() || element.isF64())
      return v;
    auto cast = ampc::CastOp::create(b, lossLoc("Cast"),
                                     type.clone(b.getF32Type()), v);
    cast->setAttr(ampc::kAutocastAttr, b.getUnitAttr());
    return cast;
  }

  /// @forward's location, set when the pass runs.
  LocationAttr forwardLoc;
};

FailureOr<RankedTensorType> AttachLoss::labelType(Value output) {
  auto type = cast<RankedTensorType>(output.getType());
  Operation *def = output.getDefiningOp();
  auto report = [&](StringRef message, StringRef hint) {
    (def ? def->emitError() : emitError(Location(forwardLoc)))
        << "ampc-attach-loss: " << message << ", got " << type << hint;
    return failure();
  };
  if (!isa<FloatType>(type.getElementType()))
    return report("the first output of @forward must be float to attach a "
                  "loss",
                  "");
  if (loss == ampc::LossFunction::Mse)
    return type.clone(type.getElementType().isF64()
                          ? type.getElementType()
                          : Float32Type::get(&getContext()));
  if (type.getRank() < 2)
    return report("loss=cross_entropy needs class scores of shape (N, C, "
                  "...) as the first output",
                  "; use --loss=mse");
  SmallVector<int64_t> shape = {type.getDimSize(0)};
  shape.append(type.getShape().begin() + 2, type.getShape().end());
  return RankedTensorType::get(shape, IntegerType::get(&getContext(), 64));
}

/// SoftmaxCrossEntropyLoss of the scores behind `output` (NLL of a
/// LogSoftmax output), mean reduction, in FP32.
FailureOr<Value> AttachLoss::crossEntropy(OpBuilder &b, Value output,
                                          Value label) {
  auto classAxis = [](Operation *op, int64_t axis) {
    int64_t rank = cast<RankedTensorType>(op->getResult(0).getType()).getRank();
    return ampc::normalizeAxis(axis, rank) == 1;
  };
  if (auto logSoftmax = output.getDefiningOp<ampc::LogSoftmaxOp>();
      logSoftmax && classAxis(logSoftmax, logSoftmax.getAxis()))
    return Value(ampc::NegativeLogLikelihoodLossOp::create(
        b, lossLoc("NegativeLogLikelihoodLoss"), toFp32(b, output), label,
        Value(), ampc::Reduction::Mean, IntegerAttr()));
  Value scores = output;
  if (auto softmax = output.getDefiningOp<ampc::SoftmaxOp>();
      softmax && classAxis(softmax, softmax.getAxis()))
    scores = softmax.getInput();
  auto sce = ampc::SoftmaxCrossEntropyLossOp::create(
      b, lossLoc("SoftmaxCrossEntropyLoss"), toFp32(b, scores), label, Value(),
      ampc::Reduction::Mean, IntegerAttr());
  return sce.getLoss();
}

/// mean((output - label)^2) over every element, in FP32.
Value AttachLoss::meanSquaredError(OpBuilder &b, Value output, Value label) {
  Value diff = ampc::SubOp::create(b, lossLoc("Sub"), toFp32(b, output), label);
  Value square = ampc::MulOp::create(b, lossLoc("Mul"), diff, diff);
  return ampc::ReduceMeanOp::create(b, lossLoc("ReduceMean"), square,
                                    ArrayRef<int64_t>{}, /*keepdims=*/0);
}

void AttachLoss::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(ampc::checkEnumOption(loss, module.getLoc(), getArgument())))
    return signalPassFailure();
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.isExternal() || !forward.getBody().hasOneBlock()) {
    emitError(module.getLoc())
        << "ampc-attach-loss: the module has no @forward function";
    return signalPassFailure();
  }
  forwardLoc = forward.getLoc();
  Operation *ret = forward.getBody().front().getTerminator();

  // A loss the model computes itself comes first and is used as it is.
  for (unsigned i = 0; i < ret->getNumOperands(); ++i) {
    if (!isLoss(ret->getOperand(i)))
      continue;
    // Its class-id input, when the model takes it, is the label input.
    forward.walk([&](Operation *op) {
      Value labels;
      if (auto ce = dyn_cast<ampc::SoftmaxCrossEntropyLossOp>(op))
        labels = ce.getLabels();
      else if (auto nll = dyn_cast<ampc::NegativeLogLikelihoodLossOp>(op))
        labels = nll.getTarget();
      if (auto arg = dyn_cast_or_null<BlockArgument>(labels))
        forward.setArgAttr(arg.getArgNumber(), ampc::kLabelAttr,
                           UnitAttr::get(forward.getContext()));
    });
    if (i == 0)
      return;
    Value value = ret->getOperand(i);
    Type type = forward.getResultTypes()[i];
    DictionaryAttr attrs = forward.getResultAttrDict(i);
    ret->eraseOperand(i);
    ret->insertOperands(0, value);
    if (failed(forward.eraseResult(i)) ||
        failed(forward.insertResult(0, type, attrs)))
      return signalPassFailure();
    return;
  }
  if (loss == ampc::LossFunction::None)
    return;
  if (ret->getNumOperands() == 0) {
    forward.emitError("ampc-attach-loss: @forward has no output to attach a "
                      "loss to");
    return signalPassFailure();
  }

  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    if (auto name = forward.getArgAttrOfType<StringAttr>(i, ampc::kNameAttr);
        name && name.getValue() == label) {
      forward.emitError("ampc-attach-loss: @forward already has an input "
                        "named '")
          << label << "'; choose the label's name with --label";
      return signalPassFailure();
    }
  Value output = ret->getOperand(0);
  FailureOr<RankedTensorType> type = labelType(output);
  if (failed(type))
    return signalPassFailure();

  OpBuilder b(ret);
  auto nameAttr = [&](StringRef name) {
    return b.getDictionaryAttr(
        b.getNamedAttr(ampc::kNameAttr, b.getStringAttr(name)));
  };
  unsigned index = forward.getNumArguments();
  // Located like the importer's inputs: the name around the model.
  Location labelLoc = NameLoc::get(b.getStringAttr(label), forwardLoc);
  if (failed(forward.insertArgument(index, *type, nameAttr(label), labelLoc)))
    return signalPassFailure();
  Value labelValue = forward.getArgument(index);
  forward.setArgAttr(index, ampc::kLabelAttr, b.getUnitAttr());

  Value lossValue;
  if (loss == ampc::LossFunction::Mse) {
    lossValue = meanSquaredError(b, output, labelValue);
  } else {
    FailureOr<Value> ce = crossEntropy(b, output, labelValue);
    if (failed(ce))
      return signalPassFailure();
    lossValue = *ce;
  }
  ret->insertOperands(0, lossValue);
  if (failed(forward.insertResult(0, lossValue.getType(), nameAttr("loss"))))
    return signalPassFailure();
}

} // namespace
