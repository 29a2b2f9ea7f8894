//===- CpuGemm.cpp - GEMMs and convolutions ---------------------------------===//
//
// Gemm and ampc.batched_gemm (every MatMul: ampc-lower-matmul) as cblas
// calls on FP32 (f64: double) copies of their operands, accumulated in
// `acc` and rounded once when stored; the convolutions and their adjoints
// as im2col + GEMM.
//
//===----------------------------------------------------------------------===//

#include "CpuEmitter.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Target/ScalarExpression.h"
#include "ampc/Transforms/MemoryPlan.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace ampc::emit;
using namespace ampc::cpugen;
using llvm::formatv;
using llvm::StringRef;

LogicalResult CpuEmitter::emitMatmul(Operation *op, llvm::raw_ostream &body) {
  // Gemm: alpha * op(A) op(B) + beta * C; ampc.batched_gemm: its batch of
  // GEMMs through the op's matrix layouts (every MatMul is one:
  // ampc-lower-matmul). Both widen 16-bit inputs to FP32, multiply with FP32
  // accumulation, and round once when storing.
  Value a = op->getOperand(0), b = op->getOperand(1), out = op->getResult(0);
  Type outType = elementOf(out);
  if (!isa<FloatType>(outType))
    return op->emitError() << "the CPU target multiplies float matrices "
                              "only, got "
                           << outType;
  // The ReLU mask epilogues are the CUDA target's (ampc-fuse-epilogues
  // with `backward`); the CPU target keeps the Relu's gradient and the
  // bias gradient as their own ops.
  if (auto gemm = dyn_cast<ampc::GemmOp>(op);
      gemm && (gemm.getReluMask() || gemm.getReluMaskOut()))
    return op->emitError() << "the CPU target does not take epilogue '"
                           << ampc::stringifyGemmEpilogue(gemm.getEpilogue())
                           << "' (a cuBLASLt ReLU mask; the CUDA target's)";
  // T: the GEMM's accumulation type (ampc.accumulate).
  StringRef t = accumulation(op);
  auto widen = [&](Value v) { return widenFloat(op, v); };
  // A GEMM of a matrix with itself (folded transposes) widens it once.
  body << "  {\n    " << widen(a);
  if (b != a)
    body << "    " << widen(b);
  int64_t outCount = tensorOf(out).getNumElements();
  body << scratchArray(op, "acc", t);
  if (auto gemm = dyn_cast<ampc::GemmOp>(op)) {
    ArrayRef<int64_t> as = tensorOf(a).getShape(), bs = tensorOf(b).getShape();
    bool ta = gemm.getTransA() != 0, tb = gemm.getTransB() != 0;
    int64_t m = ta ? as[1] : as[0], k = ta ? as[0] : as[1];
    int64_t n = tb ? bs[0] : bs[1];
    float beta = gemm.getBeta().convertToFloat();
    if (Value c = gemm.getC()) {
      body << "    " << widen(c);
      body << formatv("    {{ static const int64_t dims[] = {0}; static const "
                      "int64_t s0[] = {1}; const int64_t *strides[] = {{s0};\n"
                      "      ampc::cpu::parallelForEach<1>(2, dims, strides, [&](int64_t "
                      "o, int64_t i0) {{ acc[o] = {4}({2}) * w_{3}[i0]; }); }\n",
                      list({m, n}),
                      list(broadcastStrides(tensorOf(c).getShape(), {m, n})),
                      llvm::formatv("{0:e9}", beta), name(c), t);
    }
    body << formatv("    ampc::cpu::gemm<{9}>({0}, {1}, {2}LL, {3}LL, {4}LL, "
                    "{9}({5}), w_{6}, w_{7}, {9}({8}), acc);\n",
                    ta, tb, m, n, k,
                    llvm::formatv("{0:e9}", gemm.getAlpha().convertToFloat()),
                    name(a), name(b), gemm.getC() ? "1" : "0", t);
  } else {
    auto bg = cast<ampc::BatchedGemmOp>(op);
    // acc is laid out as the result, which D's layout covers exactly once
    // (the op's verifier): the bias goes in first, as for a Gemm's C.
    int64_t strideD = bg.getStrideD(), ldd = bg.getLdd();
    if (Value bias = bg.getBias())
      body << "    " << widen(bias)
           << formatv("    for (int64_t p = 0; p < {0}LL; ++p) for (int64_t "
                      "i = 0; i < {1}LL; ++i) for (int64_t j = 0; j < {2}LL; "
                      "++j) acc[p * {3}LL + i * {4}LL + j] = w_{5}[j];\n",
                      bg.getBatch(), bg.getM(), bg.getN(), strideD, ldd,
                      name(bias));
    body << formatv(
        "    for (int64_t p = 0; p < {0}LL; ++p) ampc::cpu::gemm<{1}>({2}, "
        "{3}, {4}LL, {5}LL, {6}LL, {1}({7}), w_{8} + p * {9}LL, {10}LL, "
        "w_{11} + p * {12}LL, {13}LL, {1}({14}), acc + p * {15}LL, "
        "{16}LL);\n",
        bg.getBatch(), t, bg.getTransA(), bg.getTransB(), bg.getM(),
        bg.getN(), bg.getK(),
        llvm::formatv("{0:e9}", bg.getAlpha().convertToFloat()), name(a),
        bg.getStrideA(), bg.getLda(), name(b), bg.getStrideB(), bg.getLdb(),
        bg.getBias() ? "1" : "0", strideD, ldd);
  }
  // The epilogue's Relu (ampc-fuse-epilogues) clamps before the one
  // rounding; rounding commutes with it.
  std::optional<ampc::GemmEpilogue> epilogue;
  if (auto gemm = dyn_cast<ampc::GemmOp>(op))
    epilogue = gemm.getEpilogue();
  if (auto bg = dyn_cast<ampc::BatchedGemmOp>(op))
    epilogue = bg.getEpilogue();
  bool relu = epilogue == ampc::GemmEpilogue::Relu ||
              epilogue == ampc::GemmEpilogue::ReluBias;
  body << "    for (int64_t i = 0; i < " << outCount << "LL; ++i) " << name(out)
       << "[i] = "
       << store(outType, relu ? "(" + ampc::reluExpression("acc[i]", t) + ")"
                              : std::string("acc[i]"));
  body << ";\n";
  // The bias gradient epilogues (issue 37, item 3): op(A)'s rows or op(B)'s
  // columns summed over k, in ReduceSum's pairwise order, rounded once.
  if (auto gemm = dyn_cast<ampc::GemmOp>(op))
    if (Value grad = gemm.getBiasGrad()) {
      bool fromA = gemm.getEpilogue() == ampc::GemmEpilogue::BiasGradA;
      Value x = fromA ? a : b;
      ArrayRef<int64_t> xs = tensorOf(x).getShape();
      // Stored k-major ([k, len]) or len-major ([len, k]).
      bool kMajor = fromA ? gemm.getTransA() != 0 : gemm.getTransB() == 0;
      int64_t k = kMajor ? xs[0] : xs[1], len = kMajor ? xs[1] : xs[0];
      std::string at = kMajor ? formatv("kk * {0}LL + i", len).str()
                              : formatv("i * {0}LL + kk", k).str();
      body << formatv("    for (int64_t i = 0; i < {0}LL; ++i) {1}[i] = ",
                      len, name(grad))
           << store(elementOf(grad),
                    formatv("ampc::cpu::pairwiseSum<{0}>(0, {1}LL, "
                            "[&](int64_t kk) {{ return w_{2}[{3}]; })",
                            t, k, name(x), at)
                        .str())
           << ";\n";
    }
  body << "  }\n";
  return success();
}

