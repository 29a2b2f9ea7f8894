//===- Passes.h - ampc passes and the compilation pipeline ------*- C++ -*-===//

#ifndef AMPC_TRANSFORMS_PASSES_H
#define AMPC_TRANSFORMS_PASSES_H

#include "ampc/Dialect/AMPCDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace ampc {

#define GEN_PASS_DECL
#include "ampc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ampc/Transforms/Passes.h.inc"

/// Options of the whole pipeline; grows as passes are added.
struct PipelineOptions {
  /// Stop after the pass with this argument name (e.g. "ampc-fold-shapes");
  /// empty runs the whole pipeline.
  std::string stopAfter;
  /// ampc-assign-precision: dtype, propagation, overrides, rules file.
  AssignPrecisionPassOptions precision;
};

/// The argument names of the pipeline's passes, in order.
llvm::ArrayRef<llvm::StringRef> pipelinePassNames();

/// Builds the ampc pipeline (docs/design.md, Pipeline) into `pm`. Fails with
/// a message when `options.stopAfter` names no pass of the pipeline.
mlir::LogicalResult buildPipeline(mlir::OpPassManager &pm,
                                  const PipelineOptions &options,
                                  std::string &error);

/// Registers the dialects every ampc tool loads.
void registerAllDialects(mlir::DialectRegistry &registry);

} // namespace ampc

#endif // AMPC_TRANSFORMS_PASSES_H
