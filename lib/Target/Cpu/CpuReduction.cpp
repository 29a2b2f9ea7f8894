//===- CpuReduction.cpp - reductions and losses -----------------------------===//
//
// The reductions and GlobalAveragePool, SoftmaxCrossEntropyLoss,
// NegativeLogLikelihoodLoss and the losses' adjoint; the losses compute in
// float (double for f64).
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

LogicalResult CpuEmitter::emitReduction(Operation *op,
                                        llvm::raw_ostream &body) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ampc::ReduceSumOp, ampc::ReduceMeanOp, ampc::ReduceMaxOp,
            ampc::ReduceProdOp>(
          [&](Operation *) {
            emitReduce(op, body);
            return success();
          })
      .Case([&](ampc::GlobalAveragePoolOp o) {
        Type t = elementOf(o.getInput());
        ReduceGeometry g = reduceGeometry(op);
        body << formatv("  ampc::cpu::globalAveragePool<{0}, {5}, {6}>({1}, "
                        "{2}, {3}LL, {4}LL);\n",
                        accumulation(op), name(o.getInput()),
                        name(o.getOutput()), g.keptCount(), g.reducedCount(),
                        codec(t), codec(elementOf(o.getOutput())));
        return success();
      })
      .Case<ampc::SoftmaxCrossEntropyLossOp,
            ampc::NegativeLogLikelihoodLossOp>([&](Operation *) {
        emitLoss(op, body);
        return success();
      })
      .Case([&](ampc::NllLossGradOp o) {
        LossGeometry g = lossGeometry(op);
        StringRef c = g.compute;
        body << "  {\n";
        body << convertedArray(op, "grad", c, o.getGrad());
        if (o.getWeight())
          body << convertedArray(op, "weights", c, o.getWeight());
        body << scratchArray(op, "out", c);
        std::string call =
            formatv("ampc::cpu::nllLossGrad<{0}>(grad, {1}, {2}, "
                    "{3}LL, {4}LL, {5}LL, {6}, {7}LL, ampc::cpu::{8}, "
                    "out)",
                    c, name(g.labels), g.weights ? "weights" : "nullptr",
                    g.n, g.classes, g.inner, g.ignoreIndex.has_value(),
                    g.ignoreIndex.value_or(0), lossReductionName(g.reduction))
                .str();
        body << "  " << failUnless(op, call, "a label is out of range");
        if (o.getLogProb()) {
          body << convertedArray(op, "logp", c, o.getLogProb());
          body << formatv("    ampc::cpu::softmaxLossGrad<{0}>(out, logp, {1}, "
                          "{2}LL, {3}LL, {4}LL, {5}, {6}LL);\n",
                          c, name(g.labels), g.n,
                          g.classes, g.inner, g.ignoreIndex.has_value(),
                          g.ignoreIndex.value_or(0));
        }
        body << storeAll("out", o.getOutput());
        body << "  }\n";
        return success();
      })
      .Default([&](Operation *) { return failure(); });
}

void CpuEmitter::emitReduce(Operation *op, llvm::raw_ostream &body) {
  Value in = op->getOperand(0), out = op->getResult(0);
  Type ti = elementOf(in), to = elementOf(out);
  if (tensorOf(out).getNumElements() == 0)
    return;
  ReduceGeometry g = reduceGeometry(op);
  body << formatv("  {{ static const int64_t kept[] = {0}; static const int64_t "
                  "keptStrides[] = {1};\n"
                  "    static const int64_t reduced[] = {2}; static const "
                  "int64_t reducedStrides[] = {3};\n"
                  "    ampc::cpu::reduce<{4}, {10}, {11}>({5}, {6}, {7}, kept, "
                  "keptStrides, {8}, reduced, reducedStrides, ampc::cpu::{9}, "
                  "{12}); }\n",
                  list(g.keptDims), list(g.keptStrides), list(g.reducedDims),
                  list(g.reducedStrides), accumulation(op), name(in),
                  name(out), g.keptDims.size(), g.reducedDims.size(), g.kind,
                  codec(ti), codec(to), scratch(op, "reduced", "int64_t"));
}

void CpuEmitter::emitLoss(Operation *op, llvm::raw_ostream &body) {
  // SoftmaxCrossEntropyLoss (with logProb) is LogSoftmax over axis 1 and
  // NegativeLogLikelihoodLoss; both compute in float (double for f64).
  LossGeometry g = lossGeometry(op);
  Value scores = g.scores, weights = g.weights, logProb = g.logProb;
  int64_t n = g.n, classes = g.classes, inner = g.inner;
  int64_t count = tensorOf(scores).getNumElements();
  Type t = elementOf(scores);
  Value loss = op->getResult(0);
  StringRef c = g.compute;
  body << "  {\n";
  body << scratchArray(op, "logp", c);
  if (logProb) {
    body << formatv("    ampc::cpu::softmax<{0}, {6}, ampc::cpu::As<{0}>>({2}, "
                    "logp, {3}LL, {4}LL, {5}LL, true);\n"
                    "    for (int64_t i = 0; i < {1}LL; ++i) {7}[i] = {8};\n",
                    c, count, name(scores), n, classes, inner, codec(t),
                    name(logProb), store(elementOf(logProb), "logp[i]"));
  } else {
    body << formatv("    ampc::cpu::convert<{0}, {3}>({1}, {2}LL, logp);\n",
                    c, name(scores), count, codec(t));
  }
  if (weights)
    body << convertedArray(op, "weights", c, weights);
  int64_t lossCount = tensorOf(loss).getNumElements();
  body << scratchArray(op, "loss", c);
  std::string call =
      formatv("ampc::cpu::nllLoss<{0}>(logp, {1}, {2}, {3}LL, {4}LL, "
              "{5}LL, {6}, {7}LL, ampc::cpu::{8}, loss, {9}, {10})",
              c, name(g.labels), weights ? "weights" : "nullptr", n,
              classes, inner, g.ignoreIndex.has_value(),
              g.ignoreIndex.value_or(0), lossReductionName(g.reduction),
              scratch(op, "values", c), scratch(op, "used", c))
          .str();
  body << "  " << failUnless(op, call, "a label is out of range");
  body << "    for (int64_t i = 0; i < " << lossCount << "LL; ++i) "
       << name(loss) << "[i] = " << store(elementOf(loss), "loss[i]")
       << ";\n  }\n";
}
