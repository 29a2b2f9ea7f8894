//===- CudaWindow.cpp - pooling and batch norm
//------------------------------===//
//
// Max and average pooling, batch normalisation and their adjoints, on the
// templated kernels of CudaKernels.cuh (a thread per output element; the
// batch statistics and the adjoint's per-channel sums split over work
// items, then combined per channel in order after a grid barrier: one
// cooperative launch each).
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

LogicalResult CudaEmitter::emitWindowOp(Operation *op,
                                        llvm::raw_ostream &body) {
  // --sync-batchnorm is the CPU target's only (the option refuses
  // --target=cuda; this catches an ampc-opt pipeline).
  if (op->hasAttr(ampc::kSyncRequestAttr))
    return op->emitError() << "the CUDA target does not synchronise "
                              "BatchNorm over the ranks yet "
                              "(--sync-batchnorm needs --target=cpu)";
  // The pools' window; batch normalisation has none.
  WindowGeometry pool;
  if (!isa<ampc::BatchNormalizationOp, ampc::BatchNormGradOp>(op))
    pool = windowGeometry(op);
  // The pools' layout (the kernels' `channels`): 0 NCHW, C for
  // channels_last (NHWC; MaxPool's Indices then NHWC flat indices, row-major
  // only).
  int64_t channels = pool.channels;
  auto rowMajor = [&](int64_t storageOrder) -> LogicalResult {
    if (channels && storageOrder != 0)
      return op->emitError() << "a channels_last max pool takes no "
                                "column-major storage_order";
    return success();
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ampc::MaxPoolOp o) -> LogicalResult {
        if (failed(rowMajor(o.getStorageOrder())))
          return failure();
        Type ti = elementOf(o.getInput()), to = elementOf(o.getOutput());
        launch(op,
               formatv("ampc::cuda::maxPool<{0}, {1}, {2}>",
                       accumulation(op), codec(ti), codec(to))
                   .str(),
               tensorOf(o.getOutput()).getNumElements(),
               formatv("{0}, {1}, {2}, {3}LL, {4}, {5}, {6}LL",
                       name(o.getInput()), name(o.getOutput()),
                       o.getIndices() ? name(o.getIndices()) : "nullptr",
                       pool.planes, window(pool), o.getStorageOrder() != 0,
                       channels)
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
               formatv("{0}, {1}, {2}LL, {3}, {4}, {5}LL", name(o.getInput()),
                       name(o.getOutput()), pool.planes, window(pool),
                       o.getCountIncludePad() != 0, channels)
                   .str(),
               body);
        return success();
      })
      .Case([&](ampc::MaxPoolGradOp o) -> LogicalResult {
        if (failed(rowMajor(o.getStorageOrder())))
          return failure();
        // A gather per input element (no zeroed accumulator, no atomics,
        // no convert).
        Type t = elementOf(o.getGrad());
        launch(op,
               formatv("ampc::cuda::maxPoolGrad<{0}, {1}, {1}>",
                       accumulation(op), codec(t))
                   .str(),
               tensorOf(o.getOutput()).getNumElements(),
               formatv("{0}, {1}, {2}, {3}LL, {4}, {5}, {6}LL",
                       name(o.getGrad()), name(o.getIndices()),
                       name(o.getOutput()), pool.planes, window(pool),
                       o.getStorageOrder() != 0, channels)
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
               formatv("{0}, {1}, {2}LL, {3}, {4}, {5}LL", name(o.getGrad()),
                       name(o.getOutput()), pool.planes, window(pool),
                       o.getCountIncludePad() != 0, channels)
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
        // The epilogue (ampc-fuse-batch-norm-epilogue): the residual's
        // codec and the compute type it is added in; the residual and ReLU.
        Type y = elementOf(o.getOutput());
        Value residual = o.getResidual();
        std::string types =
            formatv("{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}", acc,
                    codec(elementOf(x)), codec(y), codec(p),
                    codec(elementOf(o.getRunningMean())),
                    codec(savedMean ? elementOf(savedMean) : p),
                    codec(residual ? elementOf(residual) : y), computeType(y))
                .str();
        std::string epilogue =
            formatv("{0}, {1}", residual ? name(residual) : "nullptr",
                    o.getRelu() ? "true" : "false")
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
                         "{9}, {10}",
                         name(x), name(o.getOutput()), g.n, g.channels, g.inner,
                         parameters, epsilon, name(o.getRunningMean()),
                         name(o.getRunningVar()), saved, epilogue)
                     .str(),
                 body);
          return success();
        }
        // Training mode: each work item's node of the channel's moments, a
        // grid barrier, then the apply, in one cooperative launch
        // (CudaKernels.cuh, batchNormTrain).
        int64_t splits = launchInt(op, "splits");
        launchCooperative(
            op, "ampc::cuda::batchNormTrain<" + types + ">",
            g.channels * splits,
            formatv("{0}, {1}, {2}LL, {3}LL, {4}LL, {5}LL, {6}, {7}, {8}, "
                    "{9}({10:e17}), {9}({11:e17}), {12}, {13}, {14}, {15}",
                    name(x), name(o.getOutput()), g.n, g.channels, g.inner,
                    splits, scratch(op, "partials", acc), parameters, epsilon,
                    acc, o.getMomentum().convertToDouble(),
                    o.runningVarianceFactor(), name(o.getRunningMean()),
                    name(o.getRunningVar()), saved, epilogue)
                .str(),
            body, std::to_string(launchInt(op, "threads")));
        return success();
      })
      .Case([&](ampc::BatchNormGradOp o) -> LogicalResult {
        Value x = o.getInput();
        Type p = elementOf(o.getScale()), v = elementOf(o.getMean());
        BatchNormGeometry g = batchNormGeometry(op);
        StringRef acc = g.compute;
        // The work items' sums, a grid barrier, then the input gradient, in
        // one cooperative launch (CudaKernels.cuh, batchNormGrad).
        int64_t splits = launchInt(op, "splits");
        // The prologue (ampc-fuse-batch-norm-epilogue): the addend, the
        // ReLU's Y and the kept gradient (or nullptr), added in X's
        // elementwise compute type.
        auto orNull = [&](Value value) {
          return value ? name(value) : std::string("nullptr");
        };
        launchCooperative(
            op,
            formatv("ampc::cuda::batchNormGrad<{0}, {1}, {2}, {3}, {4}, {5}, "
                    "{6}>",
                    acc, codec(elementOf(x)),
                    codec(elementOf(o.getGradInput())), codec(p), codec(v),
                    codec(elementOf(o.getGradScale())),
                    computeType(elementOf(x)))
                .str(),
            g.channels * splits,
            formatv("{0}, {1}, {2}, {3}LL, {4}LL, {5}LL, {6}LL, {7}, {8}, "
                    "{9}, {10}, {11}, {12}, {13}, {14}, {15}, {16}",
                    name(o.getGrad()), name(x), name(o.getGradInput()), g.n,
                    g.channels, g.inner, splits, scratch(op, "partials", acc),
                    name(o.getScale()), name(o.getMean()),
                    name(o.getInvStdDev()),
                    o.getTrainingMode() != 0 ? "true" : "false",
                    name(o.getGradScale()), name(o.getGradBias()),
                    orNull(o.getAddend()), orNull(o.getReluOutput()),
                    orNull(o.getKeptGrad()))
                .str(),
            body, std::to_string(launchInt(op, "threads")));
        return success();
      })
      .Default([&](Operation *) { return failure(); });
}
