//===- CpuEmitter.h - the CPU target's emitter, by op family ----*- C++ -*-===//
//
// The CPU emitter's class, shared by its files: CpuEmitter.cpp (arguments,
// results, constants, the dispatch by op family, the library), CpuGemm.cpp,
// CpuDataMovement.cpp, CpuNormalization.cpp, CpuReduction.cpp,
// CpuElementwise.cpp, CpuWindow.cpp, CpuAttention.cpp and CpuTraining.cpp.
// Private to lib/Target/Cpu.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_LIB_TARGET_CPU_CPUEMITTER_H
#define AMPC_LIB_TARGET_CPU_CPUEMITTER_H

#include "ampc/Analysis/KernelGeometry.h"
#include "ampc/Target/LibraryEmitter.h"

#include "ampc/Transforms/Training.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"

#include <string>

namespace ampc::cpugen {

using llvm::ArrayRef;
using llvm::SmallVector;
using llvm::StringRef;
using mlir::BlockArgument;
using mlir::failure;
using mlir::LogicalResult;
using mlir::Operation;
using mlir::success;
using mlir::Type;
using mlir::Value;
using mlir::ValueRange;
namespace func = mlir::func;
using namespace ampc::emit;

inline std::string load(Type t, const std::string &e) {
  if (t.isF16()) return "ampc::cpu::loadF16(" + e + ")";
  if (t.isBF16()) return "ampc::cpu::loadBf16(" + e + ")";
  if (t.isInteger(1)) return "(" + e + " != 0)";
  return e;
}

inline std::string store(Type t, const std::string &e) {
  if (t.isF16()) return "ampc::cpu::storeF16(" + e + ")";
  if (t.isBF16()) return "ampc::cpu::storeBf16(" + e + ")";
  return "static_cast<" + storageType(t).str() + ">(" + e + ")";
}

/// The codec the kernels read and write `t` with (ampc::cpu::AsF16 ...),
/// a template argument as on the CUDA target.
inline std::string codec(Type t) { return codecName(t, "ampc::cpu"); }

class CpuEmitter : public ampc::LibraryEmitter {
public:
  using LibraryEmitter::LibraryEmitter;

private:
  StringRef targetName() const override { return "cpu"; }
  ampc::KernelTarget kernelTarget() const override {
    return ampc::KernelTarget::Cpu;
  }
  std::string load(Type t, const std::string &e) const override {
    return cpugen::load(t, e);
  }
  std::string store(Type t, const std::string &e) const override {
    return cpugen::store(t, e);
  }
  void emitStore(Operation *op, llvm::raw_ostream &body) override;
  void emitArgument(unsigned index, BlockArgument arg,
                    llvm::raw_ostream &body) override;
  void emitReturn(unsigned index, Value v, llvm::raw_ostream &body) override;
  LogicalResult emitLibrary(func::FuncOp forward, func::FuncOp trainStep,
                            StringRef inferBody, StringRef stepBody) override;
  /// One loop nest over the elements of `output` (CpuElementwise.cpp).
  LogicalResult emitElementwise(ArrayRef<Operation *> ops, ValueRange inputs,
                                ValueRange arguments, ValueRange yielded,
                                ValueRange outputs, llvm::raw_ostream &body) override;
  /// Transpose, Slice: a copy through the op's strided view.
  void emitStrided(Operation *op, llvm::raw_ostream &body);
  /// A `const float *w_NAME` holding operand `v` of `op` in FP32 (a
  /// widened copy in `op`'s scratch for f16/bf16).
  std::string widenFloat(Operation *op, Value v);
  /// `C *SLOT` (slot SLOT of op's scratch) holding operand `v` converted
  /// to C with its codec.
  std::string convertedArray(Operation *op, StringRef slot, StringRef c,
                             Value v) {
    return scratchArray(op, slot, c) +
           llvm::formatv("    ampc::cpu::convert<{0}, {3}>({1}, {2}LL, {4});\n",
                         c, name(v), tensorOf(v).getNumElements(),
                         codec(elementOf(v)), slot)
               .str();
  }
  /// `C *NAME = <slot NAME of op's scratch>;`
  std::string scratchArray(Operation *op, StringRef slot, StringRef c) {
    return llvm::formatv("    {0} *{1} = {2};\n", c, slot, scratch(op, slot, c))
        .str();
  }
  /// Stores the values of vector `acc`, one per element of `out`, into
  /// `out` (rounded to its type).
  std::string storeAll(StringRef acc, Value out) {
    return "    for (int64_t i = 0; i < " +
           std::to_string(tensorOf(out).getNumElements()) + "LL; ++i) " +
           name(out) + "[i] = " + store(elementOf(out), (acc + "[i]").str()) +
           ";\n";
  }
  /// `if (!(condition)) return <failure naming the node>;`
  /// Data parallel: the statement that fails the step with the message of
  /// communicator `comm` (an ampc_abi_comm pointer expression).
  std::string commFailure(StringRef comm);
  /// The communicator of a data-parallel step when it runs on several
  /// ranks, else null, as a C++ expression.
  std::string ranks() const;
  std::string failUnless(Operation *op, const std::string &condition,
                         StringRef what);
  // The op families, one file each (LibraryEmitter::emitKernelOp
  // dispatches).
  /// Gemm and ampc.batched_gemm (every MatMul: ampc-lower-matmul) (CpuGemm.cpp).
  LogicalResult emitMatmul(Operation *op, llvm::raw_ostream &body) override;
  /// Conv and its adjoints (CpuGemm.cpp).
  LogicalResult emitConvolution(Operation *op, llvm::raw_ostream &body) override;
  /// Transpose, Slice, SliceGrad, Concat, Gather, GatherGrad, Shape,
  /// Scatter and TopK (CpuDataMovement.cpp).
  LogicalResult emitDataMovement(Operation *op, llvm::raw_ostream &body) override;
  /// Softmax, LogSoftmax, LayerNormalization, AddLayerNorm and
  /// LayerNorm's adjoint (CpuNormalization.cpp).
  LogicalResult emitNormalization(Operation *op, llvm::raw_ostream &body) override;
  /// ampc.layer_normalization and ampc.add_layer_norm.
  template <typename Op> void emitLayerNorm(Op op, llvm::raw_ostream &body);
  /// The reductions, GlobalAveragePool, the losses and their adjoint
  /// (CpuReduction.cpp).
  LogicalResult emitReduction(Operation *op, llvm::raw_ostream &body) override;
  void emitReduce(Operation *op, llvm::raw_ostream &body);
  /// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss.
  void emitLoss(Operation *op, llvm::raw_ostream &body);
  /// Dropout (CpuElementwise.cpp).
  LogicalResult emitDropout(Operation *op, llvm::raw_ostream &body) override;
  /// Pooling, batch normalisation and their adjoints (CpuWindow.cpp).
  LogicalResult emitWindowOp(Operation *op, llvm::raw_ostream &body) override;
  /// `g` as a `static const ampc::cpu::Window win`.
  LogicalResult emitWindow(Operation *op, const WindowGeometry &g,
                           llvm::raw_ostream &body);
  /// MaxPool, AveragePool and their adjoints.
  LogicalResult emitPool(Operation *op, llvm::raw_ostream &body);
  void emitBatchNorm(ampc::BatchNormalizationOp op, llvm::raw_ostream &body);
  /// ampc.attention and ampc.attention_grad (CpuKernels.h, attention;
  /// CpuAttention.cpp).
  LogicalResult emitAttention(Operation *op, llvm::raw_ostream &body) override;
  /// The training ops (CpuTraining.cpp).
  LogicalResult emitTrainingOp(Operation *op,
                               llvm::raw_ostream &body) override;
  /// ZeRO-1 (--shard-optimizer; CpuTraining.cpp): an update of the rank's
  /// shard (after the last, the all-gather of the new parameters).
  LogicalResult emitShardedUpdate(ampc::OptimizerUpdateOp o,
                                  llvm::raw_ostream &body);
  bool shardsOptimizer() const override { return true; }
  /// Bytes of an element of the sharded moments (the updates' compute
  /// type: float, double in an f64 model).
  int64_t shardWidth() const {
    for (auto [op, offset] : shardOffsets)
      return storageSize(elementOf(
                 llvm::cast<ampc::OptimizerUpdateOp>(op).getParam())) == 8
                 ? 8
                 : 4;
    return 4;
  }
  std::string shardedMoments(int64_t kind, Type t) const override {
    return llvm::formatv("ampc::cpu::shardMoments<{0}>(state + {1}, {2})",
                         storageType(t), shardSlot, kind)
        .str();
  }
  /// The training step Dropout's masks are drawn for (ampc.step; 0 in a
  /// library without an optimizer), as a C++ expression.
  std::string trainingStep() const {
    if (!parameterOffsets.count(ampc::kStepCount))
      return "0";
    return llvm::formatv("*reinterpret_cast<const int64_t *>(state + {0})",
                         parameterOffsets.lookup(ampc::kStepCount))
        .str();
  }
  void emitConstant(Operation *op, llvm::raw_ostream &body) override;

  std::string constants;
  /// Whether some op of the library can fail at run time.
  bool canFail = false;
};

/// The CPU target's convolutions and pools take NCHW images; BatchNorm
/// takes either layout (batchNormGeometry).
LogicalResult refuseChannelsLast(Operation *op);

} // namespace ampc::cpugen

#endif // AMPC_LIB_TARGET_CPU_CPUEMITTER_H
