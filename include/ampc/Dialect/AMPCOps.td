//===- AMPCOps.td - the ampc dialect: ONNX-semantics tensor ops -*- tablegen -*-===//
//
// Ranked, statically shaped tensor ops with ONNX semantics. Attributes that
// ONNX passes as constant inputs in some opsets (Slice starts, Squeeze axes,
// Reduce* axes, the Reshape/Expand target shape) are attributes or the result
// type here, so every later pass sees one form whatever the model's opset.
//
// Ops whose result type follows from operands and attributes implement
// InferTypeOpAdaptor: the importer builds them without result types, and the
// verifier checks a written result type against the inferred one.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_OPS_TD
#define AMPC_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "ampc/Dialect/AMPCInterfaces.td"

def AMPC_Dialect : Dialect {
  let name = "ampc";
  let cppNamespace = "::ampc";
  let summary = "ONNX-semantics tensor ops for mixed-precision training";
  let description = [{
    The ampc dialect holds an imported forward model: ranked, statically
    shaped tensors, one op per ONNX operator with ONNX semantics, trainable
    parameters as module-level `ampc.parameter` symbols.
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
  // The discardable `ampc.*` attributes the passes write (AMPCDialect.h)
  // are checked like op attributes.
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
}

//===----------------------------------------------------------------------===//
// Enum attributes: choices an op or a pass makes, typed instead of strings.
// Each prints as `#ampc<NAME value>`.
//===----------------------------------------------------------------------===//

class AMPC_EnumAttr<EnumAttrInfo info, string name>
    : EnumAttr<AMPC_Dialect, info, name> {
  let assemblyFormat = "$value";
}

// What a GEMM applies to its result while storing it (cuBLASLt's
// epilogues), decided by ampc-fuse-epilogues. `bias` adds the row vector C;
// `relu` clamps at zero (NaN stays NaN), after the bias when there is one.
// `bgrad_a` / `bgrad_b` (backward, issue 37 item 3) also write a bias
// gradient, the GEMM's second result: the sum over the GEMM's k of op(A)
// (m values) or of op(B) (n values), in the result's type. `relu_aux` /
// `relu_aux_bias` are `relu` / `relu_bias` that also write the ReLU's bit
// mask (the second result, cuBLASLt's RELU_AUX); `drelu` zeroes the
// product where such a mask (the `relu_mask` operand) is clear (the
// ReLU's backward, cuBLASLt's DRELU), and `drelu_bgrad` also writes the
// masked product's column sums (the bias gradient of the Linear before
// the ReLU, cuBLASLt's DRELU_BGRAD). CUDA target only.
def AMPC_GemmEpilogue : I32EnumAttr<"GemmEpilogue", "a GEMM's epilogue", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Bias", 1, "bias">,
    I32EnumAttrCase<"Relu", 2, "relu">,
    I32EnumAttrCase<"ReluBias", 3, "relu_bias">,
    I32EnumAttrCase<"BiasGradA", 4, "bgrad_a">,
    I32EnumAttrCase<"BiasGradB", 5, "bgrad_b">,
    I32EnumAttrCase<"ReluAux", 6, "relu_aux">,
    I32EnumAttrCase<"ReluAuxBias", 7, "relu_aux_bias">,
    I32EnumAttrCase<"DRelu", 8, "drelu">,
    I32EnumAttrCase<"DReluBiasGrad", 9, "drelu_bgrad">]> {
  let cppNamespace = "::ampc";
  let genSpecializedAttr = 0;
}
def AMPC_GemmEpilogueAttr : AMPC_EnumAttr<AMPC_GemmEpilogue, "epilogue">;

// How an ONNX loss reduces its per-sample losses (the loss ops and
// ampc.nll_loss_grad): `none` keeps them, `sum` adds them, `mean` divides
// the sum by the total weight of the samples.
def AMPC_Reduction : I32EnumAttr<"Reduction", "a loss reduction", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Sum", 1, "sum">,
    I32EnumAttrCase<"Mean", 2, "mean">]> {
  let cppNamespace = "::ampc";
  let genSpecializedAttr = 0;
}
def AMPC_ReductionAttr : AMPC_EnumAttr<AMPC_Reduction, "reduction">;

// ONNX Gelu's `approximate`: `none` is the erf form, `tanh` the tanh
// approximation (ampc.gelu and ampc.gelu_grad).
def AMPC_GeluApproximate : I32EnumAttr<"GeluApproximate",
    "a Gelu approximation", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Tanh", 1, "tanh">]> {
  let cppNamespace = "::ampc";
  let genSpecializedAttr = 0;
}
def AMPC_GeluApproximateAttr : AMPC_EnumAttr<AMPC_GeluApproximate,
                                             "approximate">;

// The torch.optim rule of ampc.optimizer_update and of the step
// (`ampc.optimizer` on the module, ampc-attach-optimizer's `kind`). `none`
// is a choice of the pass only: no optimizer, the step returns gradients.
def AMPC_OptimizerKind : I32EnumAttr<"OptimizerKind", "an optimizer", [
    I32EnumAttrCase<"Sgd", 0, "sgd">,
    I32EnumAttrCase<"Adam", 1, "adam">,
    I32EnumAttrCase<"Adamw", 2, "adamw">,
    I32EnumAttrCase<"None", 3, "none">]> {
  let cppNamespace = "::ampc";
  let genSpecializedAttr = 0;
}
def AMPC_OptimizerKindAttr : AMPC_EnumAttr<AMPC_OptimizerKind, "optimizer">;

// The kernels a library is written with (ampc-plan-memory's `target`: the
// scratch each op's kernels take differs between them). cuda-sim writes
// the CUDA kernels.
def AMPC_KernelTarget : I32EnumAttr<"KernelTarget", "a kernel target", [
    I32EnumAttrCase<"Cpu", 0, "cpu">,
    I32EnumAttrCase<"Cuda", 1, "cuda">]> {
  let cppNamespace = "::ampc";
  let genSpecializedAttr = 0;
}

// Loss scaling of the step (ampc-insert-loss-scaling's `mode`, and
// `ampc.loss_scaling` on the module): a scale that adapts (GradScaler), a
// fixed one, or none.
def AMPC_LossScalingMode : I32EnumAttr<"LossScalingMode",
    "a loss-scaling mode", [
    I32EnumAttrCase<"Dynamic", 0, "dynamic">,
    I32EnumAttrCase<"Static", 1, "static">,
    I32EnumAttrCase<"None", 2, "none">]> {
  let cppNamespace = "::ampc";
  let genSpecializedAttr = 0;
}
def AMPC_LossScalingModeAttr : AMPC_EnumAttr<AMPC_LossScalingMode,
                                             "loss_scaling">;

// How an op's compute dtype is chosen under autocast (docs/precision.md,
// REFERENCE.md 1): the category traits below (AMPC_Allow, ...) carry one,
// rules files name them, and every decision records the one it used.
def AMPC_PrecisionCategory : I32EnumAttr<"PrecisionCategory",
    "a precision category", [
    // Low-precision inputs and outputs, FP32 accumulation (GEMM-like).
    I32EnumAttrCase<"Allow", 0, "allow">,
    // FP32 inputs and outputs (numerically sensitive).
    I32EnumAttrCase<"Deny", 1, "deny">,
    // Computed and returned in FP32 whatever the input dtype.
    I32EnumAttrCase<"Fp32Output", 2, "fp32_output">,
    // Mixed float inputs are all cast to the widest of them.
    I32EnumAttrCase<"Promote", 3, "promote">,
    // Runs in the dtype of its (data) input.
    I32EnumAttrCase<"Follow", 4, "follow">]> {
  let cppNamespace = "::ampc";
  let genSpecializedAttr = 0;
}

