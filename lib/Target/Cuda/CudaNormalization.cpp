//===- CudaNormalization.cpp - softmax and layer norm -----------------------===//
//
// Softmax, LogSoftmax, LayerNormalization and its adjoint: a thread per row,
// or a block per row for long rows (launchRows). Batch normalisation is
// with the pools (CudaWindow.cpp): it shares their per-channel layout.
//
//===----------------------------------------------------------------------===//

#include "CudaEmitter.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Target/KernelGeometry.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace ampc::emit;
using namespace ampc::cudagen;
using llvm::formatv;
using llvm::StringRef;

LogicalResult CudaEmitter::emitNormalization(Operation *op,
                                             llvm::raw_ostream &body) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ampc::SoftmaxOp, ampc::LogSoftmaxOp>([&](Operation *) {
        Value in = op->getOperand(0), out = op->getResult(0);
        AxisSplit g = softmaxGeometry(op);
        Type ti = elementOf(in), to = elementOf(out);
        launchRows(op, "softmax",
                   formatv("{0}, {1}, {2}", accumulation(op), codec(ti),
                           codec(to))
                       .str(),
                   g.outer * g.inner, g.size,
                   formatv("{0}, {1}, {2}LL, {3}LL, {4}LL, {5}", name(in),
                           name(out), g.outer, g.size, g.inner,
                           isa<ampc::LogSoftmaxOp>(op))
                       .str(),
                   body);
        return success();
      })
      .Case([&](ampc::LayerNormalizationOp o) -> LogicalResult {
        Value x = o.getInput(), y = o.getOutput();
        Type stash = elementOf(o.getMean()), p = elementOf(o.getScale());
        if (o.getBias() && elementOf(o.getBias()) != p)
          return op->emitError() << "the CUDA target needs Scale and B of one "
                                    "type";
        LayerNormGeometry g = layerNormGeometry(op);
        std::string scale = strided(g.normalized, g.scaleStrides);
        launchRows(op, "layerNorm",
               formatv("{0}, {1}, {2}, {3}, {4}", g.compute,
                       codec(elementOf(x)), codec(elementOf(y)), codec(stash),
                       codec(p))
                   .str(),
               g.outer, g.size,
               formatv("{0}, {1}, {2}, {3}, {4}LL, {5}LL, {6}, {7}, {8}, {9}, "
                       "{10}({11})",
                       name(x), name(y), name(o.getMean()),
                       name(o.getInvStdDev()), g.outer, g.size,
                       name(o.getScale()), scale,
                       o.getBias() ? name(o.getBias()) : "nullptr",
                       o.getBias() ? strided(g.normalized, g.biasStrides)
                                   : scale,
                       g.compute, exactLiteral(o.getEpsilon()))
                   .str(),
               body);
        return success();
      })
      .Case([&](ampc::LayerNormGradOp o) {
        Value x = o.getInput();
        Type stash = elementOf(o.getMean());
        LayerNormGeometry g = layerNormGeometry(op);
        launch(op,
               formatv("ampc::cuda::layerNormGrad<{0}, {1}, {2}, {3}, {4}>",
                       g.compute, codec(elementOf(x)), codec(stash),
                       codec(elementOf(o.getScale())), codec(elementOf(x)))
                   .str(),
               g.outer,
               formatv("{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}LL, {8}LL",
                       name(o.getGrad()), name(x), name(o.getScale()),
                       strided(g.normalized, g.scaleStrides),
                       name(o.getMean()), name(o.getInvStdDev()),
                       name(o.getOutput()), g.outer, g.size)
                   .str(),
               body);
        return success();
      })
      .Default([&](Operation *) -> LogicalResult {
        llvm_unreachable("not an op of this family (emitKernelOp dispatches)");
      });
}
