//===- Autodiff.cpp - reverse-mode autodiff: @forward to @train_step ------===//
//
// Builds @train_step = a copy of the (precision-assigned) forward, followed
// by its reverse pass. The per-op rules belong to the ops
// (GradientOpInterface, lib/Dialect/Gradients.cpp); this pass decides which
// values need adjoints, seeds the loss, calls the rules in reverse program
// order, adds up the adjoints of values used several times and returns the
// parameters' gradients.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace ampc {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

bool isFloatTensor(Value v) {
  return isa<FloatType>(getElementTypeOrSelf(v.getType()));
}

/// Whether a gradient flows from result `r` back into the op: float results
/// of ops with a rule, unless the rule says otherwise; every float result of
/// ops without one (so that they are reported when a gradient needs them).
bool carriesGradient(OpResult r) {
  if (!isFloatTensor(r))
    return false;
  auto rule = dyn_cast<ampc::GradientOpInterface>(r.getOwner());
  return !rule || rule.isDifferentiableResult(r.getResultNumber());
}

/// Whether a gradient flows into operand `o` (the same convention).
bool carriesGradient(OpOperand &o) {
  if (!isFloatTensor(o.get()))
    return false;
  auto rule = dyn_cast<ampc::GradientOpInterface>(o.getOwner());
  return !rule || rule.isDifferentiableOperand(o.getOperandNumber());
}

/// Which values of a block need adjoints: those on a path from a trainable
/// parameter's load to the loss, along edges gradients flow through.
struct Activity {
  llvm::DenseSet<Value> varied; // depend on a trainable parameter
  llvm::DenseSet<Value> useful; // the loss depends on them
  bool active(Value v) const {
    return varied.contains(v) && useful.contains(v);
  }

  Activity(ArrayRef<Operation *> ops, Value loss,
           llvm::function_ref<bool(ampc::LoadParameterOp)> trainable) {
    for (Operation *op : ops) {
      if (auto load = dyn_cast<ampc::LoadParameterOp>(op)) {
        if (trainable(load))
          varied.insert(load.getOutput());
        continue;
      }
      if (op->hasTrait<ampc::NonDifferentiable>())
        continue;
      if (llvm::none_of(op->getOpOperands(), [&](OpOperand &o) {
            return varied.contains(o.get()) && carriesGradient(o);
          }))
        continue;
      for (OpResult r : op->getResults())
        if (carriesGradient(r))
          varied.insert(r);
    }
    useful.insert(loss);
    for (Operation *op : llvm::reverse(ops)) {
      if (op->hasTrait<ampc::NonDifferentiable>() ||
          llvm::none_of(op->getResults(), [&](OpResult r) {
            return useful.contains(r) && carriesGradient(r);
          }))
        continue;
      for (OpOperand &o : op->getOpOperands())
        if (carriesGradient(o))
          useful.insert(o.get());
    }
  }
};

/// The parameters `step` reads only as the running mean or variance of a
/// training-mode BatchNormalization: running statistics, which
/// ampc-running-statistics makes state (not frozen parameters). One walk
/// over the step for all parameters.
llvm::DenseSet<StringAttr> runningStatistics(func::FuncOp step) {
  llvm::DenseSet<StringAttr> statistic, other;
  step.walk([&](ampc::LoadParameterOp load) {
    StringAttr name = load.getParameterAttr().getAttr();
    for (OpOperand &use : load.getOutput().getUses()) {
      auto bn = dyn_cast<ampc::BatchNormalizationOp>(use.getOwner());
      bool isStatistic = bn && bn.getTrainingMode() &&
                         (use.get() == bn.getInputMean() ||
                          use.get() == bn.getInputVar());
      (isStatistic ? statistic : other).insert(name);
    }
  });
  for (StringAttr name : other)
    statistic.erase(name);
  return statistic;
}

/// The parameters that get no gradient although nothing froze them are
/// frozen with the reason, so that the decision is visible (--summary) and
/// no later pass mistakes them for trainable: a causal mask added to
/// scores through Where, a tensor only compared or used as indices.
void markUntrainable(ModuleOp module, func::FuncOp step,
                     const llvm::DenseMap<StringAttr, Value> &gradientOf) {
  Builder b(module.getContext());
  llvm::DenseSet<StringAttr> statistics = runningStatistics(step);
  for (auto param : module.getOps<ampc::ParameterOp>()) {
    if (param->hasAttr(ampc::kFrozenAttr) ||
        gradientOf.contains(param.getSymNameAttr()) ||
        statistics.contains(param.getSymNameAttr()))
      continue;
    param->setAttr(ampc::kFrozenAttr,
                   b.getStringAttr("no gradient reaches it"));
    emitRemark(param.getLoc())
        << "initializer '" << param.getSymName()
        << "' does not train: the loss reaches it only through comparisons, "
           "shapes, indices or Where conditions, or not at all";
  }
}

