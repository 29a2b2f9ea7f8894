//===- CudaWindow.cpp - pooling and batch norm ------------------------------===//
//
// Max and average pooling, batch normalisation and their adjoints, on the
// templated kernels of CudaKernels.cuh (a thread per output element; the
// batch statistics and the adjoint's per-channel sums split over blocks,
// then combined per channel in order).
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

/// A grid of `blocks` blocks, each looping over its share of the work when
/// there are more (the launch limit).
static std::string blockGrid(int64_t blocks) {
  return formatv("{0}u", std::min(blocks, kMaxRowBlocks)).str();
}

void CudaEmitter::emitChannelStatistics(Operation *op, Value x,
                                        StringRef mean, StringRef var,
                                        llvm::raw_ostream &body) {
  BatchNormGeometry g = batchNormGeometry(op);
  int64_t splits = cudaBatchNormSplits(g);
  std::string threads = std::to_string(cudaBatchNormThreads(g));
  std::string partials = scratch(op, "partials", g.compute);
  for (StringRef squares : {"false", "true"})
    launch(op,
           formatv("ampc::cuda::channelSums<{0}, {1}>", g.compute,
                   codec(elementOf(x)))
               .str(),
           g.channels * splits,
           formatv("{0}, {1}LL, {2}LL, {3}LL, {4}LL, {5}, {6}", name(x), g.n,
                   g.channels, g.inner, splits, partials, squares)
               .str(),
           body, blockGrid(g.channels * splits), threads);
  launch(op, formatv("ampc::cuda::channelCombine<{0}>", g.compute).str(),
         g.channels,
         formatv("{0}, {1}LL, {2}LL, {3}LL, {4}LL, {5}, {6}", partials, g.n,
                 g.channels, g.inner, splits, mean, var)
             .str(),
         body, blockGrid(g.channels), threads);
}