LogicalResult CpuEmitter::emitConvolution(Operation *op,
                                       llvm::raw_ostream &body) {
  if (failed(refuseChannelsLast(op)))
    return failure();
  // im2col + GEMM (a chunk of images per GEMM: cpuConvImagesPerGemm,
  // recorded as `images_per_gemm`): 16-bit operands widened to FP32, FP32
  // accumulation, one rounding when storing; f64 in double.
  ConvGeometry g = convGeometry(op);
  // The kernel's two operands, in its argument order, and Conv's bias.
  Value lhs = g.input, rhs = g.weight, bias;
  StringRef kernel = "conv";
  if (auto conv = dyn_cast<ampc::ConvOp>(op)) {
    bias = conv.getBias();
  } else if (isa<ampc::ConvBackwardDataOp>(op)) {
    kernel = "convBackwardData", lhs = g.output;
  } else {
    kernel = "convBackwardWeight", rhs = g.output;
  }
  Value out = op->getResult(0);
  Type outType = elementOf(out);
  body << "  {\n    " << widenFloat(op, lhs) << "    "
       << widenFloat(op, rhs);
  if (bias)
    body << "    " << widenFloat(op, bias);
  if (failed(emitWindow(op, g.window, body)))
    return failure();
  int64_t count = tensorOf(out).getNumElements();
  bool direct = outType.isF32() || outType.isF64();
  StringRef c = accumulation(op);
  if (!direct)
    body << scratchArray(op, "acc", "float");
  // The images per GEMM (conv and the data gradient), im2col's columns
  // (none for an identity window and one image) and the staging of a chunk
  // of images (none for one).
  int64_t images = launchInt(op, "images_per_gemm");
  std::string scratchArgs =
      !g.window.isIdentity() || images > 1 ? scratch(op, "columns", c)
                                           : "nullptr";
  if (kernel != "convBackwardWeight")
    scratchArgs = std::to_string(images) + "LL, " + scratchArgs + ", " +
                  (images > 1 ? scratch(op, "staging", c) : "nullptr");
  body << formatv("    ampc::cpu::{0}<{1}>(w_{2}, w_{3}, {4}{5}, {6}LL, {7}LL, "
                  "{8}LL, {9}LL, win, {10});\n",
                  kernel, c, name(lhs), name(rhs),
                  kernel == "conv" ? (bias ? "w_" + name(bias) : "nullptr") + ", "
                                   : "",
                  direct ? name(out) : "acc", g.n, g.channels,
                  g.filters, g.group, scratchArgs);
  if (!direct)
    body << "    for (int64_t i = 0; i < " << count << "LL; ++i) " << name(out)
         << "[i] = " << store(outType, "acc[i]") << ";\n";
  body << "  }\n";
  return success();
}
