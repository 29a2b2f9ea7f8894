//===- CudaReduction.cpp - reductions and losses ----------------------------===//
//
// The reductions and GlobalAveragePool (a thread or a block per output, or
// partial sums over several blocks then a combining pass for few outputs of
// many elements), SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and the
// losses' adjoint.
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

void CudaEmitter::emitReduce(Operation *op, llvm::raw_ostream &body) {
  Value in = op->getOperand(0), out = op->getResult(0);
  int64_t outCount = tensorOf(out).getNumElements();
  if (outCount == 0)
    return;
  ReduceGeometry g = reduceGeometry(op);
  Type ti = elementOf(in), to = elementOf(out);
  std::string kept = strided(g.keptDims, g.keptStrides),
              reduced = strided(g.reducedDims, g.reducedStrides);
  int64_t splits = launchInt(op, "splits");
  if (splits > 1) {
    // Few outputs of many elements: shares over `splits` blocks each into
    // the op's partials, then each output's shares combined.
    StringRef c = accumulation(op);
    std::string partials = scratch(op, "partials", c);
    launch(op,
           formatv("ampc::cuda::reducePartials<{0}, {1}>", c, codec(ti)).str(),
           outCount * splits,
           formatv("{0}, {1}, {2}LL, {3}, {4}, {5}LL, {6}LL, ampc::cuda::{7}",
                   name(in), partials, outCount, kept, reduced,
                   g.reducedCount(), splits, g.kind)
               .str(),
           body,
           formatv("{0}u", std::min(outCount * splits, kMaxRowBlocks)).str());
    launch(op,
           formatv("ampc::cuda::reduceFinish<{0}, {1}>", c, codec(to)).str(),
           outCount,
           formatv("{0}, {1}, {2}LL, {3}LL, {4}LL, ampc::cuda::{5}", partials,
                   name(out), outCount, splits, g.reducedCount(), g.kind)
               .str(),
           body);
    return;
  }
  launchRows(op, "reduce",
             formatv("{0}, {1}, {2}", accumulation(op), codec(ti), codec(to))
                 .str(),
             outCount, g.reducedCount(),
             formatv("{0}, {1}, {2}LL, {3}, {4}, {5}LL, ampc::cuda::{6}",
                     name(in), name(out), outCount, kept, reduced,
                     g.reducedCount(), g.kind)
                 .str(),
             body);
}

void CudaEmitter::emitLoss(Operation *op, llvm::raw_ostream &body) {
  // SoftmaxCrossEntropyLoss is LogSoftmax over axis 1 into its log_prob
  // output (and scratch when log_prob is not in C) and
  // NegativeLogLikelihoodLoss.
  LossGeometry g = lossGeometry(op);
  Value scores = g.scores, weights = g.weights, logProb = g.logProb;
  int64_t n = g.n, classes = g.classes, inner = g.inner;
  Type t = elementOf(scores);
  StringRef c = g.compute;
  std::string logp = name(scores);
  Type logpType = t;
  if (isa<ampc::SoftmaxCrossEntropyLossOp>(op)) {
    auto logSoftmax = [&](const std::string &out, Type outType) {
      launchRows(op, "softmax",
                 formatv("{0}, {1}, {2}, {1}", c, codec(t), codec(outType))
                     .str(),
                 n * inner, classes,
                 formatv("{0}, {1}, {2}LL, {3}LL, {4}LL, true, {5}(1), "
                         "nullptr, ampc::cuda::Strided{{}",
                         name(scores), out, n, classes, inner, c)
                     .str(),
                 body);
    };
    if (launchFlag(op, "log_prob")) {
      // log_prob holds the log-probabilities in C: one LogSoftmax, which
      // the loss reads.
      logp = name(logProb);
      logpType = elementOf(logProb);
      logSoftmax(logp, logpType);
    } else {
      // log-probabilities in C, in the op's scratch, and in log_prob's
      // type.
      logp = scratch(op, "logp", c);
      logpType = c == "double" ? Type(Float64Type::get(op->getContext()))
                               : Type(Float32Type::get(op->getContext()));
      logSoftmax(logp, logpType);
      if (logProb)
        logSoftmax(name(logProb), elementOf(logProb));
    }
  }
  Value loss = op->getResult(0);
  Type weightType = weights ? elementOf(weights) : logpType;
  launch(op,
         formatv("ampc::cuda::nllLoss<{0}, {1}, {2}, {3}, {4}>", c,
                 codec(logpType), codec(weightType), codec(elementOf(loss)),
                 storageType(elementOf(g.labels)))
             .str(),
         g.reduction == ampc::Reduction::None ? n * inner : 1,
         formatv("{0}, {1}, {2}, {3}LL, {4}LL, {5}LL, {6}, {7}LL, "
                 "ampc::cuda::{8}, {9}, {10}",
                 logp, name(g.labels), weights ? name(weights) : "nullptr", n,
                 classes, inner, g.ignoreIndex.has_value(),
                 g.ignoreIndex.value_or(0), lossReductionName(g.reduction),
                 name(loss), deviceError(op, "a label is out of range"))
             .str(),
         body);
}
LogicalResult CudaEmitter::emitReduction(Operation *op,
                                         llvm::raw_ostream &body) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ampc::ReduceSumOp, ampc::ReduceMeanOp, ampc::ReduceMaxOp,
            ampc::ReduceProdOp, ampc::GlobalAveragePoolOp>([&](Operation *) {
        emitReduce(op, body);
        return success();
      })
      .Case<ampc::SoftmaxCrossEntropyLossOp,
            ampc::NegativeLogLikelihoodLossOp>([&](Operation *) {
        emitLoss(op, body);
        return success();
      })
      .Case([&](ampc::NllLossGradOp o) {
        LossGeometry l = lossGeometry(op);
        Type t = elementOf(o.getOutput()), g = elementOf(o.getGrad());
        launch(op,
               formatv("ampc::cuda::nllLossGrad<{0}, {1}, {2}, {3}, {4}>",
                       l.compute, codec(g),
                       codec(l.weights ? elementOf(l.weights) : g), codec(t),
                       storageType(elementOf(l.labels)))
                   .str(),
               tensorOf(o.getOutput()).getNumElements(),
               formatv("{0}, {1}, {2}, {11}, {3}LL, {4}LL, {5}LL, {6}, {7}LL, "
                       "ampc::cuda::{8}, {9}, {10}",
                       name(o.getGrad()), name(l.labels),
                       l.weights ? name(l.weights) : "nullptr", l.n, l.classes,
                       l.inner, l.ignoreIndex.has_value(),
                       l.ignoreIndex.value_or(0),
                       lossReductionName(l.reduction),
                       name(o.getOutput()),
                       deviceError(op, "a label is out of range"),
                       o.getLogProb() ? name(o.getLogProb()) : "nullptr")
                   .str(),
               body);
        return success();
      })
      .Default([&](Operation *) -> LogicalResult {
        llvm_unreachable("not an op of this family (emitKernelOp dispatches)");
      });
}