class Autodiff : public ampc::impl::AutodiffPassBase<Autodiff> {
public:
  using Base::Base;
  void runOnOperation() override;

private:
  LogicalResult checkRules(ArrayRef<Operation *> ops, const Activity &activity);
  LogicalResult buildBackward(OpBuilder &b, ArrayRef<Operation *> ops,
                              const Activity &activity, Value loss,
                              llvm::DenseMap<Value, Value> &adjoints);
};

/// Every op a gradient must flow through has a rule that differentiates the
/// results it flows from.
LogicalResult Autodiff::checkRules(ArrayRef<Operation *> ops,
                                   const Activity &activity) {
  for (Operation *op : ops) {
    if (isa<ampc::LoadParameterOp>(op) ||
        op->hasTrait<ampc::NonDifferentiable>())
      continue;
    auto rule = dyn_cast<ampc::GradientOpInterface>(op);
    if (!rule) {
      if (llvm::any_of(op->getResults(),
                       [&](Value r) { return activity.active(r); }))
        return op->emitError("ampc-autodiff: '")
               << op->getName()
               << "' has no gradient rule, and the loss depends on a "
                  "trainable parameter through it";
      continue;
    }
    bool variedInput = llvm::any_of(op->getOpOperands(), [&](OpOperand &o) {
      return activity.varied.contains(o.get()) && carriesGradient(o);
    });
    for (OpResult r : op->getResults())
      if (variedInput && isFloatTensor(r) && activity.useful.contains(r) &&
          !rule.isDifferentiableResult(r.getResultNumber()))
        return op->emitError("ampc-autodiff: the loss depends on result #")
               << r.getResultNumber() << " of '" << op->getName()
               << "', which its gradient rule does not differentiate";
  }
  return success();
}

/// Calls the rules in reverse program order, filling `adjoints`.
LogicalResult Autodiff::buildBackward(OpBuilder &b, ArrayRef<Operation *> ops,
                                      const Activity &activity, Value loss,
                                      llvm::DenseMap<Value, Value> &adjoints) {
  auto accumulate = [&](Value value, Value adjoint, Location loc) {
    auto [it, inserted] = adjoints.try_emplace(value, adjoint);
    if (!inserted)
      it->second = ampc::AddOp::create(b, loc, it->second, adjoint);
  };
  auto lossType = cast<RankedTensorType>(loss.getType());
  Location lossLoc = loss.getDefiningOp() ? loss.getDefiningOp()->getLoc()
                                          : loss.getLoc();
  // Marked so that ampc-insert-loss-scaling can seed with the scale instead.
  adjoints[loss] = ampc::ConstantOp::create(
      b, lossLoc,
      DenseElementsAttr::get(
          lossType, b.getFloatAttr(lossType.getElementType(), 1.0)));
  adjoints[loss].getDefiningOp()->setAttr(ampc::kLossSeedAttr, b.getUnitAttr());

  for (Operation *op : llvm::reverse(ops)) {
    auto rule = dyn_cast<ampc::GradientOpInterface>(op);
    if (!rule)
      continue; // parameter loads, constants, non-differentiable ops
    SmallVector<Value> dResults;
    for (OpResult r : op->getResults())
      dResults.push_back(activity.active(r) ? adjoints.lookup(r) : Value());
    SmallVector<bool> wanted;
    for (OpOperand &o : op->getOpOperands())
      wanted.push_back(activity.active(o.get()) && carriesGradient(o));
    if (llvm::all_of(dResults, [](Value v) { return !v; }) ||
        llvm::none_of(wanted, [](bool w) { return w; }))
      continue;
    SmallVector<Value> dOperands(op->getNumOperands());
    if (failed(rule.buildGradient(b, dResults, wanted, dOperands)))
      return failure();
    for (OpOperand &o : op->getOpOperands()) {
      unsigned i = o.getOperandNumber();
      if (!wanted[i])
        continue;
      if (!dOperands[i] || dOperands[i].getType() != o.get().getType())
        return op->emitError("ampc-autodiff: internal error: the gradient "
                             "rule of '")
               << op->getName() << "' gave operand #" << i << " an adjoint of "
               << (dOperands[i] ? dOperands[i].getType() : Type())
               << ", expected " << o.get().getType();
      accumulate(o.get(), dOperands[i], op->getLoc());
    }
  }
  return success();
}

