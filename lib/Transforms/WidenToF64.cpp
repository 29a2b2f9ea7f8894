//===- WidenToF64.cpp - every f32 tensor becomes f64 ----------------------===//
//
// `--precision=fp64` (Passes.td, WidenToF64Pass): the model as imported,
// with every FP32 tensor (inputs, results, parameters, constants, every
// intermediate) in FP64, for finite-difference gradient checks.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace ampc {
#define GEN_PASS_DEF_WIDENTOF64PASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

Type widen(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.getElementType().isF32())
    return type;
  return tensor.clone(Float64Type::get(type.getContext()));
}

/// `value` with its f32 elements converted (exactly) to f64.
Attribute widenValue(Attribute value) {
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (!dense || !dense.getElementType().isF32())
    return value;
  return dense.mapValues(Float64Type::get(value.getContext()),
                         [](const APFloat &f) {
                           APFloat d = f;
                           bool lost;
                           d.convert(APFloat::IEEEdouble(),
                                     APFloat::rmNearestTiesToEven, &lost);
                           return d.bitcastToAPInt();
                         });
}

struct WidenToF64 : ampc::impl::WidenToF64PassBase<WidenToF64> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    bool failedToWiden = false;
    module.walk([&](Operation *op) {
      if (auto param = dyn_cast<ampc::ParameterOp>(op)) {
        if (!isa<DenseElementsAttr>(param.getInitialValue()) &&
            cast<ShapedType>(param.getType()).getElementType().isF32()) {
          param.emitError() << "cannot widen a parameter whose value is not "
                               "dense";
          failedToWiden = true;
          return;
        }
        param.setType(cast<RankedTensorType>(widen(param.getType())));
        param.setInitialValueAttr(
            cast<ElementsAttr>(widenValue(param.getInitialValue())));
        return;
      }
      if (auto func = dyn_cast<func::FuncOp>(op)) {
        auto type = func.getFunctionType();
        SmallVector<Type> inputs, results;
        for (Type t : type.getInputs())
          inputs.push_back(widen(t));
        for (Type t : type.getResults())
          results.push_back(widen(t));
        func.setFunctionType(
            FunctionType::get(op->getContext(), inputs, results));
        for (Block &block : func.getBody())
          for (BlockArgument arg : block.getArguments())
            arg.setType(widen(arg.getType()));
        return;
      }
      if (auto constant = dyn_cast<ampc::ConstantOp>(op))
        constant.setValueAttr(cast<ElementsAttr>(widenValue(constant.getValue())));
      // Statistics stashed in FP32 (ONNX code 1) are stashed in FP64.
      if (auto norm = dyn_cast<ampc::LayerNormalizationOp>(op))
        if (norm.getStashType() == 1)
          norm.setStashType(11);
      for (Region &region : op->getRegions())
        for (Block &block : region)
          for (BlockArgument arg : block.getArguments())
            arg.setType(widen(arg.getType()));
      for (OpResult result : op->getResults())
        result.setType(widen(result.getType()));
    });
    if (failedToWiden)
      signalPassFailure();
  }
};

} // namespace
