//===- ScalarExpression.cpp - one element of an elementwise op ------------===//

#include "ampc/Target/ScalarExpression.h"

#include "ampc/Dialect/AMPCDialect.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using llvm::formatv;

std::string ampc::reluExpression(StringRef x, StringRef computeType) {
  // NaN stays NaN, as in PyTorch (a NaN batch must not report a finite
  // loss); -0 becomes +0.
  return ("!(" + x + " <= 0) ? " + x + " : " + computeType + "(0)").str();
}

FailureOr<std::string>
ampc::scalarExpression(Operation *op, ArrayRef<std::string> operands,
                       StringRef computeType) {
  std::string c = computeType.str();
  auto arg = [&](unsigned i) { return operands[i]; };
  std::string x = operands.empty() ? "" : arg(0);
  std::optional<std::string> e =
      llvm::TypeSwitch<Operation *, std::optional<std::string>>(op)
          .Case([&](ampc::NegOp) { return "-" + x; })
          .Case([&](ampc::SqrtOp) { return "std::sqrt(" + x + ")"; })
          .Case([&](ampc::ReciprocalOp) { return c + "(1) / " + x; })
          .Case([&](ampc::ExpOp) { return "std::exp(" + x + ")"; })
          .Case([&](ampc::LogOp) { return "std::log(" + x + ")"; })
          .Case([&](ampc::ErfOp) { return "std::erf(" + x + ")"; })
          .Case([&](ampc::ReluOp) { return ampc::reluExpression(x, c); })
          .Case([&](ampc::SigmoidOp) {
            return c + "(1) / (" + c + "(1) + std::exp(-" + x + "))";
          })
          .Case([&](ampc::TanhOp) { return "std::tanh(" + x + ")"; })
          .Case([&](ampc::IdentityOp) { return x; })
          .Case([&](ampc::LeakyReluOp o) {
            return formatv("{0} >= 0 ? {0} : {1}({2:e9}) * {0}", x, c,
                           o.getAlpha().convertToFloat())
                .str();
          })
          .Case([&](ampc::GeluOp o) {
            if (o.getApproximate() == ampc::GeluApproximate::Tanh)
              return formatv("{1}(0.5) * {0} * ({1}(1) + std::tanh("
                             "{1}(0.7978845608028654) * ({0} + {1}(0.044715) "
                             "* {0} * {0} * {0})))",
                             x, c)
                  .str();
            return formatv("{1}(0.5) * {0} * ({1}(1) + std::erf({0} * "
                           "{1}(0.7071067811865476)))",
                           x, c)
                .str();
          })
          .Case([&](ampc::ReluGradOp o) {
            // Relu's (alpha 0) writes 0 where the mask is clear, whatever
            // the adjoint (PyTorch's threshold_backward; cuBLASLt's DRELU
            // epilogue, which replaces it on the CUDA target).
            float alpha = o.getAlpha().convertToFloat();
            if (alpha == 0.0f)
              return formatv("{1} > 0 ? {0} : {2}(0)", x, arg(1), c).str();
            return formatv("{1} > 0 ? {0} : {2}({3:e9}) * {0}", x, arg(1), c,
                           alpha)
                .str();
          })
          .Case([&](ampc::GeluGradOp o) {
            // gelu'(v) from the forward input v = arg(1), times the adjoint.
            std::string v = arg(1);
            if (o.getApproximate() == ampc::GeluApproximate::Tanh)
              return formatv(
                         "{0} * [&] {{ const {1} u = {1}(0.7978845608028654) * "
                         "({2} + {1}(0.044715) * {2} * {2} * {2}); const {1} t "
                         "= std::tanh(u); return {1}(0.5) * ({1}(1) + t) + "
                         "{1}(0.5) * {2} * ({1}(1) - t * t) * "
                         "{1}(0.7978845608028654) * ({1}(1) + {1}(0.134145) * "
                         "{2} * {2}); }()",
                         x, c, v)
                  .str();
            return formatv("{0} * ({1}(0.5) * ({1}(1) + std::erf({2} * "
                           "{1}(0.7071067811865476))) + {2} * std::exp({1}(-0.5) "
                           "* {2} * {2}) * {1}(0.3989422804014327))",
                           x, c, v)
                .str();
          })
          .Case([&](ampc::AddOp) { return x + " + " + arg(1); })
          .Case([&](ampc::SubOp) { return x + " - " + arg(1); })
          .Case([&](ampc::MulOp) { return x + " * " + arg(1); })
          .Case([&](ampc::DivOp) { return x + " / " + arg(1); })
          .Case([&](ampc::PowOp) {
            return "std::pow(" + x + ", " + arg(1) + ")";
          })
          .Case([&](ampc::EqualOp) { return x + " == " + arg(1); })
          .Case([&](ampc::WhereOp) {
            return x + " ? " + arg(1) + " : " + arg(2);
          })
          .Case([&](ampc::CastOp cast) {
            // ONNX Cast to bool is "not zero"; other casts convert (float
            // to integer truncates, as C++ does).
            auto to = cast.getOutput().getType().getElementType();
            return to.isInteger(1) ? x + " != 0" : x;
          })
          .Case([&](ampc::ExpandOp) { return x; })
          // Issue 18's elementwise ops (AMPCElementwiseOps.td).
          .Case([&](ampc::AbsOp) { return "std::abs(" + x + ")"; })
          .Case([&](ampc::SinOp) { return "std::sin(" + x + ")"; })
          .Case([&](ampc::CosOp) { return "std::cos(" + x + ")"; })
          .Case([&](ampc::TanOp) { return "std::tan(" + x + ")"; })
          .Case([&](ampc::AsinOp) { return "std::asin(" + x + ")"; })
          .Case([&](ampc::AcosOp) { return "std::acos(" + x + ")"; })
          .Case([&](ampc::AtanOp) { return "std::atan(" + x + ")"; })
          .Case([&](ampc::SinhOp) { return "std::sinh(" + x + ")"; })
          .Case([&](ampc::CoshOp) { return "std::cosh(" + x + ")"; })
          .Case([&](ampc::AsinhOp) { return "std::asinh(" + x + ")"; })
          .Case([&](ampc::AcoshOp) { return "std::acosh(" + x + ")"; })
          .Case([&](ampc::AtanhOp) { return "std::atanh(" + x + ")"; })
          .Case([&](ampc::SignOp) {
            // 0, -0 and NaN are their own sign.
            return formatv("{0} > {1}(0) ? {1}(1) : ({0} < {1}(0) ? {1}(-1) "
                           ": {0})",
                           x, c)
                .str();
          })
          .Case([&](ampc::FloorOp) { return "std::floor(" + x + ")"; })
          .Case([&](ampc::CeilOp) { return "std::ceil(" + x + ")"; })
          // The default rounding mode: halves to even.
          .Case([&](ampc::RoundOp) { return "std::nearbyint(" + x + ")"; })
          .Case([&](ampc::SoftplusOp) {
            return formatv("{0} > {1}(20) ? {0} : std::log1p(std::exp({0}))",
                           x, c)
                .str();
          })
          .Case([&](ampc::SoftsignOp) {
            return x + " / (" + c + "(1) + std::abs(" + x + "))";
          })
          .Case([&](ampc::MishOp) {
            return x + " * std::tanh(std::log1p(std::exp(" + x + ")))";
          })
          .Case([&](ampc::HardSwishOp) {
            std::string v = formatv("({0} * {1}(1.0 / 6.0) + {1}(0.5))", x, c);
            return formatv("{0} * ({1} < {2}(0) ? {2}(0) : ({1} > {2}(1) ? "
                           "{2}(1) : {1}))",
                           x, v, c)
                .str();
          })
          .Case([&](ampc::EluOp o) {
            return formatv("{0} > {1}(0) ? {0} : {1}({2:e9}) * std::expm1({0})",
                           x, c, o.getAlpha().convertToFloat())
                .str();
          })
          .Case([&](ampc::CeluOp o) {
            return formatv("{0} > {1}(0) ? {0} : {1}({2:e9}) * std::expm1({0} "
                           "/ {1}({2:e9}))",
                           x, c, o.getAlpha().convertToFloat())
                .str();
          })
          .Case([&](ampc::SeluOp o) {
            return formatv("{1}({3:e9}) * ({0} > {1}(0) ? {0} : {1}({2:e9}) * "
                           "std::expm1({0}))",
                           x, c, o.getAlpha().convertToFloat(),
                           o.getGamma().convertToFloat())
                .str();
          })
          .Case([&](ampc::HardSigmoidOp o) {
            std::string v = formatv("({1}({2:e9}) * {0} + {1}({3:e9}))", x, c,
                                    o.getAlpha().convertToFloat(),
                                    o.getBeta().convertToFloat());
            return formatv("{0} < {1}(0) ? {1}(0) : ({0} > {1}(1) ? {1}(1) : "
                           "{0})",
                           v, c)
                .str();
          })
          .Case([&](ampc::ThresholdedReluOp o) {
            return formatv("{0} > {1}({2:e9}) ? {0} : {1}(0)", x, c,
                           o.getAlpha().convertToFloat())
                .str();
          })
          .Case([&](ampc::StopGradientOp) { return x; })
          .Case([&](ampc::ShrinkOp o) {
            float lambd = o.getLambd().convertToFloat(),
                  bias = o.getBias().convertToFloat();
            return formatv("{0} < {1}({2:e9}) ? {0} + {1}({3:e9}) : ({0} > "
                           "{1}({4:e9}) ? {0} - {1}({3:e9}) : {1}(0))",
                           x, c, -lambd, bias, lambd)
                .str();
          })
          .Case([&](ampc::BitShiftOp o) {
            // C++ leaves a shift by the width or more undefined.
            unsigned bits = o.getOutput().getType().getElementTypeBitWidth();
            return formatv("{1} >= {2} ? {3}(0) : {3}({0} {4} {1})", x, arg(1),
                           bits, c, o.getLeft() ? "<<" : ">>")
                .str();
          })
          .Case([&](ampc::PReluOp) {
            return formatv("{0} < {1}(0) ? {2} * {0} : {0}", x, c, arg(1)).str();
          })
          .Case([&](ampc::MaxOp) {
            // NaN wins, as in numpy (x != x only for NaN).
            return formatv("({0} > {1} || {0} != {0}) ? {0} : {1}", x, arg(1))
                .str();
          })
          .Case([&](ampc::MinOp) {
            return formatv("({0} < {1} || {0} != {0}) ? {0} : {1}", x, arg(1))
                .str();
          })
          .Case([&](ampc::ModOp o) {
            if (o.getFmod() != 0)
              return formatv("std::fmod({0}, {1})", x, arg(1)).str();
            // The divisor's sign; a zero divisor gives 0, not a trap.
            return formatv("{1} == 0 ? {2}(0) : [&] {{ const {2} r = {0} % "
                           "{1}; return (r != 0 && ((r < 0) != ({1} < 0))) ? "
                           "{2}(r + {1}) : r; }()",
                           x, arg(1), c)
                .str();
          })
          .Case([&](ampc::GreaterOp) { return x + " > " + arg(1); })
          .Case([&](ampc::LessOp) { return x + " < " + arg(1); })
          .Case([&](ampc::GreaterOrEqualOp) { return x + " >= " + arg(1); })
          .Case([&](ampc::LessOrEqualOp) { return x + " <= " + arg(1); })
          .Case([&](ampc::AndOp) { return x + " && " + arg(1); })
          .Case([&](ampc::OrOp) { return x + " || " + arg(1); })
          .Case([&](ampc::XorOp) { return x + " != " + arg(1); })
          .Case([&](ampc::NotOp) { return "!" + x; })
          .Case([&](ampc::IsNaNOp) { return x + " != " + x; })
          .Case([&](ampc::IsInfOp o) {
            // c is the result's (bool): compare the input with itself.
            bool pos = o.getDetectPositive() != 0,
                 neg = o.getDetectNegative() != 0;
            if (!pos && !neg)
              return std::string("false");
            std::string inf = "std::isinf(" + x + ")";
            if (pos && neg)
              return inf;
            return inf + " && " + x + (pos ? " > 0" : " < 0");
          })
          .Case([&](ampc::ClipOp) {
            // numpy's clip: min(max(x, lo), hi), so hi wins when lo > hi.
            return formatv("[&] {{ const {3} v = {0} < {1} ? {1} : {0}; "
                           "return v > {2} ? {2} : v; }()",
                           x, arg(1), arg(2), c)
                .str();
          })
          .Default([](Operation *) { return std::nullopt; });
  if (!e)
    return op->emitError() << "'" << op->getName()
                           << "' has no elementwise expression";
  return "(" + *e + ")";
}
