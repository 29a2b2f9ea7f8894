//===- RunningStatistics.cpp - BatchNorm's running statistics as state ----===//
//
// torch.nn.BatchNorm keeps running_mean and running_var as buffers that
// every training-mode forward updates; an ONNX export has them as
// initializers, which the importer makes parameters. This pass makes them
// state of the same name that @train_step writes and @forward reads. Like
// torch's, they are updated by every step's forward, also on a step whose
// optimizer update the loss scaler skips (GradScaler skips
// optimizer.step(), not the forward).
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"
#include "ampc/Transforms/Training.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace ampc {
#define GEN_PASS_DEF_RUNNINGSTATISTICSPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {
struct RunningStatisticsPass
    : ampc::impl::RunningStatisticsPassBase<RunningStatisticsPass> {
  using Base::Base;

  /// torch's BatchNorm counts its training-mode batches in the buffer
  /// PREFIX.num_batches_tracked beside PREFIX.running_mean; the export
  /// drops it (no ONNX op reads it), the library keeps it as an i64 state
  /// every step increments with the statistics, so that state_dict() has
  /// every entry torch's has.
  void countBatches(
      SymbolTable &symbols, func::FuncOp step,
      const llvm::MapVector<StringAttr,
                            std::pair<ampc::BatchNormalizationOp, Value>>
          &updates) {
    OpBuilder b(&getContext());
    auto scalar = RankedTensorType::get({}, b.getI64Type());
    Operation *ret = step.getBody().front().getTerminator();
    for (auto &[name, update] : updates) {
      StringRef mean = name.getValue();
      auto [bn, next] = update;
      if (next != bn.getRunningMean() || !mean.ends_with("running_mean"))
        continue;
      std::string counter =
          (mean.drop_back(StringRef("running_mean").size()) +
           "num_batches_tracked")
              .str();
      if (symbols.lookup(counter))
        continue;
      Value count = ampc::declareState(
          symbols, step, counter,
          DenseElementsAttr::get(scalar, b.getI64IntegerAttr(0)));
      symbols.lookup(counter)->setAttr(ampc::kBufferAttr, b.getUnitAttr());
      b.setInsertionPoint(ret);
      Value one = ampc::ConstantOp::create(
          b, bn.getLoc(), DenseElementsAttr::get(scalar, b.getI64IntegerAttr(1)));
      Value value = ampc::AddOp::create(b, bn.getLoc(), count, one);
      ampc::StoreOp::create(b, bn.getLoc(), counter, value);
    }
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>(ampc::kTrainStep);
    if (!step)
      return;
    // Each running statistic: the op that updates it and its new value.
    llvm::MapVector<StringAttr, std::pair<ampc::BatchNormalizationOp, Value>>
        updates;
    WalkResult walk = step.walk([&](ampc::BatchNormalizationOp bn) {
      if (!bn.getTrainingMode())
        return WalkResult::advance();
      auto mean = bn.getInputMean().getDefiningOp<ampc::LoadParameterOp>();
      auto var = bn.getInputVar().getDefiningOp<ampc::LoadParameterOp>();
      if (!mean || !var)
        return WalkResult::advance(); // Computed statistics: nothing to keep.
      bn.setUnbiasedRunningVar(true);
      for (auto [load, result] :
           {std::pair{mean, bn.getRunningMean()}, {var, bn.getRunningVar()}}) {
        StringAttr name = load.getParameterAttr().getAttr();
        auto [it, inserted] = updates.try_emplace(name, bn, result);
        if (!inserted) {
          bn.emitError() << "the running statistic '" << name.getValue()
                         << "' is also updated by another BatchNormalization "
                            "node; give each node its own (do not pass "
                            "--tie-initializers)";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    if (updates.empty())
      return;

    // The parameters become state, read with load_state everywhere.
    OpBuilder b(&getContext());
    SymbolTable symbols(module);
    for (auto &[name, update] : updates) {
      auto param = symbols.lookup<ampc::ParameterOp>(name);
      b.setInsertionPoint(param);
      auto state = ampc::StateOp::create(b, param.getLoc(), name.getValue(),
                                         param.getType(),
                                         param.getInitialValue(), nullptr);
      state->setAttr(ampc::kBufferAttr, b.getUnitAttr());
      symbols.erase(param);
      symbols.insert(state, Block::iterator(state));
    }
    SmallVector<ampc::LoadParameterOp> loads;
    module.walk([&](ampc::LoadParameterOp load) {
      if (updates.contains(load.getParameterAttr().getAttr()))
        loads.push_back(load);
    });
    for (ampc::LoadParameterOp load : loads) {
      b.setInsertionPoint(load);
      auto state = ampc::LoadStateOp::create(b, load.getLoc(), load.getType(),
                                             load.getParameterAttr());
      load.replaceAllUsesWith(state.getOutput());
      load.erase();
    }

    // The step stores the new values last, whether or not the scaler
    // skips its optimizer update, as torch's forward updates them.
    Operation *ret = step.getBody().front().getTerminator();
    countBatches(symbols, step, updates);
    b.setInsertionPoint(ret);
    for (auto &[name, update] : updates) {
      auto [bn, next] = update;
      ampc::StoreOp::create(b, bn.getLoc(), name.getValue(), next);
    }
  }
};
} // namespace