LogicalResult CudaEmitter::emitWindowOp(Operation *op,
                                        llvm::raw_ostream &body) {
  // The pools' window; batch normalisation has none.
  WindowGeometry pool;
  if (!isa<ampc::BatchNormalizationOp, ampc::BatchNormGradOp>(op))
    pool = windowGeometry(op);
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ampc::MaxPoolOp o) {
        Type ti = elementOf(o.getInput()), to = elementOf(o.getOutput());
        launch(op,
               formatv("ampc::cuda::maxPool<{0}, {1}, {2}>",
                       accumulation(op), codec(ti), codec(to))
                   .str(),
               tensorOf(o.getOutput()).getNumElements(),
               formatv("{0}, {1}, {2}, {3}LL, {4}, {5}", name(o.getInput()),
                       name(o.getOutput()),
                       o.getIndices() ? name(o.getIndices()) : "nullptr",
                       pool.planes, window(pool),
                       o.getStorageOrder() != 0)
                   .str(),
               body);
        return success();
      })
      .Case([&](ampc::AveragePoolOp o) {
        Type ti = elementOf(o.getInput()), to = elementOf(o.getOutput());
        launch(op,
               formatv("ampc::cuda::averagePool<{0}, {1}, {2}>",
                       accumulation(op), codec(ti), codec(to))
                   .str(),
               tensorOf(o.getOutput()).getNumElements(),
               formatv("{0}, {1}, {2}LL, {3}, {4}", name(o.getInput()),
                       name(o.getOutput()), pool.planes, window(pool),
                       o.getCountIncludePad() != 0)
                   .str(),
               body);
        return success();
      })
      .Case([&](ampc::MaxPoolGradOp o) {
        Type t = elementOf(o.getGrad());
        StringRef acc = accumulation(op);
        int64_t count = tensorOf(o.getOutput()).getNumElements();
        std::string sum = scratch(op, "acc", acc);
        body << formatv("  AMPC_CUDA(ctx, cudaMemsetAsync({0}, 0, {1}ULL, "
                        "ctx.stream), {2});\n",
                        sum, count * (acc == "double" ? 8 : 4), where(op));
        launch(op,
               formatv("ampc::cuda::maxPoolGrad<{0}, {1}>", acc, codec(t)).str(),
               tensorOf(o.getGrad()).getNumElements(),
               formatv("{0}, {1}, {2}, {3}LL, {4}LL, {5}, {6}",
                       name(o.getGrad()), name(o.getIndices()), sum,
                       pool.planes, product(pool.out), window(pool),
                       o.getStorageOrder() != 0)
                   .str(),
               body);
        launch(op,
               formatv("ampc::cuda::convert<{0}, {1}>", acc, codec(t)).str(),
               count, formatv("{0}, {1}, {2}LL", sum, name(o.getOutput()), count).str(),
               body);
        return success();
      })
      .Case([&](ampc::AveragePoolGradOp o) {
        Type t = elementOf(o.getGrad());
        launch(op,
               formatv("ampc::cuda::averagePoolGrad<{0}, {1}, {1}>",
                       accumulation(op), codec(t))
                   .str(),
               tensorOf(o.getOutput()).getNumElements(),
               formatv("{0}, {1}, {2}LL, {3}, {4}", name(o.getGrad()),
                       name(o.getOutput()), pool.planes, window(pool),
                       o.getCountIncludePad() != 0)
                   .str(),
               body);
        return success();
      })
      .Case([&](ampc::BatchNormalizationOp o) -> LogicalResult {
        Value x = o.getInput();
        Type p = elementOf(o.getScale());
        for (Value v : {o.getBias(), o.getInputMean(), o.getInputVar()})
          if (elementOf(v) != p)
            return op->emitError() << "the CUDA target needs scale, B, mean "
                                      "and var of one type";
        BatchNormGeometry g = batchNormGeometry(op);
        int64_t n = g.n, c = g.channels, inner = g.inner;
        StringRef acc = g.compute;
        std::string mean = "nullptr", var = "nullptr";
        if (o.getTrainingMode()) {
          mean = scratch(op, "mean", acc);
          var = scratch(op, "variance", acc);
          emitChannelStatistics(op, x, mean, var, body);
        }
        launch(op,
               formatv("ampc::cuda::batchNorm<{0}, {1}, {2}, {3}, {4}>", acc,
                       codec(elementOf(x)), codec(elementOf(o.getOutput())),
                       codec(p), codec(elementOf(o.getRunningMean())))
                   .str(),
               tensorOf(x).getNumElements(),
               formatv("{0}, {1}, {2}LL, {3}LL, {4}LL, {5}, {6}, {7}, {8}, {9}, "
                       "{10}, {11}({12}), {11}({13:e17}), {11}({16:e17}), "
                       "{14}, {15}",
                       name(x), name(o.getOutput()), n, c, inner,
                       name(o.getScale()), name(o.getBias()),
                       name(o.getInputMean()), name(o.getInputVar()), mean, var,
                       acc, exactLiteral(o.getEpsilon()),
                       o.getMomentum().convertToDouble(),
                       name(o.getRunningMean()), name(o.getRunningVar()),
                       o.runningVarianceFactor())
                   .str(),
               body);
        return success();
      })
      .Case([&](ampc::BatchNormGradOp o) -> LogicalResult {
        Value x = o.getInput();
        Type p = elementOf(o.getScale());
        if ((o.getMean() && elementOf(o.getMean()) != p) ||
            (o.getVar() && elementOf(o.getVar()) != p))
          return op->emitError() << "the CUDA target needs scale, mean and "
                                    "var of one type";
        BatchNormGeometry g = batchNormGeometry(op);
        StringRef acc = g.compute;
        int64_t splits = cudaBatchNormSplits(g);
        std::string threads = std::to_string(cudaBatchNormThreads(g));
        // Training mode: the batch statistics first, as the forward has them.
        std::string mean = "nullptr", var = "nullptr";
        if (!o.getMean()) {
          mean = scratch(op, "mean", acc);
          var = scratch(op, "variance", acc);
          emitChannelStatistics(op, x, mean, var, body);
        }
        std::string inputMean = o.getMean() ? name(o.getMean()) : "nullptr";
        std::string inputVar = o.getVar() ? name(o.getVar()) : "nullptr";
        std::string epsilon =
            formatv("{0}({1})", acc, exactLiteral(o.getEpsilon())).str();
        std::string partials = scratch(op, "partials", acc);
        std::string sums = scratch(op, "sums", acc);
        launch(op,
               formatv("ampc::cuda::batchNormGradPartials<{0}, {1}, {2}>", acc,
                       codec(elementOf(x)), codec(p))
                   .str(),
               g.channels * splits,
               formatv("{0}, {1}, {2}LL, {3}LL, {4}LL, {5}LL, {6}, {7}, {8}, "
                       "{9}, {10}, {11}",
                       name(o.getGrad()), name(x), g.n, g.channels, g.inner,
                       splits, mean, var, inputMean, inputVar, epsilon,
                       partials)
                   .str(),
               body, blockGrid(g.channels * splits), threads);
        launch(op,
               formatv("ampc::cuda::batchNormGradCombine<{0}, {1}>", acc,
                       codec(elementOf(o.getGradScale())))
                   .str(),
               g.channels,
               formatv("{0}, {1}LL, {2}LL, {3}, {4}, {5}", partials, g.channels,
                       splits, sums, name(o.getGradScale()),
                       name(o.getGradBias()))
                   .str(),
               body, blockGrid(g.channels), threads);
        launch(op,
               formatv("ampc::cuda::batchNormGradInput<{0}, {1}, {2}, {3}>",
                       acc, codec(elementOf(x)),
                       codec(elementOf(o.getGradInput())), codec(p))
                   .str(),
               tensorOf(x).getNumElements(),
               formatv("{0}, {1}, {2}, {3}LL, {4}LL, {5}LL, {6}, {7}, {8}, "
                       "{9}, {10}, {11}, {12}",
                       name(o.getGrad()), name(x), name(o.getGradInput()), g.n,
                       g.channels, g.inner, name(o.getScale()), mean, var,
                       inputMean, inputVar, epsilon, sums)
                   .str(),
               body);
        return success();
      })
      .Default([&](Operation *) { return failure(); });
}
