//===- CudaNormalization.cpp - softmax and layer norm -----------------------===//
//
// Softmax, LogSoftmax, LayerNormalization and its adjoint: a warp per row,
// or a block per row for long rows (launchRows; a thread per row only for
// rows shorter than kCudaWarpRowMinLength). Batch normalisation is
// with the pools (CudaWindow.cpp): it shares their per-channel layout.
//
//===----------------------------------------------------------------------===//

#include "CudaEmitter.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Analysis/KernelGeometry.h"

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
        StringRef c = accumulation(op);
        launchRows(op, "softmax",
                   formatv("{0}, {1}, {2}, {3}", c, codec(ti), codec(to),
                           codec(ti))
                       .str(),
                   g.outer * g.inner, g.size,
                   formatv("{0}, {1}, {2}LL, {3}LL, {4}LL, {5}, {6}(1), "
                           "nullptr, ampc::cuda::Strided{{}",
                           name(in), name(out), g.outer, g.size, g.inner,
                           isa<ampc::LogSoftmaxOp>(op), c)
                       .str(),
                   body);
        return success();
      })
      .Case<ampc::LayerNormalizationOp, ampc::AddLayerNormOp>(
          [&](auto o) -> LogicalResult {
        // ampc.add_layer_norm: the addend's codec and pointer and the sum's
        // pointer before the LayerNorm's arguments (addLayerNorm*).
        constexpr bool add = std::is_same_v<decltype(o), ampc::AddLayerNormOp>;
        Value x = o.getInput(), y = o.getOutput();
        Type stash = elementOf(o.getMean()), p = elementOf(o.getScale());
        if (o.getBias() && elementOf(o.getBias()) != p)
          return op->emitError() << "the CUDA target needs Scale and B of one "
                                    "type";
        LayerNormGeometry g = layerNormGeometry(op);
        std::string scale = strided(g.normalized, g.scaleStrides);
        std::string types =
            formatv("{0}, {1}, {2}, {3}, {4}", g.compute, codec(elementOf(x)),
                    codec(elementOf(y)), codec(stash), codec(p))
                .str();
        std::string inputs = name(x);
        if constexpr (add) {
          types += ", " + codec(elementOf(o.getAddend()));
          inputs += ", " + name(o.getAddend()) + ", " + name(o.getSum());
        }
        launchRows(op, add ? "addLayerNorm" : "layerNorm", types, g.outer,
               g.size,
               formatv("{0}, {1}, {2}, {3}, {4}LL, {5}LL, {6}, {7}, {8}, {9}, "
                       "{10}({11})",
                       inputs, name(y), name(o.getMean()),
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
        std::string types =
            formatv("{0}, {1}, {2}, {3}, {4}, {5}", g.compute,
                    codec(elementOf(x)), codec(stash),
                    codec(elementOf(o.getScale())), codec(elementOf(x)),
                    codec(elementOf(o.getGrad())))
                .str();
        std::string args =
            formatv("{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}LL, {8}LL",
                    name(o.getGrad()), name(x), name(o.getScale()),
                    strided(g.normalized, g.scaleStrides), name(o.getMean()),
                    name(o.getInvStdDev()),
                    o.getParamGrads() > 0 && o.getOutput().use_empty()
                        ? "nullptr"
                        : name(o.getOutput()),
                    g.outer,
                    g.size)
                .str();
        Parallelism p = launchParallelism(op).kind;
        if (o.getParamGrads() == 0) {
          if (p != Parallelism::RowByThread)
            args += ", nullptr";
          launchRows(op, "layerNormGrad", types, g.outer, g.size, args, body);
          return success();
        }
        // dX and each row group's shares of the Scale and B adjoints in one
        // kernel (ampc-fuse-layer-norm-grad), a group per leaf of the CPU's
        // pairwise sum over the rows, then the leaves added as the CPU adds
        // them (cudaLayerNormGradGroups, recorded as `groups`).
        int64_t groups = launchInt(op, "groups");
        bool byBlock = p == Parallelism::RowByBlock;
        std::string partials = scratch(op, "partials", g.compute);
        launch(op,
               formatv("ampc::cuda::layerNormGrad{0}<{1}>",
                       byBlock ? "ByBlock" : "ByWarp", types)
                   .str(),
               g.outer, args + ", " + partials, body,
               formatv("{0}u", byBlock ? groups : groups / kWarpsPerBlock)
                   .str());
        ValueRange params = o.getGradParams();
        Type pt = elementOf(params[0]);
        launch(op,
               formatv("ampc::cuda::layerNormParamGrad<{0}, {1}, {1}>",
                       g.compute, codec(pt))
                   .str(),
               g.size,
               formatv("{0}, {1}LL, {2}LL, {3}, {4}", partials, g.outer, g.size,
                       name(params[0]),
                       params.size() > 1 ? name(params[1]) : "nullptr")
                   .str(),
               body);
        return success();
      })
      .Default([&](Operation *) -> LogicalResult {
        llvm_unreachable("not an op of this family (emitKernelOp dispatches)");
      });
}
