//===- AttachLoss.cpp - make @forward return a scalar training loss first -===//
//
// ampc-autodiff differentiates the first result of @forward. Models exported
// for training often end in a loss already; inference exports end in
// logits or predictions, and get one of PyTorch's losses (cross-entropy
// with its options, BCE with logits, MSE, L1, smooth L1, Huber) against a
// new label input here, built from the dialect's ops so that autodiff,
// precision assignment and both targets need nothing of their own. Runs
// before precision assignment, which then decides the loss ops like any
// other (their inputs are cast to FP32 first).
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"
#include "ampc/Transforms/Training.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

namespace ampc {
#define GEN_PASS_DEF_ATTACHLOSSPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

/// The label a padded row of a partial batch gets for cross-entropy when
/// no ignore-index is given: an id no class has, which the loss ignores.
constexpr int64_t kPaddingLabel = INT32_MIN;

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
  /// (1 - eps) CE + eps / C times the mean over the counted positions of
  /// -sum_c w_c logp_c (PyTorch's label_smoothing with class-id labels).
  Value smoothedCrossEntropy(OpBuilder &b, Value hard, Value logp, Value label);
  /// -sum_c w_c y_c logp_c, mean over N and D... (probability targets).
  Value softCrossEntropy(OpBuilder &b, Value logp, Value label);
  Value bceWithLogits(OpBuilder &b, Value output, Value label);
  /// The mean over every element of mse, l1, smooth_l1 or huber.
  Value regression(OpBuilder &b, Value output, Value label);
  /// The options that apply to the chosen loss only, checked against the
  /// output they apply to; the one-line complaint, or "".
  std::string checkOptions(RankedTensorType outputType);
  bool hasIgnoreIndex() const { return ignoreIndex != INT64_MIN; }
  /// Whether any loss option differs from its default.
  bool lossOptionsGiven() const {
    return hasIgnoreIndex() || labelSmoothing != 0.0 || !classWeights.empty() ||
           softTargets || !posWeight.empty() || huberDelta != 1.0 ||
           smoothL1Beta != 1.0;
  }

  /// A constant of `element` type (f32 or f64) and `shape`.
  Value constant(OpBuilder &b, Type element, ArrayRef<int64_t> shape,
                 ArrayRef<double> values) {
    SmallVector<Attribute> attrs;
    for (double v : values)
      attrs.push_back(FloatAttr::get(element, v));
    auto type = RankedTensorType::get(shape, element);
    return ampc::ConstantOp::create(b, lossLoc("Constant"),
                                    DenseElementsAttr::get(type, attrs));
  }
  Value scalar(OpBuilder &b, Type element, double value) {
    return constant(b, element, {}, {value});
  }
  /// The class weights as a constant of `element` type shaped (C, 1, ...)
  /// to broadcast along axis 1 of a rank-`rank` tensor.
  Value classWeightsAlongAxis1(OpBuilder &b, Type element, int64_t rank) {
    SmallVector<int64_t> shape(std::max<int64_t>(rank - 1, 1), 1);
    shape[0] = classWeights.size();
    return constant(b, element, shape, classWeights);
  }
  static Type elementOf(Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType();
  }
  /// The log-probabilities over axis 1 of the scores behind `output`.
  Value logProbabilities(OpBuilder &b, Value output);
  Value meanSquaredError(OpBuilder &b, Value output, Value label);
  /// The type of the label input the loss needs for `output`.
  FailureOr<RankedTensorType> labelType(Value output);

  Location lossLoc(StringRef opType) {
    MLIRContext *ctx = &getContext();
    return NameLoc::get(
        StringAttr::get(ctx, kLossNode),
        FusedLoc::get(ctx, {forwardLoc}, StringAttr::get(ctx, opType)));
  }

  /// `v` in FP32 (f64 stays f64), through a compiler-inserted cast.
  Value toFp32(OpBuilder &b, Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    Type element = type.getElementType();
    if (element.isF32() || element.isF64())
      return v;
    auto cast =
        ampc::CastOp::create(b, lossLoc("Cast"), type.clone(b.getF32Type()), v);
    cast->setAttr(ampc::kAutocastAttr, b.getUnitAttr());
    return cast;
  }

  /// @forward's location, set when the pass runs.
  LocationAttr forwardLoc;

