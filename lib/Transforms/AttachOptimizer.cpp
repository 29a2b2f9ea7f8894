//===- AttachOptimizer.cpp - the optimizer step on FP32 master weights ----===//
//
// Turns @train_step (loss and gradients) into a whole training step: every
// parameter with a gradient is updated by torch.optim's rule, skipped when
// the loss scaler found an overflow, the low-precision weight copies the
// forward reads are written after the update, and the step returns the
// loss only.
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/ChannelsLast.h"
#include "ampc/Dialect/Optimizers.h"
#include "ampc/Transforms/Passes.h"
#include "ampc/Transforms/Training.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/GlobPattern.h"

#include <cmath>
#include <optional>

namespace ampc {
#define GEN_PASS_DEF_ATTACHOPTIMIZERPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

/// The suffix of the low-precision copy of a weight read in `t`.
StringRef lowPrecisionSuffix(Type t) { return t.isBF16() ? ".bf16" : ".f16"; }

/// Whether `op` reads a channels-last weight as such: a channels-last op,
/// or ampc-pad-channels' zero padding of it that only such ops read.
bool readsChannelsLast(Operation *op) {
  if (op->hasAttr("channels_last"))
    return true;
  return isa<ampc::ConcatOp>(op) && op->hasAttr(ampc::kPaddingAttr) &&
         llvm::all_of(op->getUsers(), readsChannelsLast);
}

/// The transpose to channels-last that is the only reader of a weight's
/// cast `c`, when only channels-last ops read it (ampc-channels-last's
/// weight layout, possibly padded by ampc-pad-channels); null otherwise.
ampc::TransposeOp channelsLastReader(ampc::CastOp c) {
  if (!c->hasOneUse())
    return {};
  auto t = dyn_cast<ampc::TransposeOp>(*c->getUsers().begin());
  if (!t || t.getPerm() != ArrayRef<int64_t>(ampc::channelsLastPerm(
                               c.getOutput().getType().getRank())))
    return {};
  if (!llvm::all_of(t->getUsers(), readsChannelsLast))
    return {};
  return t;
}

/// A low-precision copy the step keeps: its type, and whether it is
/// channels-last (then its type is the transposed one).
struct CopyKind {
  Type type;
  bool channelsLast;
  bool operator==(const CopyKind &o) const {
    return type == o.type && channelsLast == o.channelsLast;
  }
};

/// One of torch's param_groups: the parameters a glob matches, with their
/// own learning rate, weight decay, betas, eps, momentum and dampening where
/// given.
struct ParamGroup {
  std::string spelling;
  llvm::GlobPattern glob;
  std::optional<double> lr, weightDecay, beta1, beta2, eps, momentum,
      dampening;
  bool used = false;
  /// `ampc.lr` times lr / the default lr, built once.
  Value learningRate;

