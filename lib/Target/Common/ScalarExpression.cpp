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
            return formatv("{1} > 0 ? {0} : {2}({3:e9}) * {0}", x, arg(1), c,
                           o.getAlpha().convertToFloat())
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
          .Default([](Operation *) { return std::nullopt; });
  if (!e)
    return op->emitError() << "'" << op->getName()
                           << "' has no elementwise expression";
  return "(" + *e + ")";
}