  /// Partial batches (issue 34, item 6): the rows of the batch the step
  /// trains, an i64 scalar (the batch size in @forward, marked
  /// kBatchRowsAttr; ampc-attach-optimizer reads it from the state in
  /// @train_step), or null when the loss is not masked.
  Value batchRows;
  int64_t batchSize = 0;
  /// i1 of shape (batch, 1, ...) (rank `rank`): row < batchRows.
  Value rowMask(OpBuilder &b, int64_t rank) {
    SmallVector<int64_t> shape(std::max<int64_t>(rank, 1), 1);
    shape[0] = batchSize;
    SmallVector<int64_t> ids(batchSize);
    for (int64_t i = 0; i < batchSize; ++i)
      ids[i] = i;
    Value rowIds = ampc::ConstantOp::create(
        b, lossLoc("Constant"),
        DenseElementsAttr::get(RankedTensorType::get(shape, b.getI64Type()),
                               ArrayRef<int64_t>(ids)));
    return ampc::LessOp::create(b, lossLoc("Less"), rowIds, batchRows);
  }
  /// `x` (batch on axis 0) with the padded rows' elements 0: a select, so
  /// that the real rows keep their bits.
  Value maskRows(OpBuilder &b, Value x) {
    if (!batchRows)
      return x;
    Type element = elementOf(x);
    Value zero =
        isa<FloatType>(element)
            ? scalar(b, element, 0.0)
            : ampc::ConstantOp::create(
                  b, lossLoc("Constant"),
                  DenseElementsAttr::get(RankedTensorType::get({}, element),
                                         b.getIntegerAttr(element, 0)));
    return ampc::WhereOp::create(b, lossLoc("Where"),
                                 rowMask(b, cast<RankedTensorType>(
                                                x.getType())
                                                .getRank()),
                                 x, zero);
  }
  /// The mean over every element of `x` (batch on axis 0) in the real
  /// rows: the masked sum divided by rows * (elements per row), the product
  /// taken in i64 and converted once. With every row real it is
  /// ReduceMean(x) bit for bit where the sum is kept in the type it
  /// accumulates in (an FP32 loss, as autocast computes losses): both
  /// targets compute ReduceMean as that same sum divided by the rounded
  /// element count (one reduction and a scalar division per step; the
  /// select between a full and a partial mean it replaces cost a second
  /// reduction and a select's adjoint).
  Value meanOverRows(OpBuilder &b, Value x) {
    if (!batchRows)
      return ampc::ReduceMeanOp::create(b, lossLoc("ReduceMean"), x,
                                        ArrayRef<int64_t>{}, /*keepdims=*/0);
    Type element = elementOf(x);
    Value masked = maskRows(b, x);
    Value sum = ampc::ReduceSumOp::create(b, lossLoc("ReduceSum"), masked,
                                          ArrayRef<int64_t>{}, /*keepdims=*/0);
    int64_t perRow =
        cast<RankedTensorType>(x.getType()).getNumElements() / batchSize;
    auto countType = RankedTensorType::get({}, b.getI64Type());
    Value elements = ampc::MulOp::create(
        b, lossLoc("Mul"), batchRows,
        ampc::ConstantOp::create(b, lossLoc("Constant"),
                                 DenseElementsAttr::get(countType, perRow)));
    Value count = ampc::CastOp::create(
        b, lossLoc("Cast"), RankedTensorType::get({}, element), elements);
    return ampc::DivOp::create(b, lossLoc("Div"), sum, count);
  }
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
  // Every loss but cross-entropy with class ids takes a float label of the
  // output's shape.
  Type fp32 = type.getElementType().isF64() ? type.getElementType()
                                            : Float32Type::get(&getContext());
  if (loss != ampc::LossFunction::CrossEntropy)
    return type.clone(fp32);
  if (type.getRank() < 2)
    return report("loss=cross_entropy needs class scores of shape (N, C, "
                  "...) as the first output",
                  "; use --loss=mse");
  if (softTargets)
    return type.clone(fp32);
  SmallVector<int64_t> shape = {type.getDimSize(0)};
  shape.append(type.getShape().begin() + 2, type.getShape().end());
  return RankedTensorType::get(shape, IntegerType::get(&getContext(), 64));
}

static bool alongClassAxis(Operation *op, int64_t axis) {
  int64_t rank = cast<RankedTensorType>(op->getResult(0).getType()).getRank();
  return ampc::normalizeAxis(axis, rank) == 1;
}

