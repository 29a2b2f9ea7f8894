//===- InsertLossScaling.cpp - dynamic loss scaling of @train_step --------===//
//
// torch.amp.GradScaler compiled into the step (REFERENCE.md 3): seed the
// backward with the scale, unscale every gradient with one fused pass that
// also finds non-finite values, and update the scale on the device that
// runs the step. The optimizer (ampc-attach-optimizer) reads found_inf.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"
#include "ampc/Transforms/Training.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace ampc {
#define GEN_PASS_DEF_INSERTLOSSSCALINGPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {
struct InsertLossScalingPass
    : ampc::impl::InsertLossScalingPassBase<InsertLossScalingPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(ampc::checkEnumOption(mode, module.getLoc(), getArgument())))
      return signalPassFailure();
    if (mode == ampc::LossScalingMode::None)
      return;
    if (!(initScale > 0) || !std::isfinite(initScale) ||
        !(growthFactor > 1) || !(backoffFactor > 0 && backoffFactor < 1) ||
        growthInterval < 1 || minScale < 0 || maxScale < 0 ||
        (maxScale > 0 && maxScale < minScale) ||
        (maxScale > 0 && initScale > maxScale) ||
        (minScale > 0 && initScale < minScale)) {
      module.emitError()
          << "ampc-insert-loss-scaling: expected init-scale > 0, "
             "growth-factor > 1, 0 < backoff-factor < 1, growth-interval >= "
             "1 and 0 <= min-scale <= init-scale <= max-scale (0: no "
             "bound)";
      return signalPassFailure();
    }
    auto step = module.lookupSymbol<func::FuncOp>(ampc::kTrainStep);
    if (!step) {
      module.emitError() << "ampc-insert-loss-scaling: no @train_step (run "
                            "ampc-autodiff first)";
      return signalPassFailure();
    }
    // Without a trainable parameter there is no backward to scale.
    ampc::Seed seed = ampc::findLossSeed(step);
    if (!seed.op || ampc::gradientResults(step).empty())
      return;
    Location loc = step.getLoc();
    OpBuilder b(module.getContext());
    MLIRContext *ctx = module.getContext();
    Type f32 = Float32Type::get(ctx);
    Value scale = ampc::declareState(
        module, step, ampc::kLossScale,
        DenseElementsAttr::get(RankedTensorType::get({}, f32),
                               static_cast<float>(initScale)));

    // Seed with the scale times the seed, in the seed's dtype. The seed
    // stays, marked, for ampc-accumulate-gradients to make it 1/N; the
    // canonicalizer folds the product by 1.
    Value seedValue = seed.op->getResult(0);
    b.setInsertionPointAfter(seed.op);
    Value scaledSeed = scale;
    if (seedValue.getType() != scale.getType())
      scaledSeed = ampc::CastOp::create(b, seed.op->getLoc(),
                                        seedValue.getType(), scale);
    auto product =
        ampc::MulOp::create(b, seed.op->getLoc(), scaledSeed, seedValue);
    seedValue.replaceAllUsesExcept(product, product);

    // Unscale every gradient result in one op.
    auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
    SmallVector<unsigned> gradientResults = ampc::gradientResults(step);
    SmallVector<Value> grads;
    for (unsigned i : gradientResults)
      grads.push_back(ret.getOperand(i));
    b.setInsertionPoint(ret);
    SmallVector<Type> types;
    for (Value g : grads)
      types.push_back(g.getType());
    types.push_back(RankedTensorType::get({}, b.getI1Type()));
    auto unscale = ampc::UnscaleOp::create(b, loc, types, scale, grads,
                                           /*channels_last=*/nullptr);
    for (auto [k, i] : llvm::enumerate(gradientResults))
      ret.setOperand(i, unscale.getUnscaled()[k]);
    Value foundInf = unscale.getFoundInf();

    module->setAttr(ampc::kLossScalingAttr,
                    ampc::LossScalingModeAttr::get(ctx, mode));

    // The scale update (dynamic) and the skipped-step count, stored at the
    // end; a static scale counts skipped steps too (the host's step position
    // is steps + skipped steps).
    Type i32 = b.getI32Type(), i64 = b.getI64Type();
    Value tracker;
    if (mode == ampc::LossScalingMode::Dynamic)
      tracker = ampc::declareState(
          module, step, ampc::kGrowthTracker,
          DenseElementsAttr::get(RankedTensorType::get({}, i32), int32_t(0)));
    Value skipped = ampc::declareState(
        module, step, ampc::kSkippedSteps,
        DenseElementsAttr::get(RankedTensorType::get({}, i64), int64_t(0)));
    b.setInsertionPoint(ret);
    ampc::UpdateScaleOp update;
    if (tracker)
      update = ampc::UpdateScaleOp::create(
          b, loc, scale, tracker, foundInf, b.getF32FloatAttr(growthFactor),
          b.getF32FloatAttr(backoffFactor),
          b.getI64IntegerAttr(growthInterval), b.getF32FloatAttr(minScale),
          b.getF32FloatAttr(maxScale));
    Value counted = ampc::countIf(b, loc, skipped, foundInf, /*when=*/true);
    if (update) {
      ampc::StoreOp::create(b, loc, ampc::kLossScale, update.getNewScale());
      ampc::StoreOp::create(b, loc, ampc::kGrowthTracker,
                            update.getNewGrowthTracker());
    }
    ampc::StoreOp::create(b, loc, ampc::kSkippedSteps, counted);
  }
};
} // namespace