  /// The optimizer settings (ampc::OptimizerFacts::settings) it gives.
  SmallVector<StringRef> givenSettings() const {
    SmallVector<StringRef> given;
    for (auto [name, value] :
         {std::pair<StringRef, const std::optional<double> *>{"beta1", &beta1},
          {"beta2", &beta2},
          {"eps", &eps},
          {"momentum", &momentum},
          {"dampening", &dampening}})
      if (value->has_value())
        given.push_back(name);
    return given;
  }
};

/// Parses "GLOB:KEY=X;KEY=Y..." (lr, weight_decay, beta1, beta2, eps,
/// momentum, dampening); false with `error` set.
bool parseParamGroup(StringRef spec, ParamGroup &group, std::string &error) {
  group.spelling = spec.str();
  auto [pattern, settings] = spec.rsplit(':');
  if (pattern.empty() || settings.empty() || pattern == spec) {
    error = "'" + spec.str() + "' must be GLOB:lr=X;weight_decay=Y";
    return false;
  }
  llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(pattern);
  if (!glob) {
    error = "'" + spec.str() +
            "': not a valid glob: " + llvm::toString(glob.takeError());
    return false;
  }
  group.glob = std::move(*glob);
  SmallVector<StringRef> pairs;
  settings.split(pairs, ';', -1, /*KeepEmpty=*/false);
  for (StringRef pair : pairs) {
    auto [key, text] = pair.split('=');
    double value = 0;
    // Kept as an f32: a value beyond its range would become inf.
    if (text.trim().getAsDouble(value) || !(value >= 0) ||
        !std::isfinite(float(value))) {
      error = "'" + spec.str() + "': " + key.trim().str() +
              " must be a finite number >= 0 that fits in f32, got '" +
              text.trim().str() + "'";
      return false;
    }
    key = key.trim();
    std::optional<double> *slot =
        llvm::StringSwitch<std::optional<double> *>(key)
            .Case("lr", &group.lr)
            .Case("weight_decay", &group.weightDecay)
            .Case("beta1", &group.beta1)
            .Case("beta2", &group.beta2)
            .Case("eps", &group.eps)
            .Case("momentum", &group.momentum)
            .Case("dampening", &group.dampening)
            .Default(nullptr);
    if (!slot) {
      error = "'" + spec.str() + "': '" + key.str() +
              "' is not a group setting (lr, weight_decay, beta1, beta2, "
              "eps, momentum, dampening)";
      return false;
    }
    if ((key == "beta1" || key == "beta2") && !(value < 1)) {
      error = "'" + spec.str() + "': " + key.str() + " must be in [0, 1), got '" +
              text.trim().str() + "'";
      return false;
    }
    *slot = value;
  }
  return true;
}

struct AttachOptimizerPass
    : ampc::impl::AttachOptimizerPassBase<AttachOptimizerPass> {
  using Base::Base;

  /// The pass option of an ampc::OptimizerFacts setting or flag.
  double settingValue(StringRef setting) const {
    return llvm::StringSwitch<double>(setting)
        .Case("momentum", momentum)
        .Case("dampening", dampening)
        .Case("beta1", beta1)
        .Case("beta2", beta2)
        .Case("eps", eps);
  }
  bool flagValue(StringRef flag) const {
    return llvm::StringSwitch<bool>(flag).Case("nesterov", nesterov);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(ampc::checkEnumOption(kind, module.getLoc(), getArgument())))
      return signalPassFailure();
    if (kind == ampc::OptimizerKind::None)
      return;
    const ampc::OptimizerFacts &facts = *ampc::optimizerFacts(kind);
    double decay = weightDecay >= 0 ? weightDecay : facts.defaultWeightDecay;
    // `!(x >= 0)` also refuses NaN; infinities are refused by name.
    auto finiteNonNegative = [](double x) {
      return x >= 0 && std::isfinite(x);
    };
    if (!finiteNonNegative(lr) || !finiteNonNegative(momentum) ||
        !finiteNonNegative(dampening) || !finiteNonNegative(decay) ||
        !(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1) ||
        !finiteNonNegative(eps) || !finiteNonNegative(clipGradNorm) ||
        (nesterov && (momentum <= 0 || dampening != 0))) {
      module.emitError()
          << "ampc-attach-optimizer: expected lr, momentum, dampening, "
             "weight-decay, eps, clip-grad-norm finite and >= 0, betas in "
             "[0, 1), and nesterov only with momentum > 0 and dampening 0";
      return signalPassFailure();
    }
    std::vector<ParamGroup> groups(paramGroups.size());
    for (auto [spec, group] : llvm::zip(paramGroups, groups)) {
      std::string error;
      if (!parseParamGroup(spec, group, error)) {
        module.emitError() << "ampc-attach-optimizer: parameter group "
                           << error;
        return signalPassFailure();
      }
      // Settings of another optimizer are a mistake, not something to
      // ignore: the user expects them to act.
      if (llvm::any_of(group.givenSettings(), [&](StringRef setting) {
            return !llvm::is_contained(facts.settings, setting);
          })) {
        module.emitError()
            << "ampc-attach-optimizer: parameter group '" << spec << "' sets "
            << ampc::foreignOptimizerSettings(kind) << ", which --optimizer="
            << ampc::stringifyEnum(kind) << " does not have";
        return signalPassFailure();
      }
      if (nesterov && (group.momentum.value_or(momentum) <= 0 ||
                       group.dampening.value_or(dampening) != 0)) {
        module.emitError()
            << "ampc-attach-optimizer: parameter group '" << spec
            << "': nesterov needs momentum > 0 and dampening 0";
        return signalPassFailure();
      }
      if (group.lr && *group.lr != lr && !(lr > 0)) {
        module.emitError()
            << "ampc-attach-optimizer: parameter group '" << spec
            << "' sets lr, which is a multiple of --lr: --lr must be > 0";
        return signalPassFailure();
      }
    }
    auto step = module.lookupSymbol<func::FuncOp>(ampc::kTrainStep);
    if (!step) {
      module.emitError() << "ampc-attach-optimizer: no @train_step (run "
                            "ampc-autodiff first)";
      return signalPassFailure();
    }
    MLIRContext *ctx = module.getContext();
    OpBuilder b(ctx);
    Location loc = step.getLoc();
    Type f32 = Float32Type::get(ctx), i64 = b.getI64Type();
    // Built once: a lookup per declared state in the module would make the
    // pass quadratic in the number of parameters.
    SymbolTable symbols(module);
    Value learningRate = ampc::declareState(
        symbols, step, ampc::kLearningRate,
        DenseElementsAttr::get(RankedTensorType::get({}, f32),
                               static_cast<float>(lr)));
    Value stepCount = ampc::declareState(
        symbols, step, ampc::kStepCount,
        DenseElementsAttr::get(RankedTensorType::get({}, i64), int64_t(0)));
    Value foundInf = ampc::findFoundInf(step);
    // Partial batches: the row count ampc-attach-loss masks the loss by
    // becomes state the runtime sets (the batch size unless it trains a
    // partial last batch).
    SmallVector<ampc::ConstantOp> rowCounts;
    step.walk([&](ampc::ConstantOp c) {
      if (c->hasAttr(ampc::kBatchRowsAttr))
        rowCounts.push_back(c);
    });
    if (!rowCounts.empty()) {
      Value rows = ampc::declareState(symbols, step, ampc::kBatchRows,
                                      rowCounts.front().getValue());
      for (ampc::ConstantOp c : rowCounts) {
        c->getResult(0).replaceAllUsesWith(rows);
        c.erase();
      }
    }

    auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
    SmallVector<unsigned> gradientResults = ampc::gradientResults(step);
    SmallVector<Value> grads;
    SmallVector<FlatSymbolRefAttr> params;
    for (unsigned i : gradientResults) {
      grads.push_back(ret.getOperand(i));
      params.push_back(
          step.getResultAttrOfType<FlatSymbolRefAttr>(i, ampc::kGradientOfAttr));
    }

    // Weights the forward reads in f16/bf16 read a copy the step keeps,
    // also through transposes (a Linear's W^T: the copy is the master's
    // layout, transposed as the master was; a cast commutes with a
    // transpose, so the values are the cast's bit for bit). A cast that
    // only channels-last ops read through ampc-channels-last's transpose
    // (a convolution's weight) reads a copy kept in that layout, written
    // by the optimizer's step, so the step transposes no weight; unless
    // the same parameter is also read in the master's layout in that type
    // (one copy per type).
    llvm::DenseMap<StringAttr, SmallVector<CopyKind>> lowPrecision;
    llvm::DenseSet<StringAttr> trained;
    for (FlatSymbolRefAttr p : params)
      trained.insert(p.getAttr());
    // The load a cast reads, through transposes (outermost first).
    auto loadOf = [](ampc::CastOp c, SmallVectorImpl<ampc::TransposeOp> &via) {
      Value v = c.getInput();
      while (auto t = v.getDefiningOp<ampc::TransposeOp>()) {
        via.push_back(t);
        v = t.getInput();
      }
      return v.getDefiningOp<ampc::LoadParameterOp>();
    };
    SmallVector<ampc::CastOp> weightCasts;
    step.walk([&](ampc::CastOp c) {
      SmallVector<ampc::TransposeOp> via;
      auto load = loadOf(c, via);
      Type to = c.getOutput().getType().getElementType();
      if (load && (to.isF16() || to.isBF16()) &&
          trained.contains(load.getParameterAttr().getAttr()))
        weightCasts.push_back(c);
    });
    // The (parameter, type) pairs some cast reads in the master's layout.
    llvm::DenseSet<std::pair<StringAttr, Type>> plainCopies;
    for (ampc::CastOp c : weightCasts) {
      SmallVector<ampc::TransposeOp> via;
      auto load = loadOf(c, via);
      if (!via.empty() || !channelsLastReader(c))
        plainCopies.insert({load.getParameterAttr().getAttr(),
                            c.getOutput().getType().getElementType()});
    }
    for (ampc::CastOp c : weightCasts) {
      SmallVector<ampc::TransposeOp> via;
      auto load = loadOf(c, via);
      Type element = c.getOutput().getType().getElementType();
      StringAttr param = load.getParameterAttr().getAttr();
      ampc::TransposeOp layout =
          via.empty() && !plainCopies.contains({param, element})
              ? channelsLastReader(c)
              : ampc::TransposeOp();
      auto type = RankedTensorType::get(
          layout ? layout.getOutput().getType().getShape()
                 : cast<RankedTensorType>(load.getType()).getShape(),
          element);
      std::string name = (param.getValue() + lowPrecisionSuffix(element)).str();
      Value copy = ampc::declareState(
          symbols, step, name,
          DenseElementsAttr::get(type, FloatAttr::get(element, 0.0)),
          FlatSymbolRefAttr::get(param));
      if (layout) {
        symbols.lookup<ampc::StateOp>(name).setChannelsLast(true);
        layout.getOutput().replaceAllUsesWith(copy);
        layout.erase();
      }
      if (!via.empty()) {
        OpBuilder tb(c);
        for (ampc::TransposeOp t : llvm::reverse(via))
          copy = ampc::TransposeOp::create(tb, t.getLoc(), copy,
                                           t.getPermAttr());
      }
      c.getOutput().replaceAllUsesWith(copy);
      c.erase();
      for (ampc::TransposeOp t : via)
        if (t->use_empty())
          t.erase();
      SmallVector<CopyKind> &kinds = lowPrecision[param];
      CopyKind kind{element, static_cast<bool>(layout)};
      if (!llvm::is_contained(kinds, kind))
        kinds.push_back(kind);
    }

    b.setInsertionPoint(ret);
    if (clipGradNorm > 0) {
      SmallVector<Type> types;
      for (Value g : grads)
        types.push_back(g.getType());
      auto clip = ampc::ClipGradNormOp::create(
          b, loc, types, grads, b.getF32FloatAttr(clipGradNorm));
      grads.assign(clip.getClipped().begin(), clip.getClipped().end());
    }

    ArrayRef<StringLiteral> momentNames = facts.moments;
    for (auto [param, grad] : llvm::zip(params, grads)) {
      auto type = cast<RankedTensorType>(grad.getType());
      auto zero = DenseElementsAttr::get(
          type, FloatAttr::get(type.getElementType(), 0.0));
      // The parameter's group: its learning rate, weight decay, betas, eps,
      // momentum and dampening.
      Value rate = learningRate;
      double paramDecay = decay, paramBeta1 = beta1, paramBeta2 = beta2,
             paramEps = eps, paramMomentum = momentum,
             paramDampening = dampening;
      for (ParamGroup &group : groups) {
        if (!group.glob.match(param.getValue()))
          continue;
        group.used = true;
        if (group.lr && *group.lr != lr) {
          if (!group.learningRate) {
            OpBuilder::InsertionGuard atStart(b);
            b.setInsertionPointAfterValue(learningRate);
            group.learningRate = ampc::MulOp::create(
                b, loc, learningRate,
                ampc::ConstantOp::create(
                    b, loc,
                    DenseElementsAttr::get(RankedTensorType::get({}, f32),
                                           static_cast<float>(*group.lr /
                                                              lr))));
          }
          rate = group.learningRate;
        }
        paramDecay = group.weightDecay.value_or(decay);
        paramBeta1 = group.beta1.value_or(beta1);
        paramBeta2 = group.beta2.value_or(beta2);
        paramEps = group.eps.value_or(eps);
        paramMomentum = group.momentum.value_or(momentum);
        paramDampening = group.dampening.value_or(dampening);
        break;
      }
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&step.getBody().front());
      Value master = ampc::LoadParameterOp::create(b, loc, type, param);
      // SGD keeps a momentum buffer where the parameter's momentum is
      // not 0.
      unsigned numMoments = ampc::momentCount(kind, paramMomentum);
      SmallVector<Value> moments;
      for (unsigned m = 0; m < numMoments; ++m)
        moments.push_back(ampc::declareState(
            symbols, step, (param.getValue() + momentNames[m]).str(), zero));
      b.setInsertionPoint(ret);
      SmallVector<Type> resultTypes(1 + numMoments, type);
      auto update = ampc::OptimizerUpdateOp::create(
          b, loc, resultTypes, master, grad, rate, stepCount, foundInf,
          moments, ampc::OptimizerKindAttr::get(ctx, kind),
          b.getF32FloatAttr(paramMomentum), b.getF32FloatAttr(paramDampening),
          b.getBoolAttr(nesterov), b.getF32FloatAttr(paramBeta1),
          b.getF32FloatAttr(paramBeta2), b.getF32FloatAttr(paramEps),
          b.getF32FloatAttr(paramDecay));
      ampc::StoreOp::create(b, loc, param.getValue(), update.getNewParam());
      for (unsigned m = 0; m < numMoments; ++m)
        ampc::StoreOp::create(b, loc,
                              (param.getValue() + momentNames[m]).str(),
                              update.getNewMoments()[m]);
      for (CopyKind kind : lowPrecision.lookup(param.getAttr())) {
        auto master = cast<RankedTensorType>(update.getNewParam().getType());
        Value copy = ampc::CastOp::create(
            b, loc, RankedTensorType::get(master.getShape(), kind.type),
            update.getNewParam());
        if (kind.channelsLast)
          copy = ampc::TransposeOp::create(
              b, loc, copy,
              b.getDenseI64ArrayAttr(ampc::channelsLastPerm(master.getRank())));
        ampc::StoreOp::create(
            b, loc, (param.getValue() + lowPrecisionSuffix(kind.type)).str(),
            copy);
      }
    }
    Value nextStep =
        foundInf ? ampc::countIf(b, loc, stepCount, foundInf, /*when=*/false)
                 : ampc::AddOp::create(
                       b, loc, stepCount,
                       ampc::ConstantOp::create(
                           b, loc,
                           DenseElementsAttr::get(
                               RankedTensorType::get({}, i64), int64_t(1))))
                       .getResult();
    ampc::StoreOp::create(b, loc, ampc::kStepCount, nextStep);