void Autodiff::runOnOperation() {
  ModuleOp module = getOperation();
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.isExternal()) {
    emitError(module.getLoc())
        << "ampc-autodiff: the module has no @forward function to "
           "differentiate";
    return signalPassFailure();
  }
  if (module.lookupSymbol("train_step")) {
    emitError(module.getLoc())
        << "ampc-autodiff: the module already has a @train_step";
    return signalPassFailure();
  }
  if (!forward.getBody().hasOneBlock() || forward.getNumResults() == 0) {
    forward.emitError("ampc-autodiff: @forward must be one block returning "
                      "the loss first");
    return signalPassFailure();
  }
  {
    Value loss = forward.getBody().front().getTerminator()->getOperand(0);
    auto type = dyn_cast<RankedTensorType>(loss.getType());
    if (!type || !type.hasStaticShape() || type.getNumElements() != 1 ||
        !isa<FloatType>(type.getElementType())) {
      Operation *def = loss.getDefiningOp();
      (def ? def->emitError() : forward.emitError())
          << "ampc-autodiff: the loss (the first result of @forward) must be "
             "a float scalar, got "
          << loss.getType()
          << "; ampc-attach-loss (--loss) can add one";
      return signalPassFailure();
    }
  }

  // @train_step starts as a copy of @forward; the backward goes before its
  // return.
  OpBuilder mb(forward);
  mb.setInsertionPointAfter(forward);
  auto trainStep = cast<func::FuncOp>(mb.clone(*forward.getOperation()));
  trainStep.setSymName("train_step");
  Block &body = trainStep.getBody().front();
  Operation *ret = body.getTerminator();
  Value loss = ret->getOperand(0);
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);

  SymbolTable symbols(module);
  auto trainable = [&](ampc::LoadParameterOp load) {
    auto param = symbols.lookup<ampc::ParameterOp>(load.getParameter());
    return param && !param->hasAttr(ampc::kFrozenAttr);
  };
  Activity activity(ops, loss, trainable);
  if (failed(checkRules(ops, activity)))
    return signalPassFailure();

  OpBuilder b(ret);
  llvm::DenseMap<Value, Value> adjoints;
  if (!activity.active(loss))
    emitWarning(loss.getLoc())
        << "ampc-autodiff: the loss depends on no trainable parameter; "
           "@train_step returns no gradient";
  else if (failed(buildBackward(b, ops, activity, loss, adjoints)))
    return signalPassFailure();

  // Gradients per parameter (a parameter loaded twice adds both), in the
  // order of the parameters.
  llvm::DenseMap<StringAttr, Value> gradientOf;
  for (Operation *op : ops) {
    auto load = dyn_cast<ampc::LoadParameterOp>(op);
    if (!load || !activity.active(load.getOutput()))
      continue;
    Value adjoint = adjoints.lookup(load.getOutput());
    auto [it, inserted] =
        gradientOf.try_emplace(load.getParameterAttr().getAttr(), adjoint);
    if (!inserted)
      it->second = ampc::AddOp::create(b, load.getLoc(), it->second, adjoint);
  }

  // The loss as a rank-0 f32 tensor (f64 models keep f64).
  auto lossType = cast<RankedTensorType>(loss.getType());
  Type lossElement = lossType.getElementType();
  Value lossOut = loss;
  if (!lossElement.isF32() && !lossElement.isF64()) {
    lossOut = ampc::CastOp::create(b, ret->getLoc(),
                                   lossType.clone(b.getF32Type()), lossOut);
    lossOut.getDefiningOp()->setAttr(ampc::kAutocastAttr, b.getUnitAttr());
  }
  if (lossType.getRank() != 0)
    lossOut = ampc::ReshapeOp::create(
        b, ret->getLoc(),
        RankedTensorType::get(
            {}, cast<RankedTensorType>(lossOut.getType()).getElementType()),
        lossOut);

  SmallVector<Value> results = {lossOut};
  SmallVector<Attribute> resultAttrs = {
      b.getDictionaryAttr(b.getNamedAttr(ampc::kNameAttr, b.getStringAttr("loss")))};
  for (auto param : module.getOps<ampc::ParameterOp>()) {
    Value gradient = gradientOf.lookup(param.getSymNameAttr());
    if (!gradient)
      continue;
    results.push_back(gradient);
    resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
        ampc::kGradientOfAttr, FlatSymbolRefAttr::get(param.getSymNameAttr()))));
  }
  markUntrainable(module, trainStep, gradientOf);
  func::ReturnOp::create(b, ret->getLoc(), results);
  ret->erase();
  trainStep.setType(FunctionType::get(&getContext(), trainStep.getArgumentTypes(),
                                      ValueRange(results).getTypes()));
  trainStep.setAllResultAttrs(resultAttrs);

  // What neither the loss nor a gradient rule reads (the other outputs of
  // the forward) goes; a reverse sweep sees users before their operands.
  SmallVector<Operation *> all;
  for (Operation &op : body.without_terminator())
    all.push_back(&op);
  for (Operation *op : llvm::reverse(all))
    if (isOpTriviallyDead(op))
      op->erase();
}

} // namespace
