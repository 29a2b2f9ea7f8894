//===- AMPCElementwiseOps.td - the elementwise ops of real models -*- tablegen -*-===//
//
// Included at the end of AMPCOps.td: the elementwise ONNX ops that ordinary
// PyTorch models export beyond the first set (issue 18): more math,
// activations, Clip, Max/Min, Mod, comparisons and logic. Each is one
// loop body on both targets (ScalarExpression.cpp); the precision
// categories follow PyTorch's CUDA autocast lists (REFERENCE.md 1), the
// ops absent from them follow their input (Promote where several inputs
// must agree); the gradient rules are in Gradients.cpp.
//
//===----------------------------------------------------------------------===//

// Math with a derivative.
def AMPC_AbsOp : AMPC_UnaryOp<"abs", AMPC_Tensor, "Abs", [AMPC_Follow, AMPC_Gradient]>;
def AMPC_SinOp : AMPC_UnaryOp<"sin", AMPC_FloatTensor, "Sin", [AMPC_Follow, AMPC_Gradient]>;
def AMPC_CosOp : AMPC_UnaryOp<"cos", AMPC_FloatTensor, "Cos", [AMPC_Follow, AMPC_Gradient]>;
def AMPC_TanOp : AMPC_UnaryOp<"tan", AMPC_FloatTensor, "Tan", [AMPC_Deny, AMPC_Gradient]>;
def AMPC_AsinOp : AMPC_UnaryOp<"asin", AMPC_FloatTensor, "Asin", [AMPC_Deny, AMPC_Gradient]>;
def AMPC_AcosOp : AMPC_UnaryOp<"acos", AMPC_FloatTensor, "Acos", [AMPC_Deny, AMPC_Gradient]>;
def AMPC_AtanOp : AMPC_UnaryOp<"atan", AMPC_FloatTensor, "Atan", [AMPC_Follow, AMPC_Gradient]>;
def AMPC_SinhOp : AMPC_UnaryOp<"sinh", AMPC_FloatTensor, "Sinh", [AMPC_Deny, AMPC_Gradient]>;
def AMPC_CoshOp : AMPC_UnaryOp<"cosh", AMPC_FloatTensor, "Cosh", [AMPC_Deny, AMPC_Gradient]>;
def AMPC_AsinhOp : AMPC_UnaryOp<"asinh", AMPC_FloatTensor, "Asinh", [AMPC_Follow, AMPC_Gradient]>;
def AMPC_AcoshOp : AMPC_UnaryOp<"acosh", AMPC_FloatTensor, "Acosh", [AMPC_Follow, AMPC_Gradient]>;
def AMPC_AtanhOp : AMPC_UnaryOp<"atanh", AMPC_FloatTensor, "Atanh", [AMPC_Follow, AMPC_Gradient]>;

// Rounding and the sign: derivative zero wherever it exists, so autodiff
// treats their results as constants (as PyTorch's zero gradients do).
def AMPC_SignOp : AMPC_UnaryOp<"sign", AMPC_Tensor, "Sign", [AMPC_Follow, AMPC_NonDifferentiable]>;
def AMPC_FloorOp : AMPC_UnaryOp<"floor", AMPC_FloatTensor, "Floor", [AMPC_Follow, AMPC_NonDifferentiable]>;
def AMPC_CeilOp : AMPC_UnaryOp<"ceil", AMPC_FloatTensor, "Ceil", [AMPC_Follow, AMPC_NonDifferentiable]>;
// Round: halves to even (ONNX Round, torch.round).
def AMPC_RoundOp : AMPC_UnaryOp<"round", AMPC_FloatTensor, "Round", [AMPC_Follow, AMPC_NonDifferentiable]>;

