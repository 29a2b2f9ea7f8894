//===- RunningStatistics.cpp - BatchNorm's running statistics as state ----===//
//
// torch.nn.BatchNorm keeps running_mean and running_var as buffers that
// every training-mode forward updates; an ONNX export has them as
// initializers, which the importer makes parameters. This pass makes them
// state of the same name that @train_step writes (skipped with the rest of
// the step on overflow) and @forward reads.
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

    // The step stores the new values last; an overflow keeps the old ones.
    Value foundInf = ampc::findFoundInf(step);
    Operation *ret = step.getBody().front().getTerminator();
    b.setInsertionPoint(ret);
    for (auto &[name, update] : updates) {
      auto [bn, next] = update;
      Value old = next == bn.getRunningMean() ? bn.getInputMean()
                                              : bn.getInputVar();
      Value value = next;
      if (foundInf)
        value = ampc::WhereOp::create(b, bn.getLoc(), foundInf, old, next);
      ampc::StoreOp::create(b, bn.getLoc(), name.getValue(), value);
    }
  }
};
} // namespace