// Choices of pass options only (Passes.td), never in the IR: the enums give
// them one spelling each (symbolize/stringify), which the option parser and
// the messages use.
def AMPC_LossFunction : I32EnumAttr<"LossFunction",
    "the loss ampc-attach-loss adds", [
    I32EnumAttrCase<"CrossEntropy", 0, "cross_entropy">,
    I32EnumAttrCase<"BceWithLogits", 1, "bce_with_logits">,
    I32EnumAttrCase<"Mse", 2, "mse">,
    I32EnumAttrCase<"L1", 3, "l1">,
    I32EnumAttrCase<"SmoothL1", 4, "smooth_l1">,
    I32EnumAttrCase<"Huber", 5, "huber">,
    I32EnumAttrCase<"None", 6, "none">]> {
  let cppNamespace = "::ampc";
  let genSpecializedAttr = 0;
}
def AMPC_LowPrecisionType : I32EnumAttr<"LowPrecisionType",
    "the low-precision dtype of ampc-assign-precision", [
    I32EnumAttrCase<"F16", 0, "f16">,
    I32EnumAttrCase<"BF16", 1, "bf16">,
    I32EnumAttrCase<"F32", 2, "f32">]> {
  let cppNamespace = "::ampc";
  let genSpecializedAttr = 0;
}
def AMPC_Propagation : I32EnumAttr<"Propagation",
    "how ampc-assign-precision propagates decisions", [
    I32EnumAttrCase<"Autocast", 0, "autocast">,
    I32EnumAttrCase<"Paint", 1, "paint">]> {
  let cppNamespace = "::ampc";
  let genSpecializedAttr = 0;
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

// The decision ampc-assign-precision records on every op it decides
// (`ampc.precision`), which the report, `ampc explain` and the ONNX export
// read: the category it applied, the compute dtype, and the rule that
// decided, in words.
def AMPC_PrecisionDecisionAttr : AttrDef<AMPC_Dialect, "PrecisionDecision"> {
  let mnemonic = "precision";
  let summary = "the precision decision for an op";
  let description = [{
    ```mlir
    %y = ampc.matmul %x, %w {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "allow list">} : ...
    ```
  }];
  let parameters = (ins EnumParameter<AMPC_PrecisionCategory>:$category,
                        "::mlir::FloatType":$compute,
                        StringRefParameter<"what decided">:$rule);
  let assemblyFormat = "`<` struct(params) `>`";
}

// Every op's tensors are bounded in size (AMPCTraits.h, BoundedTensors).
def AMPC_BoundedTensors : NativeOpTrait<"BoundedTensors"> {
  let cppNamespace = "::ampc";
}
class AMPC_Op<string mnemonic, list<Trait> traits = []>
    : Op<AMPC_Dialect, mnemonic, !listconcat(traits, [AMPC_BoundedTensors])>;

// The precision category of an op (include/ampc/Dialect/AMPCTraits.h,
// docs/precision.md): what ampc-assign-precision does with it under autocast.
// Ops without one (constants, parameters, casts, shape) are left alone.
class AMPC_Precision<string category>
    : ParamNativeOpTrait<"PrecisionCategoryTrait",
                         "::ampc::PrecisionCategory::" # category> {
  let cppNamespace = "::ampc";
}
def AMPC_Allow : AMPC_Precision<"Allow">;
def AMPC_Deny : AMPC_Precision<"Deny">;
def AMPC_Fp32Output : AMPC_Precision<"Fp32Output">;
def AMPC_Promote : AMPC_Precision<"Promote">;
def AMPC_Follow : AMPC_Precision<"Follow">;
// Only the data operand and result take the compute dtype.
def AMPC_DataOperandOnly : NativeOpTrait<"DataOperandOnly"> {
  let cppNamespace = "::ampc";
}

// Only the attention operands Q, K and V take the compute dtype; an
// additive bias stays in the dtype it has (FP32), as the statistics do.
def AMPC_QkvDataOperands : NativeOpTrait<"QkvDataOperands"> {
  let cppNamespace = "::ampc";
}

// Elementwise: result element i depends only on element i of each operand
// (after numpy broadcasting to the result shape). ampc-fuse merges chains of
// such ops into one `ampc.fusion` loop nest.
def AMPC_Elementwise : NativeOpTrait<"Elementwise"> {
  let cppNamespace = "::ampc";
}
// Accumulating: the op sums (or compares) many elements per result
// element, in an accumulation type that ampc-assign-accumulation records
// as `ampc.accumulate` (AMPCDialect.h) and the emitters read.
def AMPC_Accumulating : NativeOpTrait<"Accumulating"> {
  let cppNamespace = "::ampc";
}
// View: the result holds operand 0's elements in the same order under
// another shape, so code generation aliases the operand's buffer.
def AMPC_View : NativeOpTrait<"View"> {
  let cppNamespace = "::ampc";
}

// Shapes are static after import (docs/design.md): every tensor type
// constraint says so, and the shape rules may rely on it.
def AMPC_Tensor : StaticShapeTensorOf<[AnyType]>;
def AMPC_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;
def AMPC_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def AMPC_BoolTensor : StaticShapeTensorOf<[I1]>;
def AMPC_I64Tensor : StaticShapeTensorOf<[I64]>;

//===----------------------------------------------------------------------===//
// Constants and parameters
//===----------------------------------------------------------------------===//

