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

def WidenToF64Pass : Pass<"ampc-widen-to-f64", "mlir::ModuleOp"> {
  let summary = "make every FP32 tensor FP64 (--precision=fp64)";
  let description = [{
    Rewrites every f32 tensor type in the module to f64: function arguments
    and results, parameters and constants (values converted exactly), and
    every op result; LayerNormalization's FP32 stash becomes FP64. Used by
    `--precision=fp64`, which exists for finite-difference gradient checks
    (ampc-gradcheck): no mixed precision, every computation in double.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def AssignPrecisionPass : Pass<"ampc-assign-precision", "mlir::ModuleOp"> {
  let summary = "choose FP16/BF16/FP32 for every op and insert the casts";
  let description = [{
    Decides the compute dtype of every op that computes on floating-point
    data and inserts `ampc.cast` ops (marked `ampc.autocast`) where a value
    reaches an op in another dtype. Each decided op records its decision in
    an `ampc.precision` attribute: the compute dtype, the category and the
    rule that decided.

    `propagation=autocast` reproduces PyTorch CUDA autocast op by op from the
    precision category of each op (AMPCOps.td: allow, deny, fp32_output,
    promote, follow). `propagation=paint` colours the graph the way
    TensorFlow's auto_mixed_precision does, to need fewer casts, while every
    deny op stays in FP32. Overrides (`keep-fp32`, `force-lowp`, a `rules`
    file) beat the lists. Integer and boolean tensors, float64 tensors and a
    user's own casts are never changed; function arguments and results keep
    their types. docs/precision.md has the details.
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", /*default=*/"\"f16\"",
           "low-precision dtype: f16, bf16, or f32 (nothing is lowered)">,
    Option<"propagation", "propagation", "std::string",
           /*default=*/"\"autocast\"", "autocast or paint">,
    ListOption<"keepFp32", "keep-fp32", "std::string",
               "ops kept in FP32: op:TYPE or node:NAME">,
    ListOption<"forceLowp", "force-lowp", "std::string",
               "ops forced to low precision: op:TYPE or node:NAME">,
    Option<"rulesFile", "rules", "std::string", /*default=*/"",
           "a JSON rules file (categories, keep_fp32, force_lowp)">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def OptimizeCastsPass : Pass<"ampc-optimize-casts", "mlir::ModuleOp"> {
  let summary = "one cast per value and dtype, no round trips";
  let description = [{
    Cleans up the casts that ampc-assign-precision inserted (those marked
    `ampc.autocast`; a user's own casts are kept, though inserted casts may
    reuse them):
    - casts of one value to one dtype are merged into one;
    - a cast of a cast whose first step widens exactly (f16 → f32 → f16) is
      folded: back to the original dtype it disappears, otherwise it casts
      from the original value directly;
    - casts to the type a value already has, and unused casts, are erased.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

//===----------------------------------------------------------------------===//
// Kernel-level form: what the target emitters consume
//===----------------------------------------------------------------------===//

def FusePass : Pass<"ampc-fuse", "mlir::ModuleOp"> {
  let summary = "merge elementwise chains into ampc.fusion loop nests";
  let description = [{
    Groups chains of elementwise ops (AMPC_Elementwise in AMPCOps.td) into
    one `ampc.fusion` each, which a target runs as one loop over the result
    with every intermediate in a register. Walking each function backwards,
    an elementwise op starts a group; a producer joins it when it is
    elementwise, has the group's result shape (so nothing is recomputed),
    and all its users are already in the group (so its value is needed
    nowhere else). Operands outside the group, which may broadcast, become
    the fusion's operands. Groups of one op are left as they are.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def PlanMemoryPass : Pass<"ampc-plan-memory", "mlir::ModuleOp"> {
  let summary = "give every intermediate tensor an offset in one arena";
  let description = [{
    The static memory plan. In each function, every result of a top-level
    op that needs storage (not constants, parameter loads, or views, which
    share their operand's buffer) gets a byte offset in one arena, recorded
    as `ampc.offsets` on the op (one entry per result, -1 for none); the
    function gets `ampc.arena_bytes`. Buffers are allocated in program
    order, best fit among the free blocks, 64-byte aligned, and freed after
    the last use of the value or of any view of it, never before the op
    that produces it has run, so an op's results never overlap its operands.
    Function results live to the end.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

#endif // AMPC_TRANSFORMS_PASSES_TD
