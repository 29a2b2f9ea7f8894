// RUN: ampc-opt %s -split-input-file -verify-diagnostics

// The shape rules of ampc.quantize_linear, ampc.dequantize_linear and
// ampc.dynamic_quantize_linear (ampc::quantizationParameterShape and its
// kin, include/ampc/Dialect/Quantization.h): one invalid op per section,
// each message the importer reports for the node
// (test/Import/errors/quantize-bad.test) and the op's verifier reports for
// the op.

func.func @scale_length(%x: tensor<2x3xf32>, %s: tensor<4xf32>) {
  // expected-error @+2 {{ampc.quantize_linear: the scale must be a scalar or hold 3 values (the length of axis 1), got [4]}}
  // expected-error @+1 {{'ampc.quantize_linear' op failed to infer returned types}}
  %y, %in = ampc.quantize_linear %x, %s : (tensor<2x3xf32>, tensor<4xf32>) -> (tensor<2x3xui8>, tensor<2x3xi1>)
  return
}

// -----

func.func @axis_range(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+2 {{ampc.quantize_linear: axis 5 is out of range for rank 2}}
  // expected-error @+1 {{'ampc.quantize_linear' op failed to infer returned types}}
  %y, %in = ampc.quantize_linear %x, %s {axis = 5 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> (tensor<2x3xui8>, tensor<2x3xi1>)
  return
}

// -----

// A scalar scale takes any axis (ONNX reads it only for per-axis values).
func.func @scalar_any_axis(%x: tensor<2x3xf32>, %s: tensor<f32>) {
  %y, %in = ampc.quantize_linear %x, %s {axis = 5 : i64} : (tensor<2x3xf32>, tensor<f32>) -> (tensor<2x3xui8>, tensor<2x3xi1>)
  return
}

// -----

func.func @zero_point_length(%x: tensor<2x3xf32>, %s: tensor<2xf32>, %z: tensor<3xi8>) {
  // expected-error @+2 {{ampc.quantize_linear: the zero point must be a scalar or hold 2 values (the length of axis 0), got [3]}}
  // expected-error @+1 {{'ampc.quantize_linear' op failed to infer returned types}}
  %y, %in = ampc.quantize_linear %x, %s, %z {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2xf32>, tensor<3xi8>) -> (tensor<2x3xi8>, tensor<2x3xi1>)
  return
}

// -----

func.func @zero_point_type(%x: tensor<2x3xf32>, %s: tensor<f32>, %z: tensor<i16>) {
  // expected-error @+2 {{ampc.quantize_linear: the zero point must be uint8 or int8, got i16}}
  // expected-error @+1 {{'ampc.quantize_linear' op failed to infer returned types}}
  %y, %in = ampc.quantize_linear %x, %s, %z : (tensor<2x3xf32>, tensor<f32>, tensor<i16>) -> (tensor<2x3xi16>, tensor<2x3xi1>)
  return
}

// -----

func.func @x_type(%x: tensor<2x3xf16>, %s: tensor<f32>) {
  // expected-error @+2 {{ampc.quantize_linear: x must be an integer tensor or of the scale's element type f32, got f16}}
  // expected-error @+1 {{'ampc.quantize_linear' op failed to infer returned types}}
  %y, %in = ampc.quantize_linear %x, %s : (tensor<2x3xf16>, tensor<f32>) -> (tensor<2x3xui8>, tensor<2x3xi1>)
  return
}

// -----

func.func @result_type(%x: tensor<2x3xf32>, %s: tensor<f32>, %z: tensor<i8>) {
  // expected-error @+2 {{'ampc.quantize_linear' op inferred type(s) 'tensor<2x3xi8>', 'tensor<2x3xi1>' are incompatible with return type(s) of operation 'tensor<2x3xui8>', 'tensor<2x3xi1>'}}
  // expected-error @+1 {{'ampc.quantize_linear' op failed to infer returned types}}
  %y, %in = ampc.quantize_linear %x, %s, %z : (tensor<2x3xf32>, tensor<f32>, tensor<i8>) -> (tensor<2x3xui8>, tensor<2x3xi1>)
  return
}

// -----

func.func @dequantize_scale_length(%x: tensor<2x3xui8>, %s: tensor<4xf32>) {
  // expected-error @+2 {{ampc.dequantize_linear: the scale must be a scalar or hold 3 values (the length of axis 1), got [4]}}
  // expected-error @+1 {{'ampc.dequantize_linear' op failed to infer returned types}}
  %y = ampc.dequantize_linear %x, %s : (tensor<2x3xui8>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @dequantize_axis_range(%x: tensor<2x3xi8>, %s: tensor<2xf32>, %z: tensor<2xi8>) {
  // expected-error @+2 {{ampc.dequantize_linear: axis -3 is out of range for rank 2}}
  // expected-error @+1 {{'ampc.dequantize_linear' op failed to infer returned types}}
  %y = ampc.dequantize_linear %x, %s, %z {axis = -3 : i64} : (tensor<2x3xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<2x3xf32>
  return
}

// -----

func.func @dynamic_result_type(%x: tensor<4xf32>) {
  // expected-error @+2 {{'ampc.dynamic_quantize_linear' op inferred type(s) 'tensor<4xui8>', 'tensor<f32>', 'tensor<ui8>' are incompatible with return type(s) of operation 'tensor<4xi8>', 'tensor<f32>', 'tensor<ui8>'}}
  // expected-error @+1 {{'ampc.dynamic_quantize_linear' op failed to infer returned types}}
  %y, %s, %z = ampc.dynamic_quantize_linear %x : (tensor<4xf32>) -> (tensor<4xi8>, tensor<f32>, tensor<ui8>)
  return
}