Value AttachLoss::logProbabilities(OpBuilder &b, Value output) {
  if (auto logSoftmax = output.getDefiningOp<ampc::LogSoftmaxOp>();
      logSoftmax && alongClassAxis(logSoftmax, logSoftmax.getAxis()))
    return toFp32(b, output);
  Value scores = output;
  if (auto softmax = output.getDefiningOp<ampc::SoftmaxOp>();
      softmax && alongClassAxis(softmax, softmax.getAxis()))
    scores = softmax.getInput();
  return ampc::LogSoftmaxOp::create(b, lossLoc("LogSoftmax"), toFp32(b, scores),
                                    /*axis=*/1);
}

/// SoftmaxCrossEntropyLoss of the scores behind `output` (NLL of a
/// LogSoftmax output), mean reduction, in FP32, with the class weights and
/// ignored class; then label smoothing or probability targets.
FailureOr<Value> AttachLoss::crossEntropy(OpBuilder &b, Value output,
                                          Value label) {
  if (softTargets)
    return softCrossEntropy(b, logProbabilities(b, output), label);
  Type element =
      elementOf(output).isF64() ? elementOf(output) : Type(b.getF32Type());
  Value weights;
  if (!classWeights.empty())
    weights =
        constant(b, element, {int64_t(classWeights.size())}, classWeights);
  IntegerAttr ignored =
      hasIgnoreIndex() ? b.getI64IntegerAttr(ignoreIndex) : IntegerAttr();
  // A partial batch: the padded rows' labels become the ignored id, which
  // takes them out of the sum and of the divisor.
  Value hardLabel = label;
  if (batchRows) {
    if (!ignored)
      ignored = b.getI64IntegerAttr(kPaddingLabel);
    Value id = ampc::ConstantOp::create(
        b, lossLoc("Constant"),
        DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                               ignored.getInt()));
    hardLabel = ampc::WhereOp::create(
        b, lossLoc("Where"),
        rowMask(b, cast<RankedTensorType>(label.getType()).getRank()), label,
        id);
  }
  Value hard;
  if (auto logSoftmax = output.getDefiningOp<ampc::LogSoftmaxOp>();
      logSoftmax && alongClassAxis(logSoftmax, logSoftmax.getAxis())) {
    hard = ampc::NegativeLogLikelihoodLossOp::create(
        b, lossLoc("NegativeLogLikelihoodLoss"), toFp32(b, output), hardLabel,
        weights, ampc::Reduction::Mean, ignored);
  } else {
    Value scores = output;
    if (auto softmax = output.getDefiningOp<ampc::SoftmaxOp>();
        softmax && alongClassAxis(softmax, softmax.getAxis()))
      scores = softmax.getInput();
    hard = ampc::SoftmaxCrossEntropyLossOp::create(
               b, lossLoc("SoftmaxCrossEntropyLoss"), toFp32(b, scores),
               hardLabel, weights, ampc::Reduction::Mean, ignored)
               .getLoss();
  }
  if (labelSmoothing == 0.0)
    return hard;
  // With an ignore-index the masked labels take the padding out of the
  // smoothed part too; without one, it masks its sums itself.
  return smoothedCrossEntropy(b, hard, logProbabilities(b, output),
                              hasIgnoreIndex() ? hardLabel : label);
}

