//===- CpuAttention.cpp - ampc.attention and its adjoint on the CPU ---------===//
//
// Fused attention (issue 38) and its adjoint on the kernels of
// CpuKernels.h, Q, K, V and O read through their logical [b, h, s, d]
// strides; dropout on P draws the unfused Dropout's masks.
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

LogicalResult CpuEmitter::emitAttention(Operation *op,
                                        llvm::raw_ostream &body) {
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
    return success();
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
  return success();
}
