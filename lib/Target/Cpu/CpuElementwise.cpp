//===- CpuElementwise.cpp - loop nests --------------------------------------===//
//
// Elementwise ops and ampc.fusion: one loop nest each, from the same scalar
// expressions as the CUDA target (broadcast inputs indexed through constant
// dims and strides); and Dropout, whose masks are the CUDA target's (the
// same seed, step and index).
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

LogicalResult CpuEmitter::emitElementwise(ArrayRef<Operation *> ops,
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
  // Independent elements: the rows in parallel (ThreadPool.h).
  body << "    ampc::cpu::parallelForEach<" << inputs.size() << ">(" << out.getRank()
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

LogicalResult CpuEmitter::emitDropout(Operation *op, llvm::raw_ostream &body) {
  auto o = cast<ampc::DropoutOp>(op);
  RankedTensorType t = tensorOf(o.getOutput());
  double ratio = o.getRatio().convertToDouble();
  // A random mask per training step (ampc.step, 0 in a library without
  // an optimizer), distinct per Dropout (its seed, else its name);
  // kept values scaled by 1 / (1 - ratio).
  uint64_t seed = o.maskSeed();
  std::string step = trainingStep();
  Type e = t.getElementType();
  body << formatv(
      "  {{ const uint64_t step = static_cast<uint64_t>({0});\n"
      "    ampc::cpu::parallelFor(0, {1}LL, ampc::cpu::grainFor(4), "
      "[&](int64_t b, int64_t e) {{ for (int64_t i = b; i < e; ++i) {{\n"
      "      const bool keep = ampc::cpu::dropoutKeeps({2}ULL, step, "
      "static_cast<uint64_t>(i), {3:e17});\n"
      "      {4}[i] = keep;\n"
      "      {5}[i] = {6};\n    } });\n  }\n",
      step, t.getNumElements(), seed, ratio, name(o.getMask()),
      name(o.getOutput()),
      ratio >= 1.0
          ? store(e, "0")
          : store(e, formatv("keep ? {0} * {1}({2:e17}) : {1}(0)",
                             load(e, name(o.getInput()) + "[i]"),
                             computeType(e), 1.0 / (1.0 - ratio))
                         .str()));
  return success();
}
