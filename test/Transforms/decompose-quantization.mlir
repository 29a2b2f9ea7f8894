// RUN: ampc-opt %s --ampc-decompose-quantization --split-input-file | FileCheck %s
// The pass is declared on the module (it freezes a scale's ampc.parameter).
// RUN: ampc-opt %s --split-input-file --pass-pipeline="builtin.module(ampc-decompose-quantization)" | FileCheck %s
// An op the lowering makes past max-tensor-bytes is an error at the op.
// RUN: not ampc-opt %s --split-input-file --ampc-decompose-quantization=max-tensor-bytes=16 2>&1 | FileCheck %s --check-prefix=LIMIT

// ampc-decompose-quantization lowers ampc.quantize_linear,
// ampc.dequantize_linear and ampc.dynamic_quantize_linear (ONNX's, imported
// 1:1) to what the importer built for the nodes, and makes a
// dequantize_linear of a quantize_linear with the same scale and zero point
// fake quantization. Expected IR worked out by hand from ONNX's formulas
// (and equal to the import IR of the same nodes before the 1:1 import).

// Per axis 0 with an int8 zero point: the scale and zero point reshaped to
// broadcast along the axis, x / scale rounded (halves to even), the zero
// point added, where that is in [-128, 127] (in_range), clipped, cast.
// CHECK-LABEL: func.func @quantize_per_axis
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>, %[[S:.+]]: tensor<2xf32>, %[[Z:.+]]: tensor<2xi8>)
// CHECK-NEXT: %[[S3:.+]] = ampc.reshape %[[S]] : tensor<2xf32> to tensor<2x1x1xf32>
// CHECK-NEXT: %[[Z3:.+]] = ampc.reshape %[[Z]] : tensor<2xi8> to tensor<2x1x1xi8>
// CHECK-NEXT: %[[ZF:.+]] = ampc.cast %[[Z3]] : tensor<2x1x1xi8> to tensor<2x1x1xf32>
// CHECK-NEXT: %[[D:.+]] = ampc.div %[[X]], %[[S3]] : (tensor<2x3x4xf32>, tensor<2x1x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[R:.+]] = ampc.round %[[D]] : tensor<2x3x4xf32>
// CHECK-NEXT: %[[A:.+]] = ampc.add %[[R]], %[[ZF]] : (tensor<2x3x4xf32>, tensor<2x1x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[LO:.+]] = ampc.constant dense<-1.280000e+02> : tensor<f32>
// CHECK-NEXT: %[[HI:.+]] = ampc.constant dense<1.270000e+02> : tensor<f32>
// CHECK-NEXT: %[[GE:.+]] = ampc.greater_or_equal %[[A]], %[[LO]]
// CHECK-NEXT: %[[LE:.+]] = ampc.less_or_equal %[[A]], %[[HI]]
// CHECK-NEXT: %[[IN:.+]] = ampc.and %[[GE]], %[[LE]] : (tensor<2x3x4xi1>, tensor<2x3x4xi1>) -> tensor<2x3x4xi1>
// CHECK-NEXT: %[[C:.+]] = ampc.clip %[[A]], %[[LO]], %[[HI]]
// CHECK-NEXT: %[[Y:.+]] = ampc.cast %[[C]] : tensor<2x3x4xf32> to tensor<2x3x4xi8>
// CHECK-NEXT: return %[[Y]], %[[IN]]
func.func @quantize_per_axis(%x: tensor<2x3x4xf32>, %s: tensor<2xf32>, %z: tensor<2xi8>) -> (tensor<2x3x4xi8>, tensor<2x3x4xi1>) {
  %y, %in = ampc.quantize_linear %x, %s, %z {axis = 0 : i64} : (tensor<2x3x4xf32>, tensor<2xf32>, tensor<2xi8>) -> (tensor<2x3x4xi8>, tensor<2x3x4xi1>)
  return %y, %in : tensor<2x3x4xi8>, tensor<2x3x4xi1>
}

// -----

