//===- CudaAttention.cpp - ampc.attention and its adjoint on CUDA ---------===//
//
// Fused attention (issue 38): the forward kernel (O and the rows'
// logsumexp), then for the adjoint the pre-pass (delta = rowsum(dO ∘ O))
// and the one backward launch (dQ, dK, dV), from
// include/ampc/Kernels/Cuda/CudaAttention.cuh; dropout on P draws its masks in
// the kernels (no mask buffer). Q, K, V, O and their gradients
// are read and written through their logical [b, h, s, d] strides, so the
// per-head layouts the exporter wrote (the op's perms) need no transpose.
//
//===----------------------------------------------------------------------===//

#include "CudaEmitter.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Analysis/KernelGeometry.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace ampc::emit;
using namespace ampc::cudagen;
using llvm::formatv;
using llvm::StringRef;

namespace {
/// The four logical strides as an ampc::cuda::attention::Strides literal.
std::string strides(llvm::ArrayRef<int64_t> s) {
  return formatv("ampc::cuda::attention::Strides{{{0}LL, {1}LL, {2}LL, {3}LL}",
                 s[0], s[1], s[2], s[3])
      .str();
}
} // namespace

LogicalResult CudaEmitter::emitAttention(Operation *op,
                                         llvm::raw_ostream &body) {
  AttentionGeometry g = attentionGeometry(op);
  Value q = op->getOperand(isa<ampc::AttentionGradOp>(op) ? 1 : 0);
  Type t = elementOf(q);
  StringRef type = t.isF16()    ? "__half"
                   : t.isBF16() ? "__nv_bfloat16"
                                : "";
  if (type.empty())
    return op->emitError()
           << "the CUDA target's attention kernels take FP16 or BF16 Q, K and "
              "V, got "
           << t << " (compile with --fuse-attention=false)";
  if (!cudaAttentionSupported(g.d, g.dv))
    return op->emitError() << "the CUDA target's attention kernels take head "
                              "dimensions 16 to 128, a multiple of 16, the "
                              "same for Q/K and V; got "
                           << g.d << " and " << g.dv;
  auto attrs = [](auto a) {
    return std::make_tuple(a.getBias(), a.getScale(), a.getCausal());
  };
  auto [bias, scale, causal] =
      isa<ampc::AttentionOp>(op) ? attrs(cast<ampc::AttentionOp>(op))
                                 : attrs(cast<ampc::AttentionGradOp>(op));
  if (bias && !elementOf(bias).isF32())
    return op->emitError() << "the CUDA target's attention kernels take an "
                              "FP32 bias, got "
                           << elementOf(bias);
  // `offset`: K's and V's (and dK's and dV's) place in a packed Q|K|V.
  auto ptr = [&](Value v, int64_t offset = 0) {
    if (offset == 0)
      return formatv("reinterpret_cast<{0} *>({1})", type, name(v)).str();
    return formatv("(reinterpret_cast<{0} *>({1}) + {2})", type, name(v),
                   offset)
        .str();
  };
  std::string biasPtr =
      bias ? "reinterpret_cast<const float *>(" + name(bias) + ")" : "nullptr";
  std::string kernel =
      formatv("ampc::cuda::attention::{{0}<{0}, {1}>", type, g.d).str();
  // Dropout on P: the unfused Dropout's seed, step and element indices
  // (the step is in the device state, so the shape is not static).
  body << formatv("  {{ const ampc::cuda::attention::Shape shape = "
                  "{{{0}, {1}, {2}, {3}, {4}f, {5}, {6:e17}, {7}ULL, {8}};\n",
                  g.batch, g.heads, g.sq, g.sk,
                  formatv("{0:e9}", scale.convertToFloat()),
                  causal ? "true" : "false", g.dropoutRatio, g.dropoutSeed,
                  g.dropoutRatio > 0 ? trainingStep() : "nullptr");
  emitGuards(op, body);
  if (auto a = dyn_cast<ampc::AttentionOp>(op)) {
    body << formatv(
        "  AMPC_CUDA(ctx, ({0}({1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, "
        "{10}, reinterpret_cast<float *>({11}), shape, ctx.stream)), {12}); }\n",
        formatv(kernel.c_str(), "forward").str(), ptr(a.getQ()),
        strides(g.q), ptr(a.getK(), g.kOffset), strides(g.k),
        ptr(a.getV(), g.vOffset), strides(g.v), biasPtr, strides(g.bias), ptr(a.getO()), strides(g.o),
        name(a.getLse()), where(op));
    return success();
  }
  auto a = cast<ampc::AttentionGradOp>(op);
  std::string delta = scratch(op, "delta", "float");
  body << formatv("  AMPC_CUDA(ctx, ({0}({1}, {2}, {3}, {4}, {5}, shape, "
                  "ctx.stream)), {6});\n",
                  formatv(kernel.c_str(), "prepass").str(), ptr(a.getGrad()),
                  strides(g.o), ptr(a.getO()), strides(g.o), delta, where(op));
  body << formatv(
      "  AMPC_CUDA(ctx, ({0}({1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, "
      "{10}, reinterpret_cast<const float *>({11}), {12}, {13}, {14}, {15}, "
      "{16}, {17}, {18}, shape, ctx.stream)), {19}); }\n",
      formatv(kernel.c_str(), "backward").str(), ptr(a.getGrad()),
      strides(g.o), ptr(a.getQ()), strides(g.q), ptr(a.getK(), g.kOffset),
      strides(g.k), ptr(a.getV(), g.vOffset), strides(g.v), biasPtr,
      strides(g.bias), name(a.getLse()), delta, ptr(a.getGradQ()),
      strides(g.q), ptr(a.getGradK(), g.kOffset), strides(g.k),
      ptr(a.getGradV(), g.vOffset), strides(g.v), where(op));
  return success();
}
