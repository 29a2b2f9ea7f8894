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
        // A gather per input element (no zeroed accumulator, no atomics,
        // no convert).
        Type t = elementOf(o.getGrad());
        launch(op,
               formatv("ampc::cuda::maxPoolGrad<{0}, {1}, {1}>",
                       accumulation(op), codec(t))
                   .str(),
               tensorOf(o.getOutput()).getNumElements(),
               formatv("{0}, {1}, {2}, {3}LL, {4}, {5}", name(o.getGrad()),
                       name(o.getIndices()), name(o.getOutput()), pool.planes,
                       window(pool), o.getStorageOrder() != 0)
                   .str(),
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
        StringRef acc = g.compute;
        Value savedMean = o.getSavedMean();
        std::string types =
            formatv("{0}, {1}, {2}, {3}, {4}, {5}", acc, codec(elementOf(x)),
                    codec(elementOf(o.getOutput())), codec(p),
                    codec(elementOf(o.getRunningMean())),
                    codec(savedMean ? elementOf(savedMean) : p))
                .str();
        std::string saved =
            savedMean ? name(savedMean) + ", " + name(o.getSavedInvStdDev())
                      : "nullptr, nullptr";
        std::string epsilon =
            formatv("{0}({1})", acc, exactLiteral(o.getEpsilon())).str();
        std::string parameters =
            formatv("{0}, {1}, {2}, {3}", name(o.getScale()),
                    name(o.getBias()), name(o.getInputMean()),
                    name(o.getInputVar()))
                .str();
        if (!o.getTrainingMode()) {
          launch(op, "ampc::cuda::batchNorm<" + types + ">",
                 tensorOf(x).getNumElements(),
                 formatv("{0}, {1}, {2}LL, {3}LL, {4}LL, {5}, {6}, {7}, {8}, "
                         "{9}",
                         name(x), name(o.getOutput()), g.n, g.channels, g.inner,
                         parameters, epsilon, name(o.getRunningMean()),
                         name(o.getRunningVar()), saved)
                     .str(),
                 body);
          return success();
        }
        // Training mode: each block's node of the channel's moments, then
        // the apply in the same grid (CudaKernels.cuh, batchNormPartials).
        int64_t splits = cudaBatchNormSplits(g);
        std::string threads = std::to_string(cudaBatchNormThreads(g));
        std::string partials = scratch(op, "partials", acc);
        std::string grid = blockGrid(g.channels * splits);
        launch(op,
               formatv("ampc::cuda::batchNormPartials<{0}, {1}>", acc,
                       codec(elementOf(x)))
                   .str(),
               g.channels * splits,
               formatv("{0}, {1}LL, {2}LL, {3}LL, {4}LL, {5}", name(x), g.n,
                       g.channels, g.inner, splits, partials)
                   .str(),
               body, grid, threads);
        launch(op, "ampc::cuda::batchNormApply<" + types + ">",
               g.channels * splits,
               formatv("{0}, {1}, {2}LL, {3}LL, {4}LL, {5}LL, {6}, {7}, {8}, "
                       "{9}({10:e17}), {9}({11:e17}), {12}, {13}, {14}",
                       name(x), name(o.getOutput()), g.n, g.channels, g.inner,
                       splits, partials, parameters, epsilon, acc,
                       o.getMomentum().convertToDouble(),
                       o.runningVarianceFactor(), name(o.getRunningMean()),
                       name(o.getRunningVar()), saved)
                   .str(),
               body, grid, threads);
        return success();
      })
      .Case([&](ampc::BatchNormGradOp o) -> LogicalResult {
        Value x = o.getInput();
        Type p = elementOf(o.getScale()), v = elementOf(o.getMean());
        BatchNormGeometry g = batchNormGeometry(op);
        StringRef acc = g.compute;
        int64_t splits = cudaBatchNormSplits(g);
        std::string threads = std::to_string(cudaBatchNormThreads(g));
        std::string partials = scratch(op, "partials", acc);
        std::string grid = blockGrid(g.channels * splits);
        std::string statistics =
            name(o.getMean()) + ", " + name(o.getInvStdDev());
        launch(op,
               formatv("ampc::cuda::batchNormGradPartials<{0}, {1}, {2}>", acc,
                       codec(elementOf(x)), codec(v))
                   .str(),
               g.channels * splits,
               formatv("{0}, {1}, {2}LL, {3}LL, {4}LL, {5}LL, {6}, {7}",
                       name(o.getGrad()), name(x), g.n, g.channels, g.inner,
                       splits, statistics, partials)
                   .str(),
               body, grid, threads);
        launch(op,
               formatv("ampc::cuda::batchNormGradInput<{0}, {1}, {2}, {3}, "
                       "{4}, {5}>",
                       acc, codec(elementOf(x)),
                       codec(elementOf(o.getGradInput())), codec(p), codec(v),
                       codec(elementOf(o.getGradScale())))
                   .str(),
               g.channels * splits,
               formatv("{0}, {1}, {2}, {3}LL, {4}LL, {5}LL, {6}LL, {7}, {8}, "
                       "{9}, {10}, {11}, {12}",
                       name(o.getGrad()), name(x), name(o.getGradInput()), g.n,
                       g.channels, g.inner, splits, partials,
                       name(o.getScale()), statistics,
                       o.getTrainingMode() != 0 ? "true" : "false",
                       name(o.getGradScale()), name(o.getGradBias()))
                   .str(),
               body, grid, threads);
        return success();
      })
      .Default([&](Operation *) { return failure(); });
}
