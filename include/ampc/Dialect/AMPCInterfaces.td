//===- AMPCInterfaces.td - gradient rules of ampc ops -----*- tablegen -*-===//
//
// Reverse-mode differentiation is per-op knowledge, so it lives with the op:
// every differentiable op implements AMPC_GradientOpInterface (its rule is
// one function in lib/Dialect/Gradients.cpp), ops that have no derivative by
// nature carry AMPC_NonDifferentiable, and ampc-autodiff reports an op with
// neither when a gradient has to flow through it.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_INTERFACES_TD
#define AMPC_INTERFACES_TD

include "mlir/IR/OpBase.td"

def AMPC_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::ampc";
  let description = [{
    The gradient rule of an op: given the adjoints of its results (the
    gradient of the loss with respect to each result), build the adjoints of
    the operands that the caller asks for. The rule builds ordinary ops at the
    builder's insertion point, reading the forward op's operands and results
    where it needs them (each rule's comment says which). Every adjoint has
    exactly the type of the value it belongs to, so the backward of an op
    runs in the dtype precision assignment chose for the op.
  }];
  let methods = [
    InterfaceMethod<[{
        Whether a gradient flows through operand `index`. By default every
        float operand; ops override it for float operands that only select
        or weight (BatchNormalization's running statistics, loss class
        weights), whose values are treated as constants.
      }],
      "bool", "isDifferentiableOperand", (ins "unsigned":$index), [{}],
      [{
        return ::mlir::isa<::mlir::FloatType>(
            ::mlir::getElementTypeOrSelf($_op->getOperand(index).getType()));
      }]>,
    InterfaceMethod<[{
        Whether result `index` carries a gradient. By default every float
        result; ops override it for float results their rule does not
        differentiate (BatchNormalization's running statistics,
        LayerNormalization's Mean and InvStdDev). ampc-autodiff reports a
        gradient that would have to flow through such a result.
      }],
      "bool", "isDifferentiableResult", (ins "unsigned":$index), [{}],
      [{
        return ::mlir::isa<::mlir::FloatType>(
            ::mlir::getElementTypeOrSelf($_op->getResult(index).getType()));
      }]>,
    InterfaceMethod<[{
        Builds the operand adjoints. `resultAdjoints` has one entry per
        result, null where the result has no adjoint (it does not reach the
        loss, or is not differentiable). For every operand with
        `wanted[i]` set, the rule stores the adjoint in
        `operandAdjoints[i]` (pre-filled with null); it builds nothing for
        operands that are not wanted. A failure has been reported at the
        op's location.
      }],
      "::mlir::LogicalResult", "buildGradient",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultAdjoints,
           "::llvm::ArrayRef<bool>":$wanted,
           "::llvm::MutableArrayRef<::mlir::Value>":$operandAdjoints)>,
  ];
}

// The trait list entry of every differentiable op: its rule is defined in
// lib/Dialect/Gradients.cpp.
def AMPC_Gradient : DeclareOpInterfaceMethods<AMPC_GradientOpInterface>;

// Ops without a derivative by nature: constants, comparisons, shape queries.
// Gradients stop at them (their results are constants to autodiff).
def AMPC_NonDifferentiable : NativeOpTrait<"NonDifferentiable"> {
  let cppNamespace = "::ampc";
}

#endif // AMPC_INTERFACES_TD
