//===- CudaGemm.cpp - GEMMs and convolutions --------------------------------===//
//
// Gemm and ampc.batched_gemm (every MatMul is one: ampc-lower-matmul) as
// cuBLASLt calls (FP16/BF16 operands with FP32 compute, the epilogue
// ampc-fuse-epilogues chose, strided batches), and the convolutions and their adjoints: one cuDNN call per
// convolution and direction (im2col + cuBLASLt, col2im where cuDNN's legacy
// API cannot take the window: cudnnConvolves, recorded as `cudnn`).
//
//===----------------------------------------------------------------------===//

#include "CudaEmitter.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Analysis/KernelGeometry.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace ampc::emit;
using namespace ampc::cudagen;
using llvm::formatv;
using llvm::StringRef;

void CudaEmitter::emitGemm(Operation *op, bool ta, bool tb, int64_t m,
                           int64_t n, int64_t k, int64_t batch,
                           int64_t strideA, int64_t strideB, int64_t strideD,
                           Type ab, Type d, float alpha, float beta,
                           StringRef epilogue, const std::string &a,
                           const std::string &b, const std::string &out,
                           const std::string &bias, llvm::raw_ostream &body,
                           LeadingDims ld, const ReluMask &mask) {
  // Packed operands leave the leading dimensions to their default (0); a
  // ReLU mask's bits per row follow them.
  std::string lds;
  if (ld.a || ld.b || ld.d || mask.bits)
    lds = formatv(", {0}LL, {1}LL, {2}LL", ld.a, ld.b, ld.d).str();
  if (mask.bits)
    lds += formatv(", {0}LL", mask.bits).str();
  std::string aux = mask.bits ? ", " + mask.pointer : "";
  body << formatv("  {{ static const ampc::cuda::Gemm g = {{{0}, {1}, {2}LL, "
                  "{3}LL, {4}LL, {5}LL, {6}LL, {7}LL, {8}LL, {9}, {10}, "
                  "{11:e9}f, {12:e9}f, CUBLASLT_EPILOGUE_{13}{19}};\n"
                  "    if (int32_t code = ampc::cuda::gemm(ctx, {14}, g, {15}, "
                  "{16}, {17}, {18}{20})) return code; }\n",
                  ta, tb, m, n, k, batch, strideA, strideB, strideD,
                  cudaDataType(ab), cudaDataType(d), alpha, beta, epilogue,
                  where(op), a, b, out, bias.empty() ? "nullptr" : bias, lds,
                  aux);
}

/// cuBLASLt's name of a GEMM epilogue (after CUBLASLT_EPILOGUE_). The
/// runtime gives cuBLASLt row-major B as its A and A as its B (column-major
/// Dᵀ = op(B)ᵀ op(A)ᵀ), so the bias gradient of op(A) (m values, the rows
/// of row-major D, the columns of cuBLASLt's D) is BGRADB, and op(B)'s is
/// BGRADA. The ReLU mask and DRELU_BGRAD's bias gradient follow cuBLASLt's
/// D: its rows are row-major D's columns (n), as the bias's are.
static StringRef cublasEpilogue(ampc::GemmEpilogue epi) {
  switch (epi) {
  case ampc::GemmEpilogue::ReluBias: return "RELU_BIAS";
  case ampc::GemmEpilogue::Relu: return "RELU";
  case ampc::GemmEpilogue::ReluAux: return "RELU_AUX";
  case ampc::GemmEpilogue::ReluAuxBias: return "RELU_AUX_BIAS";
  case ampc::GemmEpilogue::DRelu: return "DRELU";
  case ampc::GemmEpilogue::DReluBiasGrad: return "DRELU_BGRAD";
  case ampc::GemmEpilogue::Bias: return "BIAS";
  case ampc::GemmEpilogue::BiasGradA: return "BGRADB";
  case ampc::GemmEpilogue::BiasGradB: return "BGRADA";
  case ampc::GemmEpilogue::None: break;
  }
  return "DEFAULT";
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
    // The bias gradient epilogues write their second result through the
    // bias pointer (in D's type: the op's verifier).
    if (Value grad = gemm.getBiasGrad())
      bias = name(grad);
    bool hasBias = epi == ampc::GemmEpilogue::Bias ||
                   epi == ampc::GemmEpilogue::ReluBias ||
                   epi == ampc::GemmEpilogue::ReluAuxBias;
    // The ReLU mask it writes (RELU_AUX) or reads (DRELU).
    ReluMask mask = {};
    if (Value v = gemm.getReluMask() ? gemm.getReluMask()
                                     : gemm.getReluMaskOut())
      mask = {name(v), ampc::reluMaskBits(n)};
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
             cublasEpilogue(epi), name(a), name(b), name(out), bias, body,
             {0, 0, 0}, mask);
    return success();
  }
  auto bg = cast<ampc::BatchedGemmOp>(op);
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
std::string CudaEmitter::window(const WindowGeometry &g) {
  return formatv("ampc::cuda::Window{{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}",
                 g.in.size(), list(g.in), list(g.out), list(g.kernel),
                 list(g.strides), list(g.padBegin), list(g.padEnd),
                 list(g.dilations))
      .str();
}