// No zero point: uint8, the range [0, 255], nothing added; a scalar scale
// is not reshaped. The comparisons are built whether or not in_range is
// used (as the importer did).
// CHECK-LABEL: func.func @quantize_uint8
// CHECK-SAME: (%[[X:.+]]: tensor<3xf32>, %[[S:.+]]: tensor<f32>)
// CHECK-NEXT: %[[D:.+]] = ampc.div %[[X]], %[[S]] : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK-NEXT: %[[R:.+]] = ampc.round %[[D]]
// CHECK-NEXT: %[[LO:.+]] = ampc.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[HI:.+]] = ampc.constant dense<2.550000e+02> : tensor<f32>
// CHECK-NEXT: ampc.greater_or_equal %[[R]], %[[LO]]
// CHECK-NEXT: ampc.less_or_equal %[[R]], %[[HI]]
// CHECK-NEXT: ampc.and
// CHECK-NEXT: %[[C:.+]] = ampc.clip %[[R]], %[[LO]], %[[HI]]
// CHECK-NEXT: %[[Y:.+]] = ampc.cast %[[C]] : tensor<3xf32> to tensor<3xui8>
// CHECK-NEXT: return %[[Y]]
// CHECK-NOT: ampc.quantize_linear
func.func @quantize_uint8(%x: tensor<3xf32>, %s: tensor<f32>) -> tensor<3xui8> {
  %y, %in = ampc.quantize_linear %x, %s : (tensor<3xf32>, tensor<f32>) -> (tensor<3xui8>, tensor<3xi1>)
  return %y : tensor<3xui8>
}

// -----

// int32 data is quantized as the scale's float type; a single-value scale
// is a scalar.
// CHECK-LABEL: func.func @quantize_int32
// CHECK-SAME: (%[[N:.+]]: tensor<3xi32>, %[[S:.+]]: tensor<1xf32>)
// CHECK-NEXT: %[[S0:.+]] = ampc.reshape %[[S]] : tensor<1xf32> to tensor<f32>
// CHECK-NEXT: %[[F:.+]] = ampc.cast %[[N]] : tensor<3xi32> to tensor<3xf32>
// CHECK-NEXT: ampc.div %[[F]], %[[S0]] : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
func.func @quantize_int32(%n: tensor<3xi32>, %s: tensor<1xf32>) -> tensor<3xui8> {
  %y, %in = ampc.quantize_linear %n, %s : (tensor<3xi32>, tensor<1xf32>) -> (tensor<3xui8>, tensor<3xi1>)
  return %y : tensor<3xui8>
}

// -----