Value AttachLoss::smoothedCrossEntropy(OpBuilder &b, Value hard, Value logp,
                                       Value label) {
  Type element = elementOf(logp);
  auto logpType = cast<RankedTensorType>(logp.getType());
  int64_t classes = logpType.getDimSize(1);
  Value weighted = logp;
  if (!classWeights.empty())
    weighted = ampc::MulOp::create(
        b, lossLoc("Mul"), logp,
        classWeightsAlongAxis1(b, element, logpType.getRank()));
  // Per position (N, D...): sum_c w_c logp_c.
  Value perPosition = ampc::ReduceSumOp::create(b, lossLoc("ReduceSum"),
                                                weighted, ArrayRef<int64_t>{1},
                                                /*keepdims=*/0);
  Value total;
  if (!hasIgnoreIndex() && classWeights.empty()) {
    // Every position counts once: the mean.
    total = meanOverRows(b, perPosition);
  } else {
    // The divisor is NLL's: the sum of w[label] over the counted positions.
    Value counted, ids = label;
    if (hasIgnoreIndex()) {
      Value ignoredId = ampc::ConstantOp::create(
          b, lossLoc("Constant"),
          DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                 int64_t(ignoreIndex)));
      Value isIgnored =
          ampc::EqualOp::create(b, lossLoc("Equal"), label, ignoredId);
      counted = ampc::CastOp::create(
          b, lossLoc("Cast"),
          cast<RankedTensorType>(isIgnored.getType()).clone(element),
          ampc::NotOp::create(b, lossLoc("Not"), isIgnored));
      perPosition =
          ampc::MulOp::create(b, lossLoc("Mul"), perPosition, counted);
      // An ignored id may lie outside the classes: look up class 0 instead.
      Value zero = ampc::ConstantOp::create(
          b, lossLoc("Constant"),
          DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                 int64_t(0)));
      ids = ampc::WhereOp::create(b, lossLoc("Where"), isIgnored, zero, label);
    }
    Value divisorTerms = counted;
    if (!classWeights.empty()) {
      Value perLabel = ampc::GatherOp::create(
          b, lossLoc("Gather"), constant(b, element, {classes}, classWeights),
          ids, /*axis=*/0);
      divisorTerms =
          counted
              ? Value(ampc::MulOp::create(b, lossLoc("Mul"), perLabel, counted))
              : perLabel;
    }
    if (!hasIgnoreIndex()) {
      // Without an ignore-index the padded rows are masked here.
      perPosition = maskRows(b, perPosition);
      divisorTerms = maskRows(b, divisorTerms);
    }
    Value sum = ampc::ReduceSumOp::create(b, lossLoc("ReduceSum"), perPosition,
                                          ArrayRef<int64_t>{}, /*keepdims=*/0);
    Value divisor =
        ampc::ReduceSumOp::create(b, lossLoc("ReduceSum"), divisorTerms,
                                  ArrayRef<int64_t>{}, /*keepdims=*/0);
    total = ampc::DivOp::create(b, lossLoc("Div"), sum, divisor);
  }
  // loss = (1 - eps) hard - eps / C total.
  Value hardPart = ampc::MulOp::create(
      b, lossLoc("Mul"), hard, scalar(b, element, 1.0 - labelSmoothing));
  Value smoothPart = ampc::MulOp::create(
      b, lossLoc("Mul"), total,
      scalar(b, element, -labelSmoothing / double(classes)));
  return ampc::AddOp::create(b, lossLoc("Add"), hardPart, smoothPart);
}

Value AttachLoss::softCrossEntropy(OpBuilder &b, Value logp, Value label) {
  Type element = elementOf(logp);
  auto logpType = cast<RankedTensorType>(logp.getType());
  int64_t classes = logpType.getDimSize(1);
  Value target = label;
  if (labelSmoothing != 0.0)
    target = ampc::AddOp::create(
        b, lossLoc("Add"),
        ampc::MulOp::create(b, lossLoc("Mul"), label,
                            scalar(b, element, 1.0 - labelSmoothing)),
        scalar(b, element, labelSmoothing / double(classes)));
  Value product = ampc::MulOp::create(b, lossLoc("Mul"), logp, target);
  if (!classWeights.empty())
    product = ampc::MulOp::create(
        b, lossLoc("Mul"), product,
        classWeightsAlongAxis1(b, element, logpType.getRank()));
  Value perPosition = ampc::ReduceSumOp::create(
      b, lossLoc("ReduceSum"), product, ArrayRef<int64_t>{1}, /*keepdims=*/0);
  Value mean = meanOverRows(b, perPosition);
  return ampc::NegOp::create(b, lossLoc("Neg"), mean);
}

/// mean((1 - y) x + (1 + (pw - 1) y) softplus(-x)), PyTorch's form: its
/// gradient, sigmoid(x) (1 + (pw - 1) y) - pw y, holds at every x.
Value AttachLoss::bceWithLogits(OpBuilder &b, Value output, Value label) {
  Value x = toFp32(b, output);
  Type element = elementOf(x);
  Value one = scalar(b, element, 1.0);
  Value linear = ampc::MulOp::create(
      b, lossLoc("Mul"), ampc::SubOp::create(b, lossLoc("Sub"), one, label), x);
  Value softplus = ampc::SoftplusOp::create(
      b, lossLoc("Softplus"), ampc::NegOp::create(b, lossLoc("Neg"), x));
  if (!posWeight.empty()) {
    SmallVector<double> minusOne;
    for (double w : posWeight)
      minusOne.push_back(w - 1.0);
    Value coefficient = ampc::AddOp::create(
        b, lossLoc("Add"),
        ampc::MulOp::create(
            b, lossLoc("Mul"), label,
            constant(b, element, {int64_t(minusOne.size())}, minusOne)),
        one);
    softplus = ampc::MulOp::create(b, lossLoc("Mul"), coefficient, softplus);
  }
  Value elementwise = ampc::AddOp::create(b, lossLoc("Add"), linear, softplus);
  return meanOverRows(b, elementwise);
}

