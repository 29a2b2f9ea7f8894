//===- CpuWindow.cpp - pooling and batch norm -------------------------------===//
//
// Max and average pooling, batch normalisation and their adjoints, on the
// kernels of CpuKernels.h and CpuBackwardKernels.h (NCHW images only for
// the pools; BatchNorm takes either layout).
//
//===----------------------------------------------------------------------===//

#include "CpuEmitter.h"

#include "ampc/Dialect/AMPCDialect.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace ampc::emit;
using namespace ampc::cpugen;
using llvm::formatv;
using llvm::StringRef;

LogicalResult CpuEmitter::emitWindowOp(Operation *op,
                                       llvm::raw_ostream &body) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ampc::MaxPoolOp, ampc::AveragePoolOp, ampc::MaxPoolGradOp,
            ampc::AveragePoolGradOp>(
          [&](Operation *) { return emitPool(op, body); })
      .Case([&](ampc::BatchNormalizationOp o) {
        emitBatchNorm(o, body);
        return success();
      })
      .Case([&](ampc::BatchNormGradOp o) -> LogicalResult {
        // ampc-fuse-batch-norm-epilogue's backward half runs for the CUDA
        // target only (Passes.td).
        if (o.getAddend() || o.getReluOutput() || o.getKeptGrad())
          return op->emitError()
                 << "the CPU target computes a BatchNorm adjoint's ReLU "
                    "mask and residual sum as their own ops (no addend, "
                    "relu_output or keep_grad)";
        Value x = o.getInput();
        BatchNormGeometry g = batchNormGeometry(op);
        StringRef c = g.compute;
        body << "  {\n";
        body << convertedArray(op, "scale", c, o.getScale());
        body << convertedArray(op, "mean", c, o.getMean());
        body << convertedArray(op, "invStdDev", c, o.getInvStdDev());
        body << scratchArray(op, "gradScale", c)
             << scratchArray(op, "gradBias", c);
        std::string types = formatv("<{0}, {1}, {2}>", c, codec(elementOf(x)),
                                    codec(elementOf(o.getGradInput())));
        std::string data = formatv(
            "{0}, {1}, {2}, {3}LL, {4}LL, {5}LL, scale, mean, invStdDev",
            name(o.getGrad()), name(x), name(o.getGradInput()), g.n,
            g.channels, g.inner);
        // --sync-batchnorm: on several ranks, the input adjoint from every
        // rank's sums (CpuTrainKernels.h).
        if (auto request =
                op->getAttrOfType<IntegerAttr>(ampc::kSyncRequestAttr))
          body << "    if (const ampc_abi_comm *comm = " << ranks() << ") {\n"
               << "      if (!ampc::cpu::syncBatchNormGrad" << types
               << "(comm, " << request.getInt() << ", " << data
               << ", gradScale, gradBias))\n        " << commFailure("comm")
               << "\n    } else\n  ";
        body << "    ampc::cpu::batchNormGrad" << types << "(" << data << ", "
             << (o.getTrainingMode() != 0 ? "true" : "false")
             << ", gradScale, gradBias);\n";
        body << storeAll("gradScale", o.getGradScale());
        body << storeAll("gradBias", o.getGradBias());
        body << "  }\n";
        return success();
      })
      .Default([&](Operation *) { return failure(); });
}

LogicalResult ampc::cpugen::refuseChannelsLast(Operation *op) {
  if (!op->hasAttr("channels_last"))
    return success();
  return op->emitError()
         << "the CPU target takes NCHW images: channels_last is the CUDA "
            "target's layout (--channels-last=off)";
}

LogicalResult CpuEmitter::emitWindow(Operation *op, const WindowGeometry &g,
                                  llvm::raw_ostream &body) {
  size_t n = g.rank();
  if (n > 8)
    return op->emitError() << "the CPU target handles at most 8 spatial "
                              "dimensions, got "
                           << n;
  body << formatv("    static const ampc::cpu::Window win = {{{0}, {1}, {2}, "
                  "{3}, {4}, {5}, {6}, {7}};\n",
                  n, list(g.in), list(g.out), list(g.kernel), list(g.strides),
                  list(g.padBegin), list(g.padEnd), list(g.dilations));
  return success();
}