    // The step returns the loss only.
    llvm::BitVector erase(step.getNumResults());
    for (unsigned i : gradientResults)
      erase.set(i);
    ret->eraseOperands(erase);
    if (failed(step.eraseResults(erase))) {
      step.emitError() << "ampc-attach-optimizer: cannot drop the gradient "
                          "results";
      return signalPassFailure();
    }

    // "lr=X", the kind's settings and flags, "weight_decay=X" (the options
    // as raw_ostream prints a double, the decay as formatv does).
    std::string hyper;
    llvm::raw_string_ostream os(hyper);
    os << "lr=" << double(lr);
    for (StringRef setting : facts.settings)
      os << " " << setting << "=" << settingValue(setting);
    for (StringRef flag : facts.flags)
      os << " " << flag << "=" << (flagValue(flag) ? 1 : 0);
    os << llvm::formatv(" weight_decay={0}", decay);
    if (clipGradNorm > 0)
      hyper += llvm::formatv(" clip_grad_norm={0}", clipGradNorm).str();
    for (const ParamGroup &group : groups) {
      hyper += " group=" + group.spelling;
      if (!group.used)
        module.emitWarning()
            << "parameter group '" << group.spelling
            << "' matches no trained parameter of the model";
    }
    module->setAttr(ampc::kOptimizerAttr,
                    ampc::OptimizerKindAttr::get(ctx, kind));
    module->setAttr(ampc::kHyperparametersAttr, b.getStringAttr(hyper));
    if (!module->hasAttr(ampc::kLossScalingAttr))
      module->setAttr(ampc::kLossScalingAttr,
                      ampc::LossScalingModeAttr::get(
                          ctx, ampc::LossScalingMode::None));
  }
};
} // namespace