/// With d = output - label, a = |d|, m = min(a, delta): huber is
/// m^2 / 2 + delta (a - m), smooth_l1 that over beta (l1 at beta 0), which
/// are PyTorch's piecewise definitions without a select.
Value AttachLoss::regression(OpBuilder &b, Value output, Value label) {
  if (loss == ampc::LossFunction::Mse)
    return meanSquaredError(b, output, label);
  Value diff = ampc::SubOp::create(b, lossLoc("Sub"), toFp32(b, output), label);
  Type element = elementOf(diff);
  Value absolute = ampc::AbsOp::create(b, lossLoc("Abs"), diff);
  Value elementwise = absolute;
  double knee = loss == ampc::LossFunction::Huber ? huberDelta : smoothL1Beta;
  if (loss != ampc::LossFunction::L1 && knee > 0) {
    Value clipped = ampc::MinOp::create(b, lossLoc("Min"), absolute,
                                        scalar(b, element, knee));
    // smooth_l1 divides the quadratic part by beta and keeps a - m.
    bool huber = loss == ampc::LossFunction::Huber;
    Value quadratic = ampc::MulOp::create(
        b, lossLoc("Mul"),
        ampc::MulOp::create(b, lossLoc("Mul"), clipped, clipped),
        scalar(b, element, huber ? 0.5 : 0.5 / knee));
    Value linear = ampc::SubOp::create(b, lossLoc("Sub"), absolute, clipped);
    if (huber)
      linear = ampc::MulOp::create(b, lossLoc("Mul"), linear,
                                   scalar(b, element, knee));
    elementwise = ampc::AddOp::create(b, lossLoc("Add"), quadratic, linear);
  }
  return meanOverRows(b, elementwise);
}

