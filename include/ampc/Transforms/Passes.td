//===- Passes.td - ampc passes ----------------------------*- tablegen -*-===//

#ifndef AMPC_TRANSFORMS_PASSES_TD
#define AMPC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def FoldShapesPass : Pass<"ampc-fold-shapes", "mlir::ModuleOp"> {
  let summary = "fold shape-computing subgraphs to constants";
  let description = [{
    Once every shape is static, the integer subgraphs that exported models
    use to compute reshape targets (ampc.shape, gather, unsqueeze, concat,
    arithmetic, where, cast, ...) are constants. This pass folds them and
    erases whatever becomes dead, so no shape computation survives into
    precision assignment or code generation. The importer folds as it
    builds; this pass is what guarantees the result for any module.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

#endif // AMPC_TRANSFORMS_PASSES_TD
