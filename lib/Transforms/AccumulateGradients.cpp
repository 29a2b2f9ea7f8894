//===- AccumulateGradients.cpp - N micro-batches per optimizer step -------===//
//
// Gradient accumulation with torch.amp.GradScaler's semantics: every call
// of @train_step is one micro-batch whose gradients (of the loss over N, as
// a PyTorch loop divides it) are added to FP32 accumulators; the N-th call
// unscales and checks the sum once, and steps the optimizer and the scaler
// with it, so an overflow in any micro-batch skips that optimizer step.
// The other calls commit nothing but the accumulators and the counter:
// every store the loss scaling and the optimizer made keeps its symbol's
// old value unless this call is the N-th. Runs after ampc-attach-optimizer
// and before ampc-running-statistics (BatchNorm's statistics follow every
// micro-batch, as in PyTorch).
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"
#include "ampc/Transforms/Training.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace ampc {
#define GEN_PASS_DEF_ACCUMULATEGRADIENTSPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

/// The micro-batches counted since the last optimizer step (i64 scalar).
constexpr llvm::StringLiteral kMicroBatches = "ampc.micro_batches";

/// The gradient an optimizer update reads, before the unscale and the
/// clipping that follow the backward: the op that reads it first and the
/// operand index there.
std::pair<Operation *, unsigned> gradientSource(ampc::OptimizerUpdateOp op) {
  Operation *user = op;
  unsigned index = op.getGradMutable().getOperandNumber();
  Value grad = op.getGrad();
  while (true) {
    auto result = dyn_cast<OpResult>(grad);
    if (!result)
      break;
    Operation *def = result.getOwner();
    unsigned k = result.getResultNumber();
    if (auto unscale = dyn_cast<ampc::UnscaleOp>(def)) {
      user = unscale;
      index = unscale.getGradsMutable()[k].getOperandNumber();
    } else if (auto clip = dyn_cast<ampc::ClipGradNormOp>(def)) {
      user = clip;
      index = clip.getGradsMutable()[k].getOperandNumber();
    } else {
      break;
    }
    grad = user->getOperand(index);
  }
  return {user, index};
}

