//===- Training.h - what the training passes share ------------------------===//
//
// Names of the training state and helpers that ampc-insert-loss-scaling and
// ampc-attach-optimizer both use on @train_step; the runtime knows the
// state by these names (ModelAbi.h, state_tensors).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TRANSFORMS_TRAINING_H
#define AMPC_TRANSFORMS_TRAINING_H

#include "ampc/Dialect/AMPCDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace ampc {

constexpr llvm::StringLiteral kTrainStep = "train_step";
constexpr llvm::StringLiteral kLossScale = "ampc.loss_scale";
constexpr llvm::StringLiteral kGrowthTracker = "ampc.growth_tracker";
constexpr llvm::StringLiteral kSkippedSteps = "ampc.skipped_steps";
constexpr llvm::StringLiteral kLearningRate = "ampc.lr";
constexpr llvm::StringLiteral kStepCount = "ampc.step";
/// The rows of the batch the step trains (issue 34, item 6): an i64 scalar
/// state, the batch size unless the runtime trains a partial last batch.
/// Not checkpointed: the runtime sets it around each step.
constexpr llvm::StringLiteral kBatchRows = "ampc.batch_rows";
// kBatchRowsAttr and kPartialBatchesAttr are in AMPCDialect.h.
// The module attributes that describe the step (kLossScalingAttr,
// kOptimizerAttr, kHyperparametersAttr) are in AMPCDialect.h.

/// The constant ampc-autodiff seeds the backward with (marked
/// `ampc.loss_seed`), or null.
struct Seed {
  mlir::Operation *op = nullptr;
};
Seed findLossSeed(mlir::func::FuncOp step);

/// Indices of the results of `step` that are parameter gradients
/// (`ampc.gradient_of`).
llvm::SmallVector<unsigned> gradientResults(mlir::func::FuncOp step);

/// Declares `ampc.state @name` with `initial` (its type) at the end of the
/// module's symbols unless it exists, and returns an `ampc.load_state` of it
/// at the start of `func`.
mlir::Value declareState(mlir::ModuleOp module, mlir::func::FuncOp func,
                         llvm::StringRef name, mlir::ElementsAttr initial,
                         mlir::FlatSymbolRefAttr derivedFrom = {});
/// The same with the module's symbol table, which it keeps up to date: a pass
/// that declares many states builds the table once (the overload above
/// builds one per call).
mlir::Value declareState(mlir::SymbolTable &symbols, mlir::func::FuncOp func,
                         llvm::StringRef name, mlir::ElementsAttr initial,
                         mlir::FlatSymbolRefAttr derivedFrom = {});

/// Why the rows of `forward`'s batch (axis 0 of its inputs, `batch` rows)
/// are not computed independently of each other, naming the op; "" when
/// every value either does not depend on the inputs or keeps each row's
/// elements contiguous and apart from the other rows' (axis 0 a multiple of
/// `batch`). Conservative: an op it does not know mixes rows.
std::string batchMixingReason(mlir::func::FuncOp forward, int64_t batch);

/// `counter + 1` where `flag == when`, `counter` otherwise (i64 scalars).
mlir::Value countIf(mlir::OpBuilder &b, mlir::Location loc,
                    mlir::Value counter, mlir::Value flag, bool when);

/// The `found_inf` of the step's `ampc.unscale`, or null without loss
/// scaling.
mlir::Value findFoundInf(mlir::func::FuncOp step);

} // namespace ampc

#endif // AMPC_TRANSFORMS_TRAINING_H
