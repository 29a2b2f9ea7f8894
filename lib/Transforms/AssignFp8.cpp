//===- AssignFp8.cpp - which GEMMs compute in FP8 -------------------------===//
//
// `--precision=fp8` (issue 42). ampc-assign-precision has decided every op
// as for BF16; this pass records on each BF16 GEMM whether it computes in
// FP8 and, where it does not, why (docs/precision.md, FP8). The decision is
// the forward GEMM's and covers its backward GEMMs (input and weight
// gradients), which autodiff derives from it later.
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/Fp8.h"
#include "ampc/Transforms/Passes.h"
#include "ampc/Transforms/Precision.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

namespace ampc {
#define GEN_PASS_DEF_ASSIGNFP8PASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

/// A GEMM's dimensions as a cuBLASLt call sees them: D (M x N) = A (M x K)
/// B (K x N), `batch` such products.
struct GemmDims {
  int64_t m, n, k, batch;
};

int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

std::optional<GemmDims> gemmDims(Operation *op) {
  auto shape = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  };
  if (auto gemm = dyn_cast<ampc::GemmOp>(op)) {
    ArrayRef<int64_t> a = shape(gemm.getA()), b = shape(gemm.getB());
    if (a.size() != 2 || b.size() != 2)
      return std::nullopt;
    int64_t m = gemm.getTransA() ? a[1] : a[0];
    int64_t k = gemm.getTransA() ? a[0] : a[1];
    int64_t n = gemm.getTransB() ? b[0] : b[1];
    return GemmDims{m, n, k, 1};
  }
  if (auto matmul = dyn_cast<ampc::MatMulOp>(op)) {
    ArrayRef<int64_t> a = shape(matmul.getLhs()), b = shape(matmul.getRhs());
    // numpy.matmul: a 1-D operand is a row (lhs) or column (rhs).
    int64_t m = a.size() >= 2 ? a[a.size() - 2] : 1;
    int64_t k = a.back();
    int64_t n = b.size() >= 2 ? b.back() : 1;
    if (b.size() <= 2) // a Linear: the lhs's batch dimensions are rows
      return GemmDims{m * product(a.drop_back(std::min<size_t>(a.size(), 2))),
                      n, k, 1};
    return GemmDims{m, n, k,
                    product(shape(matmul.getResult()).drop_back(2))};
  }
  if (auto batched = dyn_cast<ampc::BatchedGemmOp>(op))
    return GemmDims{static_cast<int64_t>(batched.getM()),
                    static_cast<int64_t>(batched.getN()),
                    static_cast<int64_t>(batched.getK()),
                    static_cast<int64_t>(batched.getBatch())};
  return std::nullopt;
}

class AssignFp8 : public ampc::impl::AssignFp8PassBase<AssignFp8> {
public:
  using Base::Base;
  void runOnOperation() override;

private:
  /// Why the GEMM stays BF16, or empty where it computes in FP8.
  std::string staysBf16(Operation *op, const GemmDims &dims,
                        ArrayRef<ampc::OverrideRule> keep,
                        llvm::DenseSet<const ampc::OverrideRule *> &used);
};

std::string
AssignFp8::staysBf16(Operation *op, const GemmDims &dims,
                     ArrayRef<ampc::OverrideRule> keep,
                     llvm::DenseSet<const ampc::OverrideRule *> &used) {
  if (const ampc::OverrideRule *rule = ampc::findOverrideRule(op, keep, used))
    return "override " + rule->origin + " " + rule->spelling();
  std::string notAligned;
  for (auto [name, value] : {std::pair<const char *, int64_t>{"M", dims.m},
                             {"N", dims.n},
                             {"K", dims.k}})
    if (value % 16)
      notAligned += llvm::formatv("{0}{1} = {2}", notAligned.empty() ? "" : ", ",
                                  name, value)
                        .str();
  if (!notAligned.empty())
    return notAligned + " not a multiple of 16 (cuBLASLt's FP8 GEMMs need "
                        "M, N and K multiples of 16)";
  // Saturating: a product past 2^63 is large enough to gain.
  const int64_t size = static_cast<int64_t>(std::min<uint64_t>(
      llvm::SaturatingMultiply(llvm::SaturatingMultiply<uint64_t>(dims.m, dims.n),
                               static_cast<uint64_t>(dims.k)),
      INT64_MAX));
  if (size <= minGemm)
    return llvm::formatv("M*N*K = {0}x{1}x{2} = {3} is at most {4} (too "
                         "small to gain: torchao measures FP8 at 0.80x of "
                         "BF16 at 1024x2048x1024; --fp8-min-gemm)",
                         dims.m, dims.n, dims.k, size, minGemm.getValue())
        .str();
  return "";
}

void AssignFp8::runOnOperation() {
  ModuleOp module = getOperation();
  auto fail = [&](const Twine &message) {
    emitError(module.getLoc()) << getArgument() << ": " << message;
    signalPassFailure();
  };
  if (format != "hybrid" && format != "e4m3")
    return fail("format must be hybrid or e4m3, got '" + format + "'");
  if (!ampc::isFp8AmaxAlgo(amaxAlgo))
    return fail("amax-algo must be max or most_recent, got '" + amaxAlgo +
                "'");
  if (amaxHistory < 1 || amaxHistory > ampc::kFp8MaxAmaxHistory)
    return fail("amax-history must be between 1 and " +
                Twine(ampc::kFp8MaxAmaxHistory) + ", got " +
                Twine(amaxHistory));
  if (margin < 0 || margin > ampc::kFp8MaxMargin)
    return fail("margin must be between 0 and " + Twine(ampc::kFp8MaxMargin) +
                ", got " + Twine(margin));
  if (minGemm < 0)
    return fail("min-gemm must be at least 0, got " + Twine(minGemm));
  std::vector<ampc::OverrideRule> keep;
  std::string error;
  if (!ampc::parseOverrideRules(keepBf16, "--keep-bf16", keep, error))
    return fail(error);

  Builder b(&getContext());
  llvm::DenseSet<const ampc::OverrideRule *> used;
  module.walk([&](Operation *op) {
    std::optional<GemmDims> dims = gemmDims(op);
    std::optional<ampc::PrecisionDecision> decision =
        ampc::getPrecisionDecision(op);
    // A GEMM kept in FP32 (an override) or not decided is no candidate.
    if (!dims || !decision || !decision->compute.isBF16())
      return;
    std::string why = staysBf16(op, *dims, keep, used);
    StringRef chosen =
        why.empty() ? StringRef(format) : StringRef(ampc::kFp8StaysBf16);
    if (why.empty())
      why = llvm::formatv("M, N, K = {0}, {1}, {2}: multiples of 16, "
                          "M*N*K above {3}",
                          dims->m, dims->n, dims->k, minGemm.getValue())
                .str();
    op->setAttr(ampc::kFp8Attr,
                b.getDictionaryAttr(
                    {b.getNamedAttr("format", b.getStringAttr(chosen)),
                     b.getNamedAttr("reason", b.getStringAttr(why))}));
  });
  for (const ampc::OverrideRule &rule : keep)
    if (!used.contains(&rule))
      emitWarning(module.getLoc()) << rule.origin << ": '" << rule.spelling()
                                   << "' names no op or node in the model";
  module->setAttr(
      ampc::kFp8RecipeAttr,
      b.getDictionaryAttr(
          {b.getNamedAttr("amax_history", b.getI64IntegerAttr(amaxHistory)),
           b.getNamedAttr("margin", b.getI64IntegerAttr(margin)),
           b.getNamedAttr("amax_algo", b.getStringAttr(amaxAlgo))}));
}

} // namespace