struct AccumulateGradientsPass
    : ampc::impl::AccumulateGradientsPassBase<AccumulateGradientsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (microBatches < 1) {
      module.emitError() << "ampc-accumulate-gradients: micro-batches must "
                            "be at least 1, got "
                         << microBatches;
      return signalPassFailure();
    }
    if (microBatches == 1)
      return;
    // A partial micro-batch's mean would weigh as much as a full one's.
    if (auto why = module->getAttrOfType<StringAttr>(ampc::kPartialBatchesAttr);
        why && why.getValue().empty())
      module->setAttr(ampc::kPartialBatchesAttr,
                      StringAttr::get(module.getContext(),
                                      "the step accumulates gradients over " +
                                          std::to_string(microBatches) +
                                          " micro-batches, each weighted as "
                                          "a full batch"));
    auto step = module.lookupSymbol<func::FuncOp>(ampc::kTrainStep);
    SmallVector<ampc::OptimizerUpdateOp> updates;
    if (step)
      step.walk([&](ampc::OptimizerUpdateOp op) { updates.push_back(op); });
    if (!step || updates.empty()) {
      module.emitError() << "ampc-accumulate-gradients: no optimizer step to "
                            "accumulate for (run ampc-attach-optimizer "
                            "first; --accumulate needs an optimizer)";
      return signalPassFailure();
    }
    ampc::Seed seed = ampc::findLossSeed(step);
    if (!seed.op) {
      module.emitError() << "ampc-accumulate-gradients: @train_step has no "
                            "loss seed";
      return signalPassFailure();
    }
    Location loc = step.getLoc();
    OpBuilder b(module.getContext());
    SymbolTable symbols(module);
    Type i64 = b.getI64Type();
    auto scalarI64 = RankedTensorType::get({}, i64);

    // The backward of loss / N: the seed (1, which the loss scaling
    // multiplies by the scale) becomes 1/N.
    auto seedOp = cast<ampc::ConstantOp>(seed.op);
    auto seedType = cast<RankedTensorType>(seedOp.getType());
    seedOp.setValueAttr(DenseElementsAttr::get(
        seedType,
        b.getFloatAttr(seedType.getElementType(), 1.0 / double(microBatches))));

    // Every store so far belongs to the optimizer step: gate them below.
    SmallVector<ampc::StoreOp> stepStores;
    step.walk([&](ampc::StoreOp s) { stepStores.push_back(s); });

    Operation *ret = step.getBody().front().getTerminator();
    Value counter =
        ampc::declareState(symbols, step, kMicroBatches,
                           DenseElementsAttr::get(scalarI64, int64_t(0)));
    // The count including this call and whether it is the N-th, computed
    // first: the accumulated sums are read by the unscale, which comes
    // before every store.
    b.setInsertionPointAfter(counter.getDefiningOp());
    Value count = ampc::AddOp::create(
        b, loc, counter,
        ampc::ConstantOp::create(
            b, loc, DenseElementsAttr::get(scalarI64, int64_t(1))));
    Value isStep = ampc::EqualOp::create(
        b, loc, count,
        ampc::ConstantOp::create(
            b, loc, DenseElementsAttr::get(scalarI64, int64_t(microBatches))));

    // sum = accumulated + this micro-batch's gradient, read where the
    // gradient was; the accumulator is stored back, or zero after a step.
    llvm::MapVector<std::pair<Operation *, unsigned>, StringAttr> sources;
    for (ampc::OptimizerUpdateOp update : updates) {
      auto param = update.getParam().getDefiningOp<ampc::LoadParameterOp>();
      if (!param) {
        update.emitError() << "ampc-accumulate-gradients: the optimizer "
                              "update does not read a parameter";
        return signalPassFailure();
      }
      sources.insert(
          {gradientSource(update), param.getParameterAttr().getAttr()});
    }
    for (auto &[source, name] : sources) {
      auto [user, index] = source;
      Value grad = user->getOperand(index);
      auto type = cast<RankedTensorType>(grad.getType());
      Attribute zero = b.getZeroAttr(type);
      Value accumulated = ampc::declareState(
          symbols, step, (name.getValue() + ".accumulated_grad").str(),
          cast<ElementsAttr>(zero));
      b.setInsertionPoint(user);
      Value sum = ampc::AddOp::create(b, user->getLoc(), accumulated, grad);
      user->setOperand(index, sum);
      b.setInsertionPoint(ret);
      Value zeros = ampc::ConstantOp::create(b, loc, cast<ElementsAttr>(zero));
      ampc::StoreOp::create(b, loc,
                            (name.getValue() + ".accumulated_grad").str(),
                            ampc::WhereOp::create(b, loc, isStep, zeros, sum));
    }

    // The optimizer's and the scaler's stores commit on the N-th call only.
    for (ampc::StoreOp store : stepStores) {
      StringRef target = store.getTarget();
      Operation *symbol = symbols.lookup(target);
      b.setInsertionPointToStart(&step.getBody().front());
      Value old;
      if (isa_and_present<ampc::ParameterOp>(symbol))
        old = ampc::LoadParameterOp::create(b, loc, store.getValue().getType(),
                                            target);
      else
        old = ampc::LoadStateOp::create(b, loc, store.getValue().getType(),
                                        target);
      b.setInsertionPoint(store);
      store.getValueMutable().assign(ampc::WhereOp::create(
          b, store.getLoc(), isStep, store.getValue(), old));
    }
    // The runtime's training info says so (ampc_training_info).
    if (auto hyper =
            module->getAttrOfType<StringAttr>(ampc::kHyperparametersAttr))
      module->setAttr(ampc::kHyperparametersAttr,
                      b.getStringAttr(hyper.getValue() +
                                      " accumulate=" + Twine(microBatches)));
    b.setInsertionPoint(ret);
    ampc::StoreOp::create(
        b, loc, kMicroBatches,
        ampc::WhereOp::create(
            b, loc, isStep,
            ampc::ConstantOp::create(
                b, loc, DenseElementsAttr::get(scalarI64, int64_t(0))),
            count));
  }
};
} // namespace