LogicalResult CpuEmitter::emitPool(Operation *op, llvm::raw_ostream &body) {
  if (failed(refuseChannelsLast(op)))
    return failure();
  // The kernel, the buffers before the plane count, the flag after the
  // window, the types it loads and stores.
  StringRef kernel;
  std::string buffers, scratchArgs;
  bool flag;
  Type in = elementOf(op->getOperand(0)), out = elementOf(op->getResult(0));
  if (auto o = dyn_cast<ampc::MaxPoolOp>(op)) {
    kernel = "maxPool", flag = o.getStorageOrder() != 0;
    buffers = name(o.getInput()) + ", " + name(o.getOutput()) + ", " +
              name(o.getIndices());
    scratchArgs = scratch(op, "offsets", "int64_t") + ", " +
                  (flag ? scratch(op, "reported", "int64_t") : "nullptr");
  } else if (auto o = dyn_cast<ampc::AveragePoolOp>(op)) {
    kernel = "averagePool", flag = o.getCountIncludePad() != 0;
    buffers = name(o.getInput()) + ", " + name(o.getOutput());
    scratchArgs = scratch(op, "offsets", "int64_t");
  } else if (auto o = dyn_cast<ampc::MaxPoolGradOp>(op)) {
    kernel = "maxPoolGrad", flag = o.getStorageOrder() != 0, out = in;
    buffers = name(o.getGrad()) + ", " + name(o.getIndices()) + ", " +
              name(o.getOutput());
    scratchArgs = scratch(op, "acc", accumulation(op));
  } else {
    auto g = cast<ampc::AveragePoolGradOp>(op);
    kernel = "averagePoolGrad", flag = g.getCountIncludePad() != 0, out = in;
    buffers = name(g.getGrad()) + ", " + name(g.getOutput());
    scratchArgs = scratch(op, "offsets", "int64_t") + ", " +
                  scratch(op, "counts", "int64_t") + ", " +
                  scratch(op, "acc", accumulation(op));
  }
  WindowGeometry g = windowGeometry(op);
  body << "  {\n";
  if (failed(emitWindow(op, g, body)))
    return failure();
  body << formatv("    ampc::cpu::{0}<{1}, {5}, {6}>({2}, {3}LL, win, {4}, "
                  "{7});\n  }\n",
                  kernel, accumulation(op), buffers, g.planes, flag,
                  codec(in), codec(out), scratchArgs);
  return success();
}

