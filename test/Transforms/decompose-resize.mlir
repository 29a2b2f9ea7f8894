// RUN: ampc-opt %s --ampc-decompose-resize --split-input-file | FileCheck %s
// The pass is declared on functions (buildPipeline nests it).
// RUN: ampc-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(ampc-decompose-resize))" | FileCheck %s
// An op the lowering makes past max-tensor-bytes is an error at the resize.
// RUN: not ampc-opt %s --split-input-file --ampc-decompose-resize=max-tensor-bytes=16 2>&1 | FileCheck %s --check-prefix=LIMIT

// ampc-decompose-resize lowers ampc.resize (ONNX Resize and Upsample,
// imported 1:1) to what the importer built for the node: one step per
// resized axis, the last first; nearest is one Gather of the source
// positions, linear and cubic a sum over their taps of a Gather times a
// constant weight vector along the axis. Positions and weights worked out
// by hand from ONNX's reference formulas (noted per case).

// Nearest, asymmetric, from sizes: W 3 -> 2 (scale 2/3) reads x / (2/3) =
// 0, 1.5 -> 0, 1 (round_prefer_floor: a tie goes down); then H 2 -> 3
// (scale 1.5) reads 0, 0.67, 1.33 -> 0, 1, 1. N and C stay: nothing.
// CHECK-LABEL: func.func @nearest_sizes
// CHECK-SAME: (%[[X:.+]]: tensor<1x1x2x3xf32>)
// CHECK-NEXT: %[[IW:.+]] = ampc.constant dense<[0, 1]> : tensor<2xi64>
// CHECK-NEXT: %[[W:.+]] = ampc.gather %[[X]], %[[IW]] {axis = 3 : i64} : (tensor<1x1x2x3xf32>, tensor<2xi64>) -> tensor<1x1x2x2xf32>
// CHECK-NEXT: %[[IH:.+]] = ampc.constant dense<[0, 1, 1]> : tensor<3xi64>
// CHECK-NEXT: %[[Y:.+]] = ampc.gather %[[W]], %[[IH]] {axis = 2 : i64} : (tensor<1x1x2x2xf32>, tensor<3xi64>) -> tensor<1x1x3x2xf32>
// CHECK-NEXT: return %[[Y]]
// CHECK-NOT: ampc.resize
// LIMIT: error: the result tensor<3xi64> has 24 bytes, more than the limit of 16 bytes (--max-tensor-bytes)
func.func @nearest_sizes(%x: tensor<1x1x2x3xf32>) -> tensor<1x1x3x2xf32> {
  %0 = ampc.resize %x {mode = #ampc<resize_mode nearest>, coordinate_transformation_mode = #ampc<coordinates asymmetric>, nearest_mode = #ampc<nearest round_prefer_floor>, axes = array<i64: 0, 1, 2, 3>, sizes = array<i64: 1, 1, 3, 2>, scales = [1.0, 1.0, 1.5, 0.66666666666666663]} : (tensor<1x1x2x3xf32>) -> tensor<1x1x3x2xf32>
  return %0 : tensor<1x1x3x2xf32>
}

// -----

// Linear, half_pixel, 2x: (x + 0.5) / 2 - 0.5 = -0.25 (the edge), 0.25,
// 0.75, 1.25, ...: per axis the lower neighbour times 1 - frac plus the
// upper one times frac, neighbours clamped at the edges; the weight
// vectors broadcast along their axis.
// CHECK-LABEL: func.func @linear_half_pixel
// CHECK-SAME: (%[[X:.+]]: tensor<1x1x2x3xf32>)
// CHECK-NEXT: %[[I0:.+]] = ampc.constant dense<[0, 0, 0, 1, 1, 2]> : tensor<6xi64>
// CHECK-NEXT: %[[G0:.+]] = ampc.gather %[[X]], %[[I0]] {axis = 3 : i64} : (tensor<1x1x2x3xf32>, tensor<6xi64>) -> tensor<1x1x2x6xf32>
// CHECK-NEXT: %[[W0:.+]] = ampc.constant dense<{{\[\[\[\[}}2.500000e-01, 7.500000e-01, 2.500000e-01, 7.500000e-01, 2.500000e-01, 7.500000e-01]]]]> : tensor<1x1x1x6xf32>
// CHECK-NEXT: %[[M0:.+]] = ampc.mul %[[G0]], %[[W0]]
// CHECK-NEXT: %[[I1:.+]] = ampc.constant dense<[0, 1, 1, 2, 2, 2]> : tensor<6xi64>
// CHECK-NEXT: %[[G1:.+]] = ampc.gather %[[X]], %[[I1]] {axis = 3 : i64}
// CHECK-NEXT: %[[W1:.+]] = ampc.constant dense<{{\[\[\[\[}}7.500000e-01, 2.500000e-01, 7.500000e-01, 2.500000e-01, 7.500000e-01, 2.500000e-01]]]]> : tensor<1x1x1x6xf32>
// CHECK-NEXT: %[[M1:.+]] = ampc.mul %[[G1]], %[[W1]]
// CHECK-NEXT: %[[W:.+]] = ampc.add %[[M0]], %[[M1]] : (tensor<1x1x2x6xf32>, tensor<1x1x2x6xf32>) -> tensor<1x1x2x6xf32>
// CHECK-NEXT: %[[I2:.+]] = ampc.constant dense<[0, 0, 0, 1]> : tensor<4xi64>
// CHECK-NEXT: %[[G2:.+]] = ampc.gather %[[W]], %[[I2]] {axis = 2 : i64} : (tensor<1x1x2x6xf32>, tensor<4xi64>) -> tensor<1x1x4x6xf32>
// CHECK-NEXT: %[[W2:.+]] = ampc.constant dense<{{\[\[\[\[}}2.500000e-01], [7.500000e-01], [2.500000e-01], [7.500000e-01]]]]> : tensor<1x1x4x1xf32>
// CHECK-NEXT: %[[M2:.+]] = ampc.mul %[[G2]], %[[W2]]
// CHECK-NEXT: %[[I3:.+]] = ampc.constant dense<[0, 1, 1, 1]> : tensor<4xi64>
// CHECK-NEXT: %[[G3:.+]] = ampc.gather %[[W]], %[[I3]] {axis = 2 : i64}
// CHECK-NEXT: %[[W3:.+]] = ampc.constant dense<{{\[\[\[\[}}7.500000e-01], [2.500000e-01], [7.500000e-01], [2.500000e-01]]]]> : tensor<1x1x4x1xf32>
// CHECK-NEXT: %[[M3:.+]] = ampc.mul %[[G3]], %[[W3]]
// CHECK-NEXT: %[[Y:.+]] = ampc.add %[[M2]], %[[M3]] : (tensor<1x1x4x6xf32>, tensor<1x1x4x6xf32>) -> tensor<1x1x4x6xf32>
// CHECK-NEXT: return %[[Y]]
// LIMIT: error: the result tensor<6xi64> has 48 bytes, more than the limit of 16 bytes (--max-tensor-bytes)
func.func @linear_half_pixel(%x: tensor<1x1x2x3xf32>) -> tensor<1x1x4x6xf32> {
  %0 = ampc.resize %x {mode = #ampc<resize_mode linear>, coordinate_transformation_mode = #ampc<coordinates half_pixel>, nearest_mode = #ampc<nearest round_prefer_floor>, axes = array<i64: 0, 1, 2, 3>, sizes = array<i64: 1, 1, 4, 6>, scales = [1.0, 1.0, 2.0, 2.0]} : (tensor<1x1x2x3xf32>) -> tensor<1x1x4x6xf32>
  return %0 : tensor<1x1x4x6xf32>
}

// -----

// Cubic (A = -0.75), half_pixel, 4 -> 2: x = 0.5 and 2.5, both a ratio of
// 0.5, so each of the 4 taps has one weight for both outputs: -0.09375,
// 0.59375, 0.59375, -0.09375 (sum 1). The taps are the 4 nearest positions
// of the input edge-padded by 2: 0, 0, 1, 2 for x = 0.5 and 1, 2, 3, 3 for
// x = 2.5 (clamped).
// CHECK-LABEL: func.func @cubic
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-NEXT: %[[I0:.+]] = ampc.constant dense<[0, 1]> : tensor<2xi64>
// CHECK-NEXT: %[[G0:.+]] = ampc.gather %[[X]], %[[I0]] : (tensor<4xf32>, tensor<2xi64>) -> tensor<2xf32>
// CHECK-NEXT: %[[W0:.+]] = ampc.constant dense<-9.375000e-02> : tensor<2xf32>
// CHECK-NEXT: %[[M0:.+]] = ampc.mul %[[G0]], %[[W0]]
// CHECK-NEXT: %[[I1:.+]] = ampc.constant dense<[0, 2]> : tensor<2xi64>
// CHECK-NEXT: %[[G1:.+]] = ampc.gather %[[X]], %[[I1]]
// CHECK-NEXT: %[[W1:.+]] = ampc.constant dense<5.937500e-01> : tensor<2xf32>
// CHECK-NEXT: %[[M1:.+]] = ampc.mul %[[G1]], %[[W1]]
// CHECK-NEXT: %[[S1:.+]] = ampc.add %[[M0]], %[[M1]]
// CHECK-NEXT: %[[I2:.+]] = ampc.constant dense<[1, 3]> : tensor<2xi64>
// CHECK-NEXT: %[[G2:.+]] = ampc.gather %[[X]], %[[I2]]
// CHECK-NEXT: %[[W2:.+]] = ampc.constant dense<5.937500e-01> : tensor<2xf32>
// CHECK-NEXT: %[[M2:.+]] = ampc.mul %[[G2]], %[[W2]]
// CHECK-NEXT: %[[S2:.+]] = ampc.add %[[S1]], %[[M2]]
// CHECK-NEXT: %[[I3:.+]] = ampc.constant dense<[2, 3]> : tensor<2xi64>
// CHECK-NEXT: %[[G3:.+]] = ampc.gather %[[X]], %[[I3]]
// CHECK-NEXT: %[[W3:.+]] = ampc.constant dense<-9.375000e-02> : tensor<2xf32>
// CHECK-NEXT: %[[M3:.+]] = ampc.mul %[[G3]], %[[W3]]
// CHECK-NEXT: %[[Y:.+]] = ampc.add %[[S2]], %[[M3]]
// CHECK-NEXT: return %[[Y]]
func.func @cubic(%x: tensor<4xf32>) -> tensor<2xf32> {
  %0 = ampc.resize %x {mode = #ampc<resize_mode cubic>, coordinate_transformation_mode = #ampc<coordinates half_pixel>, nearest_mode = #ampc<nearest round_prefer_floor>, axes = array<i64: 0>, sizes = array<i64: 2>, scales = [0.5]} : (tensor<4xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// exclude_outside with A = -0.5: the taps outside the input (the first of
// x = 0.5, the last of x = 2.5) get 0 and the others are divided by their
// sum (-0.0625 + 0.5625 + 0.5625 = 1.0625): -0.0588, 0.5294, 0.5294.
// CHECK-LABEL: func.func @cubic_exclude_outside
// CHECK: ampc.constant dense<[0, 1]> : tensor<2xi64>
// CHECK: ampc.constant dense<[0.000000e+00, -0.0588235296]> : tensor<2xf32>
// CHECK: ampc.constant dense<[0, 2]> : tensor<2xi64>
// CHECK: ampc.constant dense<0.529411793> : tensor<2xf32>
// CHECK: ampc.constant dense<[1, 3]> : tensor<2xi64>
// CHECK: ampc.constant dense<0.529411793> : tensor<2xf32>
// CHECK: ampc.constant dense<[2, 3]> : tensor<2xi64>
// CHECK: ampc.constant dense<[-0.0588235296, 0.000000e+00]> : tensor<2xf32>
// CHECK: %[[Y:.+]] = ampc.add
// CHECK-NEXT: return %[[Y]]
func.func @cubic_exclude_outside(%x: tensor<4xf32>) -> tensor<2xf32> {
  %0 = ampc.resize %x {mode = #ampc<resize_mode cubic>, coordinate_transformation_mode = #ampc<coordinates half_pixel>, nearest_mode = #ampc<nearest round_prefer_floor>, axes = array<i64: 0>, sizes = array<i64: 2>, scales = [0.5], cubic_coeff_a = -0.5 : f32, exclude_outside} : (tensor<4xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Linear, align_corners, 3 -> 2: x * 2 / 1 = 0 and 2, whole positions, so
// the lower taps weigh 0 everywhere (left out) and the upper ones 1 (no
// Mul): one Gather.
// CHECK-LABEL: func.func @align_corners
// CHECK-SAME: (%[[X:.+]]: tensor<3xf32>)
// CHECK-NEXT: %[[I:.+]] = ampc.constant dense<[0, 2]> : tensor<2xi64>
// CHECK-NEXT: %[[Y:.+]] = ampc.gather %[[X]], %[[I]] : (tensor<3xf32>, tensor<2xi64>) -> tensor<2xf32>
// CHECK-NEXT: return %[[Y]]
func.func @align_corners(%x: tensor<3xf32>) -> tensor<2xf32> {
  %0 = ampc.resize %x {mode = #ampc<resize_mode linear>, coordinate_transformation_mode = #ampc<coordinates align_corners>, nearest_mode = #ampc<nearest round_prefer_floor>, axes = array<i64: 0>, sizes = array<i64: 2>, scales = [0.66666666666666663]} : (tensor<3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// tf_crop_and_resize of roi [0.5, 1.5] (f64: no float32 steps), 4 -> 3:
// 1.5 + x * 1 * 3 / 2 = 1.5, 3, 4.5; the last is outside the input, so its
// weights are 0 and extrapolation_value (10) is added there.
// CHECK-LABEL: func.func @crop_and_extrapolate
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-NEXT: %[[I0:.+]] = ampc.constant dense<[1, 2, 0]> : tensor<3xi64>
// CHECK-NEXT: %[[G0:.+]] = ampc.gather %[[X]], %[[I0]]
// CHECK-NEXT: %[[W0:.+]] = ampc.constant dense<[5.000000e-01, 0.000000e+00, 0.000000e+00]> : tensor<3xf32>
// CHECK-NEXT: %[[M0:.+]] = ampc.mul %[[G0]], %[[W0]]
// CHECK-NEXT: %[[I1:.+]] = ampc.constant dense<[2, 3, 0]> : tensor<3xi64>
// CHECK-NEXT: %[[G1:.+]] = ampc.gather %[[X]], %[[I1]]
// CHECK-NEXT: %[[W1:.+]] = ampc.constant dense<[5.000000e-01, 1.000000e+00, 0.000000e+00]> : tensor<3xf32>
// CHECK-NEXT: %[[M1:.+]] = ampc.mul %[[G1]], %[[W1]]
// CHECK-NEXT: %[[S:.+]] = ampc.add %[[M0]], %[[M1]]
// CHECK-NEXT: %[[E:.+]] = ampc.constant dense<[0.000000e+00, 0.000000e+00, 1.000000e+01]> : tensor<3xf32>
// CHECK-NEXT: %[[Y:.+]] = ampc.add %[[S]], %[[E]]
// CHECK-NEXT: return %[[Y]]
func.func @crop_and_extrapolate(%x: tensor<4xf32>) -> tensor<3xf32> {
  %0 = ampc.resize %x {mode = #ampc<resize_mode linear>, coordinate_transformation_mode = #ampc<coordinates tf_crop_and_resize>, nearest_mode = #ampc<nearest round_prefer_floor>, axes = array<i64: 0>, sizes = array<i64: 3>, scales = [0.75], roi = [0.5, 1.5], extrapolation_value = 10.0 : f32} : (tensor<4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// Upsample's form (asymmetric, floor), f16: output i reads floor(i / 2);
// the axis of scale 1 builds nothing.
// CHECK-LABEL: func.func @nearest_floor
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf16>)
// CHECK-NEXT: %[[I:.+]] = ampc.constant dense<[0, 0, 1, 1]> : tensor<4xi64>
// CHECK-NEXT: %[[Y:.+]] = ampc.gather %[[X]], %[[I]] : (tensor<2x3xf16>, tensor<4xi64>) -> tensor<4x3xf16>
// CHECK-NEXT: return %[[Y]]
func.func @nearest_floor(%x: tensor<2x3xf16>) -> tensor<4x3xf16> {
  %0 = ampc.resize %x {mode = #ampc<resize_mode nearest>, coordinate_transformation_mode = #ampc<coordinates asymmetric>, nearest_mode = #ampc<nearest floor>, axes = array<i64: 0, 1>, sizes = array<i64: 4, 3>, scales = [2.0, 1.0]} : (tensor<2x3xf16>) -> tensor<4x3xf16>
  return %0 : tensor<4x3xf16>
}

// -----

// Every axis keeps its size at scale 1: the resize is its input.
// CHECK-LABEL: func.func @nothing_to_do
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @nothing_to_do(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = ampc.resize %x {mode = #ampc<resize_mode linear>, coordinate_transformation_mode = #ampc<coordinates half_pixel>, nearest_mode = #ampc<nearest round_prefer_floor>, axes = array<i64: 1, 0>, sizes = array<i64: 3, 2>, scales = [1.0, 1.0]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// An empty axis stays empty and builds nothing; the other is resized.
// CHECK-LABEL: func.func @empty_dim
// CHECK-SAME: (%[[X:.+]]: tensor<0x3xf32>)
// CHECK-NEXT: %[[I:.+]] = ampc.constant dense<[0, 0, 1, 1, 2, 2]> : tensor<6xi64>
// CHECK-NEXT: %[[Y:.+]] = ampc.gather %[[X]], %[[I]] {axis = 1 : i64} : (tensor<0x3xf32>, tensor<6xi64>) -> tensor<0x6xf32>
// CHECK-NEXT: return %[[Y]]
func.func @empty_dim(%x: tensor<0x3xf32>) -> tensor<0x6xf32> {
  %0 = ampc.resize %x {mode = #ampc<resize_mode nearest>, coordinate_transformation_mode = #ampc<coordinates asymmetric>, nearest_mode = #ampc<nearest floor>, axes = array<i64: 0, 1>, sizes = array<i64: 0, 6>, scales = [2.0, 2.0]} : (tensor<0x3xf32>) -> tensor<0x6xf32>
  return %0 : tensor<0x6xf32>
}

// -----

// A constant input folds as the ops are built, as at import.
// CHECK-LABEL: func.func @constant_folds
// CHECK: %[[Y:.+]] = ampc.constant dense<[1.000000e+00, 1.000000e+00, 2.000000e+00, 2.000000e+00]> : tensor<4xf32>
// CHECK-NOT: ampc.gather
// CHECK: return %[[Y]]
func.func @constant_folds() -> tensor<4xf32> {
  %x = ampc.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %0 = ampc.resize %x {mode = #ampc<resize_mode nearest>, coordinate_transformation_mode = #ampc<coordinates asymmetric>, nearest_mode = #ampc<nearest floor>, axes = array<i64: 0>, sizes = array<i64: 4>, scales = [2.0]} : (tensor<2xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