// (x - zero point) * scale, per axis 0; along the last axis (the default
// 1 of a 2-D x) a per-axis scale broadcasts as it is.
// CHECK-LABEL: func.func @dequantize
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xi8>, %[[S:.+]]: tensor<2xf32>, %[[Z:.+]]: tensor<2xi8>, %[[U:.+]]: tensor<2x3xui8>, %[[T:.+]]: tensor<3xf32>)
// CHECK-NEXT: %[[S2:.+]] = ampc.reshape %[[S]] : tensor<2xf32> to tensor<2x1xf32>
// CHECK-NEXT: %[[Z2:.+]] = ampc.reshape %[[Z]] : tensor<2xi8> to tensor<2x1xi8>
// CHECK-NEXT: %[[ZF:.+]] = ampc.cast %[[Z2]] : tensor<2x1xi8> to tensor<2x1xf32>
// CHECK-NEXT: %[[XF:.+]] = ampc.cast %[[X]] : tensor<2x3xi8> to tensor<2x3xf32>
// CHECK-NEXT: %[[D:.+]] = ampc.sub %[[XF]], %[[ZF]] : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[Y:.+]] = ampc.mul %[[D]], %[[S2]] : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[UF:.+]] = ampc.cast %[[U]] : tensor<2x3xui8> to tensor<2x3xf32>
// CHECK-NEXT: %[[V:.+]] = ampc.mul %[[UF]], %[[T]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: return %[[Y]], %[[V]]
func.func @dequantize(%x: tensor<2x3xi8>, %s: tensor<2xf32>, %z: tensor<2xi8>, %u: tensor<2x3xui8>, %t: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %y = ampc.dequantize_linear %x, %s, %z {axis = 0 : i64} : (tensor<2x3xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<2x3xf32>
  %v = ampc.dequantize_linear %u, %t : (tensor<2x3xui8>, tensor<3xf32>) -> tensor<2x3xf32>
  return %y, %v : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Fake quantization: a quantize_linear taken back by two dequantize_linears
// with its scale and zero point, and also a result of the function. The
// quantize is lowered once, where it was; each dequantize adds
// Where(in range, x - stop_gradient(x), 0), with the quantize's in_range. A
// dequantize without the zero point is plain.
// CHECK-LABEL: func.func @fake_quantize
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>, %[[S:.+]]: tensor<f32>, %[[Z:.+]]: tensor<i8>)
// CHECK-NEXT: %[[ZF:.+]] = ampc.cast %[[Z]] : tensor<i8> to tensor<f32>
// CHECK-NEXT: ampc.div %[[X]], %[[S]]
// CHECK-NEXT: ampc.round
// CHECK-NEXT: %[[A:.+]] = ampc.add
// CHECK-NEXT: %[[LO:.+]] = ampc.constant dense<-1.280000e+02>
// CHECK-NEXT: %[[HI:.+]] = ampc.constant dense<1.270000e+02>
// CHECK-NEXT: %[[GE:.+]] = ampc.greater_or_equal %[[A]], %[[LO]]
// CHECK-NEXT: %[[LE:.+]] = ampc.less_or_equal %[[A]], %[[HI]]
// CHECK-NEXT: %[[IN:.+]] = ampc.and %[[GE]], %[[LE]]
// CHECK-NEXT: %[[C:.+]] = ampc.clip %[[A]], %[[LO]], %[[HI]]
// CHECK-NEXT: %[[Q:.+]] = ampc.cast %[[C]] : tensor<4xf32> to tensor<4xi8>
//
// The first dequantize, fake quantization:
// CHECK-NEXT: %[[ZF1:.+]] = ampc.cast %[[Z]] : tensor<i8> to tensor<f32>
// CHECK-NEXT: %[[QF1:.+]] = ampc.cast %[[Q]] : tensor<4xi8> to tensor<4xf32>
// CHECK-NEXT: %[[D1:.+]] = ampc.sub %[[QF1]], %[[ZF1]]
// CHECK-NEXT: %[[Y1:.+]] = ampc.mul %[[D1]], %[[S]]
// CHECK-NEXT: %[[SG1:.+]] = ampc.stop_gradient %[[X]] : tensor<4xf32>
// CHECK-NEXT: %[[P1:.+]] = ampc.sub %[[X]], %[[SG1]]
// CHECK-NEXT: %[[ZERO1:.+]] = ampc.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[W1:.+]] = ampc.where %[[IN]], %[[P1]], %[[ZERO1]]
// CHECK-NEXT: %[[F1:.+]] = ampc.add %[[Y1]], %[[W1]]
//
// The second, the same with the same in_range:
// CHECK-NEXT: ampc.cast %[[Z]]
// CHECK-NEXT: ampc.cast %[[Q]]
// CHECK-NEXT: ampc.sub
// CHECK-NEXT: ampc.mul
// CHECK-NEXT: ampc.stop_gradient %[[X]]
// CHECK-NEXT: ampc.sub %[[X]]
// CHECK-NEXT: ampc.constant
// CHECK-NEXT: ampc.where %[[IN]]
// CHECK-NEXT: %[[F2:.+]] = ampc.add
//
// Without the zero point: plain.
// CHECK-NEXT: %[[QF3:.+]] = ampc.cast %[[Q]] : tensor<4xi8> to tensor<4xf32>
// CHECK-NEXT: %[[F3:.+]] = ampc.mul %[[QF3]], %[[S]]
// CHECK-NEXT: return %[[Q]], %[[F1]], %[[F2]], %[[F3]]
func.func @fake_quantize(%x: tensor<4xf32>, %s: tensor<f32>, %z: tensor<i8>) -> (tensor<4xi8>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %q, %in = ampc.quantize_linear %x, %s, %z : (tensor<4xf32>, tensor<f32>, tensor<i8>) -> (tensor<4xi8>, tensor<4xi1>)
  %f1 = ampc.dequantize_linear %q, %s, %z : (tensor<4xi8>, tensor<f32>, tensor<i8>) -> tensor<4xf32>
  %f2 = ampc.dequantize_linear %q, %s, %z : (tensor<4xi8>, tensor<f32>, tensor<i8>) -> tensor<4xf32>
  %f3 = ampc.dequantize_linear %q, %s : (tensor<4xi8>, tensor<f32>) -> tensor<4xf32>
  return %q, %f1, %f2, %f3 : tensor<4xi8>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// The scale of fake quantization is frozen when it is a parameter (torch's
// observers set it, not its optimizer); a dequantize with another scale is
// not fake quantization and freezes nothing.
// CHECK-LABEL: ampc.parameter @s {ampc.frozen = "a quantization scale"} : tensor<f32>
// CHECK-LABEL: ampc.parameter @t : tensor<f32>
// CHECK-LABEL: func.func @frozen_scale
// CHECK: %[[S:.+]] = ampc.load_parameter @s
// CHECK: %[[T:.+]] = ampc.load_parameter @t
// CHECK: %[[IN:.+]] = ampc.and
// CHECK: ampc.mul %{{.+}}, %[[S]]
// CHECK-NEXT: ampc.stop_gradient
// CHECK-NEXT: ampc.sub
// CHECK-NEXT: ampc.constant
// CHECK-NEXT: ampc.where %[[IN]]
// CHECK-NEXT: ampc.add
// CHECK-NEXT: ampc.cast
// CHECK-NEXT: ampc.mul %{{.+}}, %[[T]]
// CHECK-NEXT: return
module {
  ampc.parameter @s : tensor<f32> = dense<0.5> : tensor<f32>
  ampc.parameter @t : tensor<f32> = dense<0.25> : tensor<f32>
  func.func @frozen_scale(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %s = ampc.load_parameter @s : tensor<f32>
    %t = ampc.load_parameter @t : tensor<f32>
    %q, %in = ampc.quantize_linear %x, %s : (tensor<4xf32>, tensor<f32>) -> (tensor<4xui8>, tensor<4xi1>)
    %f = ampc.dequantize_linear %q, %s : (tensor<4xui8>, tensor<f32>) -> tensor<4xf32>
    %g = ampc.dequantize_linear %q, %t : (tensor<4xui8>, tensor<f32>) -> tensor<4xf32>
    return %f, %g : tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// int32 data in fake quantization: x cast to the scale's type for the
// estimator at the dequantize.
// CHECK-LABEL: func.func @fake_quantize_int32
// CHECK-SAME: (%[[N:.+]]: tensor<3xi32>, %[[S:.+]]: tensor<f32>)
// CHECK: %[[IN:.+]] = ampc.and
// CHECK: ampc.mul
// CHECK-NEXT: %[[F:.+]] = ampc.cast %[[N]] : tensor<3xi32> to tensor<3xf32>
// CHECK-NEXT: %[[SG:.+]] = ampc.stop_gradient %[[F]]
// CHECK-NEXT: ampc.sub %[[F]], %[[SG]]
// CHECK-NEXT: ampc.constant
// CHECK-NEXT: ampc.where %[[IN]]
func.func @fake_quantize_int32(%n: tensor<3xi32>, %s: tensor<f32>) -> tensor<3xf32> {
  %q, %in = ampc.quantize_linear %n, %s : (tensor<3xi32>, tensor<f32>) -> (tensor<3xui8>, tensor<3xi1>)
  %f = ampc.dequantize_linear %q, %s : (tensor<3xui8>, tensor<f32>) -> tensor<3xf32>
  return %f : tensor<3xf32>
}

// -----

// uint8 with the scale and zero point of x's range widened to hold 0:
// scale = (max(x, 0) + max(-x, 0)) / 255, zero point = round(clip(max(-x,
// 0) / scale, 0, 255)), then quantized as above (no in_range).
// CHECK-LABEL: func.func @dynamic
// CHECK-SAME: (%[[X:.+]]: tensor<3xf32>)
// CHECK-NEXT: %[[ZERO:.+]] = ampc.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[MX:.+]] = ampc.reduce_max %[[X]] {axes = array<i64>, keepdims = 0 : i64} : (tensor<3xf32>) -> tensor<f32>
// CHECK-NEXT: %[[MAX:.+]] = ampc.max %[[MX]], %[[ZERO]]
// CHECK-NEXT: %[[NX:.+]] = ampc.neg %[[X]]
// CHECK-NEXT: %[[MN:.+]] = ampc.reduce_max %[[NX]] {axes = array<i64>, keepdims = 0 : i64}
// CHECK-NEXT: %[[NEGMIN:.+]] = ampc.max %[[MN]], %[[ZERO]]
// CHECK-NEXT: %[[RANGE:.+]] = ampc.add %[[MAX]], %[[NEGMIN]]
// CHECK-NEXT: %[[C255:.+]] = ampc.constant dense<2.550000e+02> : tensor<f32>
// CHECK-NEXT: %[[SCALE:.+]] = ampc.div %[[RANGE]], %[[C255]]
// CHECK-NEXT: %[[ZD:.+]] = ampc.div %[[NEGMIN]], %[[SCALE]]
// CHECK-NEXT: %[[C255B:.+]] = ampc.constant dense<2.550000e+02> : tensor<f32>
// CHECK-NEXT: %[[ZC:.+]] = ampc.clip %[[ZD]], %[[ZERO]], %[[C255B]]
// CHECK-NEXT: %[[ZF:.+]] = ampc.round %[[ZC]] : tensor<f32>
// CHECK-NEXT: %[[D:.+]] = ampc.div %[[X]], %[[SCALE]]
// CHECK-NEXT: %[[R:.+]] = ampc.round %[[D]]
// CHECK-NEXT: %[[A:.+]] = ampc.add %[[R]], %[[ZF]]
// CHECK-NEXT: %[[LO:.+]] = ampc.constant dense<0.000000e+00>
// CHECK-NEXT: %[[HI:.+]] = ampc.constant dense<2.550000e+02>
// CHECK-NEXT: %[[C:.+]] = ampc.clip %[[A]], %[[LO]], %[[HI]]
// CHECK-NEXT: %[[Y:.+]] = ampc.cast %[[C]] : tensor<3xf32> to tensor<3xui8>
// CHECK-NEXT: %[[ZP:.+]] = ampc.cast %[[ZF]] : tensor<f32> to tensor<ui8>
// CHECK-NEXT: return %[[Y]], %[[SCALE]], %[[ZP]]
func.func @dynamic(%x: tensor<3xf32>) -> (tensor<3xui8>, tensor<f32>, tensor<ui8>) {
  %y, %s, %z = ampc.dynamic_quantize_linear %x : (tensor<3xf32>) -> (tensor<3xui8>, tensor<f32>, tensor<ui8>)
  return %y, %s, %z : tensor<3xui8>, tensor<f32>, tensor<ui8>
}

// -----

// Constants fold as the ops are built, as at import: x / scale of
// constants is a constant (ampc.round has no folder).
// CHECK-LABEL: func.func @constants
// CHECK: %[[D:.+]] = ampc.constant dense<[8.000000e-01, 2.000000e+00, -3.000000e+00, 2.000000e+02]> : tensor<4xf32>
// CHECK-NEXT: ampc.round %[[D]] : tensor<4xf32>
func.func @constants() -> tensor<4xui8> {
  %x = ampc.constant dense<[0.4, 1.0, -1.5, 100.0]> : tensor<4xf32>
  %s = ampc.constant dense<0.5> : tensor<f32>
  %y, %in = ampc.quantize_linear %x, %s : (tensor<4xf32>, tensor<f32>) -> (tensor<4xui8>, tensor<4xi1>)
  return %y : tensor<4xui8>
}

// LIMIT: error: the result tensor<2x3x4xf32> has 96 bytes, more than the limit of 16 bytes (--max-tensor-bytes)
