//===- CudaElementwise.cpp - generated kernels ------------------------------===//
//
// Elementwise ops and ampc.fusion: one generated __global__ kernel each,
// from the same scalar expressions as the CPU target (broadcast inputs
// indexed through constant dims and strides); and Dropout, whose masks are
// the CPU target's (the same seed, step and index).
//
//===----------------------------------------------------------------------===//

#include "CudaEmitter.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Analysis/KernelGeometry.h"
#include "ampc/Transforms/Training.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace ampc::emit;
using namespace ampc::cudagen;
using llvm::formatv;
using llvm::StringRef;

LogicalResult CudaEmitter::emitElementwise(ArrayRef<Operation *> ops,
                                           ValueRange inputs,
                                           ValueRange arguments,
                                           ValueRange yielded,
                                           ValueRange outputs,
                                           llvm::raw_ostream &body) {
  // A weight copy the fused optimizer writes (CudaOptimizer.cpp).
  if (folded.contains(outputs[0].getDefiningOp()))
    return success();
  RankedTensorType out = tensorOf(outputs[0]);
  ArrayRef<int64_t> shape = out.getShape();
  int64_t count = out.getNumElements();
  std::string k = "k" + std::to_string(kernelCount++);
  // An output written in place over one of its inputs (planInPlace) is
  // not __restrict__: each element is read before it is written.
  bool aliased = llvm::any_of(inputs, [&](Value in) {
    return llvm::any_of(outputs, [&](Value output) {
      auto a = stateOffsets.find(in), b = stateOffsets.find(output);
      return a != stateOffsets.end() && b != stateOffsets.end() &&
             a->second == b->second;
    });
  });
  StringRef restrict = aliased ? " *" : " *__restrict__ ";
  llvm::raw_string_ostream ks(kernels);
  ks << "// " << k << ":";
  for (Operation *op : ops)
    ks << " " << nodeDescription(op);
  ks << "\n__global__ void __launch_bounds__(ampc::cuda::kThreads) " << k << "(";
  std::string args;
  for (auto [i, in] : llvm::enumerate(inputs)) {
    ks << "const " << storageType(elementOf(in)) << restrict << "a" << i
       << ", ";
    args += name(in) + ", ";
  }
  // The outputs: out, or out0, out1, ... for a horizontal fusion's.
  auto outName = [&](size_t i) {
    return outputs.size() == 1 ? std::string("out") : "out" + std::to_string(i);
  };
  for (auto [i, output] : llvm::enumerate(outputs)) {
    ks << (i ? ", " : "") << storageType(elementOf(output)) << restrict
       << outName(i);
    args += (i ? ", " : "") + name(output);
  }
  ks << ") {\n"
     << "  AMPC_FOR(o, " << count << "LL) {\n";
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
  SmallVector<std::pair<Value, std::string>> stores;
  for (auto [i, v] : llvm::enumerate(yielded))
    stores.push_back({v, outName(i) + "[o]"});
  if (failed(emitScalarOps(ops, scalars, stores, "    ", ks)))
    return failure();
  ks << "  }\n}\n\n";
  launch(ops.back(), k, count, args, body);
  return success();
}

std::string CudaEmitter::trainingStep() const {
  if (!parameterOffsets.count(ampc::kStepCount))
    return "nullptr";
  return formatv("reinterpret_cast<const int64_t *>(state + {0})",
                 parameterOffsets.lookup(ampc::kStepCount))
      .str();
}

LogicalResult CudaEmitter::emitDropout(Operation *op,
                                       llvm::raw_ostream &body) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ampc::DropoutOp o) {
        RankedTensorType t = tensorOf(o.getOutput());
        double ratio = o.getRatio().convertToDouble();
        // The CPU target's masks: the same seed, step and index.
        uint64_t seed = o.maskSeed();
        std::string step = trainingStep();
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
      .Default([&](Operation *) -> LogicalResult {
        llvm_unreachable("not an op of this family (emitKernelOp dispatches)");
      });
}