void CpuEmitter::emitBatchNorm(ampc::BatchNormalizationOp op,
                            llvm::raw_ostream &body) {
  Value x = op.getInput(), y = op.getOutput();
  BatchNormGeometry g = batchNormGeometry(op);
  StringRef c = g.compute;
  int64_t n = g.n, channels = g.channels, inner = g.inner;
  body << "  {\n";
  for (auto [what, v] : {std::pair<StringRef, Value>{"scale", op.getScale()},
                         {"bias", op.getBias()},
                         {"mean", op.getInputMean()},
                         {"variance", op.getInputVar()}})
    body << convertedArray(op, what, c, v);
  bool training = op.getTrainingMode() != 0;
  // --sync-batchnorm: on several ranks, the statistics of every rank's
  // rows (CpuTrainKernels.h), and the unbiased factor of their count.
  auto request = op->getAttrOfType<IntegerAttr>(ampc::kSyncRequestAttr);
  std::string varianceFactor =
      formatv("{0}({1:e17})", c, op.runningVarianceFactor()).str();
  if (training) {
    std::string args = formatv("<{0}, {5}>({1}, {2}LL, {3}LL, {4}LL, "
                               "batchMean, batchVariance)",
                               c, name(x), n, channels, inner,
                               codec(elementOf(x)));
    body << scratchArray(op, "batchMean", c)
         << scratchArray(op, "batchVariance", c);
    if (request) {
      if (op.getUnbiasedRunningVar()) {
        body << "    " << c << " varianceFactor = " << varianceFactor << ";\n";
        varianceFactor = "varianceFactor";
      }
      body << "    if (const ampc_abi_comm *comm = " << ranks() << ") {\n"
           << formatv("      if (!ampc::cpu::syncChannelStatistics<{0}, {1}>("
                      "comm, {2}, {3}, {4}LL, {5}LL, {6}LL, batchMean, "
                      "batchVariance))\n        {7}\n",
                      c, codec(elementOf(x)), request.getInt(), name(x), n,
                      channels, inner, commFailure("comm"));
      if (op.getUnbiasedRunningVar())
        body << formatv("      varianceFactor = ampc::cpu::unbiasedFactor<{0}>"
                        "({1}LL * comm->size);\n",
                        c, n * inner);
      body << "    } else\n  ";
    }
    body << "    ampc::cpu::channelStatistics" << args << ";\n";
  }
  StringRef m = training ? "batchMean" : "mean",
            v = training ? "batchVariance" : "variance";
  // The saved statistics (@train_step): the mean and inverse standard
  // deviation Y used, for batch_norm_grad.
  Value savedMean = op.getSavedMean(), savedInvStd = op.getSavedInvStdDev();
  if (savedMean)
    body << scratchArray(op, "invStdDev", c);
  // The epilogue (ampc-fuse-batch-norm-epilogue): the residual's codec
  // and the compute type it is added in, the residual and ReLU.
  Value residual = op.getResidual();
  std::string epilogue, epilogueTypes;
  if (residual || op.getRelu()) {
    Type e = elementOf(y);
    epilogueTypes = formatv(", {0}, {1}", codec(residual ? elementOf(residual) : e),
                            computeType(e))
                        .str();
    epilogue = formatv(", {0}, {1}", residual ? name(residual) : "nullptr",
                       op.getRelu() ? "true" : "false")
                   .str();
  }
  body << formatv("    ampc::cpu::batchNorm<{0}, {9}, {10}{12}>({1}, {2}, "
                  "{3}LL, {4}LL, {5}LL, scale, bias, {6}, {7}, {0}({8}), "
                  "{11}{13});\n",
                  c, name(x), name(y), n, channels, inner, m, v,
                  exactLiteral(op.getEpsilon()), codec(elementOf(x)),
                  codec(elementOf(y)), savedMean ? "invStdDev" : "nullptr",
                  epilogueTypes, epilogue);
  if (savedMean)
    for (auto [out, from] : {std::pair<Value, StringRef>{savedMean, m},
                             {savedInvStd, "invStdDev"}})
      body << "    for (int64_t i = 0; i < " << channels << "LL; ++i) "
           << name(out) << "[i] = "
           << store(elementOf(out), (from + "[i]").str()) << ";\n";
  // Running statistics: running = input * momentum + batch * (1 -
  // momentum), the batch variance times runningVarianceFactor (population
  // or unbiased); outside training they are the inputs.
  double momentum = op.getMomentum().convertToDouble();
  auto running = [&](Value out, StringRef input, StringRef batch,
                     StringRef factor) {
    std::string b = (batch + "[i]").str();
    if (!factor.empty())
      b = formatv("({0} * {1})", b, factor).str();
    std::string e = training
                        ? formatv("{0}[i] * {1}({2:e17}) + {3} * {1}({4:e17})",
                                  input, c, momentum, b, 1.0 - momentum)
                              .str()
                        : (input + "[i]").str();
    body << "    for (int64_t i = 0; i < " << channels << "LL; ++i) "
         << name(out) << "[i] = " << store(elementOf(out), e) << ";\n";
  };
  running(op.getRunningMean(), "mean", "batchMean", "");
  running(op.getRunningVar(), "variance", "batchVariance",
          op.runningVarianceFactor() != 1.0 || varianceFactor == "varianceFactor"
              ? StringRef(varianceFactor)
              : StringRef());
  body << "  }\n";
}
