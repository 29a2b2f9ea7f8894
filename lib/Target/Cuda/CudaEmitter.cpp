//===- CudaEmitter.cpp - CUDA model libraries ------------------------------===//
//
// Walks the kernel-level module (after ampc-fuse and ampc-plan-memory) and
// writes CUDA C++ for nvcc. The state is laid out as on the CPU target (see
// LibraryEmitter), but in one device arena the library allocates at init;
// the host state block holds only the context (CudaKernels.cuh). Per op:
//  - MatMul and Gemm: cuBLASLt, FP16/BF16 operands with FP32 compute, the
//    epilogue ampc-fuse-epilogues chose for a Gemm, strided batches for
//    MatMul;
//  - elementwise ops and ampc.fusion: one generated __global__ kernel each,
//    from the same scalar expressions as the CPU target;
//  - the rest: the templated kernels of CudaKernels.cuh;
//  - the training ops: one multi-tensor unscale writing found_inf on the
//    device, optimizer kernels that read found_inf, lr and the step from
//    the device and skip themselves, a one-thread scale update. Nothing in
//    train_step waits for the device; the loss reaches the caller's buffer
//    through a host function on the stream.
//
//===----------------------------------------------------------------------===//

#include "ampc/Target/CudaTarget.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Target/KernelGeometry.h"
#include "ampc/Transforms/MemoryPlan.h"
#include "ampc/Transforms/Training.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

using namespace mlir;
using namespace ampc::emit;
using llvm::formatv;
using llvm::StringRef;

namespace {

/// Rows of at least this many elements (a reduction's elements per output,
/// a softmax or layer-norm row) run a block per row (the *ByBlock kernels:
/// a block's worth of elements each) instead of a thread per row: a mean
/// over a whole activation summed by one thread took 0.3 s per call on an
/// H200 (the GPU benchmark's GPT block, docs/benchmarks.md). The grid is
/// the row count, at most kMaxRowBlocks (the kernels loop over the rest).
constexpr int64_t kBlockRowMinLength = 256;
constexpr int64_t kMaxRowBlocks = int64_t(1) << 16;

/// The cudaDataType of a GEMM operand, or "" for a type cuBLASLt does not
/// multiply.
StringRef cudaDataType(Type t) {
  if (t.isF16()) return "CUDA_R_16F";
  if (t.isBF16()) return "CUDA_R_16BF";
  if (t.isF32()) return "CUDA_R_32F";
  if (t.isF64()) return "CUDA_R_64F";
  return "";
}

/// The codec the templated kernels read and write `t` with.
std::string codec(Type t) { return codecName(t, "ampc::cuda"); }

/// A `ampc::cuda::Strided` literal: `dims` with `strides`.
std::string strided(ArrayRef<int64_t> dims, ArrayRef<int64_t> strides) {
  return formatv("ampc::cuda::Strided{{{0}, {1}, {2}}", dims.size(), list(dims),
                 list(strides))
      .str();
}

class CudaEmitter : public ampc::LibraryEmitter {
public:
  using LibraryEmitter::LibraryEmitter;

private:
  StringRef targetName() const override { return "cuda"; }
  ampc::KernelTarget kernelTarget() const override {
    return ampc::KernelTarget::Cuda;
  }
  bool constantInState(Operation *) const override { return true; }
  std::string load(Type t, const std::string &e) const override {
    if (t.isF16()) return "ampc::cuda::loadF16(" + e + ")";
    if (t.isBF16()) return "ampc::cuda::loadBf16(" + e + ")";
    if (t.isInteger(1)) return "(" + e + " != 0)";
    return e;
  }
  std::string store(Type t, const std::string &e) const override {
    if (t.isF16()) return "ampc::cuda::storeF16(" + e + ")";
    if (t.isBF16()) return "ampc::cuda::storeBf16(" + e + ")";
    return "static_cast<" + storageType(t).str() + ">(" + e + ")";
  }
  std::string hostStateSize() const override {
    return "sizeof(ampc::cuda::Context)";
  }
  std::string synchronizeFunction() const override {
    return "synchronizeState";
  }
  void beginFunction(func::FuncOp f) override {
    inTrainStep = f.getName() == "train_step" && isTraining(f);
  }
  void emitStore(Operation *op, llvm::raw_ostream &body) override;
  LogicalResult emitKernelOp(Operation *op, llvm::raw_ostream &body) override;
  void emitArgument(unsigned index, BlockArgument arg,
                    llvm::raw_ostream &body) override;
  void emitReturn(unsigned index, Value v, llvm::raw_ostream &body) override;
  LogicalResult emitLibrary(func::FuncOp forward, func::FuncOp trainStep,
                            StringRef inferBody, StringRef stepBody) override;

  /// `where` of the error macros: the node's description.
  std::string where(Operation *op) {
    return "\"" + cString(nodeDescription(op)) + "\"";
  }
  /// `kernel` (ampc::cuda::kernel<templateArgs>) over `rows` rows of
  /// `length` elements: a thread per row, or kernelByBlock with a block
  /// per row for long rows (kBlockRowMinLength).
  void launchRows(Operation *op, StringRef kernel, StringRef templateArgs,
                  int64_t rows, int64_t length, const std::string &args,
                  llvm::raw_ostream &body);
  /// A launch of `kernel` over `count` threads (grid-stride) and its check.
  void launch(Operation *op, StringRef kernel, int64_t count,
              const std::string &args, llvm::raw_ostream &body,
              StringRef grid = "");
  /// A device error code whose message names the node; the kernel argument
  /// pair "error, code".
  std::string deviceError(Operation *op, StringRef what);
  /// A generated kernel for `ops` (elementwise, in order, the last one
  /// computing `output`) over the elements of `output`, and its launch.
  LogicalResult emitElementwise(ArrayRef<Operation *> ops, ValueRange inputs,
                                ValueRange arguments, Value output,
                                llvm::raw_ostream &body) override;
  LogicalResult emitMatmul(Operation *op, llvm::raw_ostream &body);
  /// Leading dimensions of row-major A, B and D as stored
  /// (ampc.batched_gemm); 0: packed rows.
  struct LeadingDims {
    int64_t a, b, d;
  };
  /// One cuBLASLt call (row-major operands).
  void emitGemm(Operation *op, bool ta, bool tb, int64_t m, int64_t n,
                int64_t k, int64_t batch, int64_t strideA, int64_t strideB,
                int64_t strideD, Type ab, Type d, float alpha, float beta,
                StringRef epilogue, const std::string &a, const std::string &b,
                const std::string &out, const std::string &bias,
                llvm::raw_ostream &body, LeadingDims ld = {0, 0, 0});
  void emitStrided(Operation *op, Value input, Value output,
                   ArrayRef<int64_t> strides, int64_t base,
                   llvm::raw_ostream &body);
  /// The reductions and GlobalAveragePool.
  void emitReduce(Operation *op, llvm::raw_ostream &body);
  /// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss.
  void emitLoss(Operation *op, llvm::raw_ostream &body);
  LogicalResult emitTrainingOp(Operation *op,
                               llvm::raw_ostream &body) override;
  /// Convolutions and their adjoints: im2col + cuBLASLt, col2im.
  LogicalResult emitConvolution(Operation *op, llvm::raw_ostream &body);
  /// Pooling, batch normalisation and their adjoints.
  LogicalResult emitWindowOp(Operation *op, llvm::raw_ostream &body);
  /// `g` as a `ampc::cuda::Window` literal.
  std::string window(const WindowGeometry &g);

