//===- CpuEmitter.cpp - C++ model libraries for the CPU -------------------===//
//
// Walks @forward in its kernel-level form (after ampc-fuse and
// ampc-plan-memory) and writes, for each op, a call to the kernels of
// include/ampc/Kernels/Cpu/CpuKernels.h or one loop nest (an ampc.fusion or a
// lone elementwise op). The instance state holds the parameters, which
// `init` copies from a blob the library embeds, then the arena of the
// memory plan, where every intermediate lives at its planned offset; views
// share their operand's buffer.
//
//===----------------------------------------------------------------------===//

#include "ampc/Target/CpuTarget.h"

#include "ampc/Analysis/KernelGeometry.h"
#include "ampc/Target/LibraryEmitter.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Target/ScalarExpression.h"
#include "ampc/Transforms/MemoryPlan.h"
#include "ampc/Transforms/Training.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

using namespace mlir;
using llvm::formatv;
using llvm::StringRef;
using namespace ampc::emit;

/// The runtime headers every generated source includes, in order (the
/// precompiled header holds them too).
static const StringRef kIncludes[] = {"ampc/Kernels/Cpu/CpuBackwardKernels.h",
                                      "ampc/Kernels/Cpu/CpuTrainKernels.h",
                                      "ampc/Runtime/ModelAbi.h"};

namespace {

std::string load(Type t, const std::string &e) {
  if (t.isF16()) return "ampc::cpu::loadF16(" + e + ")";
  if (t.isBF16()) return "ampc::cpu::loadBf16(" + e + ")";
  if (t.isInteger(1)) return "(" + e + " != 0)";
  return e;
}

std::string store(Type t, const std::string &e) {
  if (t.isF16()) return "ampc::cpu::storeF16(" + e + ")";
  if (t.isBF16()) return "ampc::cpu::storeBf16(" + e + ")";
  return "static_cast<" + storageType(t).str() + ">(" + e + ")";
}

/// The codec the kernels read and write `t` with (ampc::cpu::AsF16 ...),
/// a template argument as on the CUDA target.
std::string codec(Type t) { return codecName(t, "ampc::cpu"); }

class Emitter : public ampc::LibraryEmitter {
public:
  using LibraryEmitter::LibraryEmitter;

private:
  StringRef targetName() const override { return "cpu"; }
  ampc::KernelTarget kernelTarget() const override {
    return ampc::KernelTarget::Cpu;
  }
  std::string load(Type t, const std::string &e) const override {
    return ::load(t, e);
  }
  std::string store(Type t, const std::string &e) const override {
    return ::store(t, e);
  }
  void emitStore(Operation *op, llvm::raw_ostream &body) override;
  LogicalResult emitKernelOp(Operation *op, llvm::raw_ostream &body) override;
  void emitArgument(unsigned index, BlockArgument arg,
                    llvm::raw_ostream &body) override;
  void emitReturn(unsigned index, Value v, llvm::raw_ostream &body) override;
  LogicalResult emitLibrary(func::FuncOp forward, func::FuncOp trainStep,
                            StringRef inferBody, StringRef stepBody) override;
  /// One loop nest over the elements of `output`.
  LogicalResult emitElementwise(ArrayRef<Operation *> ops, ValueRange inputs,
                                ValueRange arguments, ValueRange yielded,
                                ValueRange outputs, llvm::raw_ostream &body) override;
  /// Transpose, Slice: a copy through the op's strided view.
  void emitStrided(Operation *op, llvm::raw_ostream &body);
  /// A `const float *w_NAME` holding operand `v` of `op` in FP32 (a
  /// widened copy in `op`'s scratch for f16/bf16).
  std::string widenFloat(Operation *op, Value v);
  /// `C *SLOT` (slot SLOT of op's scratch) holding operand `v` converted
  /// to C with its codec.
  std::string convertedArray(Operation *op, StringRef slot, StringRef c,
                             Value v) {
    return scratchArray(op, slot, c) +
           formatv("    ampc::cpu::convert<{0}, {3}>({1}, {2}LL, {4});\n", c,
                   name(v), tensorOf(v).getNumElements(), codec(elementOf(v)),
                   slot)
               .str();
  }
  /// `C *NAME = <slot NAME of op's scratch>;`
  std::string scratchArray(Operation *op, StringRef slot, StringRef c) {
    return formatv("    {0} *{1} = {2};\n", c, slot, scratch(op, slot, c))
        .str();
  }
  /// `if (!(condition)) return <failure naming the node>;`
  std::string failUnless(Operation *op, const std::string &condition,
                         StringRef what);
  LogicalResult emitMatmul(Operation *op, llvm::raw_ostream &body);
  /// Conv and its adjoints.
  LogicalResult emitConvolution(Operation *op, llvm::raw_ostream &body);
  /// `g` as a `static const ampc::cpu::Window win`.
  LogicalResult emitWindow(Operation *op, const WindowGeometry &g,
                           llvm::raw_ostream &body);
  /// MaxPool, AveragePool and their adjoints.
  LogicalResult emitPool(Operation *op, llvm::raw_ostream &body);
  /// The gradient ops of AMPCGradOps.td that are not elementwise.
  LogicalResult emitGradientOp(Operation *op, llvm::raw_ostream &body);
  void emitReduce(Operation *op, llvm::raw_ostream &body);
  /// ampc.layer_normalization and ampc.add_layer_norm.
  template <typename Op> void emitLayerNorm(Op op, llvm::raw_ostream &body);
  /// ampc.attention and ampc.attention_grad (CpuKernels.h, attention).
  void emitAttention(Operation *op, llvm::raw_ostream &body);
  /// The training step Dropout's masks are drawn for (ampc.step; 0 in a
  /// library without an optimizer), as a C++ expression.
  std::string trainingStep() const {
    if (!parameterOffsets.count(ampc::kStepCount))
      return "0";
    return formatv("*reinterpret_cast<const int64_t *>(state + {0})",
                   parameterOffsets.lookup(ampc::kStepCount))
        .str();
  }
  void emitBatchNorm(ampc::BatchNormalizationOp op, llvm::raw_ostream &body);
  /// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss.
  void emitLoss(Operation *op, llvm::raw_ostream &body);
  void emitConstant(Operation *op, llvm::raw_ostream &body) override;
  LogicalResult emitTrainingOp(Operation *op,
                               llvm::raw_ostream &body) override;