/// `v` as %g prints it (1.5, not 1.500000).
static std::string shortest(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

std::string AttachLoss::checkOptions(RankedTensorType outputType) {
  using ampc::LossFunction;
  auto onlyFor = [&](bool given, StringRef option, LossFunction wanted,
                     StringRef extra = "") -> std::string {
    if (!given || loss == wanted)
      return "";
    return (option + " applies to loss=" + ampc::stringifyEnum(wanted) + extra +
            " only, not loss=" + ampc::stringifyEnum(loss))
        .str();
  };
  for (std::string m :
       {onlyFor(hasIgnoreIndex(), "ignore-index", LossFunction::CrossEntropy),
        onlyFor(labelSmoothing != 0.0, "label-smoothing",
                LossFunction::CrossEntropy),
        onlyFor(!classWeights.empty(), "class-weights",
                LossFunction::CrossEntropy),
        onlyFor(softTargets, "soft-targets", LossFunction::CrossEntropy),
        onlyFor(!posWeight.empty(), "pos-weight", LossFunction::BceWithLogits),
        onlyFor(huberDelta != 1.0, "huber-delta", LossFunction::Huber),
        onlyFor(smoothL1Beta != 1.0, "smooth-l1-beta", LossFunction::SmoothL1)})
    if (!m.empty())
      return m;
  if (softTargets && hasIgnoreIndex())
    return "ignore-index applies to class-id labels, not soft-targets";
  if (!(labelSmoothing >= 0.0 && labelSmoothing <= 1.0))
    return "label-smoothing must be in [0, 1], got " + shortest(labelSmoothing);
  if (!(huberDelta > 0.0 && std::isfinite(huberDelta)))
    return "huber-delta must be positive, got " + shortest(huberDelta);
  if (!(smoothL1Beta >= 0.0 && std::isfinite(smoothL1Beta)))
    return "smooth-l1-beta must be >= 0, got " + shortest(smoothL1Beta);
  for (auto [name, list] :
       {std::pair<StringRef, ArrayRef<double>>("class-weights", classWeights),
        {"pos-weight", posWeight}})
    for (double w : list)
      // Kept as an f32 constant: 1e39 would become inf.
      if (!(w >= 0.0 && std::isfinite(float(w))))
        return (name + " must be finite and >= 0, got " + shortest(w)).str();
  auto dim = [&](int64_t axis) {
    return axis < outputType.getRank() ? outputType.getDimSize(axis) : 1;
  };
  if (!classWeights.empty() && outputType.getRank() >= 2 &&
      int64_t(classWeights.size()) != dim(1))
    return "class-weights has " + std::to_string(classWeights.size()) +
           " weights for " + std::to_string(dim(1)) + " classes";
  if (posWeight.size() > 1 &&
      (outputType.getRank() == 0 ||
       int64_t(posWeight.size()) != dim(outputType.getRank() - 1)))
    return "pos-weight has " + std::to_string(posWeight.size()) +
           " weights for the output's last axis of " +
           std::to_string(outputType.getRank() ? dim(outputType.getRank() - 1)
                                               : 1);
  return "";
}

/// mean((output - label)^2) over every element, in FP32.
Value AttachLoss::meanSquaredError(OpBuilder &b, Value output, Value label) {
  Value diff = ampc::SubOp::create(b, lossLoc("Sub"), toFp32(b, output), label);
  Value square = ampc::MulOp::create(b, lossLoc("Mul"), diff, diff);
  return meanOverRows(b, square);
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
    if (lossOptionsGiven()) {
      forward.emitError("ampc-attach-loss: the model computes its own loss "
                        "(output ")
          << i << "); the loss options apply to a loss ampc attaches";
      return signalPassFailure();
    }
    if (partialBatches)
      module->setAttr(ampc::kPartialBatchesAttr,
                    StringAttr::get(module.getContext(),
                                    "the model computes its own loss (output " +
                                        std::to_string(i) +
                                        "), which would count the padded "
                                        "rows"));
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
  // Whether a partial batch trains: the rows are independent and the
  // output keeps them on axis 0 (decided before the label is added).
  std::string partialReason = partialBatches
                                  ? "@forward has no inputs"
                                  : "not decided (partial-batches=0)";
  if (partialBatches && forward.getNumArguments() > 0) {
    auto first = cast<RankedTensorType>(forward.getArgument(0).getType());
    batchSize = first.hasStaticShape() && first.getRank() > 0
                    ? first.getDimSize(0)
                    : 0;
    partialReason = ampc::batchMixingReason(forward, batchSize);
    auto outType = cast<RankedTensorType>(output.getType());
    if (partialReason.empty() &&
        (outType.getRank() == 0 || outType.getDimSize(0) != batchSize))
      partialReason = "the output the loss is attached to does not have "
                      "the batch on axis 0";
  }
  if (partialBatches)
    module->setAttr(ampc::kPartialBatchesAttr,
                    StringAttr::get(module.getContext(), partialReason));
  FailureOr<RankedTensorType> type = labelType(output);
  if (failed(type))
    return signalPassFailure();
  if (std::string problem =
          checkOptions(cast<RankedTensorType>(output.getType()));
      !problem.empty()) {
    Operation *def = output.getDefiningOp();
    (def ? def->emitError() : forward.emitError())
        << "ampc-attach-loss: " << problem;
    return signalPassFailure();
  }

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

  if (partialReason.empty()) {
    auto rowsType = RankedTensorType::get({}, b.getI64Type());
    auto rows = ampc::ConstantOp::create(
        b, lossLoc("Constant"), DenseElementsAttr::get(rowsType, batchSize));
    rows->setAttr(ampc::kBatchRowsAttr, b.getUnitAttr());
    batchRows = rows;
  }

  Value lossValue;
  if (loss == ampc::LossFunction::CrossEntropy) {
    FailureOr<Value> ce = crossEntropy(b, output, labelValue);
    if (failed(ce))
      return signalPassFailure();
    lossValue = *ce;
  } else if (loss == ampc::LossFunction::BceWithLogits) {
    lossValue = bceWithLogits(b, output, labelValue);
  } else {
    lossValue = regression(b, output, labelValue);
  }
  ret->insertOperands(0, lossValue);
  if (failed(forward.insertResult(0, lossValue.getType(), nameAttr("loss"))))
    return signalPassFailure();
}

} // namespace