// Activations. Softplus is log(1 + exp(x)), x itself above 20 (torch's
// threshold, where the two agree to float precision).
def AMPC_SoftplusOp : AMPC_UnaryOp<"softplus", AMPC_FloatTensor, "Softplus", [AMPC_Deny, AMPC_Gradient]>;
def AMPC_SoftsignOp : AMPC_UnaryOp<"softsign", AMPC_FloatTensor, "Softsign", [AMPC_Follow, AMPC_Gradient]>;
def AMPC_MishOp : AMPC_UnaryOp<"mish", AMPC_FloatTensor, "Mish", [AMPC_Follow, AMPC_Gradient]>;
// HardSwish: x * max(0, min(1, x / 6 + 1/2)).
def AMPC_HardSwishOp : AMPC_UnaryOp<"hard_swish", AMPC_FloatTensor, "HardSwish", [AMPC_Follow, AMPC_Gradient]>;
def AMPC_EluOp : AMPC_UnaryOp<"elu", AMPC_FloatTensor, "Elu", [AMPC_Follow, AMPC_Gradient]> {
  let arguments = (ins AMPC_FloatTensor:$input,
                       DefaultValuedAttr<F32Attr, "1.0">:$alpha);
}
def AMPC_CeluOp : AMPC_UnaryOp<"celu", AMPC_FloatTensor, "Celu", [AMPC_Follow, AMPC_Gradient]> {
  let arguments = (ins AMPC_FloatTensor:$input,
                       DefaultValuedAttr<F32Attr, "1.0">:$alpha);
  let hasVerifier = 1;
}
def AMPC_SeluOp : AMPC_UnaryOp<"selu", AMPC_FloatTensor, "Selu", [AMPC_Follow, AMPC_Gradient]> {
  let arguments = (ins AMPC_FloatTensor:$input,
                       DefaultValuedAttr<F32Attr, "1.67326319217681884765625">:$alpha,
                       DefaultValuedAttr<F32Attr, "1.05070102214813232421875">:$gamma);
}
// HardSigmoid: max(0, min(1, alpha * x + beta)).
def AMPC_HardSigmoidOp : AMPC_UnaryOp<"hard_sigmoid", AMPC_FloatTensor, "HardSigmoid", [AMPC_Follow, AMPC_Gradient]> {
  let arguments = (ins AMPC_FloatTensor:$input,
                       DefaultValuedAttr<F32Attr, "0.2">:$alpha,
                       DefaultValuedAttr<F32Attr, "0.5">:$beta);
}
// Shrink: x - bias above lambd, x + bias below -lambd, 0 between.
def AMPC_ShrinkOp : AMPC_UnaryOp<"shrink", AMPC_FloatTensor, "Shrink", [AMPC_Follow, AMPC_Gradient]> {
  let arguments = (ins AMPC_FloatTensor:$input,
                       DefaultValuedAttr<F32Attr, "0.5">:$lambd,
                       DefaultValuedAttr<F32Attr, "0.0">:$bias);
}
def AMPC_ThresholdedReluOp : AMPC_UnaryOp<"thresholded_relu", AMPC_FloatTensor, "ThresholdedRelu", [AMPC_Follow, AMPC_Gradient]> {
  let arguments = (ins AMPC_FloatTensor:$input,
                       DefaultValuedAttr<F32Attr, "1.0">:$alpha);
}

// PRelu: x where x >= 0, slope * x below (slope broadcast to x). On
// PyTorch's lower-precision list.
def AMPC_PReluOp : AMPC_BinaryOp<"prelu", AMPC_FloatTensor, "PRelu", [AMPC_Allow, AMPC_Gradient]> {
  let hasFolder = 0;
}

// Binary with broadcasting. Max and Min propagate NaN (numpy's maximum and
// minimum); Mod is C's fmod with `fmod` 1 and the divisor's sign (Python's
// %) with 0, which ONNX allows on integers only.
def AMPC_MaxOp : AMPC_BinaryOp<"max", AMPC_Tensor, "Max", [Commutative, AMPC_Promote, AMPC_Gradient]>;
def AMPC_MinOp : AMPC_BinaryOp<"min", AMPC_Tensor, "Min", [Commutative, AMPC_Promote, AMPC_Gradient]>;
def AMPC_ModOp : AMPC_BinaryOp<"mod", AMPC_Tensor, "Mod", [AMPC_Promote, AMPC_Gradient]> {
  let arguments = (ins AMPC_Tensor:$lhs, AMPC_Tensor:$rhs,
                       DefaultValuedAttr<I64Attr, "0">:$fmod);
  let hasVerifier = 1;
}

