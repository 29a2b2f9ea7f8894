//===- CpuNormalization.cpp - softmax and layer norm ------------------------===//
//
// Softmax, LogSoftmax, LayerNormalization, AddLayerNorm and LayerNorm's
// adjoint. Batch normalisation is with the pools (CpuWindow.cpp): it
// shares their per-channel layout.
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

LogicalResult CpuEmitter::emitNormalization(Operation *op,
                                            llvm::raw_ostream &body) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ampc::SoftmaxOp, ampc::LogSoftmaxOp>([&](Operation *) {
        Value in = op->getOperand(0), out = op->getResult(0);
        AxisSplit g = softmaxGeometry(op);
        Type ti = elementOf(in), to = elementOf(out);
        body << formatv("  ampc::cpu::softmax<{8}, {6}, {7}>({0}, {1}, {2}LL, "
                        "{3}LL, {4}LL, {5});\n",
                        name(in), name(out), g.outer, g.size, g.inner,
                        isa<ampc::LogSoftmaxOp>(op), codec(ti), codec(to),
                        accumulation(op));
        return success();
      })
      .Case<ampc::LayerNormalizationOp, ampc::AddLayerNormOp>([&](auto o) {
        emitLayerNorm(o, body);
        return success();
      })
      .Case([&](ampc::LayerNormGradOp o) -> LogicalResult {
        // ampc-fuse-layer-norm-grad runs for the CUDA target only.
        if (o.getParamGrads() != 0)
          return op->emitError()
                 << "the CPU target computes LayerNorm's parameter "
                    "adjoints as ReduceSums (param_grads must be 0)";
        Value x = o.getInput();
        Type stash = elementOf(o.getMean());
        LayerNormGeometry g = layerNormGeometry(op);
        body << formatv(
            "  {{ static const int64_t dims[] = {0};\n"
            "    static const int64_t scaleStrides[] = {1};\n"
            "{16}"
            "    ampc::cpu::broadcast<{2}, {5}>({3}, {4}, dims, scaleStrides, "
            "scale);\n"
            "    ampc::cpu::layerNormGrad<{2}, {13}, {14}, {15}, {17}>({6}, "
            "{7}, scale, {8}, {9}, {10}, {11}LL, {12}LL); }\n",
            list(g.normalized), list(g.scaleStrides), g.compute,
            name(o.getScale()), g.normalized.size(),
            codec(elementOf(o.getScale())), name(o.getGrad()), name(x),
            name(o.getMean()), name(o.getInvStdDev()), name(o.getOutput()),
            g.outer, g.size, codec(elementOf(x)), codec(stash),
            codec(elementOf(x)), scratchArray(op, "scale", g.compute),
            codec(elementOf(o.getGrad())));
        return success();
      })
      .Default([&](Operation *) { return failure(); });
}

template <typename Op>
void CpuEmitter::emitLayerNorm(Op op, llvm::raw_ostream &body) {
  Value x = op.getInput(), y = op.getOutput();
  Type stash = elementOf(op.getMean());
  LayerNormGeometry g = layerNormGeometry(op);
  StringRef c = g.compute;
  body << "  { static const int64_t dims[] = " << list(g.normalized) << ";\n";
  // Scale and bias broadcast to the normalised shape, in the compute type.
  auto operand = [&](StringRef what, Value v, ArrayRef<int64_t> strides) {
    body << formatv("    static const int64_t {0}Strides[] = {1};\n", what,
                    list(strides))
         << scratchArray(op, what, c)
         << formatv("    ampc::cpu::broadcast<{0}, {4}>({1}, {2}, dims, "
                    "{3}Strides, {3});\n",
                    c, name(v), g.normalized.size(), what,
                    codec(elementOf(v)));
  };
  operand("scale", op.getScale(), g.scaleStrides);
  if (op.getBias())
    operand("bias", op.getBias(), g.biasStrides);
  // ampc.add_layer_norm: the addend's codec, its pointer and the sum's
  // before the LayerNorm's (addLayerNorm).
  std::string kernel = "layerNorm", codecs, inputs = name(x);
  if constexpr (std::is_same_v<Op, ampc::AddLayerNormOp>) {
    kernel = "addLayerNorm";
    codecs = ", " + codec(elementOf(op.getAddend()));
    inputs += ", " + name(op.getAddend()) + ", " + name(op.getSum());
  }
  body << formatv("    ampc::cpu::{12}<{0}, {9}, {10}, {11}{13}>({1}, {2}, "
                  "{3}, {4}, {5}LL, {6}LL, scale, {7}, {0}({8})); }\n",
                  c, inputs, name(y), name(op.getMean()),
                  name(op.getInvStdDev()), g.outer, g.size,
                  op.getBias() ? "bias" : "nullptr",
                  exactLiteral(op.getEpsilon()), codec(elementOf(x)),
                  codec(elementOf(y)), codec(stash), kernel, codecs);
}