  std::string kernels;
  unsigned kernelCount = 0;
  SmallVector<std::string> deviceErrors = {""};
  /// Whether the function being written is the training step (its output 0
  /// is the loss, delivered asynchronously).
  bool inTrainStep = false;
};

void CudaEmitter::launch(Operation *op, StringRef kernel, int64_t count,
                         const std::string &args, llvm::raw_ostream &body,
                         StringRef grid) {
  std::string g = grid.empty()
                      ? formatv("ampc::cuda::blocks({0}LL)", count).str()
                      : grid.str();
  // ampc::cuda::launch: <<<>>> under nvcc, the CUDA execution on the CPU
  // under the host compiler (--target=cuda-sim), from one source.
  StringRef shortName = kernel;
  shortName.consume_front("ampc::cuda::");
  body << "  ampc::cuda::launch(\"" << shortName << "\", " << kernel << ", " << g
       << ", ampc::cuda::kThreads, 0, ctx.stream" << (args.empty() ? "" : ", ")
       << args << ");\n"
       << "  AMPC_LAUNCHED(ctx, " << where(op) << ");\n";
}

void CudaEmitter::launchRows(Operation *op, StringRef kernel,
                             StringRef templateArgs, int64_t rows,
                             int64_t length, const std::string &args,
                             llvm::raw_ostream &body) {
  bool byBlock = length >= kBlockRowMinLength;
  launch(op,
         formatv("ampc::cuda::{0}{1}<{2}>", kernel, byBlock ? "ByBlock" : "",
                 templateArgs)
             .str(),
         rows, args, body,
         byBlock ? formatv("{0}u", std::min(rows, kMaxRowBlocks)).str() : "");
}

std::string CudaEmitter::deviceError(Operation *op, StringRef what) {
  deviceErrors.push_back(nodeDescription(op) + ": " + what.str());
  return formatv("reinterpret_cast<int32_t *>(state + {0}), {1}", errorSlot(),
                 deviceErrors.size() - 1)
      .str();
}

void CudaEmitter::emitArgument(unsigned index, BlockArgument arg,
                               llvm::raw_ostream &body) {
  RankedTensorType t = tensorOf(arg);
  int64_t bytes = t.getNumElements() * storageSize(t.getElementType());
  std::string n = "in" + std::to_string(index);
  names[arg] = n;
  StringRef type = storageType(t.getElementType());
  body << formatv("  AMPC_CUDA(ctx, cudaMemcpyAsync(state + {0}, inputs[{1}], "
                  "{2}ULL, cudaMemcpyHostToDevice, ctx.stream), \"input {1}\");\n"
                  "  const {3} *{4} = reinterpret_cast<const {3} *>(state + "
                  "{0});\n",
                  stagingOffset(index), index, bytes, type, n);
}

void CudaEmitter::emitReturn(unsigned index, Value v, llvm::raw_ostream &body) {
  RankedTensorType t = tensorOf(v);
  int64_t bytes = t.getNumElements() * storageSize(t.getElementType());
  if (inTrainStep && index == 0) {
    body << formatv("  if (int32_t code = ampc::cuda::returnLoss(ctx, "
                    "outputs[0], {0}, {1}ULL)) return code;\n",
                    name(v), bytes);
    return;
  }
  body << formatv("  AMPC_CUDA(ctx, cudaMemcpyAsync(outputs[{0}], {1}, {2}ULL, "
                  "cudaMemcpyDeviceToHost, ctx.stream), \"output {0}\");\n",
                  index, name(v), bytes);
}

LogicalResult CudaEmitter::emitElementwise(ArrayRef<Operation *> ops,
                                           ValueRange inputs,
                                           ValueRange arguments, Value output,
                                           llvm::raw_ostream &body) {
  RankedTensorType out = tensorOf(output);
  ArrayRef<int64_t> shape = out.getShape();
  int64_t count = out.getNumElements();
  std::string k = "k" + std::to_string(kernelCount++);
  llvm::raw_string_ostream ks(kernels);
  ks << "// " << k << ":";
  for (Operation *op : ops)
    ks << " " << nodeDescription(op);
  ks << "\n__global__ void __launch_bounds__(ampc::cuda::kThreads) " << k << "(";
  std::string args;
  for (auto [i, in] : llvm::enumerate(inputs)) {
    ks << "const " << storageType(elementOf(in)) << " *__restrict__ a" << i
       << ", ";
    args += name(in) + ", ";
  }
  ks << storageType(out.getElementType()) << " *__restrict__ out) {\n"
     << "  AMPC_FOR(o, " << count << "LL) {\n";
  args += name(output);
  // Offsets of inputs that are not laid out like the output come from the
  // multi-index, with constant dims and strides.
  SmallVector<int64_t> own = rowMajorStrides(shape);
  llvm::DenseMap<Value, std::string> scalars;
  for (auto [i, in] : llvm::enumerate(inputs)) {
    SmallVector<int64_t> s = broadcastStrides(tensorOf(in).getShape(), shape);
    std::string at = "o";
    if (s != own) {
      at = "i" + std::to_string(i);
      ks << "    int64_t " << at << " = 0; { int64_t r = o;";
      for (int64_t d = shape.size() - 1; d >= 0; --d) {
        if (s[d])
          ks << " " << at << " += (r % " << shape[d] << "LL) * " << s[d]
             << "LL;";
        if (d)
          ks << " r /= " << shape[d] << "LL;";
      }
      ks << " }\n";
    }
    std::string x = "x" + std::to_string(i);
    scalars[arguments[i]] = x;
    ks << "    const " << computeType(elementOf(in)) << " " << x << " = "
       << load(elementOf(in), "a" + std::to_string(i) + "[" + at + "]")
       << ";\n";
  }
  if (failed(emitScalarOps(ops, scalars, "out[o]", "    ", ks)))
    return failure();
  ks << "  }\n}\n\n";
  launch(ops.back(), k, count, args, body);
  return success();
}

void CudaEmitter::emitGemm(Operation *op, bool ta, bool tb, int64_t m,
                           int64_t n, int64_t k, int64_t batch,
                           int64_t strideA, int64_t strideB, int64_t strideD,
                           Type ab, Type d, float alpha, float beta,
                           StringRef epilogue, const std::string &a,
                           const std::string &b, const std::string &out,
                           const std::string &bias, llvm::raw_ostream &body,
                           LeadingDims ld) {
  // Packed operands leave the leading dimensions to their default (0).
  std::string lds;
  if (ld.a || ld.b || ld.d)
    lds = formatv(", {0}LL, {1}LL, {2}LL", ld.a, ld.b, ld.d).str();
  body << formatv("  {{ static const ampc::cuda::Gemm g = {{{0}, {1}, {2}LL, "
                  "{3}LL, {4}LL, {5}LL, {6}LL, {7}LL, {8}LL, {9}, {10}, "
                  "{11:e9}f, {12:e9}f, CUBLASLT_EPILOGUE_{13}{19}};\n"
                  "    if (int32_t code = ampc::cuda::gemm(ctx, {14}, g, {15}, "
                  "{16}, {17}, {18})) return code; }\n",
                  ta, tb, m, n, k, batch, strideA, strideB, strideD,
                  cudaDataType(ab), cudaDataType(d), alpha, beta, epilogue,
                  where(op), a, b, out, bias.empty() ? "nullptr" : bias, lds);
}

/// cuBLASLt's name of a GEMM epilogue (after CUBLASLT_EPILOGUE_).
static StringRef cublasEpilogue(ampc::GemmEpilogue epi) {
  return epi == ampc::GemmEpilogue::ReluBias ? "RELU_BIAS"
         : epi == ampc::GemmEpilogue::Relu   ? "RELU"
         : epi == ampc::GemmEpilogue::Bias   ? "BIAS"
                                             : "DEFAULT";
}

LogicalResult CudaEmitter::emitMatmul(Operation *op, llvm::raw_ostream &body) {
  Value a = op->getOperand(0), b = op->getOperand(1), out = op->getResult(0);
  Type ab = elementOf(a), d = elementOf(out);
  if (cudaDataType(ab).empty() || elementOf(b) != ab || cudaDataType(d).empty())
    return op->emitError() << "the CUDA target multiplies float matrices of "
                              "one type only, got "
                           << ab << " and " << elementOf(b) << " into " << d;
  if (auto gemm = dyn_cast<ampc::GemmOp>(op)) {
    ArrayRef<int64_t> as = tensorOf(a).getShape(), bs = tensorOf(b).getShape();
    bool ta = gemm.getTransA() != 0, tb = gemm.getTransB() != 0;
    int64_t m = ta ? as[1] : as[0], k = ta ? as[0] : as[1];
    int64_t n = tb ? bs[0] : bs[1];
    float alpha = gemm.getAlpha().convertToFloat();
    float beta = gemm.getBeta().convertToFloat();
    Value c = gemm.getC();
    std::string bias;
    ampc::GemmEpilogue epi = gemm.getEpilogue();
    bool hasBias = epi == ampc::GemmEpilogue::Bias ||
                   epi == ampc::GemmEpilogue::ReluBias;
    if (c && hasBias) {
      // D = op(A) op(B) + bias (ampc-fuse-epilogues checked the form).
      bias = name(c);
      beta = 0.0f;
    } else if (c) {
      if (elementOf(c) != d)
        return op->emitError() << "the CUDA target adds C of the output's "
                                  "type only, got "
                               << elementOf(c) << " and " << d;
      // C broadcast into D, then D = alpha op(A) op(B) + beta D.
      emitStrided(op, c, out, broadcastStrides(tensorOf(c).getShape(), {m, n}),
                  0, body);
    } else {
      beta = 0.0f;
    }
    emitGemm(op, ta, tb, m, n, k, 1, 0, 0, 0, ab, d, alpha, beta,
             cublasEpilogue(epi), name(a), name(b), name(out), bias, body);
    return success();
  }
  if (auto bg = dyn_cast<ampc::BatchedGemmOp>(op)) {
    // The layouts are the op's (ampc-fold-transposes); D is written whole.
    emitGemm(op, bg.getTransA(), bg.getTransB(), bg.getM(), bg.getN(),
             bg.getK(), bg.getBatch(), bg.getStrideA(), bg.getStrideB(),
             bg.getStrideD(), ab, d, bg.getAlpha().convertToFloat(), 0.0f,
             cublasEpilogue(bg.getEpilogue()), name(a), name(b), name(out),
             bg.getBias() ? name(bg.getBias()) : "", body,
             {static_cast<int64_t>(bg.getLda()), static_cast<int64_t>(bg.getLdb()),
              static_cast<int64_t>(bg.getLdd())});
    return success();
  }
  // MatMul: promote 1-D operands, then broadcast the batch dimensions.
  SmallVector<int64_t> as(tensorOf(a).getShape()), bs(tensorOf(b).getShape());
  if (as.size() == 1)
    as.insert(as.begin(), 1);
  if (bs.size() == 1)
    bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  ArrayRef<int64_t> aBatch = ArrayRef(as).drop_back(2),
                    bBatch = ArrayRef(bs).drop_back(2);
  SmallVector<int64_t> batch = *ampc::broadcastShapes({aBatch, bBatch});
  int64_t count = product(batch);
  SmallVector<int64_t> aStrides = broadcastStrides(aBatch, batch),
                       bStrides = broadcastStrides(bBatch, batch);
  // Each operand's offset for each batch element.
  auto offsets = [&](ArrayRef<int64_t> strides, int64_t matrix) {
    SmallVector<int64_t> at;
    for (int64_t i = 0; i < count; ++i) {
      int64_t r = i, off = 0;
      for (int64_t dIndex = batch.size() - 1; dIndex >= 0; --dIndex) {
        off += (r % batch[dIndex]) * strides[dIndex] * matrix;
        r /= batch[dIndex];
      }
      at.push_back(off);
    }
    return at;
  };
  SmallVector<int64_t> aAt = offsets(aStrides, m * k), bAt = offsets(bStrides, k * n);
  auto uniform = [](ArrayRef<int64_t> at) {
    for (size_t i = 2; i < at.size(); ++i)
      if (at[i] - at[i - 1] != at[1] - at[0])
        return false;
    return true;
  };
  if (uniform(aAt) && uniform(bAt)) {
    int64_t sa = count > 1 ? aAt[1] - aAt[0] : 0;
    int64_t sb = count > 1 ? bAt[1] - bAt[0] : 0;
    emitGemm(op, false, false, m, n, k, count, sa, sb, m * n, ab, d, 1.0f,
             0.0f, "DEFAULT", name(a), name(b), name(out), "", body);
    return success();
  }
  // Batch broadcasting that is not a constant stride: one GEMM per batch.
  for (int64_t i = 0; i < count; ++i)
    emitGemm(op, false, false, m, n, k, 1, 0, 0, 0, ab, d, 1.0f, 0.0f,
             "DEFAULT", formatv("{0} + {1}", name(a), aAt[i]).str(),
             formatv("{0} + {1}", name(b), bAt[i]).str(),
             formatv("{0} + {1}", name(out), i * m * n).str(), "", body);
  return success();
}

void CudaEmitter::emitStrided(Operation *op, Value input, Value output,
                              ArrayRef<int64_t> strides, int64_t base,
                              llvm::raw_ostream &body) {
  RankedTensorType out = tensorOf(output);
  if (out.getNumElements() == 0)
    return;
  launch(op,
         formatv("ampc::cuda::stridedCopy<{0}>",
                 storageType(out.getElementType()))
             .str(),
         out.getNumElements(),
         formatv("{0}, {1}, {2}LL, {3}LL, {4}", name(input), name(output),
                 out.getNumElements(), base,
                 strided(out.getShape(), strides))
             .str(),
         body);
}

void CudaEmitter::emitReduce(Operation *op, llvm::raw_ostream &body) {
  Value in = op->getOperand(0), out = op->getResult(0);
  int64_t outCount = tensorOf(out).getNumElements();
  if (outCount == 0)
    return;
  ReduceGeometry g = reduceGeometry(op);
  Type ti = elementOf(in), to = elementOf(out);
  std::string kept = strided(g.keptDims, g.keptStrides),
              reduced = strided(g.reducedDims, g.reducedStrides);
  int64_t splits = cudaReduceSplits(outCount, g.reducedCount());
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
  // output (or scratch) and NegativeLogLikelihoodLoss.
  LossGeometry g = lossGeometry(op);
  Value scores = g.scores, weights = g.weights, logProb = g.logProb;
  int64_t n = g.n, classes = g.classes, inner = g.inner;
  Type t = elementOf(scores);
  StringRef c = g.compute;
  std::string logp = name(scores);
  Type logpType = t;
  if (isa<ampc::SoftmaxCrossEntropyLossOp>(op)) {
    // log-probabilities in C, in the op's scratch.
    logp = scratch(op, "logp", c);
    logpType = c == "double" ? Type(Float64Type::get(op->getContext()))
                             : Type(Float32Type::get(op->getContext()));
    launchRows(op, "softmax",
               formatv("{0}, {1}, {2}", c, codec(t), codec(logpType)).str(),
               n * inner, classes,
               formatv("{0}, {1}, {2}LL, {3}LL, {4}LL, true", name(scores),
                       logp, n, classes, inner)
                   .str(),
               body);
    if (logProb)
      launchRows(op, "softmax",
                 formatv("{0}, {1}, {2}", c, codec(t),
                         codec(elementOf(logProb)))
                     .str(),
                 n * inner, classes,
                 formatv("{0}, {1}, {2}LL, {3}LL, {4}LL, true", name(scores),
                         name(logProb), n, classes, inner)
                     .str(),
                 body);
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

LogicalResult CudaEmitter::emitTrainingOp(Operation *op,
                                          llvm::raw_ostream &body) {
  auto computeIn = [](Value v) { return accumulatorType(elementOf(v)); };
  // A TensorList of `ins` and `outs` (offsets in the arena), by value.
  // Multi-tensor kernels take lists of one element type and at most
  // kMaxTensors (256) tensors: the tensors are grouped by type, in order,
  // and each group split into lists of 256. Each list is written as a
  // TensorList literal; returns (type, list name, largest tensor, count).
  struct Chunk {
    std::string type, list;
    int64_t largest, count;
  };
  auto tensorLists = [&](ValueRange ins, ValueRange outs,
                         llvm::function_ref<std::string(Value)> typeOf) {
    std::vector<std::pair<std::string, SmallVector<std::pair<Value, Value>>>>
        groups;
    for (auto [i, o] : llvm::zip(ins, outs)) {
      std::string type = typeOf(i);
      auto group = llvm::find_if(groups, [&](auto &g) { return g.first == type; });
      if (group == groups.end()) {
        groups.push_back({type, {}});
        group = std::prev(groups.end());
      }
      group->second.push_back({i, o});
    }
    SmallVector<Chunk> chunks;
    for (auto &[type, pairs] : groups)
      for (size_t begin = 0; begin < pairs.size(); begin += 256) {
        std::string in, out, size;
        int64_t largest = 1, count = 0;
        for (size_t k = begin; k < std::min(pairs.size(), begin + 256); ++k) {
          auto [i, o] = pairs[k];
          in += formatv("static_cast<uint64_t>(reinterpret_cast<unsigned char "
                        "*>({0}) - state), ",
                        name(i))
                    .str();
          out += formatv("static_cast<uint64_t>(reinterpret_cast<unsigned "
                         "char *>({0}) - state), ",
                         name(o))
                     .str();
          size += formatv("{0}LL, ", tensorOf(i).getNumElements()).str();
          largest = std::max<int64_t>(largest, tensorOf(i).getNumElements());
          ++count;
        }
        body << formatv("  static const ampc::cuda::TensorList<{0}> list{1} = "
                        "{{{2}, {{{3}}, {{{4}}, {{{5}}};\n",
                        type, counter, count, in, out, size);
        chunks.push_back({type, "list" + std::to_string(counter++), largest,
                          count});
      }
    return chunks;
  };
  auto grid = [](const Chunk &c) {
    return formatv("dim3(ampc::cuda::blocks({0}LL), {1})", c.largest, c.count)
        .str();
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ampc::UnscaleOp o) -> LogicalResult {
        body << formatv("  AMPC_CUDA(ctx, cudaMemsetAsync({0}, 0, 1, "
                        "ctx.stream), {1});\n",
                        name(o.getFoundInf()), where(op));
        for (const Chunk &c :
             tensorLists(o.getGrads(), o.getUnscaled(), [&](Value v) {
               return storageType(elementOf(v)).str();
             }))
          launch(op, formatv("ampc::cuda::unscale<{0}>", c.type).str(), 0,
                 formatv("state, {0}, {1}, {2}", c.list, name(o.getScale()),
                         name(o.getFoundInf()))
                     .str(),
                 body, grid(c));
        return success();
      })
      .Case([&](ampc::ClipGradNormOp o) -> LogicalResult {
        // One norm over every gradient, summed in the first one's compute
        // type: the gradients are the FP32 (FP64) master gradients.
        StringRef t = accumulation(op);
        for (Value g : o.getGrads())
          if (computeIn(g) != t)
            return op->emitError()
                   << "the CUDA target clips gradients of one compute type, "
                      "got "
                   << t << " and " << computeIn(g);
        SmallVector<Chunk> chunks = tensorLists(
            o.getGrads(), o.getClipped(), [&](Value) { return t.str(); });
        std::string sumPtr = scratch(op, "sum", t);
        body << formatv("  AMPC_CUDA(ctx, cudaMemsetAsync({0}, 0, 8, "
                        "ctx.stream), {1});\n",
                        sumPtr, where(op));
        for (const Chunk &c : chunks)
          launch(op, formatv("ampc::cuda::sumOfSquares<{0}>", t).str(), 0,
                 formatv("state, {0}, {1}", c.list, sumPtr).str(), body,
                 grid(c));
        for (const Chunk &c : chunks)
          launch(op, formatv("ampc::cuda::clipByNorm<{0}>", t).str(), 0,
                 formatv("state, {0}, {1}, {2}({3:e9})", c.list, sumPtr, t,
                         o.getMaxNorm().convertToFloat())
                     .str(),
                 body, grid(c));
        return success();
      })
      .Case([&](ampc::OptimizerUpdateOp o) {
        StringRef t = computeIn(o.getParam());
        int64_t count = tensorOf(o.getParam()).getNumElements();
        auto literal = [&](APFloat v) {
          return formatv("{0}({1:e9})", t, v.convertToFloat()).str();
        };
        std::string found = o.getFoundInf()
                                ? "reinterpret_cast<const uint8_t *>(" +
                                      name(o.getFoundInf()) + ")"
                                : "nullptr";
        if (o.getKind() == ampc::OptimizerKind::Sgd) {
          bool hasBuffer = !o.getMoments().empty();
          launch(op, formatv("ampc::cuda::sgdStep<{0}>", t).str(), count,
                 formatv("{0}, {1}, {2}, {3}, {4}, {5}LL, {6}, {7}, {8}, {9}, "
                         "{10}, {11}, {12}",
                         name(o.getParam()), name(o.getGrad()),
                         hasBuffer ? name(o.getMoments()[0]) : "nullptr",
                         name(o.getNewParam()),
                         hasBuffer ? name(o.getNewMoments()[0]) : "nullptr",
                         count, name(o.getLr()), name(o.getStep()), found,
                         literal(o.getMomentum()), literal(o.getDampening()),
                         o.getNesterov(), literal(o.getWeightDecay()))
                     .str(),
                 body);
        } else {
          launch(op, formatv("ampc::cuda::adamStep<{0}>", t).str(), count,
                 formatv("{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}LL, {8}, {9}, "
                         "{10}, {11}, {12}, {13}, {14}, {15}",
                         name(o.getParam()), name(o.getGrad()),
                         name(o.getMoments()[0]), name(o.getMoments()[1]),
                         name(o.getNewParam()), name(o.getNewMoments()[0]),
                         name(o.getNewMoments()[1]), count, name(o.getLr()),
                         name(o.getStep()), found, literal(o.getBeta1()),
                         literal(o.getBeta2()), literal(o.getEps()),
                         literal(o.getWeightDecay()),
                         o.getKind() == ampc::OptimizerKind::Adamw)
                     .str(),
                 body);
        }
        return success();
      })
      .Case([&](ampc::UpdateScaleOp o) {
        body << formatv(
            "  ampc::cuda::launch(\"updateScale\", ampc::cuda::updateScale, 1, "
            "1, 0, ctx.stream, {0}, {1}, "
            "reinterpret_cast<const uint8_t *>({2}), {3:e9}f, {4:e9}f, {5}LL, "
            "{6:e9}f, {7:e9}f, {8}, {9});\n  AMPC_LAUNCHED(ctx, {10});\n",
            name(o.getScale()), name(o.getGrowthTracker()),
            name(o.getFoundInf()), o.getGrowthFactor().convertToFloat(),
            o.getBackoffFactor().convertToFloat(), o.getGrowthInterval(),
            o.getMinScale().convertToFloat(), o.getMaxScale().convertToFloat(),
            name(o.getNewScale()), name(o.getNewGrowthTracker()), where(op));
        return success();
      })
      .Default([&](Operation *) { return failure(); });
}

void CudaEmitter::emitStore(Operation *op, llvm::raw_ostream &body) {
  auto store = cast<ampc::StoreOp>(op);
  RankedTensorType t = tensorOf(store.getValue());
  body << formatv("  AMPC_CUDA(ctx, cudaMemcpyAsync(state + {0}, {1}, {2}ULL, "
                  "cudaMemcpyDeviceToDevice, ctx.stream), {3});\n",
                  parameterOffsets.lookup(store.getTarget()),
                  name(store.getValue()),
                  t.getNumElements() * storageSize(t.getElementType()),
                  where(op));
}

LogicalResult CudaEmitter::emitKernelOp(Operation *op,
                                        llvm::raw_ostream &body) {
  auto unsupported = [&]() -> LogicalResult {
    return op->emitError() << "the CUDA target cannot compile '"
                           << op->getName() << "' yet (use --target=cpu)";
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ampc::GemmOp, ampc::MatMulOp, ampc::BatchedGemmOp>(
          [&](Operation *) { return emitMatmul(op, body); })
      .Case<ampc::TransposeOp, ampc::SliceOp>([&](Operation *) {
        StridedView view = stridedView(op);
        emitStrided(op, op->getOperand(0), op->getResult(0), view.strides,
                    view.offset, body);
        return success();
      })
      .Case([&](ampc::SliceGradOp o) {
        RankedTensorType out = tensorOf(o.getOutput()),
                         grad = tensorOf(o.getGrad());
        StridedView view = stridedView(op);
        body << formatv("  AMPC_CUDA(ctx, cudaMemsetAsync({0}, 0, {1}ULL, "
                        "ctx.stream), {2});\n",
                        name(o.getOutput()),
                        out.getNumElements() * storageSize(out.getElementType()),
                        where(op));
        if (grad.getNumElements())
          launch(op,
                 formatv("ampc::cuda::stridedScatter<{0}>",
                         storageType(grad.getElementType()))
                     .str(),
                 grad.getNumElements(),
                 formatv("{0}, {1}, {2}LL, {3}LL, {4}", name(o.getGrad()),
                         name(o.getOutput()), grad.getNumElements(),
                         view.offset, strided(view.dims, view.strides))
                     .str(),
                 body);
        return success();
      })
      .Case([&](ampc::ConcatOp o) {
        ConcatGeometry g = concatGeometry(op);
        for (const ConcatPart &part : g.parts)
          if (part.block * g.outer != 0)
            launch(op,
                   formatv("ampc::cuda::concatPart<{0}>",
                           storageType(elementOf(part.input)))
                       .str(),
                   g.outer * part.block,
                   formatv("{0}, {1}, {2}LL, {3}LL, {4}LL, {5}LL",
                           name(part.input), name(o.getOutput()), g.outer,
                           part.block, g.row, part.offset)
                       .str(),
                   body);
        return success();
      })
      .Case([&](ampc::GatherOp o) {
        GatherGeometry g = gatherGeometry(op);
        int64_t count = tensorOf(o.getOutput()).getNumElements();
        if (count)
          launch(op,
                 formatv("ampc::cuda::gather<{0}, {1}>",
                         storageType(elementOf(o.getData())),
                         storageType(elementOf(o.getIndices())))
                     .str(),
                 count,
                 formatv("{0}, {1}, {2}, {3}LL, {4}LL, {5}LL, {6}LL, {7}",
                         name(o.getData()), name(o.getIndices()),
                         name(o.getOutput()), g.data.outer, g.data.size,
                         g.indexCount, g.data.inner,
                         deviceError(op, "an index is out of range"))
                     .str(),
                 body);
        return success();
      })
      .Case([&](ampc::GatherGradOp o) {
        // A counting sort of the indices by row, then a sum per output
        // element over its row's indices (CudaKernels.cuh, gatherGrad*).
        GatherGeometry g = gatherGeometry(op);
        Type t = elementOf(o.getOutput());
        int64_t outCount = tensorOf(o.getOutput()).getNumElements();
        if (!outCount)
          return success();
        int64_t rows = g.data.size;
        std::string buckets = scratch(op, "buckets", "unsigned long long"),
                    order = scratch(op, "order", "int64_t"),
                    indices = name(o.getIndices());
        StringRef indexType = storageType(elementOf(o.getIndices()));
        body << formatv("  AMPC_CUDA(ctx, cudaMemsetAsync({0}, 0, {1}ULL, "
                        "ctx.stream), {2});\n",
                        buckets, 8 * (2 * rows + 1), where(op));
        if (g.indexCount) {
          launch(op,
                 formatv("ampc::cuda::gatherGradCount<{0}>", indexType).str(),
                 g.indexCount,
                 formatv("{0}, {1}LL, {2}LL, {3}, {4}", indices, g.indexCount,
                         rows, buckets,
                         deviceError(op, "an index is out of range"))
                     .str(),
                 body);
          launch(op, "ampc::cuda::gatherGradStarts", 1,
                 formatv("{0}, {1}LL", buckets, rows + 1).str(), body, "1u");
          launch(op,
                 formatv("ampc::cuda::gatherGradFill<{0}>", indexType).str(),
                 g.indexCount,
                 formatv("{0}, {1}LL, {2}LL, {3}, {4}", indices, g.indexCount,
                         rows, buckets, order)
                     .str(),
                 body);
          launch(op, "ampc::cuda::gatherGradSort", rows,
                 formatv("{0}, {1}LL, {2}", buckets, rows, order).str(), body);
        }
        launch(op,
               formatv("ampc::cuda::gatherGrad<{0}, {1}, {2}, {3}>",
                       accumulation(op), storageType(t), codec(t), codec(t))
                   .str(),
               outCount,
               formatv("{0}, {1}, {2}, {3}, {4}LL, {5}LL, {6}LL, {7}LL",
                       name(o.getGrad()), buckets, order, name(o.getOutput()),
                       g.data.outer, rows, g.indexCount, g.data.inner)
                   .str(),
               body);
        return success();
      })
      .Case([&](ampc::ShapeOp o) {
        // Normally folded away; the values are known here anyway, copied
        // from the host (a constant in the state would need a layout).
        SmallVector<int64_t> dims = shapeOpDims(op);
        if (!dims.empty())
          body << "  { static const int64_t dims[] = " << list(dims)
               << "; AMPC_CUDA(ctx, cudaMemcpyAsync(" << name(o.getOutput())
               << ", dims, " << 8 * dims.size()
               << "ULL, cudaMemcpyHostToDevice, ctx.stream), " << where(op)
               << "); }\n";
        return success();
      })
      .Case<ampc::SoftmaxOp, ampc::LogSoftmaxOp>([&](Operation *) {
        Value in = op->getOperand(0), out = op->getResult(0);
        AxisSplit g = softmaxGeometry(op);
        Type ti = elementOf(in), to = elementOf(out);
        launchRows(op, "softmax",
                   formatv("{0}, {1}, {2}", accumulation(op), codec(ti),
                           codec(to))
                       .str(),
                   g.outer * g.inner, g.size,
                   formatv("{0}, {1}, {2}LL, {3}LL, {4}LL, {5}", name(in),
                           name(out), g.outer, g.size, g.inner,
                           isa<ampc::LogSoftmaxOp>(op))
                       .str(),
                   body);
        return success();
      })
      .Case<ampc::ReduceSumOp, ampc::ReduceMeanOp, ampc::ReduceMaxOp,
            ampc::ReduceProdOp, ampc::GlobalAveragePoolOp>([&](Operation *) {
        emitReduce(op, body);
        return success();
      })
      .Case([&](ampc::ScatterOp o) {
        // The data first, then the updates on it (a copy unless the memory
        // plan gave both one buffer).
        GatherGeometry g = gatherGeometry(op);
        RankedTensorType t = tensorOf(o.getOutput());
        int64_t bytes = t.getNumElements() * storageSize(t.getElementType());
        if (bytes)
          body << formatv("  if ({0} != {1}) AMPC_CUDA(ctx, cudaMemcpyAsync("
                          "{0}, {1}, {2}ULL, cudaMemcpyDeviceToDevice, "
                          "ctx.stream), {3});\n",
                          name(o.getOutput()), name(o.getData()), bytes,
                          where(op));
        if (g.data.outer * g.data.inner != 0 && g.indexCount)
          launch(op,
                 formatv("ampc::cuda::scatter<{0}, {1}, {2}>",
                         computeType(t.getElementType()),
                         codec(t.getElementType()),
                         storageType(elementOf(o.getIndices())))
                     .str(),
                 g.data.outer * g.data.inner,
                 formatv("{0}, {1}, {2}, {3}LL, {4}LL, {5}LL, {6}LL, "
                         "ampc::math::{7}, {8}",
                         name(o.getUpdates()), name(o.getIndices()),
                         name(o.getOutput()), g.data.outer, g.data.size,
                         g.indexCount, g.data.inner, scatterReductionName(op),
                         deviceError(op, "an index is out of range"))
                     .str(),
                 body);
        return success();
      })
      .Case([&](ampc::TopKOp o) {
        TopKGeometry g = topKGeometry(op);
        Type t = elementOf(o.getInput());
        if (tensorOf(o.getOutput()).getNumElements())
          launch(op,
                 formatv("ampc::cuda::topK<{0}, {1}>", computeType(t), codec(t))
                     .str(),
                 g.input.outer * g.input.size * g.input.inner,
                 formatv("{0}, {1}, {2}LL, {3}LL, {4}LL, {5}LL, {6}",
                         name(o.getInput()), name(o.getOutput()), g.input.outer,
                         g.input.size, g.input.inner, g.k, g.largest)
                     .str(),
                 body);
        return success();
      })
      .Case([&](ampc::LayerNormalizationOp o) -> LogicalResult {
        Value x = o.getInput(), y = o.getOutput();
        Type stash = elementOf(o.getMean()), p = elementOf(o.getScale());
        if (o.getBias() && elementOf(o.getBias()) != p)
          return op->emitError() << "the CUDA target needs Scale and B of one "
                                    "type";
        LayerNormGeometry g = layerNormGeometry(op);
        std::string scale = strided(g.normalized, g.scaleStrides);
        launchRows(op, "layerNorm",
               formatv("{0}, {1}, {2}, {3}, {4}", g.compute,
                       codec(elementOf(x)), codec(elementOf(y)), codec(stash),
                       codec(p))
                   .str(),
               g.outer, g.size,
               formatv("{0}, {1}, {2}, {3}, {4}LL, {5}LL, {6}, {7}, {8}, {9}, "
                       "{10}({11})",
                       name(x), name(y), name(o.getMean()),
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
        launch(op,
               formatv("ampc::cuda::layerNormGrad<{0}, {1}, {2}, {3}, {4}>",
                       g.compute, codec(elementOf(x)), codec(stash),
                       codec(elementOf(o.getScale())), codec(elementOf(x)))
                   .str(),
               g.outer,
               formatv("{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}LL, {8}LL",
                       name(o.getGrad()), name(x), name(o.getScale()),
                       strided(g.normalized, g.scaleStrides),
                       name(o.getMean()), name(o.getInvStdDev()),
                       name(o.getOutput()), g.outer, g.size)
                   .str(),
               body);
        return success();
      })
      .Case([&](ampc::DropoutOp o) {
        RankedTensorType t = tensorOf(o.getOutput());
        double ratio = o.getRatio().convertToDouble();
        int64_t bytes = t.getNumElements() * storageSize(t.getElementType());
        if (!o.getTrainingMode() || ratio == 0.0) {
          body << formatv("  AMPC_CUDA(ctx, cudaMemcpyAsync({0}, {1}, {2}ULL, "
                          "cudaMemcpyDeviceToDevice, ctx.stream), {4});\n"
                          "  AMPC_CUDA(ctx, cudaMemsetAsync({3}, 1, {5}ULL, "
                          "ctx.stream), {4});\n",
                          name(o.getOutput()), name(o.getInput()), bytes,
                          name(o.getMask()), where(op), t.getNumElements());
          return success();
        }
        // The CPU target's masks: the same seed, step and index.
        uint64_t seed = dropoutSeed(op);
        std::string step = "nullptr";
        if (parameterOffsets.count(ampc::kStepCount))
          step = formatv("reinterpret_cast<const int64_t *>(state + {0})",
                         parameterOffsets.lookup(ampc::kStepCount))
                     .str();
        Type e = t.getElementType();
        launch(op,
               formatv("ampc::cuda::dropout<{0}, {0}>", codec(e)).str(),
               t.getNumElements(),
               formatv("{0}, {1}, reinterpret_cast<uint8_t *>({2}), {3}LL, "
                       "{4}ULL, {5}, {6:e17}",
                       name(o.getInput()), name(o.getOutput()),
                       name(o.getMask()), t.getNumElements(), seed, step, ratio)
                   .str(),
               body);
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
               formatv("{0}, {1}, {2}, {3}LL, {4}LL, {5}LL, {6}, {7}LL, "
                       "ampc::cuda::{8}, {9}, {10}",
                       name(o.getGrad()), name(l.labels),
                       l.weights ? name(l.weights) : "nullptr", l.n, l.classes,
                       l.inner, l.ignoreIndex.has_value(),
                       l.ignoreIndex.value_or(0),
                       lossReductionName(l.reduction),
                       name(o.getOutput()),
                       deviceError(op, "a label is out of range"))
                   .str(),
               body);
        return success();
      })
      .Case<ampc::ConvOp, ampc::ConvBackwardDataOp,
            ampc::ConvBackwardWeightOp>(
          [&](Operation *) { return emitConvolution(op, body); })
      .Case<ampc::MaxPoolOp, ampc::AveragePoolOp, ampc::MaxPoolGradOp,
            ampc::AveragePoolGradOp, ampc::BatchNormalizationOp,
            ampc::BatchNormGradOp>(
          [&](Operation *) { return emitWindowOp(op, body); })
      .Default([&](Operation *) { return unsupported(); });
}

std::string CudaEmitter::window(const WindowGeometry &g) {
  return formatv("ampc::cuda::Window{{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}",
                 g.in.size(), list(g.in), list(g.out), list(g.kernel),
                 list(g.strides), list(g.padBegin), list(g.padEnd),
                 list(g.dilations))
      .str();
}

LogicalResult CudaEmitter::emitConvolution(Operation *op,
                                           llvm::raw_ostream &body) {
  // The forward Conv's X (n, c, in...), W (m, c/group, k...), Y (n, m,
  // out...), whichever op this is.
  ConvGeometry geometry = convGeometry(op);
  const WindowGeometry &shape = geometry.window;
  Value x = geometry.input, w = geometry.weight, y = geometry.output;
  int64_t group = geometry.group;
  ArrayRef<int64_t> xs = tensorOf(x).getShape(), ys = tensorOf(y).getShape();
  Type t = elementOf(x);
  if (cudaDataType(t).empty() || elementOf(w) != t || elementOf(y) != t)
    return op->emitError() << "the CUDA target convolves float tensors of one "
                              "type only";
  if (xs.size() - 2 > 8)
    return op->emitError() << "the CUDA target handles at most 8 spatial "
                              "dimensions";
  int64_t n = geometry.n, c = geometry.channels, m = geometry.filters;
  int64_t inSize = product(shape.in), outSize = product(shape.out),
          kernelSize = product(shape.kernel);
  int64_t cg = c / group, mg = m / group, depth = cg * kernelSize;
  StringRef acc = accumulation(op), storage = storageType(t);
  Type accType = acc == "double" ? Type(Float64Type::get(op->getContext()))
                                 : Type(Float32Type::get(op->getContext()));
  std::string win = window(shape);
  bool direct = shape.isIdentity();
  // im2col of X for every image (skipped for a 1x1 stride-1 window, where
  // X is its own column matrix): image stride, group offset.
  auto columns = [&]() -> std::tuple<std::string, int64_t, int64_t> {
    if (direct)
      return {name(x), c * inSize, cg * inSize};
    std::string cols = scratch(op, "columns", storage);
    launch(op, formatv("ampc::cuda::im2col<{0}>", storage).str(),
           n * c * kernelSize * outSize,
           formatv("{0}, {1}, {2}LL, {3}LL, {4}", name(x), cols, n, c, win).str(),
           body);
    return {cols, c * kernelSize * outSize, depth * outSize};
  };
  if (n == 0)
    return success();
  if (auto conv = dyn_cast<ampc::ConvOp>(op)) {
    auto [cols, imageStride, groupOffset] = columns();
    float beta = 0.0f;
    if (Value b = conv.getBias()) {
      if (elementOf(b) != t)
        return op->emitError() << "the CUDA target needs the bias in the "
                                  "output's type";
      // Y starts as the bias broadcast; the GEMMs add to it (one rounding).
      SmallVector<int64_t> biasStrides(ys.size(), 0);
      biasStrides[1] = 1;
      emitStrided(op, b, y, biasStrides, 0, body);
      beta = 1.0f;
    }
    for (int64_t g = 0; g < group; ++g)
      emitGemm(op, false, false, mg, outSize, depth, n, 0, imageStride,
               m * outSize, t, t, 1.0f, beta, "DEFAULT",
               formatv("{0} + {1}", name(w), g * mg * depth).str(),
               formatv("{0} + {1}", cols, g * groupOffset).str(),
               formatv("{0} + {1}", name(y), g * mg * outSize).str(), "", body);
    return success();
  }
  if (isa<ampc::ConvBackwardDataOp>(op)) {
    // Columns (in the accumulator type) = Wᵀ · dY per image and group, then
    // col2im sums them into dX, rounded once.
    std::string cols = scratch(op, "columns", acc);
    for (int64_t g = 0; g < group; ++g)
      emitGemm(op, true, false, depth, outSize, mg, n, 0, m * outSize,
               c * kernelSize * outSize, t, accType, 1.0f, 0.0f, "DEFAULT",
               formatv("{0} + {1}", name(w), g * mg * depth).str(),
               formatv("{0} + {1}", name(y), g * mg * outSize).str(),
               formatv("{0} + {1}", cols, g * depth * outSize).str(), "", body);
    launch(op,
           formatv("ampc::cuda::col2im<{0}, {1}>", acc, codec(t)).str(),
           n * c * inSize,
           formatv("{0}, {1}, {2}LL, {3}LL, {4}", cols, name(x), n, c, win).str(),
           body);
    return success();
  }
  // dW (in the accumulator type) = Σ over images of dY · colsᵀ, then
  // rounded once into W's type.
  auto [cols, imageStride, groupOffset] = columns();
  std::string sum = scratch(op, "sum", acc);
  for (int64_t g = 0; g < group; ++g) {
    auto call = [&](StringRef image, float beta) {
      emitGemm(op, false, true, mg, depth, outSize, 1, 0, 0, 0, t, accType,
               1.0f, beta, "DEFAULT",
               formatv("{0} + ({1}) * {2} + {3}", name(y), image, m * outSize,
                       g * mg * outSize)
                   .str(),
               formatv("{0} + ({1}) * {2} + {3}", cols, image, imageStride,
                       g * groupOffset)
                   .str(),
               formatv("{0} + {1}", sum, g * mg * depth).str(), "", body);
    };
    call("0", 0.0f);
    if (n > 1) {
      body << "  for (int64_t image = 1; image < " << n << "; ++image) {\n";
      call("image", 1.0f);
      body << "  }\n";
    }
  }
  launch(op, formatv("ampc::cuda::convert<{0}, {1}>", acc, codec(t)).str(),
         m * depth,
         formatv("{0}, {1}, {2}LL", sum, name(w), m * depth).str(), body);
  return success();
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
          launch(op,
                 formatv("ampc::cuda::channelStatistics<{0}, {1}>", acc,
                         codec(elementOf(x)))
                     .str(),
                 c,
                 formatv("{0}, {1}LL, {2}LL, {3}LL, {4}, {5}", name(x), n, c,
                         inner, mean, var)
                     .str(),
                 body);
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
        launch(op,
               formatv("ampc::cuda::batchNormGrad<{0}, {1}, {2}, {3}, {4}>",
                       acc, codec(elementOf(x)),
                       codec(elementOf(o.getGradInput())), codec(p),
                       codec(elementOf(o.getGradScale())))
                   .str(),
               g.channels,
               formatv("{0}, {1}, {2}, {3}LL, {4}LL, {5}LL, {6}, {7}, {8}, "
                       "{9}({10}), {11}, {12}",
                       name(o.getGrad()), name(x), name(o.getGradInput()), g.n,
                       g.channels, g.inner,
                       name(o.getScale()),
                       o.getMean() ? name(o.getMean()) : "nullptr",
                       o.getVar() ? name(o.getVar()) : "nullptr", acc,
                       exactLiteral(o.getEpsilon()), name(o.getGradScale()),
                       name(o.getGradBias()))
                   .str(),
               body);
        return success();
      })
      .Default([&](Operation *) { return failure(); });
}

LogicalResult CudaEmitter::emitLibrary(func::FuncOp forward,
                                       func::FuncOp trainStep,
                                       StringRef inferBody,
                                       StringRef stepBody) {
  bool training = isTraining(trainStep);
  os << "// Generated by ampc (CUDA target). Model: " << options.modelName
     << "\n#include \"" << ampc::kCudaKernelsHeader << "\"\n\n";
  emitParameterBlob(
      "The initial state (parameters, training state, constants).");
  os << "// Messages of the errors kernels report by code.\n"
        "static const char *const kDeviceErrors[] = {\n";
  for (const std::string &m : deviceErrors)
    os << "  \"" << cString(m) << "\",\n";
  os << "};\n\n" << kernels;
  emitCopyTable();
  os << "static int32_t refreshCopies(void *raw, int32_t parameter) {\n"
        "  return ampc::cuda::refreshCopies(ampc::cuda::context(raw), kCopies, "
        "kNumCopies, parameter);\n}\n"
        "static int32_t copyOut(void *raw, uint64_t offset, void *out, "
        "uint64_t bytes) {\n"
        "  return ampc::cuda::copyOut(ampc::cuda::context(raw), offset, out, "
        "bytes);\n}\n"
        "static int32_t copyIn(void *raw, uint64_t offset, const void *in, "
        "uint64_t bytes) {\n"
        "  return ampc::cuda::copyIn(ampc::cuda::context(raw), offset, in, "
        "bytes);\n}\n\n";
  std::string fills;
  for (const SplatFill &f : splatFills)
    fills += formatv("  if (int32_t code = ampc::cuda::fillState("
                     "ampc::cuda::context(raw), {0}ULL, {1}ULL, {2}, {3}LL)) "
                     "{{\n    ampc::cuda::freeResources(ampc::cuda::context("
                     "raw)); return code;\n  }\n",
                     f.offset, f.word, f.width, f.count)
                 .str();
  os << formatv("static int32_t init(void *raw, const ampc_abi_config *config) "
                "{{\n"
                "  if (int32_t code = ampc::cuda::init(raw, config, {0}ULL, "
                "{1}, {2}ULL, {6}ULL, {3}ULL, kDeviceErrors, {4})) return "
                "code;\n"
                "{5}"
                "  if (int32_t code = refreshCopies(raw, -1)) {{\n"
                "    ampc::cuda::freeResources(ampc::cuda::context(raw)); "
                "return code;\n  }\n"
                "  return 0;\n}\n\n",
                stateSize, blobBytes ? symbol("ampc_parameter_blob") : "nullptr",
                blobBytes, errorSlot(), deviceErrors.size(), fills, arenaBase);
  os << "static void release(void *raw) { ampc::cuda::release(raw); }\n"
        "static const char *lastError(void *raw) { return "
        "ampc::cuda::lastError(raw); }\n"
        "static int32_t synchronizeState(void *raw) { return "
        "ampc::cuda::synchronize(ampc::cuda::context(raw)); }\n\n";
  // Inference and gradients wait for their outputs; the training step does
  // not wait.
  auto function = [&](StringRef name, StringRef body, bool wait) {
    os << "static int32_t " << name
       << "(void *raw, const void *const *inputs, void *const *outputs) {\n"
          "  ampc::cuda::Context &ctx = ampc::cuda::context(raw);\n"
          "  unsigned char *state = ctx.device;\n"
          "  (void)state; (void)inputs; (void)outputs;\n"
       << body
       << (wait ? "  return ampc::cuda::synchronize(ctx);\n}\n\n"
                : "  return 0;\n}\n\n");
  };
  function("infer", inferBody, true);
  if (trainStep) {
    function(training ? "trainStepBody" : "gradients", stepBody, !training);
    if (failed(emitParameterAccess(trainStep)))
      return failure();
  }
  if (training)
    emitTrainStepEntry();
  emitDescriptor(forward, trainStep, /*hasLastError=*/true,
                 /*hasRelease=*/true);
  return success();
}

} // namespace

LogicalResult ampc::emitCudaSource(ModuleOp module,
                                   const LibraryOptions &options,
                                   llvm::raw_ostream &source,
                                   std::string &blob) {
  return CudaEmitter(module, options, source, blob).run();
}
