//===- Fp8.h - the FP8 decision in the IR ------------------------*- C++ -*-===//
//
// `--precision=fp8` (issue 42): ampc-assign-fp8 records on each GEMM of the
// forward whether it computes in FP8 and why, and on the module the
// delayed-scaling recipe (docs/precision.md, FP8). Both attributes are
// verified in AMPCDialect.cpp. A header of its own so that the passes and
// the report that read the decision do not rebuild with AMPCDialect.h.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_DIALECT_FP8_H
#define AMPC_DIALECT_FP8_H

#include "llvm/ADT/StringRef.h"

namespace ampc {

/// On an ampc.gemm, ampc.matmul or ampc.batched_gemm:
/// `{format = "hybrid" | "e4m3" | "bf16", reason = "..."}`. hybrid: E4M3
/// inputs in the forward, E5M2 gradients in the backward GEMMs; e4m3: E4M3
/// for both; bf16: the GEMM stays BF16, `reason` says why.
constexpr llvm::StringLiteral kFp8Attr = "ampc.fp8";
/// On the module: `{amax_history = N : i64, margin = M : i64, amax_algo =
/// "max" | "most_recent"}`, the recipe every FP8 tensor's scale follows.
constexpr llvm::StringLiteral kFp8RecipeAttr = "ampc.fp8_recipe";

/// The `format` of a GEMM that stays BF16.
constexpr llvm::StringLiteral kFp8StaysBf16 = "bf16";

inline bool isFp8Format(llvm::StringRef format) {
  return format == "hybrid" || format == "e4m3" || format == kFp8StaysBf16;
}
inline bool isFp8AmaxAlgo(llvm::StringRef algo) {
  return algo == "max" || algo == "most_recent";
}
/// The amax history's bounds (--fp8-amax-history): Transformer Engine's
/// default is 1024; the state is per tensor, so a bound keeps it small.
constexpr int64_t kFp8MaxAmaxHistory = 65536;
/// --fp8-margin's bounds: the scale is divided by 2^margin in FP32.
constexpr int64_t kFp8MaxMargin = 127;

} // namespace ampc

#endif // AMPC_DIALECT_FP8_H