/// cuDNN's name of a convolution's data type.
static StringRef cudnnDataType(Type t) {
  if (t.isF16()) return "CUDNN_DATA_HALF";
  if (t.isBF16()) return "CUDNN_DATA_BFLOAT16";
  if (t.isF64()) return "CUDNN_DATA_DOUBLE";
  return "CUDNN_DATA_FLOAT";
}

void CudaEmitter::emitCudnnConvolution(Operation *op,
                                       const ConvGeometry &geometry,
                                       float beta, llvm::raw_ostream &body) {
  const WindowGeometry &w = geometry.window;
  // A 1-D window is a 2-D one with H = 1 (cuDNN's tensors have 4 or 5
  // dimensions).
  int64_t lead = w.rank() == 1 ? 1 : 0;
  auto dims = [&](ArrayRef<int64_t> values, int64_t fill) {
    SmallVector<int64_t> all(lead, fill);
    all.append(values.begin(), values.end());
    return "{" + llvm::join(llvm::map_range(all, [](int64_t v) {
                              return std::to_string(v);
                            }),
                            ", ") +
           "}";
  };
  // channels_last: NHWC tensors and a KRSC (OHWI) filter.
  bool channelsLast = geometry.window.channels != 0;
  StringRef direction = isa<ampc::ConvOp>(op) ? "kConvolutionForward"
                        : isa<ampc::ConvBackwardDataOp>(op)
                            ? "kConvolutionBackwardData"
                            : "kConvolutionBackwardFilter";
  std::string spec =
      formatv("{{ampc::cuda::{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, "
              "{9}, {10}, {11}, {12}, {13:e9}f, {14}, {15}ULL}",
              direction, cudnnDataType(elementOf(geometry.input)),
              w.rank() + lead, geometry.n, geometry.channels, geometry.filters,
              geometry.group, dims(w.in, 1), dims(w.out, 1), dims(w.kernel, 1),
              dims(w.padBegin, 0), dims(w.strides, 1), dims(w.dilations, 1),
              beta, channelsLast ? "true" : "false",
              launchInt(op, "workspace"))
          .str();
  // One plan per distinct convolution (the forward in infer and in the
  // step share theirs).
  auto *found = llvm::find_if(convolutions, [&](const auto &c) {
    return c.first == spec;
  });
  size_t index = found - convolutions.begin();
  if (found == convolutions.end())
    convolutions.push_back({spec, where(op)});
  // The operands in the order ampc::cuda::convolution takes them.
  Value a = geometry.input, b = geometry.weight, out = geometry.output;
  if (isa<ampc::ConvBackwardDataOp>(op))
    a = geometry.output, out = geometry.input;
  else if (isa<ampc::ConvBackwardWeightOp>(op))
    b = geometry.output, out = geometry.weight;
  body << formatv("  if (int32_t code = ampc::cuda::convolution(ctx, {0}, {1}, "
                  "{2}, {3}, {4}, {5})) return code;\n",
                  where(op), index, name(a), name(b), name(out),
                  scratch(op, "workspace", "unsigned char"));
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
  bool cudnn = ampc::emit::launchFlag(op, "cudnn");
  // channels_last: cuDNN's NHWC descriptors; im2col, col2im and the GEMMs
  // below take NCHW only.
  bool channelsLast = shape.channels != 0;
  if (channelsLast && !cudnn)
    return op->emitError()
           << "the CUDA target runs a channels_last convolution on cuDNN "
              "only (pads equal at both ends, at most 3 spatial dimensions, "
              "the accumulation FP32, FP64 for f64)";
  if (auto conv = dyn_cast<ampc::ConvOp>(op)) {
    float beta = 0.0f;
    if (Value b = conv.getBias()) {
      if (elementOf(b) != t)
        return op->emitError() << "the CUDA target needs the bias in the "
                                  "output's type";
      // Y starts as the bias broadcast; the GEMMs add to it (one rounding).
      SmallVector<int64_t> biasStrides(ys.size(), 0);
      biasStrides[channelsLast ? ys.size() - 1 : 1] = 1;
      emitStrided(op, b, y, biasStrides, 0, body);
      beta = 1.0f;
    }
    if (cudnn) {
      emitCudnnConvolution(op, geometry, beta, body);
      return success();
    }
    auto [cols, imageStride, groupOffset] = columns();
    for (int64_t g = 0; g < group; ++g)
      emitGemm(op, false, false, mg, outSize, depth, n, 0, imageStride,
               m * outSize, t, t, 1.0f, beta, "DEFAULT",
               formatv("{0} + {1}", name(w), g * mg * depth).str(),
               formatv("{0} + {1}", cols, g * groupOffset).str(),
               formatv("{0} + {1}", name(y), g * mg * outSize).str(), "", body);
    return success();
  }
  if (cudnn) {
    emitCudnnConvolution(op, geometry, 0.0f, body);
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