def AMPC_ConstantOp : AMPC_Op<"constant",
    [ConstantLike, Pure, InferTypeOpAdaptor, AMPC_NonDifferentiable]> {
  let summary = "a constant tensor";
  let description = [{
    A non-trainable tensor: an ONNX `Constant` node, a non-float initializer,
    or the folded result of a shape computation.

    ```mlir
    %shape = ampc.constant dense<[2, 64]> : tensor<2xi64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
}

def AMPC_ParameterOp : AMPC_Op<"parameter", [Symbol]> {
  let summary = "a trainable parameter with its FP32 master value";
  let description = [{
    A float initializer of the ONNX model. The initial value is the master
    copy the optimizer updates; functions read it with `ampc.load_parameter`.

    ```mlir
    ampc.parameter @"fc1.weight" : tensor<512x784xf32> = dense<...>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AMPC_FloatTensor>:$type,
                       ElementsAttr:$initial_value);
  let assemblyFormat = "$sym_name attr-dict `:` $type `=` $initial_value";
  let hasVerifier = 1;
}

def AMPC_LoadParameterOp : AMPC_Op<"load_parameter",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "read the current value of a parameter";
  let description = [{
    ```mlir
    %w = ampc.load_parameter @"fc1.weight" : tensor<512x784xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$parameter);
  let results = (outs AMPC_FloatTensor:$output);
  let assemblyFormat = "$parameter attr-dict `:` type($output)";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// Unary ops keep their operand's type.
class AMPC_UnaryOp<string mnemonic, Type type, string desc,
                   list<Trait> traits = []>
    : AMPC_Op<mnemonic, !listconcat([Pure, InferTypeOpAdaptor, AMPC_Elementwise], traits)> {
  let summary = desc;
  let description = "ONNX `" # desc # "`, elementwise.\n\n```mlir\n%y = ampc."
      # mnemonic # " %x : tensor<4x8xf32>\n```";
  let arguments = (ins type:$input);
  let results = (outs type:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def AMPC_NegOp : AMPC_UnaryOp<"neg", AMPC_Tensor, "Neg", [AMPC_Follow, AMPC_Gradient]> {
  // Folded: shape arithmetic negates constants (axes counted from the end).
  let hasFolder = 1;
}
def AMPC_SqrtOp : AMPC_UnaryOp<"sqrt", AMPC_FloatTensor, "Sqrt", [AMPC_Follow, AMPC_Gradient]>;
def AMPC_ReciprocalOp : AMPC_UnaryOp<"reciprocal", AMPC_FloatTensor, "Reciprocal", [AMPC_Deny, AMPC_Gradient]>;
def AMPC_ExpOp : AMPC_UnaryOp<"exp", AMPC_FloatTensor, "Exp", [AMPC_Deny, AMPC_Gradient]>;
def AMPC_LogOp : AMPC_UnaryOp<"log", AMPC_FloatTensor, "Log", [AMPC_Deny, AMPC_Gradient]>;
def AMPC_ErfOp : AMPC_UnaryOp<"erf", AMPC_FloatTensor, "Erf", [AMPC_Follow, AMPC_Gradient]>;
def AMPC_ReluOp : AMPC_UnaryOp<"relu", AMPC_Tensor, "Relu", [AMPC_Follow, AMPC_Gradient]>;
def AMPC_SigmoidOp : AMPC_UnaryOp<"sigmoid", AMPC_FloatTensor, "Sigmoid", [AMPC_Follow, AMPC_Gradient]>;
def AMPC_TanhOp : AMPC_UnaryOp<"tanh", AMPC_FloatTensor, "Tanh", [AMPC_Follow, AMPC_Gradient]>;
def AMPC_IdentityOp : AMPC_UnaryOp<"identity", AMPC_Tensor, "Identity", [AMPC_Follow, AMPC_Gradient]> {
  let hasFolder = 1;
}

def AMPC_LeakyReluOp : AMPC_UnaryOp<"leaky_relu", AMPC_FloatTensor, "LeakyRelu", [AMPC_Follow, AMPC_Gradient]> {
  let arguments = (ins AMPC_FloatTensor:$input,
                       DefaultValuedAttr<F32Attr, "0.01">:$alpha);
}

def AMPC_GeluOp : AMPC_UnaryOp<"gelu", AMPC_FloatTensor, "Gelu", [AMPC_Follow, AMPC_Gradient]> {
  let description = [{
    ONNX `Gelu`, elementwise; `approximate` is `none` (the erf form) or
    `tanh`.

    ```mlir
    %y = ampc.gelu %x {approximate = #ampc<approximate tanh>} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$input,
                       DefaultValuedAttr<AMPC_GeluApproximateAttr,
                                         "::ampc::GeluApproximate::None">:$approximate);
}

// Binary ops broadcast their operands numpy-style (ONNX multidirectional
// broadcasting).
class AMPC_BinaryOp<string mnemonic, Type type, string desc,
                    list<Trait> traits = []>
    : AMPC_Op<mnemonic, !listconcat([Pure, InferTypeOpAdaptor, AMPC_Elementwise], traits)> {
  let summary = desc;
  let description = "ONNX `" # desc # "`, with multidirectional broadcasting."
      # "\n\n```mlir\n%z = ampc." # mnemonic
      # " %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>\n```";
  let arguments = (ins type:$lhs, type:$rhs);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def AMPC_AddOp : AMPC_BinaryOp<"add", AMPC_Tensor, "Add", [Commutative, AMPC_Promote, AMPC_Gradient]>;
def AMPC_SubOp : AMPC_BinaryOp<"sub", AMPC_Tensor, "Sub", [AMPC_Promote, AMPC_Gradient]>;
def AMPC_MulOp : AMPC_BinaryOp<"mul", AMPC_Tensor, "Mul", [Commutative, AMPC_Promote, AMPC_Gradient]>;
def AMPC_DivOp : AMPC_BinaryOp<"div", AMPC_Tensor, "Div", [AMPC_Promote, AMPC_Gradient]>;
def AMPC_PowOp : AMPC_BinaryOp<"pow", AMPC_Tensor, "Pow", [AMPC_Deny, AMPC_Gradient]> {
  let hasFolder = 0;
}
def AMPC_EqualOp : AMPC_BinaryOp<"equal", AMPC_Tensor, "Equal", [Commutative, AMPC_Promote, AMPC_NonDifferentiable]>;

def AMPC_WhereOp : AMPC_Op<"where",
    [Pure, InferTypeOpAdaptor, AMPC_Promote, AMPC_Elementwise, AMPC_Gradient]> {
  let summary = "Where";
  let description = [{
    ONNX `Where`: `condition ? x : y` with multidirectional broadcasting.

    ```mlir
    %z = ampc.where %c, %x, %y : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AMPC_BoolTensor:$condition, AMPC_Tensor:$x,
                       AMPC_Tensor:$y);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat =
      "$condition `,` $x `,` $y attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def AMPC_CastOp : AMPC_Op<"cast", [Pure, AMPC_Elementwise, AMPC_Gradient]> {
  let summary = "Cast";
  let description = [{
    ONNX `Cast`: converts the element type, keeping the shape. Float to
    narrower float rounds to nearest even.

    ```mlir
    %h = ampc.cast %x : tensor<4x8xf32> to tensor<4x8xf16>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$input);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($output)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Quantization, imported 1:1 and lowered by ampc-decompose-quantization
//===----------------------------------------------------------------------===//

def AMPC_QuantizeLinearOp : AMPC_Op<"quantize_linear",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "QuantizeLinear, imported 1:1 and lowered by "
                "ampc-decompose-quantization";
  let description = [{
    ONNX `QuantizeLinear`: `y` = saturate(round(x / scale) + zero point),
    halves to even, as the zero point's 8-bit type (uint8 without one). A
    scale or zero point is a scalar, or 1-D along `axis` (read only then;
    ampc::quantizationParameterShape, include/ampc/Dialect/Quantization.h).
    x is a float tensor of the scale's type or an integer one (int32 data,
    quantized as the scale's type). `in_range` is where round(x / scale) +
    zero point was in the 8-bit range before saturation: what the straight-
    through gradient of fake quantization (a `dequantize_linear` of this
    result with the same scale and zero point) passes. The op exists
    between the importer and `ampc-decompose-quantization`, which lowers it
    to div, round, add, clip and cast; no later pass, no gradient rule and
    no emitter sees it.

    ```mlir
    %y, %in = ampc.quantize_linear %x, %s, %z : (tensor<4x8xf32>, tensor<f32>, tensor<i8>) -> (tensor<4x8xi8>, tensor<4x8xi1>)
    ```
  }];
  let arguments = (ins AMPC_Tensor:$x, AMPC_FloatTensor:$scale,
                       Optional<AMPC_Tensor>:$zero_point,
                       DefaultValuedAttr<I64Attr, "1">:$axis);
  let results = (outs AMPC_Tensor:$y, AMPC_BoolTensor:$in_range);
  let assemblyFormat =
      "$x `,` $scale (`,` $zero_point^)? attr-dict `:` functional-type(operands, results)";
}

def AMPC_DequantizeLinearOp : AMPC_Op<"dequantize_linear",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "DequantizeLinear, imported 1:1 and lowered by "
                "ampc-decompose-quantization";
  let description = [{
    ONNX `DequantizeLinear`: (x - zero point) * scale as the scale's float
    type, the scale and zero point as for `quantize_linear`.
    `ampc-decompose-quantization` lowers it to cast, sub and mul; one that
    takes a `quantize_linear`'s result back with the same scale and zero
    point is fake quantization, which gets the straight-through gradient.

    ```mlir
    %x = ampc.dequantize_linear %q, %s, %z {axis = 0 : i64} : (tensor<4x8xi8>, tensor<4xf32>, tensor<4xi8>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$x, AMPC_FloatTensor:$scale,
                       Optional<AMPC_Tensor>:$zero_point,
                       DefaultValuedAttr<I64Attr, "1">:$axis);
  let results = (outs AMPC_FloatTensor:$y);
  let assemblyFormat =
      "$x `,` $scale (`,` $zero_point^)? attr-dict `:` functional-type(operands, results)";
}

def AMPC_DynamicQuantizeLinearOp : AMPC_Op<"dynamic_quantize_linear",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "DynamicQuantizeLinear, imported 1:1 and lowered by "
                "ampc-decompose-quantization";
  let description = [{
    ONNX `DynamicQuantizeLinear`: x (float) as uint8 with the scale and
    zero point of x's range widened to hold 0, which are results too.
    `ampc-decompose-quantization` lowers it to reductions and the
    composition of `quantize_linear`.

    ```mlir
    %y, %s, %z = ampc.dynamic_quantize_linear %x : (tensor<4x8xf32>) -> (tensor<4x8xui8>, tensor<f32>, tensor<ui8>)
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$x);
  let results = (outs AMPC_Tensor:$y, AMPC_FloatTensor:$y_scale,
                      AMPC_Tensor:$y_zero_point);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def AMPC_MatMulOp : AMPC_Op<"matmul",
    [AMPC_Accumulating, Pure, InferTypeOpAdaptor, AMPC_Allow, AMPC_Gradient]> {
  let summary = "MatMul";
  let description = [{
    ONNX `MatMul` (numpy.matmul): batch dimensions broadcast; a 1-D operand is
    promoted to a matrix and the added dimension removed from the result.

    ```mlir
    %y = ampc.matmul %a, %b : (tensor<8x16x64xf32>, tensor<64x32xf32>) -> tensor<8x16x32xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$lhs, AMPC_Tensor:$rhs);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

def AMPC_EinsumOp : AMPC_Op<"einsum", [Pure, InferTypeOpAdaptor]> {
  let summary = "Einsum, imported 1:1 and lowered by ampc-decompose-einsum";
  let description = [{
    ONNX `Einsum`: `equation` (numpy.einsum's, white space ignored) over the
    operands, read by `readEinsum` (include/ampc/Dialect/Einsum.h); the
    result has the output labels' sizes and the operands' element type. It
    exists between the importer and `ampc-decompose-einsum`, the first pass
    of the pipeline, which lowers it to transposes, reshapes, slices (a
    diagonal), reductions and batched `ampc.matmul`s; no later pass, no
    gradient rule and no emitter sees it.

    ```mlir
    %y = ampc.einsum %a, %b {equation = "bij,bjk->bik"} : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
    ```
  }];
  let arguments = (ins Variadic<AMPC_Tensor>:$inputs, StrAttr:$equation);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat =
      "$inputs attr-dict `:` functional-type(operands, results)";
}

// ONNX Resize's choices (ampc.resize): how source positions are combined
// (`mode`), how an output position maps to a source coordinate
// (`coordinate_transformation_mode`) and how nearest rounds a fractional
// one (`nearest_mode`), spelled as ONNX spells them.
def AMPC_ResizeMode : I32EnumAttr<"ResizeMode", "a Resize mode", [
    I32EnumAttrCase<"Nearest", 0, "nearest">,
    I32EnumAttrCase<"Linear", 1, "linear">,
    I32EnumAttrCase<"Cubic", 2, "cubic">]> {
  let cppNamespace = "::ampc";
  let genSpecializedAttr = 0;
}
def AMPC_ResizeModeAttr : AMPC_EnumAttr<AMPC_ResizeMode, "resize_mode">;
def AMPC_ResizeCoordinates : I32EnumAttr<"ResizeCoordinates",
    "a Resize coordinate transformation", [
    I32EnumAttrCase<"HalfPixel", 0, "half_pixel">,
    I32EnumAttrCase<"HalfPixelSymmetric", 1, "half_pixel_symmetric">,
    I32EnumAttrCase<"PytorchHalfPixel", 2, "pytorch_half_pixel">,
    I32EnumAttrCase<"AlignCorners", 3, "align_corners">,
    I32EnumAttrCase<"Asymmetric", 4, "asymmetric">,
    I32EnumAttrCase<"TfHalfPixelForNn", 5, "tf_half_pixel_for_nn">,
    I32EnumAttrCase<"TfCropAndResize", 6, "tf_crop_and_resize">]> {
  let cppNamespace = "::ampc";
  let genSpecializedAttr = 0;
}
def AMPC_ResizeCoordinatesAttr : AMPC_EnumAttr<AMPC_ResizeCoordinates,
                                               "coordinates">;
def AMPC_ResizeNearest : I32EnumAttr<"ResizeNearest",
    "a Resize nearest rounding", [
    I32EnumAttrCase<"RoundPreferFloor", 0, "round_prefer_floor">,
    I32EnumAttrCase<"RoundPreferCeil", 1, "round_prefer_ceil">,
    I32EnumAttrCase<"Floor", 2, "floor">,
    I32EnumAttrCase<"Ceil", 3, "ceil">]> {
  let cppNamespace = "::ampc";
  let genSpecializedAttr = 0;
}
def AMPC_ResizeNearestAttr : AMPC_EnumAttr<AMPC_ResizeNearest, "nearest">;

def AMPC_ResizeOp : AMPC_Op<"resize", [Pure, InferTypeOpAdaptor]> {
  let summary = "Resize and Upsample, imported 1:1 and lowered by "
                "ampc-decompose-resize";
  let description = [{
    ONNX `Resize` (and `Upsample`, as Resize with `asymmetric` coordinates
    and `floor` rounding) with everything the node computes at import
    resolved: each of `axes` (distinct dimensions of the input) is resized
    to `sizes` (its output size; 0 for an empty dimension, which stays
    empty) with `scales` (output / input, as ONNX's reference maps
    coordinates with it: the node's scale, or size / input, or the common
    scale of `keep_aspect_ratio_policy`). `roi` (starts, then ends, as
    fractions of the input) is the crop of `tf_crop_and_resize` and empty
    otherwise; `roi_f32` says it was given as float32, whose reference
    computes part of the coordinates in float32. `cubic_coeff_a`,
    `exclude_outside` and `extrapolation_value` are the node's. The rules
    are `ampc::readResize`'s (include/ampc/Dialect/Resize.h). It exists
    between the importer and `ampc-decompose-resize`, which lowers it to
    gathers and weighted sums along each axis; no later pass, no gradient
    rule and no emitter sees it.

    ```mlir
    %y = ampc.resize %x {mode = #ampc<resize_mode linear>, coordinate_transformation_mode = #ampc<coordinates half_pixel>, nearest_mode = #ampc<nearest round_prefer_floor>, axes = array<i64: 0, 1, 2, 3>, sizes = array<i64: 1, 1, 4, 6>, scales = [1.0, 1.0, 2.0, 2.0]} : (tensor<1x1x2x3xf32>) -> tensor<1x1x4x6xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$input,
                       AMPC_ResizeModeAttr:$mode,
                       AMPC_ResizeCoordinatesAttr:$coordinate_transformation_mode,
                       AMPC_ResizeNearestAttr:$nearest_mode,
                       DenseI64ArrayAttr:$axes,
                       DenseI64ArrayAttr:$sizes,
                       F64ArrayAttr:$scales,
                       DefaultValuedAttr<F64ArrayAttr, "{}">:$roi,
                       UnitAttr:$roi_f32,
                       DefaultValuedAttr<F32Attr, "-0.75">:$cubic_coeff_a,
                       UnitAttr:$exclude_outside,
                       DefaultValuedAttr<F32Attr, "0.0">:$extrapolation_value);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def AMPC_GemmOp : AMPC_Op<"gemm",
    [AMPC_Accumulating, Pure, InferTypeOpAdaptorWithIsCompatible, AMPC_Allow,
     AMPC_Gradient, AttrSizedOperandSegments]> {
  let summary = "Gemm";
  let description = [{
    ONNX `Gemm`: `alpha * op(A) * op(B) + beta * C`, op() transposing when
    `transA`/`transB` is 1; C is optional and broadcasts to the (M, N) result.

    `epilogue` (kernel level, set by ampc-fuse-epilogues after autodiff) is
    what the GEMM applies while storing: `bias` says C is a row vector added
    once (beta 1, the output's type), `relu` and `relu_bias` clamp the
    result at zero (a Relu folded into the Gemm). `bgrad_a` / `bgrad_b`
    (the backward of a Linear, issue 37 item 3) give the Gemm a second
    result, `bias_grad`: the sum over k of op(A) (m values) or op(B) (n
    values), in the output's type; they take no C and alpha 1.

    `relu_aux` / `relu_aux_bias` (CUDA target, issue 37 item 3) are
    `relu` / `relu_bias` whose second result is the ReLU's bit mask
    (cuBLASLt's RELU_AUX layout): i8 of shape [m, ld / 8], ld the output's
    n columns rounded up to a multiple of 128 bits; bit c of row r is set
    where the ReLU passed element (r, c). `drelu` takes such a mask as
    `relu_mask` and zeroes the product where its bit is clear (the ReLU's
    backward); `drelu_bgrad` also writes the masked result's column sums
    (n values, the output's type) as the second result. Both take no C
    and alpha 1. Only `none` has a gradient rule.

    The output is A's element type, or FP32 where A and B are FP16/BF16
    (the GEMM accumulates in FP32 and writes FP32: a weight gradient
    without a rounding to 16 bits and a cast).

    ```mlir
    %y = ampc.gemm %x, %w, %b {transB = 1 : i64} : (tensor<4x784xf32>, tensor<512x784xf32>, tensor<512xf32>) -> tensor<4x512xf32>
    %h = ampc.gemm %x, %w, %b {epilogue = #ampc<epilogue relu_bias>, transB = 1 : i64} : (tensor<4x784xf32>, tensor<512x784xf32>, tensor<512xf32>) -> tensor<4x512xf32>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$a, AMPC_FloatTensor:$b,
                       Optional<AMPC_FloatTensor>:$c,
                       Optional<AMPC_Tensor>:$relu_mask,
                       DefaultValuedAttr<F32Attr, "1.0">:$alpha,
                       DefaultValuedAttr<F32Attr, "1.0">:$beta,
                       DefaultValuedAttr<I64Attr, "0">:$transA,
                       DefaultValuedAttr<I64Attr, "0">:$transB,
                       DefaultValuedAttr<AMPC_GemmEpilogueAttr,
                           "::ampc::GemmEpilogue::None">:$epilogue);
  let results = (outs AMPC_FloatTensor:$output, Optional<AMPC_Tensor>:$aux);
  let assemblyFormat = "$a `,` $b (`,` $c^)? (`relu_mask` $relu_mask^)? "
                       "attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The bias gradient (`bgrad_a`, `bgrad_b`, `drelu_bgrad`), or null.
    ::mlir::Value getBiasGrad();
    /// The ReLU bit mask this Gemm writes (`relu_aux`, `relu_aux_bias`),
    /// or null.
    ::mlir::Value getReluMaskOut();
  }];
}

def AMPC_BatchedGemmOp : AMPC_Op<"batched_gemm", [AMPC_Accumulating, Pure, AMPC_Allow]> {
  let summary = "strided batched GEMM (kernel level)";
  let description = [{
    `batch` row-major GEMMs, `D_i = alpha op(A_i) op(B_i)` (+ the bias row
    and Relu of `epilogue`, as on ampc.gemm), each operand read and the
    result written through a matrix layout: element (r, c) of matrix i of
    A is `A[i * strideA + r * lda + c]` (A stored m x k, or k x m when
    `transA`; likewise B stored k x n or n x k, D m x n). This is the
    layout cuBLASLt takes (leading dimension and
    CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET) and cblas takes (lda,
    ldb), so a transpose feeding a GEMM, or consuming its result, need not
    be copied: ampc-fold-transposes creates this op after autodiff, and
    ampc-autodiff refuses it (no gradient rule). The verifier checks that every access stays inside
    its operand and that D's layout writes each element of the result once.

    ```mlir
    // Q K^T of attention, K read as [B*H, S, D] through transB.
    %s = ampc.batched_gemm %q, %k {m = 64 : i64, n = 64 : i64, k = 16 : i64, batch = 8 : i64, transB = true, lda = 16 : i64, ldb = 16 : i64, ldd = 64 : i64, strideA = 1024 : i64, strideB = 1024 : i64, strideD = 4096 : i64} : (tensor<8x64x16xf32>, tensor<8x64x16xf32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$a, AMPC_FloatTensor:$b,
                       Optional<AMPC_FloatTensor>:$bias,
                       I64Attr:$m, I64Attr:$n, I64Attr:$k,
                       DefaultValuedAttr<I64Attr, "1">:$batch,
                       DefaultValuedAttr<BoolAttr, "false">:$transA,
                       DefaultValuedAttr<BoolAttr, "false">:$transB,
                       I64Attr:$lda, I64Attr:$ldb, I64Attr:$ldd,
                       DefaultValuedAttr<I64Attr, "0">:$strideA,
                       DefaultValuedAttr<I64Attr, "0">:$strideB,
                       DefaultValuedAttr<I64Attr, "0">:$strideD,
                       DefaultValuedAttr<F32Attr, "1.0">:$alpha,
                       DefaultValuedAttr<AMPC_GemmEpilogueAttr,
                           "::ampc::GemmEpilogue::None">:$epilogue);
  let results = (outs AMPC_FloatTensor:$output);
  let assemblyFormat = "$a `,` $b (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def AMPC_ConvOp : AMPC_Op<"conv",
    [AMPC_Accumulating, Pure, InferTypeOpAdaptor, AMPC_Allow, AMPC_Gradient]> {
  let summary = "Conv";
  let description = [{
    ONNX `Conv` in NCHW layout (any number of spatial dimensions). `auto_pad`
    is resolved to explicit `pads` (begins then ends) at import.

    With `channels_last` (set by ampc-channels-last, never by the import;
    two spatial dimensions) the tensors are stored channels-last: X is
    (N, H, W, C), W (M, kH, kW, C/group) and Y (N, oH, oW, M); the values
    are those of the NCHW op on the transposed tensors. The same attribute
    on conv_backward_data/weight, batch_normalization, batch_norm_grad,
    max_pool(_grad) and average_pool(_grad) means the same: their image
    tensors are (N, H, W, C), per-channel operands unchanged.

    ```mlir
    %y = ampc.conv %x, %w {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<1x16x4x4xf32>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$input, AMPC_FloatTensor:$weight,
                       Optional<AMPC_FloatTensor>:$bias,
                       OptionalAttr<DenseI64ArrayAttr>:$strides,
                       OptionalAttr<DenseI64ArrayAttr>:$pads,
                       OptionalAttr<DenseI64ArrayAttr>:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group,
                       UnitAttr:$channels_last);
  let results = (outs AMPC_FloatTensor:$output);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Normalisation and activations over an axis
//===----------------------------------------------------------------------===//

def AMPC_SoftmaxOp : AMPC_Op<"softmax",
    [AMPC_Accumulating, Pure, InferTypeOpAdaptor, AMPC_Fp32Output, AMPC_Gradient]> {
  let summary = "Softmax (opset 13 semantics: along one axis)";
  let description = [{
    ```mlir
    %p = ampc.softmax %x {axis = -1 : i64} : tensor<4x10xf32>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$input,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs AMPC_FloatTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def AMPC_LogSoftmaxOp : AMPC_Op<"log_softmax",
    [AMPC_Accumulating, Pure, InferTypeOpAdaptor, AMPC_Fp32Output, AMPC_Gradient]> {
  let summary = "LogSoftmax (opset 13 semantics: along one axis)";
  let description = [{
    ```mlir
    %p = ampc.log_softmax %x {axis = -1 : i64} : tensor<4x10xf32>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$input,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs AMPC_FloatTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def AMPC_AttentionOp : AMPC_Op<"attention",
    [AMPC_Accumulating, Pure, InferTypeOpAdaptor, AMPC_Allow,
     AMPC_QkvDataOperands,
     DeclareOpInterfaceMethods<AMPC_GradientOpInterface,
                               ["isDifferentiableOperand",
                                "isDifferentiableResult"]>]> {
  let summary = "fused scaled dot-product attention (issue 38)";
  let description = [{
    `O = softmax(scale · Q Kᵀ + bias, causal) V` per (batch, head), without
    materialising the score matrix; created by ampc-fuse-attention. Logical
    shapes Q [B, H, Sq, D], K [B, H, Sk, D], V [B, H, Sk, Dv],
    O [B, H, Sq, Dv]; each 4-D operand and O is stored row-major in the
    physical order its perm gives (`perm[l]` = the physical dimension
    holding logical dimension l of (b, h, s, d)), so the per-head
    Reshape/Transpose chains of an export need no copy. `bias` (optional)
    broadcasts (ONNX rules) to [B, H, Sq, Sk] and is added to the scaled
    scores; `causal` hides key j from query i when j > i (top-left
    aligned). `lse` is each query row's log-sum-exp of its scores,
    [B, H, Sq], FP32 (FP64 for f64 data): the backward recomputes the
    probabilities from it. With `dropout_ratio` p > 0 (a training-mode
    Dropout between the Softmax and MatMul(P, V), fused) each probability
    P[b, h, i, j] is kept, times 1 / (1 - p), where dropoutKeeps(
    `dropout_seed`, the training step, ((b·H + h)·Sq + i)·Sk + j) says so
    (TrainMath.h), else 0: the mask the unfused Dropout with that seed
    draws. `lse` stays the undropped softmax's. The contract both targets
    compute is docs/design.md, "Fused attention (issue 38)".

    With `packed_qkv` (set by ampc-pack-qkv, kernel level) Q, K and V are
    one operand, the output of one GEMM: its logical heads dimension holds
    3·H heads, Q the heads [0, H), K [H, 2H) and V [2H, 3H), read in place
    (each row of the GEMM's output is q | k | v); the three operands must
    be the same value with the same perm.

    ```mlir
    %o, %lse = ampc.attention %q, %k, %v {causal = true, scale = 0.125 : f32, q_perm = array<i64: 0, 2, 1, 3>, k_perm = array<i64: 0, 2, 1, 3>, v_perm = array<i64: 0, 2, 1, 3>, o_perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x64xf16>, tensor<2x8x4x64xf16>, tensor<2x8x4x64xf16>) -> (tensor<2x8x4x64xf16>, tensor<2x4x8xf32>)
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$q, AMPC_FloatTensor:$k,
                       AMPC_FloatTensor:$v,
                       Optional<AMPC_FloatTensor>:$bias,
                       F32Attr:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$causal,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 1, 2, 3}">:$q_perm,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 1, 2, 3}">:$k_perm,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 1, 2, 3}">:$v_perm,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 1, 2, 3}">:$o_perm,
                       DefaultValuedAttr<F32Attr, "0.0">:$dropout_ratio,
                       DefaultValuedAttr<I64Attr, "0">:$dropout_seed,
                       DefaultValuedAttr<BoolAttr, "false">:$packed_qkv);
  let results = (outs AMPC_FloatTensor:$o, AMPC_FloatTensor:$lse);
  let assemblyFormat = "$q `,` $k `,` $v (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

def AMPC_LayerNormalizationOp : AMPC_Op<"layer_normalization",
    [AMPC_Accumulating, Pure, InferTypeOpAdaptorWithIsCompatible, AMPC_Deny,
     DeclareOpInterfaceMethods<AMPC_GradientOpInterface,
                               ["isDifferentiableResult"]>]> {
  let summary = "LayerNormalization";
  let description = [{
    ONNX `LayerNormalization`: normalises over the dimensions from `axis` on.
    Results: Y, Mean and InvStdDev (the latter two in the stash type, with
    the normalised dimensions kept as 1).

    Y has X's type, or FP16/BF16 where X is FP32: ampc-fold-casts gives a
    LayerNorm computing in FP32 whose Y only a cast to 16 bits reads the
    cast's type, and Y is then rounded once from the FP32 value, the bits
    the cast wrote (issue 37, item 6).

    ```mlir
    %y, %mean, %rstd = ampc.layer_normalization %x, %g, %b {axis = -1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<2x16x64xf32>, tensor<2x16x1xf32>, tensor<2x16x1xf32>)
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$input, AMPC_FloatTensor:$scale,
                       Optional<AMPC_FloatTensor>:$bias,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon,
                       DefaultValuedAttr<I64Attr, "1">:$stash_type);
  let results = (outs AMPC_FloatTensor:$output, AMPC_FloatTensor:$mean,
                      AMPC_FloatTensor:$inv_std_dev);
  let assemblyFormat = "$input `,` $scale (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

def AMPC_AddLayerNormOp : AMPC_Op<"add_layer_norm",
    [AMPC_Accumulating, Pure]> {
  let summary = "LayerNormalization of a sum that is also written (kernel level)";
  let description = [{
    `sum = input + addend` (elementwise, one shape; computed in the
    accumulation type and stored in `input`'s type, as the add it
    replaces did), then ampc.layer_normalization of `sum` with the same
    attributes and results (Y, Mean, InvStdDev). ampc-fuse-residual-layer-
    norm creates it where a residual add feeds a LayerNorm, so that one
    kernel reads the two summands and writes the sum and Y (issue 37, item
    4). `addend` may be 16-bit where `input` is FP32 (a cast it folded).

    ```mlir
    %s, %y, %mean, %rstd = ampc.add_layer_norm %x, %h, %g, %b {epsilon = 1.0e-05 : f32} : (tensor<2x16x64xf32>, tensor<2x16x64xf16>, tensor<64xf32>, tensor<64xf32>) -> (tensor<2x16x64xf32>, tensor<2x16x64xf16>, tensor<2x16x1xf32>, tensor<2x16x1xf32>)
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$input, AMPC_FloatTensor:$addend,
                       AMPC_FloatTensor:$scale,
                       Optional<AMPC_FloatTensor>:$bias,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon,
                       DefaultValuedAttr<I64Attr, "1">:$stash_type);
  let results = (outs AMPC_FloatTensor:$sum, AMPC_FloatTensor:$output,
                      AMPC_FloatTensor:$mean, AMPC_FloatTensor:$inv_std_dev);
  let assemblyFormat = "$input `,` $addend `,` $scale (`,` $bias^)? attr-dict "
                       "`:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def AMPC_BatchNormalizationOp : AMPC_Op<"batch_normalization",
    [AMPC_Accumulating, Pure, InferTypeOpAdaptor, AMPC_Follow, AMPC_DataOperandOnly,
     DeclareOpInterfaceMethods<AMPC_GradientOpInterface,
                               ["isDifferentiableOperand",
                                "isDifferentiableResult"]>]> {
  let summary = "BatchNormalization";
  let description = [{
    ONNX `BatchNormalization` (opset 14/15 form). With `training_mode = 1`
    it normalises with the batch statistics and also returns the updated
    running mean and variance, `input * momentum + batch * (1 - momentum)`;
    otherwise those results equal the inputs. The batch variance in the
    running variance is the population variance (ONNX), or with
    `unbiased_running_var` the unbiased one, count / (count - 1) times it, as
    torch.nn.BatchNorm keeps it (set by ampc-running-statistics; count is
    the number of elements per channel).

    With `saved_statistics` (set by the gradient rule on @train_step's copy,
    never by the import) two more results, `saved`: the mean and the
    inverse standard deviation 1/√(σ² + epsilon) the op normalised with
    (the batch's in training mode, input_mean and input_var otherwise), C
    each, f32 (f64 for f64 X), which batch_norm_grad reads instead of
    recomputing them. In training mode the batch statistics are one pass
    over each channel's elements: math::pairwiseMoments, a fixed tree of
    (count, mean, M2) combined with Chan's formula, on both targets.

    The epilogue (ampc-fuse-batch-norm-epilogue, never the import): with a
    `residual` operand (Y's shape and type) Y is the normalised value as
    stored in Y's type plus the residual, added in the elementwise compute
    type and rounded to Y's type, as the `ampc.add` it replaces did; with
    `relu`, ReLU of that. Backward ops read Y as they read the ReLU's or
    the add's result before.

    ```mlir
    %y, %rm, %rv = ampc.batch_normalization %x, %s, %b, %m, %v {epsilon = 1.0e-05 : f32, momentum = 0.9 : f32, training_mode = 1 : i64} : (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>)
    %z, %zm, %zv = ampc.batch_normalization %x, %s, %b, %m, %v residual %r {relu, training_mode = 1 : i64} : (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<2x16x8x8xf32>) -> (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$input, AMPC_FloatTensor:$scale,
                       AMPC_FloatTensor:$bias, AMPC_FloatTensor:$input_mean,
                       AMPC_FloatTensor:$input_var,
                       Optional<AMPC_FloatTensor>:$residual,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon,
                       DefaultValuedAttr<F32Attr, "0.9">:$momentum,
                       DefaultValuedAttr<I64Attr, "0">:$training_mode,
                       UnitAttr:$unbiased_running_var,
                       UnitAttr:$saved_statistics,
                       UnitAttr:$relu,
                       UnitAttr:$channels_last);
  let results = (outs AMPC_FloatTensor:$output,
                      AMPC_FloatTensor:$running_mean,
                      AMPC_FloatTensor:$running_var,
                      Variadic<AMPC_FloatTensor>:$saved);
  let assemblyFormat = "$input `,` $scale `,` $bias `,` $input_mean `,` "
      "$input_var (`residual` $residual^)? attr-dict `:` "
      "functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// What the batch variance is multiplied by in the running variance:
    /// count / (count - 1) with `unbiased_running_var` (1 when a channel
    /// has one element), else 1.
    double runningVarianceFactor();
    /// The saved mean and inverse standard deviation (null without
    /// `saved_statistics`).
    mlir::Value getSavedMean() {
      return getSaved().empty() ? mlir::Value() : getSaved()[0];
    }
    mlir::Value getSavedInvStdDev() {
      return getSaved().empty() ? mlir::Value() : getSaved()[1];
    }
  }];
}

def AMPC_DropoutOp : AMPC_Op<"dropout",
    [Pure, InferTypeOpAdaptor, AMPC_Follow, AMPC_Gradient]> {
  let summary = "Dropout";
  let description = [{
    ONNX `Dropout` with the ratio and training mode as attributes (they must
    be constants at import). Results: the output and the boolean keep-mask.
    Outside training mode it is the identity and the mask is all true;
    canonicalization then replaces it by its input and a constant mask, as
    it does in training mode with a ratio of 0.

    ```mlir
    %y, %mask = ampc.dropout %x {ratio = 1.000000e-01 : f32, training_mode = 1 : i64} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$input,
                       DefaultValuedAttr<F32Attr, "0.5">:$ratio,
                       DefaultValuedAttr<I64Attr, "0">:$training_mode,
                       OptionalAttr<I64Attr>:$seed);
  let results = (outs AMPC_FloatTensor:$output, AMPC_BoolTensor:$mask);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// The seed of the op's masks in training mode: `seed`, else FNV-1a of
    /// its node description (the same for the op's copies in @forward and
    /// @train_step, on every target, and for an ampc.attention that fuses
    /// it, which carries it as `dropout_seed`).
    uint64_t maskSeed();
    /// Outside training mode, or with a ratio of 0: the identity with an
    /// all-true mask, which canonicalization folds.
    bool isIdentity() { return !getTrainingMode() || getRatio().isZero(); }
  }];
  // Outside training mode, or with a ratio of 0, the identity and an
  // all-true mask (the targets never see such a Dropout).
  let hasCanonicalizeMethod = 1;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def AMPC_ReshapeOp : AMPC_Op<"reshape",
    [Pure, AMPC_Follow, AMPC_View, AMPC_Gradient]> {
  let summary = "Reshape (target shape is the result type)";
  let description = [{
    ```mlir
    %y = ampc.reshape %x : tensor<2x16x64xf32> to tensor<32x64xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$input);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($output)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def AMPC_SubviewOp : AMPC_Op<"subview", [Pure]> {
  let summary = "a contiguous range of a tensor's elements, in place (kernel level)";
  let description = [{
    The elements [`offset`, `offset` + size of the result) of `input` in
    row-major order, in the result's shape: a view of the input's buffer
    at that offset, never a copy. ampc-pack-qkv creates it to give each
    of the Q, K and V projections its rows of the packed weight gradient.

    ```mlir
    %dk = ampc.subview %dw {offset = 1024 : i64} : tensor<96x32xf32> to tensor<32x32xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$input, I64Attr:$offset);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($output)";
  let hasVerifier = 1;
}

def AMPC_ExpandOp : AMPC_Op<"expand",
    [Pure, AMPC_Follow, AMPC_Elementwise, AMPC_Gradient]> {
  let summary = "Expand (broadcast to the result type)";
  let description = [{
    ```mlir
    %y = ampc.expand %x : tensor<1x64xf32> to tensor<16x64xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$input);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($output)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def AMPC_TransposeOp : AMPC_Op<"transpose",
    [Pure, InferTypeOpAdaptor, AMPC_Follow, AMPC_Gradient]> {
  let summary = "Transpose";
  let description = [{
    ```mlir
    %y = ampc.transpose %x {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def AMPC_FlattenOp : AMPC_Op<"flatten",
    [Pure, InferTypeOpAdaptor, AMPC_Follow, AMPC_View, AMPC_Gradient]> {
  let summary = "Flatten";
  let description = [{
    ```mlir
    %y = ampc.flatten %x {axis = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x12xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$input,
                       DefaultValuedAttr<I64Attr, "1">:$axis);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def AMPC_SqueezeOp : AMPC_Op<"squeeze",
    [Pure, InferTypeOpAdaptor, AMPC_Follow, AMPC_View, AMPC_Gradient]> {
  let summary = "Squeeze";
  let description = [{
    Removes the listed size-1 dimensions (all of them when `axes` is empty).

    ```mlir
    %y = ampc.squeeze %x {axes = array<i64: 0>} : (tensor<1x8xf32>) -> tensor<8xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def AMPC_UnsqueezeOp : AMPC_Op<"unsqueeze",
    [Pure, InferTypeOpAdaptor, AMPC_Follow, AMPC_View, AMPC_Gradient]> {
  let summary = "Unsqueeze";
  let description = [{
    Inserts size-1 dimensions at `axes` (positions in the result).

    ```mlir
    %y = ampc.unsqueeze %x {axes = array<i64: 0>} : (tensor<8xf32>) -> tensor<1x8xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def AMPC_ConcatOp : AMPC_Op<"concat",
    [Pure, InferTypeOpAdaptor, AMPC_Promote, AMPC_Gradient]> {
  let summary = "Concat";
  let description = [{
    ```mlir
    %y = ampc.concat %a, %b {axis = 0 : i64} : (tensor<2x8xf32>, tensor<3x8xf32>) -> tensor<5x8xf32>
    ```
  }];
  let arguments = (ins Variadic<AMPC_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def AMPC_SliceOp : AMPC_Op<"slice",
    [Pure, InferTypeOpAdaptor, AMPC_Follow, AMPC_Gradient]> {
  let summary = "Slice";
  let description = [{
    ONNX `Slice` with constant starts, ends, axes and steps (clamped as ONNX
    specifies; negative values count from the end).

    ```mlir
    %y = ampc.slice %x {axes = array<i64: 1>, ends = array<i64: 4>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<2x8xf32>) -> tensor<2x4xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$ends, DenseI64ArrayAttr:$axes,
                       DenseI64ArrayAttr:$steps);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def AMPC_GatherOp : AMPC_Op<"gather",
    [Pure, InferTypeOpAdaptor, AMPC_Follow, AMPC_Gradient]> {
  let summary = "Gather";
  let description = [{
    ```mlir
    %y = ampc.gather %table, %ids {axis = 0 : i64} : (tensor<100x64xf32>, tensor<4x16xi64>) -> tensor<4x16x64xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$data, AMPC_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat =
      "$data `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def AMPC_ScatterOp : AMPC_Op<"scatter",
    [Pure, InferTypeOpAdaptor, AMPC_Promote, AMPC_Gradient]> {
  let summary = "Scatter: Gather's inverse, writing updates into a copy of data";
  let description = [{
    The data-dependent write that ScatterElements and ScatterND are
    lowered to by ampc-decompose-indexing (their index arithmetic is
    composed in front of it).
    `updates` has the shape a Gather of `data` at `indices` along `axis`
    gives, data.shape[:axis] + indices.shape + data.shape[axis+1:]:

        output = data
        for a (before axis), j (index position, in order), b (after axis):
          k = indices[j];  k += data.shape[axis] if k < 0
          output[a, k, b] = reduce(output[a, k, b], updates[a, j, b])

    `reduction` is "none" (a later index wins over an earlier one, as
    ONNX's reference applies them), "add", "mul", "max" or "min". An index
    outside [-data.shape[axis], data.shape[axis]) is an error at run time,
    as in Gather. Differentiable for every reduction (max and min split
    the adjoint evenly between tied values, as torch's scatter_reduce).

    ```mlir
    %y = ampc.scatter %data, %rows, %updates {axis = 0 : i64, reduction = "add"} : (tensor<8x4xf32>, tensor<3xi64>, tensor<3x4xf32>) -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$data, AMPC_IndexTensor:$indices,
                       AMPC_Tensor:$updates,
                       DefaultValuedAttr<I64Attr, "0">:$axis,
                       DefaultValuedAttr<StrAttr, "\"none\"">:$reduction);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$data `,` $indices `,` $updates attr-dict `:` "
                       "functional-type(operands, results)";
}

def AMPC_TopKOp : AMPC_Op<"top_k",
    [Pure, InferTypeOpAdaptor, AMPC_Follow, AMPC_NonDifferentiable]> {
  let summary = "TopK's indices";
  let description = [{
    The int64 positions along `axis` of the `k` largest elements (`largest`
    = 1) or smallest (0), best first; of equal elements the lower position
    first, NaN larger than every number (torch.topk). ONNX `TopK`
    (imported 1:1 as `ampc.top_k_values`) is lowered to this op and a
    gather of the values at these indices, so the values' gradient is the
    gather's.

    ```mlir
    %i = ampc.top_k %x {axis = 1 : i64, k = 3 : i64, largest = 1 : i64} : (tensor<4x10xf32>) -> tensor<4x3xi64>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$input, I64Attr:$k,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<I64Attr, "1">:$largest);
  let results = (outs AMPC_I64Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// The indexing ops imported 1:1 and lowered by ampc-decompose-indexing
// (lib/Transforms/DecomposeIndexing.cpp) to ampc.gather / ampc.scatter of
// flat positions computed by int64 elementwise ops (ampc.top_k and a gather
// for TopK, comparisons and a where for OneHot). Their shape rules read the
// operands with include/ampc/Dialect/Indexing.h, as the import rules do;
// no later pass, gradient rule or emitter sees them.
//===----------------------------------------------------------------------===//

def AMPC_GatherElementsOp : AMPC_Op<"gather_elements",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "GatherElements, imported 1:1";
  let description = [{
    ONNX `GatherElements`: `output[i] = data[i with i[axis] replaced by
    indices[i]]`, a negative index counting from the end; the result has
    indices' shape. An index out of range is an error at run time.

    ```mlir
    %y = ampc.gather_elements %data, %idx {axis = 1 : i64} : (tensor<3x4xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$data, AMPC_Tensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat =
      "$data `,` $indices attr-dict `:` functional-type(operands, results)";
}

def AMPC_ScatterElementsOp : AMPC_Op<"scatter_elements",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "ScatterElements (and Scatter), imported 1:1";
  let description = [{
    ONNX `ScatterElements`: data with `updates[i]` written (or reduced by
    `reduction`: none, add, mul, max, min) at i with i[axis] replaced by
    indices[i]; the result has data's type.

    ```mlir
    %y = ampc.scatter_elements %data, %idx, %upd {axis = 0 : i64, reduction = "add"} : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$data, AMPC_Tensor:$indices,
                       AMPC_Tensor:$updates,
                       DefaultValuedAttr<I64Attr, "0">:$axis,
                       DefaultValuedAttr<StrAttr, "\"none\"">:$reduction);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$data `,` $indices `,` $updates attr-dict `:` "
                       "functional-type(operands, results)";
}

def AMPC_GatherNDOp : AMPC_Op<"gather_nd", [Pure, InferTypeOpAdaptor]> {
  let summary = "GatherND, imported 1:1";
  let description = [{
    ONNX `GatherND`: for each index tuple (the last dimension of indices),
    after `batch_dims` dimensions shared with data, the slice of data it
    names; the result is indices' shape but the last, then data's after the
    first batch_dims + tuple length.

    ```mlir
    %y = ampc.gather_nd %data, %idx {batch_dims = 0 : i64} : (tensor<4x5x6xf32>, tensor<3x2xi64>) -> tensor<3x6xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$data, AMPC_Tensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$batch_dims);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat =
      "$data `,` $indices attr-dict `:` functional-type(operands, results)";
}

def AMPC_ScatterNDOp : AMPC_Op<"scatter_nd", [Pure, InferTypeOpAdaptor]> {
  let summary = "ScatterND, imported 1:1";
  let description = [{
    ONNX `ScatterND`: data with the slices that the index tuples of indices
    name written (or reduced by `reduction`) from updates; the result has
    data's type.

    ```mlir
    %y = ampc.scatter_nd %data, %idx, %upd {reduction = "none"} : (tensor<4x5xf32>, tensor<3x1xi64>, tensor<3x5xf32>) -> tensor<4x5xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$data, AMPC_Tensor:$indices,
                       AMPC_Tensor:$updates,
                       DefaultValuedAttr<StrAttr, "\"none\"">:$reduction);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$data `,` $indices `,` $updates attr-dict `:` "
                       "functional-type(operands, results)";
}

def AMPC_ReverseSequenceOp : AMPC_Op<"reverse_sequence",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "ReverseSequence, imported 1:1";
  let description = [{
    ONNX `ReverseSequence`: along `time_axis`, the first
    `sequence_lens[b]` steps of batch entry b (along `batch_axis`)
    reversed, the others as they are; the result has the input's type.

    ```mlir
    %y = ampc.reverse_sequence %x, %lens {batch_axis = 1 : i64, time_axis = 0 : i64} : (tensor<4x2x3xf32>, tensor<2xi64>) -> tensor<4x2x3xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$input, AMPC_Tensor:$sequence_lens,
                       DefaultValuedAttr<I64Attr, "0">:$time_axis,
                       DefaultValuedAttr<I64Attr, "1">:$batch_axis);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$input `,` $sequence_lens attr-dict `:` "
                       "functional-type(operands, results)";
}

def AMPC_OneHotOp : AMPC_Op<"one_hot", [Pure, InferTypeOpAdaptor]> {
  let summary = "OneHot, imported 1:1 (depth, a constant input, read at import)";
  let description = [{
    ONNX `OneHot`: `values[1]` (on) where the index along the new `axis`
    (of `depth`, the node's constant input 1, truncated) equals indices'
    element (a negative one counting from depth), `values[0]` (off)
    elsewhere.

    ```mlir
    %y = ampc.one_hot %idx, %values {axis = -1 : i64, depth = 5 : i64} : (tensor<3xi64>, tensor<2xf32>) -> tensor<3x5xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$indices, AMPC_Tensor:$values,
                       I64Attr:$depth, DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$indices `,` $values attr-dict `:` "
                       "functional-type(operands, results)";
}

def AMPC_TopKValuesOp : AMPC_Op<"top_k_values", [Pure, InferTypeOpAdaptor]> {
  let summary = "TopK (values and indices), imported 1:1";
  let description = [{
    ONNX `TopK`: the `k` largest (`largest` = 1) or smallest elements along
    `axis` and their int64 positions. Named so because `ampc.top_k` is the
    lowered form's indices op: ampc-decompose-indexing makes an
    `ampc.top_k` and a gather of the values at its indices (so the values'
    gradient is the gather's).

    ```mlir
    %v, %i = ampc.top_k_values %x {axis = -1 : i64, k = 3 : i64, largest = 1 : i64} : (tensor<4x10xf32>) -> (tensor<4x3xf32>, tensor<4x3xi64>)
    ```
  }];
  let arguments = (ins AMPC_Tensor:$input, I64Attr:$k,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<I64Attr, "1">:$largest);
  let results = (outs AMPC_Tensor:$values, AMPC_I64Tensor:$indices);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def AMPC_ShapeOp : AMPC_Op<"shape",
    [Pure, InferTypeOpAdaptor, AMPC_NonDifferentiable]> {
  let summary = "Shape";
  let description = [{
    The dimensions `[start, end)` of the operand's (static) shape as an i64
    tensor; always folds to a constant.

    ```mlir
    %s = ampc.shape %x : (tensor<2x16x64xf32>) -> tensor<3xi64>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$input,
                       DefaultValuedAttr<I64Attr, "0">:$start,
                       OptionalAttr<I64Attr>:$end);
  let results = (outs AMPC_I64Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Reductions and pooling
//===----------------------------------------------------------------------===//

class AMPC_ReduceOp<string mnemonic, string desc, list<Trait> traits,
                    Trait inference = InferTypeOpAdaptor, string note = "">
    : AMPC_Op<mnemonic, !listconcat([Pure, inference, AMPC_Accumulating], traits)> {
  let summary = desc;
  let description = "ONNX `" # desc # "` over `axes` (all dimensions when "
      # "empty)." # note # "\n\n```mlir\n%y = ampc." # mnemonic
      # " %x {axes = array<i64: 1>, keepdims = 0 : i64} : "
      # "(tensor<4x8xf32>) -> tensor<4xf32>\n```";
  let arguments = (ins AMPC_Tensor:$input, DenseI64ArrayAttr:$axes,
                       DefaultValuedAttr<I64Attr, "1">:$keepdims);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def AMPC_ReduceMeanOp : AMPC_ReduceOp<"reduce_mean", "ReduceMean", [AMPC_Follow, AMPC_Gradient]>;
// The sum of FP16/BF16 may be written in FP32, its accumulator (issue 37,
// item 3: a bias gradient without the rounding to 16 bits and a cast).
def AMPC_ReduceSumOp : AMPC_ReduceOp<"reduce_sum", "ReduceSum",
    [AMPC_Fp32Output, AMPC_Gradient], InferTypeOpAdaptorWithIsCompatible,
    " The result is the input's element type, or FP32 where the input is "
    # "FP16/BF16 (the sum accumulates in FP32 and writes FP32: a bias "
    # "gradient without a rounding to 16 bits and a cast).">;
def AMPC_ReduceMaxOp : AMPC_ReduceOp<"reduce_max", "ReduceMax", [AMPC_Follow, AMPC_Gradient]>;
def AMPC_ReduceProdOp : AMPC_ReduceOp<"reduce_prod", "ReduceProd", [AMPC_Fp32Output, AMPC_Gradient]>;

def AMPC_MaxPoolOp : AMPC_Op<"max_pool",
    [AMPC_Accumulating, Pure, InferTypeOpAdaptor, AMPC_Follow, AMPC_Gradient]> {
  let summary = "MaxPool";
  let description = [{
    ONNX `MaxPool`; `auto_pad` resolved to `pads` at import. Results: the
    pooled values and the flat argmax indices (ONNX `Indices`). With
    `channels_last` (see ampc.conv) X, Y and Indices are (N, H, W, C) and an
    index is the flat index of the argmax in that layout,
    ((n·H + h)·W + w)·C + c; `storage_order` must then be 0.

    ```mlir
    %y, %idx = ampc.max_pool %x {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x64x32x32xf32>) -> (tensor<1x64x16x16xf32>, tensor<1x64x16x16xi64>)
    ```
  }];
  let arguments = (ins AMPC_Tensor:$input, DenseI64ArrayAttr:$kernel_shape,
                       OptionalAttr<DenseI64ArrayAttr>:$strides,
                       OptionalAttr<DenseI64ArrayAttr>:$pads,
                       OptionalAttr<DenseI64ArrayAttr>:$dilations,
                       DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                       DefaultValuedAttr<I64Attr, "0">:$storage_order,
                       UnitAttr:$channels_last);
  let results = (outs AMPC_Tensor:$output, AMPC_I64Tensor:$indices);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def AMPC_AveragePoolOp : AMPC_Op<"average_pool",
    [AMPC_Accumulating, Pure, InferTypeOpAdaptor, AMPC_Follow, AMPC_Gradient]> {
  let summary = "AveragePool";
  let description = [{
    ONNX `AveragePool`; `auto_pad` resolved to `pads` at import.

    ```mlir
    %y = ampc.average_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x64x32x32xf32>) -> tensor<1x64x16x16xf32>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$input,
                       DenseI64ArrayAttr:$kernel_shape,
                       OptionalAttr<DenseI64ArrayAttr>:$strides,
                       OptionalAttr<DenseI64ArrayAttr>:$pads,
                       OptionalAttr<DenseI64ArrayAttr>:$dilations,
                       DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                       DefaultValuedAttr<I64Attr, "0">:$count_include_pad,
                       UnitAttr:$channels_last);
  let results = (outs AMPC_FloatTensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def AMPC_GlobalAveragePoolOp : AMPC_Op<"global_average_pool",
    [AMPC_Accumulating, Pure, InferTypeOpAdaptor, AMPC_Follow, AMPC_Gradient]> {
  let summary = "GlobalAveragePool";
  let description = [{
    ```mlir
    %y = ampc.global_average_pool %x : (tensor<2x512x2x2xf32>) -> tensor<2x512x1x1xf32>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$input);
  let results = (outs AMPC_FloatTensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def AMPC_SoftmaxCrossEntropyLossOp : AMPC_Op<"softmax_cross_entropy_loss",
    [AMPC_Accumulating, Pure, InferTypeOpAdaptorWithIsCompatible, AMPC_Deny,
     DeclareOpInterfaceMethods<AMPC_GradientOpInterface,
                               ["isDifferentiableOperand"]>]> {
  let summary = "SoftmaxCrossEntropyLoss";
  let description = [{
    ONNX `SoftmaxCrossEntropyLoss`: scores (N, C, D...), integer labels
    (N, D...), optional class weights (C). Results: the loss (a scalar unless
    `reduction = #ampc<reduction none>`) and the log-probabilities, in the
    scores' type, or both in FP32 for FP16/BF16 scores (ampc-fold-casts:
    the cast that widened the scores is read on load, exactly).

    ```mlir
    %loss, %logp = ampc.softmax_cross_entropy_loss %scores, %labels {reduction = #ampc<reduction mean>} : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$scores, AMPC_IndexTensor:$labels,
                       Optional<AMPC_FloatTensor>:$weights,
                       DefaultValuedAttr<AMPC_ReductionAttr,
                                         "::ampc::Reduction::Mean">:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs AMPC_FloatTensor:$loss, AMPC_FloatTensor:$log_prob);
  let assemblyFormat = "$scores `,` $labels (`,` $weights^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

def AMPC_NegativeLogLikelihoodLossOp
    : AMPC_Op<"negative_log_likelihood_loss",
    [Pure, InferTypeOpAdaptor, AMPC_Accumulating, AMPC_Deny,
     DeclareOpInterfaceMethods<AMPC_GradientOpInterface,
                               ["isDifferentiableOperand"]>]> {
  let summary = "NegativeLogLikelihoodLoss";
  let description = [{
    ONNX `NegativeLogLikelihoodLoss`: log-probabilities (N, C, D...), integer
    targets (N, D...), optional class weights (C).

    ```mlir
    %loss = ampc.negative_log_likelihood_loss %logp, %t {reduction = #ampc<reduction sum>} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$input, AMPC_IndexTensor:$target,
                       Optional<AMPC_FloatTensor>:$weight,
                       DefaultValuedAttr<AMPC_ReductionAttr,
                                         "::ampc::Reduction::Mean">:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs AMPC_FloatTensor:$loss);
  let assemblyFormat = "$input `,` $target (`,` $weight^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Kernel-level form (ampc-fuse): what the target emitters consume
//===----------------------------------------------------------------------===//

def AMPC_FusionOp : AMPC_Op<"fusion",
    [IsolatedFromAbove, SingleBlock, RecursiveMemoryEffects]> {
  let summary = "a chain of elementwise ops run as one loop nest";
  let description = [{
    Written by `ampc-fuse`. The body holds elementwise ops (AMPC_Elementwise)
    on the block arguments, which stand for the operands; every value in the
    body has the result's shape, and only the operands (block arguments)
    broadcast to it. A target runs the body as one loop over the result's
    elements: operands are loaded once per element, every intermediate
    stays in a register, rounded to its own dtype (f16/bf16 round to nearest
    even) exactly as if it had been stored, so fusing never changes a
    result; only the yielded values are written to memory.

    A fusion may yield several values of the result shape (`ampc-fuse`'s
    horizontal step: independent elementwise ops with only stores between
    them, such as every BatchNorm's batch counter, run as one kernel).

    ```mlir
    %y = ampc.fusion (%x, %b) : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32> {
    ^bb0(%a0: tensor<8x64xf32>, %a1: tensor<64xf32>):
      %0 = ampc.add %a0, %a1 : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
      %1 = ampc.relu %0 : tensor<8x64xf32>
      ampc.yield %1 : tensor<8x64xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<AMPC_Tensor>:$inputs);
  let results = (outs Variadic<AMPC_Tensor>:$outputs);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat =
      "`(` $inputs `)` attr-dict `:` functional-type($inputs, results) $body";
  let hasVerifier = 1;
}

def AMPC_YieldOp : AMPC_Op<"yield",
    [Pure, Terminator, HasParent<"FusionOp">]> {
  let summary = "the values an ampc.fusion writes";
  let arguments = (ins Variadic<AMPC_Tensor>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}
include "ampc/Dialect/AMPCGradOps.td"
include "ampc/Dialect/AMPCTrainOps.td"
include "ampc/Dialect/AMPCElementwiseOps.td"

#endif // AMPC_OPS_TD