  std::string constants;
  /// Whether some op of the library can fail at run time.
  bool canFail = false;
};

void Emitter::emitStrided(Operation *op, llvm::raw_ostream &body) {
  Value input = op->getOperand(0), output = op->getResult(0);
  StridedView view = stridedView(op);
  body << formatv("  {{ static const int64_t dims[] = {0}; static const int64_t "
                  "s0[] = {1}; const int64_t *strides[] = {{s0};\n",
                  list(view.dims), list(view.strides));
  body << formatv("    ampc::cpu::forEach<1>({0}, dims, strides, [&](int64_t o, "
                  "int64_t a) {{ {1}[o] = {2}[{3}LL + a]; }); }\n",
                  view.dims.size(), name(output), name(input), view.offset);
}

LogicalResult Emitter::emitElementwise(ArrayRef<Operation *> ops,
                                       ValueRange inputs, ValueRange arguments,
                                       ValueRange yielded, ValueRange outputs,
                                       llvm::raw_ostream &body) {
  RankedTensorType out = tensorOf(outputs[0]);
  body << "  { static const int64_t dims[] = " << list(out.getShape()) << ";\n";
  std::string strideNames;
  for (auto [i, in] : llvm::enumerate(inputs)) {
    body << "    static const int64_t s" << i << "[] = "
         << list(broadcastStrides(tensorOf(in).getShape(), out.getShape()))
         << ";\n";
    strideNames += (i ? ", s" : "s") + std::to_string(i);
  }
  body << "    const int64_t *strides[] = {" << strideNames << "};\n";
  std::string params = "int64_t o";
  for (size_t i = 0; i < inputs.size(); ++i)
    params += ", int64_t i" + std::to_string(i);
  body << "    ampc::cpu::forEach<" << inputs.size() << ">(" << out.getRank()
       << ", dims, strides, [&](" << params << ") {\n";
  // Each operand element is loaded once; each intermediate is a local,
  // rounded to its dtype as if it had been stored.
  llvm::DenseMap<Value, std::string> scalars;
  for (auto [i, in] : llvm::enumerate(inputs)) {
    std::string x = "x" + std::to_string(i);
    scalars[arguments[i]] = x;
    body << "      const " << computeType(elementOf(in)) << " " << x << " = "
         << load(elementOf(in), name(in) + "[i" + std::to_string(i) + "]")
         << ";\n";
  }
  SmallVector<std::pair<Value, std::string>> stores;
  for (auto [v, output] : llvm::zip(yielded, outputs))
    stores.push_back({v, name(output) + "[o]"});
  if (failed(emitScalarOps(ops, scalars, stores, "      ", body)))
    return failure();
  body << "    }); }\n";
  return success();
}

std::string Emitter::widenFloat(Operation *op, Value v) {
  Type t = elementOf(v);
  std::string n = name(v);
  if (t.isF32() || t.isF64())
    return formatv("const {0} *w_{1} = {1};\n", storageType(t), n).str();
  // The slot of the operand's first occurrence (scratchLayout: "wI").
  unsigned index = 0;
  while (op->getOperand(index) != v)
    ++index;
  return formatv("float *w_{0} = {1}; ampc::cpu::widen<{3}>({0}, {2}LL, "
                 "w_{0});\n",
                 n, scratch(op, "w" + std::to_string(index), "float"),
                 tensorOf(v).getNumElements(), codec(t))
      .str();
}

std::string Emitter::failUnless(Operation *op, const std::string &condition,
                                StringRef what) {
  canFail = true;
  return formatv("  if (!({0})) return ampc::cpu::fail(state + {1}, \"{2}: "
                 "{3}\");\n",
                 condition, errorSlot(), cString(nodeDescription(op)), what)
      .str();
}

LogicalResult Emitter::emitMatmul(Operation *op, llvm::raw_ostream &body) {
  // Gemm: alpha * op(A) op(B) + beta * C; MatMul: batched A B with numpy
  // broadcasting of the batch dimensions. Both widen 16-bit inputs to FP32,
  // multiply with FP32 accumulation, and round once when storing.
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
                      "      ampc::cpu::forEach<1>(2, dims, strides, [&](int64_t "
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
  } else if (auto bg = dyn_cast<ampc::BatchedGemmOp>(op)) {
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
  } else {
    // Promote 1-D operands to matrices, then loop over the broadcast batch.
    SmallVector<int64_t> as(tensorOf(a).getShape()), bs(tensorOf(b).getShape());
    if (as.size() == 1)
      as.insert(as.begin(), 1);
    if (bs.size() == 1)
      bs.push_back(1);
    int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
    ArrayRef<int64_t> aBatch = ArrayRef(as).drop_back(2),
                      bBatch = ArrayRef(bs).drop_back(2);
    SmallVector<int64_t> batch =
        *ampc::broadcastShapes({aBatch, bBatch});
    SmallVector<int64_t> aStrides = broadcastStrides(aBatch, batch),
                         bStrides = broadcastStrides(bBatch, batch);
    for (int64_t &s : aStrides)
      s *= m * k;
    for (int64_t &s : bStrides)
      s *= k * n;
    body << formatv("    static const int64_t dims[] = {0}; static const int64_t "
                    "sa[] = {1}; static const int64_t sb[] = {2};\n"
                    "    const int64_t *strides[] = {{sa, sb};\n"
                    "    ampc::cpu::forEach<2>({3}, dims, strides, [&](int64_t o, "
                    "int64_t ia, int64_t ib) {{\n"
                    "      ampc::cpu::gemm<{10}>(false, false, {4}LL, {5}LL, {6}LL, "
                    "{10}(1), w_{7} + ia, w_{8} + ib, {10}(0), acc + o * "
                    "{9}LL);\n"
                    "    });\n",
                    list(batch), list(aStrides), list(bStrides), batch.size(), m,
                    n, k, name(a), name(b), m * n, t);
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

void Emitter::emitConstant(Operation *op, llvm::raw_ostream &body) {
  Value v = op->getResult(0);
  std::string n = "c" + std::to_string(counter++);
  names[v] = n;
  llvm::raw_string_ostream cs(constants);
  cs << "alignas(64) static const " << storageType(elementOf(v)) << " " << n
     << "[] = {" << constantElements(op) << "};\n";
  (void)body;
}

LogicalResult Emitter::emitWindow(Operation *op, const WindowGeometry &g,
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

/// The CPU target's convolutions and pools take NCHW images; BatchNorm
/// takes either layout (batchNormGeometry).
static LogicalResult refuseChannelsLast(Operation *op) {
  if (!op->hasAttr("channels_last"))
    return success();
  return op->emitError()
         << "the CPU target takes NCHW images: channels_last is the CUDA "
            "target's layout (--channels-last=off)";
}

LogicalResult Emitter::emitConvolution(Operation *op,
                                       llvm::raw_ostream &body) {
  if (failed(refuseChannelsLast(op)))
    return failure();
  // im2col + GEMM (a chunk of images per GEMM: cpuConvImagesPerGemm):
  // 16-bit operands widened to FP32, FP32 accumulation, one rounding when
  // storing; f64 in double.
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
  int64_t images = cpuConvImagesPerGemm(op);
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

LogicalResult Emitter::emitPool(Operation *op, llvm::raw_ostream &body) {
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

LogicalResult Emitter::emitGradientOp(Operation *op, llvm::raw_ostream &body) {
  // Kernels of CpuBackwardKernels.h; 16-bit data is widened to FP32 where a
  // kernel computes on FP32 arrays and rounded once when stored.
  auto converted = [&](StringRef what, StringRef c, Value v) {
    body << convertedArray(op, what, c, v);
  };
  // Stores `count` values of vector `acc` into `out`.
  auto storeAll = [&](StringRef acc, Value out) {
    body << "    for (int64_t i = 0; i < " << tensorOf(out).getNumElements()
         << "LL; ++i) " << name(out) << "[i] = "
         << store(elementOf(out), (acc + "[i]").str()) << ";\n";
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ampc::ConvBackwardDataOp, ampc::ConvBackwardWeightOp>(
          [&](Operation *) { return emitConvolution(op, body); })
      .Case<ampc::MaxPoolGradOp, ampc::AveragePoolGradOp>(
          [&](Operation *) { return emitPool(op, body); })
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
        converted("scale", c, o.getScale());
        converted("mean", c, o.getMean());
        converted("invStdDev", c, o.getInvStdDev());
        body << scratchArray(op, "gradScale", c)
             << scratchArray(op, "gradBias", c);
        body << formatv(
            "    ampc::cpu::batchNormGrad<{0}, {7}, {8}>({1}, {2}, {3}, {4}LL, "
            "{5}LL, {6}LL, scale, mean, invStdDev, {9}, gradScale, "
            "gradBias);\n",
            c, name(o.getGrad()), name(x), name(o.getGradInput()), g.n,
            g.channels, g.inner, codec(elementOf(x)),
            codec(elementOf(o.getGradInput())),
            o.getTrainingMode() != 0 ? "true" : "false");
        storeAll("gradScale", o.getGradScale());
        storeAll("gradBias", o.getGradBias());
        body << "  }\n";
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
      .Case([&](ampc::NllLossGradOp o) {
        LossGeometry g = lossGeometry(op);
        StringRef c = g.compute;
        body << "  {\n";
        converted("grad", c, o.getGrad());
        if (o.getWeight())
          converted("weights", c, o.getWeight());
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
          converted("logp", c, o.getLogProb());
          body << formatv("    ampc::cpu::softmaxLossGrad<{0}>(out, logp, {1}, "
                          "{2}LL, {3}LL, {4}LL, {5}, {6}LL);\n",
                          c, name(g.labels), g.n,
                          g.classes, g.inner, g.ignoreIndex.has_value(),
                          g.ignoreIndex.value_or(0));
        }
        storeAll("out", o.getOutput());
        body << "  }\n";
        return success();
      })
      .Case([&](ampc::GatherGradOp o) {
        GatherGeometry g = gatherGeometry(op);
        StringRef c = accumulation(op);
        body << "  {\n";
        converted("grad", c, o.getGrad());
        body << scratchArray(op, "out", c);
        std::string call =
            formatv("ampc::cpu::gatherGrad<{0}>(grad, {1}, out, "
                    "{2}LL, {3}LL, {4}LL, {5}LL)",
                    c, name(o.getIndices()), g.data.outer, g.data.size,
                    g.indexCount, g.data.inner)
                .str();
        body << "  " << failUnless(op, call, "an index is out of range");
        storeAll("out", o.getOutput());
        body << "  }\n";
        return success();
      })
      .Case([&](ampc::SliceGradOp o) {
        StridedView view = stridedView(op);
        body << formatv("  {{ static const int64_t dims[] = {0}; static const "
                        "int64_t strides[] = {1};\n"
                        "    ampc::cpu::sliceGrad({2}, {3}, {4}LL, {5}, dims, "
                        "strides, {6}LL); }\n",
                        list(view.dims), list(view.strides), name(o.getGrad()),
                        name(o.getOutput()),
                        tensorOf(o.getOutput()).getNumElements(),
                        view.dims.size(), view.offset);
        return success();
      })
      .Default([&](Operation *) {
        return op->emitError()
               << "the CPU target cannot compile '" << op->getName()
               << "' yet";
      });
}

void Emitter::emitReduce(Operation *op, llvm::raw_ostream &body) {
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

template <typename Op>
void Emitter::emitLayerNorm(Op op, llvm::raw_ostream &body) {
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

void Emitter::emitAttention(Operation *op, llvm::raw_ostream &body) {
  AttentionGeometry g = attentionGeometry(op);
  StringRef c = accumulation(op);
  auto strides = [](ArrayRef<int64_t> s) {
    return formatv("{{{0}LL, {1}LL, {2}LL, {3}LL}", s[0], s[1], s[2], s[3])
        .str();
  };
  body << formatv("  {{ static const ampc::cpu::AttentionShape shape = "
                  "{{{0}LL, {1}LL, {2}LL, {3}LL, {4}LL, {5}LL, {6}, {7}, {8}, "
                  "{9}, {10}};\n",
                  g.batch, g.heads, g.sq, g.sk, g.d, g.dv, strides(g.q),
                  strides(g.k), strides(g.v), strides(g.o), strides(g.bias));
  // Dropout on P: the unfused Dropout's seed, step and element indices.
  std::string step = g.dropoutRatio > 0 ? trainingStep() : "0";
  body << formatv("    const ampc::math::AttentionDropout dropout = {{{0:e17}, "
                  "{1}ULL, static_cast<uint64_t>({2})};\n",
                  g.dropoutRatio, g.dropoutSeed, step);
  auto attrs = [&](auto a) {
    return std::make_tuple(a.getBias(), a.getScale(),
                           a.getCausal(), a.getLse());
  };
  auto emitCall = [&](StringRef kernel, Value q, Value bias, Value lse,
                      const llvm::APFloat &scale, bool causal,
                      StringRef buffers,
                      StringRef scratchArgs) {
    body << formatv("    ampc::cpu::{0}<{1}, {2}, {3}, {4}>({5}, shape, "
                    "{1}({6}), {7}, dropout, {8}); }\n",
                    kernel, c, codec(elementOf(q)),
                    bias ? codec(elementOf(bias)) : "ampc::cpu::As<float>",
                    codec(elementOf(lse)), buffers, exactLiteral(scale),
                    causal ? "true" : "false", scratchArgs);
  };
  std::string biasName = "nullptr";
  // K's and V's (and dK's and dV's) place in a packed Q|K|V.
  auto at = [&](Value v, int64_t offset) {
    return offset == 0 ? name(v)
                       : formatv("({0} + {1})", name(v), offset).str();
  };
  if (auto a = dyn_cast<ampc::AttentionOp>(op)) {
    auto [bias, scale, causal, lse] = attrs(a);
    if (bias)
      biasName = name(bias);
    std::string buffers = formatv("{0}, {1}, {2}, {3}, {4}, {5}", name(a.getQ()),
                                  at(a.getK(), g.kOffset),
                                  at(a.getV(), g.vOffset), biasName,
                                  name(a.getO()), name(lse))
                              .str();
    emitCall("attention", a.getQ(), bias, lse, scale, causal, buffers,
             scratch(op, "scores", c) + ", " + scratch(op, "acc", c));
    return;
  }
  auto a = cast<ampc::AttentionGradOp>(op);
  auto [bias, scale, causal, lse] = attrs(a);
  if (bias)
    biasName = name(bias);
  std::string buffers =
      formatv("{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}",
              name(a.getGrad()), name(a.getQ()), at(a.getK(), g.kOffset),
              at(a.getV(), g.vOffset), name(a.getO()), name(lse), biasName,
              name(a.getGradQ()), at(a.getGradK(), g.kOffset),
              at(a.getGradV(), g.vOffset))
          .str();
  emitCall("attentionGrad", a.getQ(), bias, lse, scale, causal, buffers,
           scratch(op, "dq", c) + ", " + scratch(op, "dk", c) + ", " +
               scratch(op, "dv", c));
}

void Emitter::emitBatchNorm(ampc::BatchNormalizationOp op,
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
  if (training)
    body << scratchArray(op, "batchMean", c)
         << scratchArray(op, "batchVariance", c)
         << formatv("    ampc::cpu::channelStatistics<{0}, {5}>({1}, {2}LL, "
                    "{3}LL, {4}LL, batchMean, batchVariance);\n",
                    c, name(x), n, channels, inner, codec(elementOf(x)));
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
                     double factor) {
    std::string b = (batch + "[i]").str();
    if (factor != 1.0)
      b = formatv("({0} * {1}({2:e17}))", b, c, factor).str();
    std::string e = training
                        ? formatv("{0}[i] * {1}({2:e17}) + {3} * {1}({4:e17})",
                                  input, c, momentum, b, 1.0 - momentum)
                              .str()
                        : (input + "[i]").str();
    body << "    for (int64_t i = 0; i < " << channels << "LL; ++i) "
         << name(out) << "[i] = " << store(elementOf(out), e) << ";\n";
  };
  running(op.getRunningMean(), "mean", "batchMean", 1.0);
  running(op.getRunningVar(), "variance", "batchVariance",
          op.runningVarianceFactor());
  body << "  }\n";
}

void Emitter::emitLoss(Operation *op, llvm::raw_ostream &body) {
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

void Emitter::emitStore(Operation *op, llvm::raw_ostream &body) {
  auto store = cast<ampc::StoreOp>(op);
  RankedTensorType t = tensorOf(store.getValue());
  body << "  std::memmove(state + " << parameterOffsets.lookup(store.getTarget())
       << ", " << name(store.getValue()) << ", "
       << t.getNumElements() * storageSize(t.getElementType()) << "ULL);\n";
}

LogicalResult Emitter::emitKernelOp(Operation *op, llvm::raw_ostream &body) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ampc::TransposeOp) {
        emitStrided(op, body);
        return success();
      })
      .Case<ampc::GemmOp, ampc::MatMulOp, ampc::BatchedGemmOp>(
          [&](Operation *) { return emitMatmul(op, body); })
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
      .Case([&](ampc::SliceOp o) {
        if (tensorOf(o.getOutput()).getNumElements())
          emitStrided(op, body);
        return success();
      })
      .Case([&](ampc::ConcatOp o) {
        ConcatGeometry g = concatGeometry(op);
        for (const ConcatPart &part : g.parts)
          body << formatv("  ampc::cpu::concatPart({0}, {1}, {2}LL, {3}LL, "
                          "{4}LL, {5}LL);\n",
                          name(part.input), name(o.getOutput()), g.outer,
                          part.block, g.row, part.offset);
        return success();
      })
      .Case([&](ampc::GatherOp o) {
        GatherGeometry g = gatherGeometry(op);
        body << failUnless(
            op,
            formatv("ampc::cpu::gather({0}, {1}, {2}, {3}LL, {4}LL, {5}LL, "
                    "{6}LL)",
                    name(o.getData()), name(o.getIndices()), name(o.getOutput()),
                    g.data.outer, g.data.size, g.indexCount, g.data.inner),
            "an index is out of range");
        return success();
      })
      .Case([&](ampc::ShapeOp o) {
        // Normally folded away; the values are known here anyway.
        SmallVector<int64_t> dims = shapeOpDims(op);
        if (!dims.empty())
          body << "  { static const int64_t dims[] = " << list(dims)
               << "; std::memcpy(" << name(o.getOutput()) << ", dims, "
               << 8 * dims.size() << "ULL); }\n";
        return success();
      })
      .Case([&](ampc::ScatterOp o) {
        GatherGeometry g = gatherGeometry(op);
        Type t = elementOf(o.getData());
        body << failUnless(
            op,
            formatv("ampc::cpu::scatter<{0}, {1}>({2}, {3}, {4}, {5}, {6}LL, "
                    "{7}LL, {8}LL, {9}LL, ampc::math::{10})",
                    computeType(t), codec(t), name(o.getData()),
                    name(o.getIndices()), name(o.getUpdates()),
                    name(o.getOutput()), g.data.outer, g.data.size,
                    g.indexCount, g.data.inner, scatterReductionName(op)),
            "an index is out of range");
        return success();
      })
      .Case([&](ampc::TopKOp o) {
        TopKGeometry g = topKGeometry(op);
        Type t = elementOf(o.getInput());
        if (tensorOf(o.getOutput()).getNumElements())
          body << formatv("  ampc::cpu::topK<{0}, {1}>({2}, {3}, {4}LL, {5}LL, "
                          "{6}LL, {7}LL, {8}, {9});\n",
                          computeType(t), codec(t), name(o.getInput()),
                          name(o.getOutput()), g.input.outer, g.input.size,
                          g.input.inner, g.k, g.largest,
                          scratch(op, "order", "int64_t"));
        return success();
      })
      .Case<ampc::ReduceSumOp, ampc::ReduceMeanOp, ampc::ReduceMaxOp,
            ampc::ReduceProdOp>(
          [&](Operation *) {
            emitReduce(op, body);
            return success();
          })
      .Case<ampc::AttentionOp, ampc::AttentionGradOp>([&](Operation *) {
        emitAttention(op, body);
        return success();
      })
      .Case<ampc::LayerNormalizationOp, ampc::AddLayerNormOp>([&](auto o) {
        emitLayerNorm(o, body);
        return success();
      })
      .Case([&](ampc::BatchNormalizationOp o) {
        emitBatchNorm(o, body);
        return success();
      })
      .Case([&](ampc::DropoutOp o) -> LogicalResult {
        RankedTensorType t = tensorOf(o.getOutput());
        double ratio = o.getRatio().convertToDouble();
        if (!o.getTrainingMode() || ratio == 0.0) {
          // The identity with an all-true mask.
          body << "  std::memcpy(" << name(o.getOutput()) << ", "
               << name(o.getInput()) << ", "
               << t.getNumElements() * storageSize(t.getElementType())
               << "ULL);\n  std::memset(" << name(o.getMask()) << ", 1, "
               << t.getNumElements() << "ULL);\n";
          return success();
        }
        // A random mask per training step (ampc.step, 0 in a library without
        // an optimizer), distinct per Dropout (its seed, else its name);
        // kept values scaled by 1 / (1 - ratio).
        uint64_t seed = o.maskSeed();
        std::string step = trainingStep();
        Type e = t.getElementType();
        body << formatv(
            "  {{ const uint64_t step = static_cast<uint64_t>({0});\n"
            "    for (int64_t i = 0; i < {1}LL; ++i) {{\n"
            "      const bool keep = ampc::cpu::dropoutKeeps({2}ULL, step, "
            "static_cast<uint64_t>(i), {3:e17});\n"
            "      {4}[i] = keep;\n"
            "      {5}[i] = {6};\n    }\n  }\n",
            step, t.getNumElements(), seed, ratio, name(o.getMask()),
            name(o.getOutput()),
            ratio >= 1.0
                ? store(e, "0")
                : store(e, formatv("keep ? {0} * {1}({2:e17}) : {1}(0)",
                                   load(e, name(o.getInput()) + "[i]"),
                                   computeType(e), 1.0 / (1.0 - ratio))
                               .str()));
        return success();
      })
      .Case<ampc::MaxPoolOp, ampc::AveragePoolOp>(
          [&](Operation *) { return emitPool(op, body); })
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
      .Case([&](ampc::ConvOp) { return emitConvolution(op, body); })
      .Case<ampc::SoftmaxCrossEntropyLossOp,
            ampc::NegativeLogLikelihoodLossOp>([&](Operation *) {
        emitLoss(op, body);
        return success();
      })
      .Default([&](Operation *) { return emitGradientOp(op, body); });
}

LogicalResult Emitter::emitTrainingOp(Operation *op, llvm::raw_ostream &body) {
  // T: what the step computes in, float or double (f64 models).
  auto computeIn = [](Value v) { return accumulatorType(elementOf(v)); };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ampc::UnscaleOp o) {
        body << "  { const float inv = ampc::cpu::inverseScale("
             << load(elementOf(o.getScale()), name(o.getScale()) + "[0]")
             << "); bool found = false;\n";
        for (auto [i, pair] :
             llvm::enumerate(llvm::zip(o.getGrads(), o.getUnscaled()))) {
          auto [g, u] = pair;
          // A channels-last gradient's channels and spatial size.
          auto [channels, spatial] = unscaleLayout(o, i);
          std::string layout =
              channels ? formatv(", {0}LL, {1}LL", channels, spatial).str()
                       : "";
          body << formatv("    found |= ampc::cpu::unscale<{3}>({0}, {1}, "
                          "{2}LL, inv{4});\n",
                          name(g), name(u), tensorOf(g).getNumElements(),
                          codec(elementOf(g)), layout);
        }
        body << "    " << name(o.getFoundInf()) << "[0] = found; }\n";
        return success();
      })
      .Case([&](ampc::ClipGradNormOp o) {
        StringRef t = accumulation(op);
        body << "  { " << t << " sum = 0;\n";
        for (Value g : o.getGrads())
          body << formatv("    sum += ampc::cpu::sumOfSquares({0}, {1}LL);\n",
                          name(g), tensorOf(g).getNumElements());
        body << formatv("    const {0} coef = std::min<{0}>({0}(1), {0}({1:e9}) "
                        "/ (std::sqrt(sum) + {0}(1e-6)));\n",
                        t, o.getMaxNorm().convertToFloat());
        for (auto [g, c] : llvm::zip(o.getGrads(), o.getClipped()))
          body << formatv("    for (int64_t i = 0; i < {0}LL; ++i) {1}[i] = "
                          "{2}[i] * coef;\n",
                          tensorOf(g).getNumElements(), name(c), name(g));
        body << "  }\n";
        return success();
      })
      .Case([&](ampc::OptimizerUpdateOp o) {
        StringRef t = computeIn(o.getParam());
        int64_t count = tensorOf(o.getParam()).getNumElements();
        auto literal = [&](APFloat v) {
          return formatv("{0}({1:e9})", t, v.convertToFloat()).str();
        };
        std::string lr = formatv("{0}({1}[0])", t, name(o.getLr())).str();
        std::string step = name(o.getStep()) + "[0]";
        std::string skip =
            o.getFoundInf() ? name(o.getFoundInf()) + "[0]" : "false";
        int64_t bytes = count * storageSize(elementOf(o.getParam()));
        // A skipped step copies every input to its result, bit for bit.
        body << "  if (" << skip << ") {\n";
        body << formatv("    std::memcpy({0}, {1}, {2}ULL);\n",
                        name(o.getNewParam()), name(o.getParam()), bytes);
        for (auto [m, nm] : llvm::zip(o.getMoments(), o.getNewMoments()))
          body << formatv("    std::memcpy({0}, {1}, {2}ULL);\n", name(nm),
                          name(m), bytes);
        body << "  } else {\n";
        if (o.getKind() == ampc::OptimizerKind::Sgd) {
          bool hasBuffer = !o.getMoments().empty();
          body << formatv(
              "    ampc::cpu::sgdStep<{0}>({1}, {2}, {3}, {4}, {5}, {6}LL, "
              "{7}, {8}, {9}, {10}, {11}, {12});\n",
              t, name(o.getParam()), name(o.getGrad()),
              hasBuffer ? name(o.getMoments()[0]) : "nullptr",
              name(o.getNewParam()),
              hasBuffer ? name(o.getNewMoments()[0]) : "nullptr", count, lr,
              step, literal(o.getMomentum()), literal(o.getDampening()),
              o.getNesterov(), literal(o.getWeightDecay()));
        } else {
          body << formatv(
              "    ampc::cpu::adamStep<{0}>({1}, {2}, {3}, {4}, {5}, {6}, {7}, "
              "{8}LL, {9}, {10}, {11}, {12}, {13}, {14}, {15});\n",
              t, name(o.getParam()), name(o.getGrad()),
              name(o.getMoments()[0]), name(o.getMoments()[1]),
              name(o.getNewParam()), name(o.getNewMoments()[0]),
              name(o.getNewMoments()[1]), count, lr, step,
              literal(o.getBeta1()), literal(o.getBeta2()),
              literal(o.getEps()), literal(o.getWeightDecay()),
              o.getKind() == ampc::OptimizerKind::Adamw);
        }
        body << "  }\n";
        return success();
      })
      .Case([&](ampc::UpdateScaleOp o) {
        body << formatv(
            "  ampc::cpu::updateScale({0}[0], {1}[0], {2}[0], {3:e9}f, "
            "{4:e9}f, {5}LL, {6:e9}f, {7:e9}f, {8}, {9});\n",
            name(o.getScale()), name(o.getGrowthTracker()),
            name(o.getFoundInf()), o.getGrowthFactor().convertToFloat(),
            o.getBackoffFactor().convertToFloat(), o.getGrowthInterval(),
            o.getMinScale().convertToFloat(), o.getMaxScale().convertToFloat(),
            name(o.getNewScale()), name(o.getNewGrowthTracker()));
        return success();
      })
      .Default([&](Operation *) { return failure(); });
}

void Emitter::emitArgument(unsigned index, BlockArgument arg,
                           llvm::raw_ostream &body) {
  Type t = elementOf(arg);
  std::string n = "in" + std::to_string(index);
  names[arg] = n;
  declarePointer(n,
                 "  const " + storageType(t) + " *" + n +
                     " = static_cast<const " + storageType(t) + " *>(inputs[" +
                     std::to_string(index) + "]);",
                 body);
}

void Emitter::emitReturn(unsigned index, Value v, llvm::raw_ostream &body) {
  RankedTensorType t = tensorOf(v);
  body << "  std::memcpy(outputs[" << index << "], " << name(v) << ", "
       << t.getNumElements() * storageSize(t.getElementType()) << "ULL);\n";
}

LogicalResult Emitter::emitLibrary(func::FuncOp forward, func::FuncOp trainStep,
                                   StringRef inferBody, StringRef stepBody) {
  os << "// Generated by ampc (CPU target). Model: " << options.modelName
     << "\n";
  for (StringRef header : kIncludes)
    os << "#include \"" << header << "\"\n";
  os << "\n" << constants;
  // A large body is cut into pieces (functions of their own, which the
  // compile builds apart and at once; startPiece), the function
  // calling them in order and returning the first error.
  bool training = isTraining(trainStep);
  struct Body {
    std::string name;
    std::vector<std::string> pieces;
  };
  SmallVector<Body> bodies;
  bodies.push_back(
      {"infer", cutPieces(inferBody, inferLayout, options.pieceBytes)});
  if (trainStep)
    bodies.push_back({training ? "trainStepBody" : "gradients",
                      cutPieces(stepBody, stepLayout, options.pieceBytes)});
  auto pieceName = [&](const Body &body, size_t i) {
    return symbol("ampc_" + body.name + "_piece" + std::to_string(i));
  };
  auto signature = [](StringRef name) {
    return ("int32_t " + name +
            "(unsigned char *state, const void *const *inputs, "
            "void *const *outputs)")
        .str();
  };
  bool pieced = llvm::any_of(bodies, [](const Body &b) {
    return b.pieces.size() > 1;
  });
  if (pieced) {
    for (const Body &body : bodies)
      for (size_t i = 0; i < body.pieces.size(); ++i)
        os << signature(pieceName(body, i)) << ";\n";
    for (const Body &body : bodies)
      for (size_t i = 0; i < body.pieces.size(); ++i) {
        os << "\n";
        startPiece();
        os << signature(pieceName(body, i))
           << " {\n  (void)state; (void)inputs; (void)outputs;\n"
           << body.pieces[i] << "  return 0;\n}\n";
      }
    os << "\n";
    startPiece();
  }
  emitParameterBlob(
      "The parameters' initial values, laid out as in the state.");
  emitCopyTable();
  os << "static int32_t refreshCopies(void *raw, int32_t parameter) {\n"
        "  ampc::cpu::refreshCopies(static_cast<unsigned char *>(raw), kCopies, "
        "kNumCopies, parameter);\n  return 0;\n}\n"
        "static int32_t copyOut(void *raw, uint64_t offset, void *out, "
        "uint64_t bytes) {\n"
        "  std::memcpy(out, static_cast<unsigned char *>(raw) + offset, bytes);\n"
        "  return 0;\n}\n"
        "static int32_t copyIn(void *raw, uint64_t offset, const void *in, "
        "uint64_t bytes) {\n"
        "  std::memcpy(static_cast<unsigned char *>(raw) + offset, in, bytes);\n"
        "  return 0;\n}\n\n";
  os << "static int32_t init(void *raw, const ampc_abi_config *) {\n";
  if (blobBytes)
    os << "  std::memcpy(raw, " << symbol("ampc_parameter_blob") << ", "
       << blobBytes << "ULL);\n";
  for (const SplatFill &f : splatFills)
    os << formatv("  ampc::cpu::fillWords(static_cast<unsigned char *>(raw) + "
                  "{0}, {1}ULL, {2}, {3}LL);\n",
                  f.offset, f.word, f.width, f.count);
  os << "  return refreshCopies(raw, -1);\n}\n\n";
  auto function = [&](const Body &body) {
    os << "static int32_t " << body.name
       << "(void *raw, const void *const *inputs, void *const *outputs) {\n"
          "  unsigned char *state = static_cast<unsigned char *>(raw);\n"
          "  (void)state; (void)inputs; (void)outputs;\n";
    if (!pieced)
      os << body.pieces.front();
    else
      for (size_t i = 0; i < body.pieces.size(); ++i)
        os << "  if (int32_t status = " << pieceName(body, i)
           << "(state, inputs, outputs))\n    return status;\n";
    os << "  return 0;\n}\n\n";
  };
  function(bodies[0]);
  if (trainStep) {
    function(bodies[1]);
    if (failed(emitParameterAccess(trainStep)))
      return failure();
  }
  if (training)
    emitTrainStepEntry();
  if (canFail)
    os << "\nstatic const char *lastError(void *raw) {\n"
          "  return ampc::cpu::lastError(static_cast<unsigned char *>(raw) + "
       << errorSlot() << ");\n}\n";
  emitDescriptor(forward, trainStep, canFail, /*hasRelease=*/false);
  return success();
}

} // namespace

LogicalResult ampc::emitCpuArtifact(ModuleOp module,
                                    const CpuLibraryOptions &options,
                                    Artifact &artifact) {
  return Emitter(module, options, artifact).run();
}

LogicalResult ampc::emitCpuSource(ModuleOp module,
                                  const CpuLibraryOptions &options,
                                  llvm::raw_ostream &source,
                                  std::string &parameters) {
  Artifact artifact;
  if (failed(emitCpuArtifact(module, options, artifact)))
    return failure();
  source << artifact.text();
  parameters = std::move(artifact.parameters);
  return success();
}

bool ampc::compileCpuLibrary(const Artifact &source, StringRef sourcePath,
                             StringRef output, std::string &error) {
  std::optional<std::string> program = emit::hostCompiler(error);
  if (!program)
    return false;
  std::vector<std::string> flags = {
      "-O3", "-std=c++17", "-fPIC", "-fvisibility=hidden",
      emit::runtimeIncludeFlag(AMPC_RUNTIME_INCLUDE_DIR)};
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // Hardware f16 conversions (CpuKernels.h) where this machine has them; a
  // library built here then needs F16C (every x86-64 CPU since 2012).
  if (__builtin_cpu_supports("f16c"))
    flags.push_back("-mf16c");
#endif
  std::string link[] = {"-lopenblas"};
  emit::LibraryCompile how;
  how.program = *program;
  how.compileFlags = flags;
  how.linkFlags = link;
  how.headers = kIncludes;
  how.what = "the C++ compiler";
  return emit::compileLibrary(how, source, sourcePath, output, error);
}