// BitShift: lhs shifted left (`left` 1) or right (0) by rhs bits, unsigned
// integers only (ONNX); a shift by the width or more gives 0 (numpy's).
def AMPC_BitShiftOp : AMPC_BinaryOp<"bit_shift", AMPC_Tensor, "BitShift", [AMPC_Promote, AMPC_NonDifferentiable]> {
  let arguments = (ins AMPC_Tensor:$lhs, AMPC_Tensor:$rhs,
                       DefaultValuedAttr<I64Attr, "1">:$left);
  let hasFolder = 0;
  let hasVerifier = 1;
}

// Comparisons and logic: i1 results, no derivative.
def AMPC_GreaterOp : AMPC_BinaryOp<"greater", AMPC_Tensor, "Greater", [AMPC_Promote, AMPC_NonDifferentiable]>;
def AMPC_LessOp : AMPC_BinaryOp<"less", AMPC_Tensor, "Less", [AMPC_Promote, AMPC_NonDifferentiable]>;
def AMPC_GreaterOrEqualOp : AMPC_BinaryOp<"greater_or_equal", AMPC_Tensor, "GreaterOrEqual", [AMPC_Promote, AMPC_NonDifferentiable]>;
def AMPC_LessOrEqualOp : AMPC_BinaryOp<"less_or_equal", AMPC_Tensor, "LessOrEqual", [AMPC_Promote, AMPC_NonDifferentiable]>;
def AMPC_AndOp : AMPC_BinaryOp<"and", AMPC_BoolTensor, "And", [Commutative, AMPC_NonDifferentiable]>;
def AMPC_OrOp : AMPC_BinaryOp<"or", AMPC_BoolTensor, "Or", [Commutative, AMPC_NonDifferentiable]>;
def AMPC_XorOp : AMPC_BinaryOp<"xor", AMPC_BoolTensor, "Xor", [Commutative, AMPC_NonDifferentiable]>;
def AMPC_NotOp : AMPC_UnaryOp<"not", AMPC_BoolTensor, "Not", [AMPC_NonDifferentiable]>;

// StopGradient: its input, unchanged, and a constant to autodiff. Not an
// ONNX op: the importer builds straight-through estimators with it (a
// QuantizeLinear followed by its DequantizeLinear).
def AMPC_StopGradientOp : AMPC_UnaryOp<"stop_gradient", AMPC_Tensor, "StopGradient", [AMPC_Follow, AMPC_NonDifferentiable]> {
  let description = [{
    Its input, unchanged; autodiff treats the result as a constant. The
    importer builds straight-through estimators with it:
    `y + mask * (x - stop_gradient(x))` has y's value and passes dy to x
    where `mask`.
  }];
}

// IsNaN and IsInf: i1 results of a float input.
def AMPC_IsNaNOp : AMPC_Op<"is_nan",
    [Pure, InferTypeOpAdaptor, AMPC_Elementwise, AMPC_Follow, AMPC_NonDifferentiable]> {
  let summary = "IsNaN";
  let description = "ONNX `IsNaN`, elementwise.";
  let arguments = (ins AMPC_FloatTensor:$input);
  let results = (outs AMPC_BoolTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}
def AMPC_IsInfOp : AMPC_Op<"is_inf",
    [Pure, InferTypeOpAdaptor, AMPC_Elementwise, AMPC_Follow, AMPC_NonDifferentiable]> {
  let summary = "IsInf";
  let description = [{
    ONNX `IsInf`, elementwise: +inf where `detect_positive`, -inf where
    `detect_negative`.
  }];
  let arguments = (ins AMPC_FloatTensor:$input,
                       DefaultValuedAttr<I64Attr, "1">:$detect_negative,
                       DefaultValuedAttr<I64Attr, "1">:$detect_positive);
  let results = (outs AMPC_BoolTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

// Clip: x limited to [min, max] (both operands, broadcast; the importer
// gives a missing bound the type's extreme). NaN stays NaN; a min above
// max gives max (numpy's clip). Promote: zero-dimensional bounds do not
// widen the data.
def AMPC_ClipOp : AMPC_Op<"clip",
    [Pure, InferTypeOpAdaptor, AMPC_Elementwise, AMPC_Promote, AMPC_Gradient]> {
  let summary = "Clip";
  let description = [{
    ONNX `Clip` with its bounds as operands.

    ```mlir
    %y = ampc.clip %x, %lo, %hi : (tensor<4x8xf32>, tensor<f32>, tensor<f32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AMPC_Tensor:$input, AMPC_Tensor:$min, AMPC_Tensor:$max);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}
