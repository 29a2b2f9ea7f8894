// RUN: ampc-opt %s | ampc-opt | FileCheck %s
// RUN: ampc-opt %s --mlir-print-op-generic | ampc-opt | FileCheck %s

// Round trip of every ampc op through its custom assembly: the file is parsed,
// printed, parsed again and printed again. Attributes equal to their defaults
// are elided by the printer, so they are absent from the CHECK lines.

// CHECK: ampc.parameter @fc.weight : tensor<2x3xf32> = dense<{{\[}}[1.000000e+00, 2.000000e+00, 3.000000e+00], [4.000000e+00, 5.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>
// CHECK: ampc.parameter @"layer1/conv 0:weight" : tensor<3xbf16> = dense<5.000000e-01> : tensor<3xbf16>
ampc.parameter @"fc.weight" : tensor<2x3xf32> = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
ampc.parameter @"layer1/conv 0:weight" : tensor<3xbf16> = dense<0.5> : tensor<3xbf16>

// CHECK-LABEL: func.func @parameters
// CHECK-NEXT: %[[W:.+]] = ampc.load_parameter @fc.weight : tensor<2x3xf32>
// CHECK-NEXT: %[[B:.+]] = ampc.load_parameter @"layer1/conv 0:weight" : tensor<3xbf16>
// CHECK-NEXT: return %[[W]], %[[B]] : tensor<2x3xf32>, tensor<3xbf16>
func.func @parameters() -> (tensor<2x3xf32>, tensor<3xbf16>) {
  %w = ampc.load_parameter @"fc.weight" : tensor<2x3xf32>
  %b = ampc.load_parameter @"layer1/conv 0:weight" : tensor<3xbf16>
  return %w, %b : tensor<2x3xf32>, tensor<3xbf16>
}

// CHECK-LABEL: func.func @constant
// CHECK-NEXT: %[[I:.+]] = ampc.constant dense<[2, 64]> : tensor<2xi64>
// CHECK-NEXT: %[[F:.+]] = ampc.constant dense<1.500000e+00> : tensor<f32>
// CHECK-NEXT: %[[C:.+]] = ampc.constant dense<{{\[}}[true, false], [false, true]]> : tensor<2x2xi1>
// CHECK-NEXT: return %[[I]], %[[F]], %[[C]]
func.func @constant() -> (tensor<2xi64>, tensor<f32>, tensor<2x2xi1>) {
  %0 = ampc.constant dense<[2, 64]> : tensor<2xi64>
  %1 = ampc.constant dense<1.5> : tensor<f32>
  %2 = ampc.constant dense<[[true, false], [false, true]]> : tensor<2x2xi1>
  return %0, %1, %2 : tensor<2xi64>, tensor<f32>, tensor<2x2xi1>
}

// CHECK-LABEL: func.func @unary
// CHECK-SAME: (%[[X:.+]]: tensor<4x8xf32>, %[[I:.+]]: tensor<4xi64>)
// CHECK-NEXT: ampc.neg %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: ampc.sqrt %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: ampc.reciprocal %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: ampc.exp %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: ampc.log %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: ampc.erf %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: ampc.relu %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: ampc.sigmoid %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: ampc.tanh %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: ampc.identity %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: ampc.leaky_relu %[[X]] {alpha = 2.000000e-01 : f32} : tensor<4x8xf32>
// CHECK-NEXT: ampc.leaky_relu %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: ampc.neg %[[I]] : tensor<4xi64>
// CHECK-NEXT: ampc.relu %[[I]] : tensor<4xi64>
// CHECK-NEXT: ampc.gelu %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: ampc.gelu %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: ampc.gelu %[[X]] {approximate = #ampc<approximate tanh>} : tensor<4x8xf32>
// CHECK-NEXT: return
func.func @unary(%x: tensor<4x8xf32>, %i: tensor<4xi64>) {
  %0 = ampc.neg %x : tensor<4x8xf32>
  %1 = ampc.sqrt %x : tensor<4x8xf32>
  %2 = ampc.reciprocal %x : tensor<4x8xf32>
  %3 = ampc.exp %x : tensor<4x8xf32>
  %4 = ampc.log %x : tensor<4x8xf32>
  %5 = ampc.erf %x : tensor<4x8xf32>
  %6 = ampc.relu %x : tensor<4x8xf32>
  %7 = ampc.sigmoid %x : tensor<4x8xf32>
  %8 = ampc.tanh %x : tensor<4x8xf32>
  %9 = ampc.identity %x : tensor<4x8xf32>
  %10 = ampc.leaky_relu %x {alpha = 0.2 : f32} : tensor<4x8xf32>
  %11 = ampc.leaky_relu %x {alpha = 0.01 : f32} : tensor<4x8xf32>
  %12 = ampc.neg %i : tensor<4xi64>
  %13 = ampc.relu %i : tensor<4xi64>
  %14 = ampc.gelu %x : tensor<4x8xf32>
  %15 = ampc.gelu %x {approximate = #ampc<approximate none>} : tensor<4x8xf32>
  %16 = ampc.gelu %x {approximate = #ampc<approximate tanh>} : tensor<4x8xf32>
  return
}

// CHECK-LABEL: func.func @binary
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xf32>, %[[Y:[^:]+]]: tensor<8xf32>, %[[I:[^:]+]]: tensor<4xi64>, %[[E:[^:]+]]: tensor<i32>, %[[C:[^:]+]]: tensor<4x8xi1>, %[[S:[^:]+]]: tensor<f32>)
// CHECK-NEXT: ampc.add %[[X]], %[[Y]] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: ampc.sub %[[Y]], %[[X]] : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: ampc.mul %[[X]], %[[S]] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT: ampc.div %[[I]], %[[I]] : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
// CHECK-NEXT: ampc.pow %[[X]], %[[E]] : (tensor<4x8xf32>, tensor<i32>) -> tensor<4x8xf32>
// CHECK-NEXT: ampc.equal %[[X]], %[[Y]] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
// CHECK-NEXT: ampc.where %[[C]], %[[X]], %[[S]] : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT: ampc.cast %[[X]] : tensor<4x8xf32> to tensor<4x8xf16>
// CHECK-NEXT: ampc.cast %[[I]] : tensor<4xi64> to tensor<4xf32>
// CHECK-NEXT: return
func.func @binary(%x: tensor<4x8xf32>, %y: tensor<8xf32>, %i: tensor<4xi64>,
                  %e: tensor<i32>, %c: tensor<4x8xi1>, %s: tensor<f32>) {
  %0 = ampc.add %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = ampc.sub %y, %x : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = ampc.mul %x, %s : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %3 = ampc.div %i, %i : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %4 = ampc.pow %x, %e : (tensor<4x8xf32>, tensor<i32>) -> tensor<4x8xf32>
  %5 = ampc.equal %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  %6 = ampc.where %c, %x, %s : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %7 = ampc.cast %x : tensor<4x8xf32> to tensor<4x8xf16>
  %8 = ampc.cast %i : tensor<4xi64> to tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @contractions
// CHECK-SAME: (%[[A:[^:]+]]: tensor<8x16x64xf32>, %[[B:[^:]+]]: tensor<64x32xf32>, %[[V:[^:]+]]: tensor<64xf32>, %[[X:[^:]+]]: tensor<4x784xf32>, %[[W:[^:]+]]: tensor<512x784xf32>, %[[C:[^:]+]]: tensor<512xf32>, %[[WT:[^:]+]]: tensor<784x512xf32>)
// CHECK-NEXT: ampc.matmul %[[A]], %[[B]] : (tensor<8x16x64xf32>, tensor<64x32xf32>) -> tensor<8x16x32xf32>
// CHECK-NEXT: ampc.matmul %[[A]], %[[V]] : (tensor<8x16x64xf32>, tensor<64xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: ampc.matmul %[[V]], %[[B]] : (tensor<64xf32>, tensor<64x32xf32>) -> tensor<32xf32>
// CHECK-NEXT: ampc.gemm %[[X]], %[[W]], %[[C]] {transB = 1 : i64} : (tensor<4x784xf32>, tensor<512x784xf32>, tensor<512xf32>) -> tensor<4x512xf32>
// CHECK-NEXT: ampc.gemm %[[X]], %[[WT]] {alpha = 5.000000e-01 : f32, beta = 2.000000e+00 : f32} : (tensor<4x784xf32>, tensor<784x512xf32>) -> tensor<4x512xf32>
// CHECK-NEXT: ampc.gemm %[[WT]], %[[X]] {transA = 1 : i64, transB = 1 : i64} : (tensor<784x512xf32>, tensor<4x784xf32>) -> tensor<512x4xf32>
// CHECK-NEXT: return
func.func @contractions(%a: tensor<8x16x64xf32>, %b: tensor<64x32xf32>,
                        %v: tensor<64xf32>, %x: tensor<4x784xf32>,
                        %w: tensor<512x784xf32>, %c: tensor<512xf32>,
                        %wt: tensor<784x512xf32>) {
  %0 = ampc.matmul %a, %b : (tensor<8x16x64xf32>, tensor<64x32xf32>) -> tensor<8x16x32xf32>
  %1 = ampc.matmul %a, %v : (tensor<8x16x64xf32>, tensor<64xf32>) -> tensor<8x16xf32>
  %2 = ampc.matmul %v, %b : (tensor<64xf32>, tensor<64x32xf32>) -> tensor<32xf32>
  %3 = ampc.gemm %x, %w, %c {transB = 1 : i64} : (tensor<4x784xf32>, tensor<512x784xf32>, tensor<512xf32>) -> tensor<4x512xf32>
  %4 = ampc.gemm %x, %wt {alpha = 0.5 : f32, beta = 2.0 : f32, transA = 0 : i64} : (tensor<4x784xf32>, tensor<784x512xf32>) -> tensor<4x512xf32>
  %5 = ampc.gemm %wt, %x {transA = 1 : i64, transB = 1 : i64} : (tensor<784x512xf32>, tensor<4x784xf32>) -> tensor<512x4xf32>
  return
}

// CHECK-LABEL: func.func @conv
// CHECK-SAME: (%[[X:[^:]+]]: tensor<1x3x8x8xf32>, %[[W:[^:]+]]: tensor<16x3x3x3xf32>, %[[B:[^:]+]]: tensor<16xf32>, %[[GX:[^:]+]]: tensor<1x4x8x8xf32>, %[[GW:[^:]+]]: tensor<4x2x3x3xf32>)
// CHECK-NEXT: ampc.conv %[[X]], %[[W]] {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<1x16x4x4xf32>
// CHECK-NEXT: ampc.conv %[[X]], %[[W]], %[[B]] {dilations = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<1x16x4x4xf32>
// CHECK-NEXT: ampc.conv %[[GX]], %[[GW]] {group = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
// CHECK-NEXT: return
func.func @conv(%x: tensor<1x3x8x8xf32>, %w: tensor<16x3x3x3xf32>,
                %b: tensor<16xf32>, %gx: tensor<1x4x8x8xf32>,
                %gw: tensor<4x2x3x3xf32>) {
  %0 = ampc.conv %x, %w {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<1x16x4x4xf32>
  %1 = ampc.conv %x, %w, %b {dilations = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<1x16x4x4xf32>
  %2 = ampc.conv %gx, %gw {group = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// CHECK-LABEL: func.func @normalization
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x16x64xf32>, %[[G:[^:]+]]: tensor<64xf32>, %[[BN:[^:]+]]: tensor<2x16x8x8xf32>, %[[S:[^:]+]]: tensor<16xf32>, %[[H:[^:]+]]: tensor<2x16x64xf16>, %[[GH:[^:]+]]: tensor<64xf16>, %[[P:[^:]+]]: tensor<4x10xf32>)
// CHECK-NEXT: ampc.softmax %[[P]] : tensor<4x10xf32>
// CHECK-NEXT: ampc.softmax %[[P]] {axis = 0 : i64} : tensor<4x10xf32>
// CHECK-NEXT: ampc.log_softmax %[[P]] : tensor<4x10xf32>
// CHECK-NEXT: ampc.log_softmax %[[P]] {axis = -2 : i64} : tensor<4x10xf32>
// CHECK-NEXT: %{{.+}}, %{{.+}}, %{{.+}} = ampc.layer_normalization %[[X]], %[[G]], %[[G]] : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<2x16x64xf32>, tensor<2x16x1xf32>, tensor<2x16x1xf32>)
// CHECK-NEXT: ampc.layer_normalization %[[H]], %[[GH]] {axis = 2 : i64, epsilon = 1.000000e-03 : f32} : (tensor<2x16x64xf16>, tensor<64xf16>) -> (tensor<2x16x64xf16>, tensor<2x16x1xf32>, tensor<2x16x1xf32>)
// CHECK-NEXT: ampc.layer_normalization %[[X]], %[[G]] {axis = 1 : i64, stash_type = 10 : i64} : (tensor<2x16x64xf32>, tensor<64xf32>) -> (tensor<2x16x64xf32>, tensor<2x1x1xf16>, tensor<2x1x1xf16>)
// CHECK-NEXT: ampc.batch_normalization %[[BN]], %[[S]], %[[S]], %[[S]], %[[S]] {epsilon = 1.000000e-03 : f32, momentum = 9.900000e-01 : f32, training_mode = 1 : i64} : (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>)
// CHECK-NEXT: ampc.batch_normalization %[[BN]], %[[S]], %[[S]], %[[S]], %[[S]] : (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>)
// CHECK-NEXT: ampc.batch_normalization %[[BN]], %[[S]], %[[S]], %[[S]], %[[S]] {saved_statistics, training_mode = 1 : i64} : (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
// CHECK-NEXT: %{{.+}}, %{{.+}} = ampc.dropout %[[G]] {ratio = 1.000000e-01 : f32, seed = 7 : i64, training_mode = 1 : i64} : (tensor<64xf32>) -> (tensor<64xf32>, tensor<64xi1>)
// CHECK-NEXT: ampc.dropout %[[G]] : (tensor<64xf32>) -> (tensor<64xf32>, tensor<64xi1>)
// CHECK-NEXT: return
func.func @normalization(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>,
                         %bn: tensor<2x16x8x8xf32>, %s: tensor<16xf32>,
                         %h: tensor<2x16x64xf16>, %gh: tensor<64xf16>,
                         %p: tensor<4x10xf32>) {
  %p0 = ampc.softmax %p : tensor<4x10xf32>
  %p1 = ampc.softmax %p {axis = 0 : i64} : tensor<4x10xf32>
  %p2 = ampc.log_softmax %p {axis = -1 : i64} : tensor<4x10xf32>
  %p3 = ampc.log_softmax %p {axis = -2 : i64} : tensor<4x10xf32>
  %y0:3 = ampc.layer_normalization %x, %g, %g {axis = -1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<2x16x64xf32>, tensor<2x16x1xf32>, tensor<2x16x1xf32>)
  %y1:3 = ampc.layer_normalization %h, %gh {axis = 2 : i64, epsilon = 1.0e-03 : f32} : (tensor<2x16x64xf16>, tensor<64xf16>) -> (tensor<2x16x64xf16>, tensor<2x16x1xf32>, tensor<2x16x1xf32>)
  %y2:3 = ampc.layer_normalization %x, %g {axis = 1 : i64, stash_type = 10 : i64} : (tensor<2x16x64xf32>, tensor<64xf32>) -> (tensor<2x16x64xf32>, tensor<2x1x1xf16>, tensor<2x1x1xf16>)
  %b0:3 = ampc.batch_normalization %bn, %s, %s, %s, %s {epsilon = 1.0e-03 : f32, momentum = 0.99 : f32, training_mode = 1 : i64} : (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>)
  %b1:3 = ampc.batch_normalization %bn, %s, %s, %s, %s : (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>)
  %b2:5 = ampc.batch_normalization %bn, %s, %s, %s, %s {saved_statistics, training_mode = 1 : i64} : (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  %d0:2 = ampc.dropout %g {ratio = 0.1 : f32, training_mode = 1 : i64, seed = 7 : i64} : (tensor<64xf32>) -> (tensor<64xf32>, tensor<64xi1>)
  %d1:2 = ampc.dropout %g : (tensor<64xf32>) -> (tensor<64xf32>, tensor<64xi1>)
  return
}

// CHECK-LABEL: func.func @data_movement
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x16x64xf32>, %[[R:[^:]+]]: tensor<1x64xf32>, %[[T:[^:]+]]: tensor<4x8xf32>, %[[S:[^:]+]]: tensor<1x8xf32>, %[[U:[^:]+]]: tensor<8xf32>, %[[A:[^:]+]]: tensor<2x8xf32>, %[[B:[^:]+]]: tensor<3x8xf32>, %[[TAB:[^:]+]]: tensor<100x64xf32>, %[[IDS:[^:]+]]: tensor<4x16xi64>, %[[IDS32:[^:]+]]: tensor<3xi32>)
// CHECK-NEXT: ampc.reshape %[[X]] : tensor<2x16x64xf32> to tensor<32x64xf32>
// CHECK-NEXT: ampc.expand %[[R]] : tensor<1x64xf32> to tensor<16x64xf32>
// CHECK-NEXT: ampc.expand %[[R]] : tensor<1x64xf32> to tensor<3x16x64xf32>
// CHECK-NEXT: ampc.transpose %[[T]] {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: ampc.transpose %[[X]] {perm = array<i64: 2, 0, 1>} : (tensor<2x16x64xf32>) -> tensor<64x2x16xf32>
// CHECK-NEXT: ampc.flatten %[[X]] {axis = 2 : i64} : (tensor<2x16x64xf32>) -> tensor<32x64xf32>
// CHECK-NEXT: ampc.flatten %[[X]] : (tensor<2x16x64xf32>) -> tensor<2x1024xf32>
// CHECK-NEXT: ampc.flatten %[[X]] {axis = 0 : i64} : (tensor<2x16x64xf32>) -> tensor<1x2048xf32>
// CHECK-NEXT: ampc.squeeze %[[S]] {axes = array<i64: 0>} : (tensor<1x8xf32>) -> tensor<8xf32>
// CHECK-NEXT: ampc.squeeze %[[S]] {axes = array<i64>} : (tensor<1x8xf32>) -> tensor<8xf32>
// CHECK-NEXT: ampc.unsqueeze %[[U]] {axes = array<i64: 0, -1>} : (tensor<8xf32>) -> tensor<1x8x1xf32>
// CHECK-NEXT: ampc.concat %[[A]], %[[B]] {axis = 0 : i64} : (tensor<2x8xf32>, tensor<3x8xf32>) -> tensor<5x8xf32>
// CHECK-NEXT: ampc.concat %[[A]], %[[A]], %[[S]] {axis = -2 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<5x8xf32>
// CHECK-NEXT: ampc.slice %[[A]] {axes = array<i64: 1>, ends = array<i64: 4>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<2x8xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: ampc.slice %[[A]] {axes = array<i64: -1>, ends = array<i64: -9223372036854775807>, starts = array<i64: -1>, steps = array<i64: -3>} : (tensor<2x8xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: ampc.gather %[[TAB]], %[[IDS]] : (tensor<100x64xf32>, tensor<4x16xi64>) -> tensor<4x16x64xf32>
// CHECK-NEXT: ampc.gather %[[TAB]], %[[IDS32]] {axis = 1 : i64} : (tensor<100x64xf32>, tensor<3xi32>) -> tensor<100x3xf32>
// CHECK-NEXT: ampc.shape %[[X]] : (tensor<2x16x64xf32>) -> tensor<3xi64>
// CHECK-NEXT: ampc.shape %[[X]] {end = -1 : i64, start = 1 : i64} : (tensor<2x16x64xf32>) -> tensor<1xi64>
// CHECK-NEXT: return
func.func @data_movement(%x: tensor<2x16x64xf32>, %r: tensor<1x64xf32>,
                         %t: tensor<4x8xf32>, %s: tensor<1x8xf32>,
                         %u: tensor<8xf32>, %a: tensor<2x8xf32>,
                         %b: tensor<3x8xf32>, %tab: tensor<100x64xf32>,
                         %ids: tensor<4x16xi64>, %ids32: tensor<3xi32>) {
  %0 = ampc.reshape %x : tensor<2x16x64xf32> to tensor<32x64xf32>
  %1 = ampc.expand %r : tensor<1x64xf32> to tensor<16x64xf32>
  %2 = ampc.expand %r : tensor<1x64xf32> to tensor<3x16x64xf32>
  %3 = ampc.transpose %t {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %4 = ampc.transpose %x {perm = array<i64: 2, 0, 1>} : (tensor<2x16x64xf32>) -> tensor<64x2x16xf32>
  %5 = ampc.flatten %x {axis = 2 : i64} : (tensor<2x16x64xf32>) -> tensor<32x64xf32>
  %6 = ampc.flatten %x : (tensor<2x16x64xf32>) -> tensor<2x1024xf32>
  %7 = ampc.flatten %x {axis = 0 : i64} : (tensor<2x16x64xf32>) -> tensor<1x2048xf32>
  %8 = ampc.squeeze %s {axes = array<i64: 0>} : (tensor<1x8xf32>) -> tensor<8xf32>
  %9 = ampc.squeeze %s {axes = array<i64>} : (tensor<1x8xf32>) -> tensor<8xf32>
  %10 = ampc.unsqueeze %u {axes = array<i64: 0, -1>} : (tensor<8xf32>) -> tensor<1x8x1xf32>
  %11 = ampc.concat %a, %b {axis = 0 : i64} : (tensor<2x8xf32>, tensor<3x8xf32>) -> tensor<5x8xf32>
  %12 = ampc.concat %a, %a, %s {axis = -2 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<5x8xf32>
  %13 = ampc.slice %a {axes = array<i64: 1>, ends = array<i64: 4>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<2x8xf32>) -> tensor<2x4xf32>
  %14 = ampc.slice %a {axes = array<i64: -1>, ends = array<i64: -9223372036854775807>, starts = array<i64: -1>, steps = array<i64: -3>} : (tensor<2x8xf32>) -> tensor<2x3xf32>
  %15 = ampc.gather %tab, %ids {axis = 0 : i64} : (tensor<100x64xf32>, tensor<4x16xi64>) -> tensor<4x16x64xf32>
  %16 = ampc.gather %tab, %ids32 {axis = 1 : i64} : (tensor<100x64xf32>, tensor<3xi32>) -> tensor<100x3xf32>
  %17 = ampc.shape %x : (tensor<2x16x64xf32>) -> tensor<3xi64>
  %18 = ampc.shape %x {start = 1 : i64, end = -1 : i64} : (tensor<2x16x64xf32>) -> tensor<1xi64>
  return
}

// CHECK-LABEL: func.func @reductions_and_pooling
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xf32>, %[[IMG:[^:]+]]: tensor<1x64x32x32xf32>, %[[G:[^:]+]]: tensor<2x512x2x2xf32>)
// CHECK-NEXT: ampc.reduce_mean %[[X]] {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT: ampc.reduce_sum %[[X]] {axes = array<i64>} : (tensor<4x8xf32>) -> tensor<1x1xf32>
// CHECK-NEXT: ampc.reduce_max %[[X]] {axes = array<i64: -2>} : (tensor<4x8xf32>) -> tensor<1x8xf32>
// CHECK-NEXT: %{{.+}}, %{{.+}} = ampc.max_pool %[[IMG]] {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x64x32x32xf32>) -> (tensor<1x64x16x16xf32>, tensor<1x64x16x16xi64>)
// CHECK-NEXT: ampc.max_pool %[[IMG]] {ceil_mode = 1 : i64, kernel_shape = array<i64: 2, 2>, storage_order = 1 : i64, strides = array<i64: 3, 3>} : (tensor<1x64x32x32xf32>) -> (tensor<1x64x11x11xf32>, tensor<1x64x11x11xi64>)
// CHECK-NEXT: ampc.average_pool %[[IMG]] {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x64x32x32xf32>) -> tensor<1x64x16x16xf32>
// CHECK-NEXT: ampc.average_pool %[[IMG]] {count_include_pad = 1 : i64, dilations = array<i64: 2, 2>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x64x32x32xf32>) -> tensor<1x64x30x30xf32>
// CHECK-NEXT: ampc.global_average_pool %[[G]] : (tensor<2x512x2x2xf32>) -> tensor<2x512x1x1xf32>
// CHECK-NEXT: return
func.func @reductions_and_pooling(%x: tensor<4x8xf32>,
                                  %img: tensor<1x64x32x32xf32>,
                                  %g: tensor<2x512x2x2xf32>) {
  %0 = ampc.reduce_mean %x {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x8xf32>) -> tensor<4xf32>
  %1 = ampc.reduce_sum %x {axes = array<i64>} : (tensor<4x8xf32>) -> tensor<1x1xf32>
  %2 = ampc.reduce_max %x {axes = array<i64: -2>, keepdims = 1 : i64} : (tensor<4x8xf32>) -> tensor<1x8xf32>
  %3:2 = ampc.max_pool %img {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x64x32x32xf32>) -> (tensor<1x64x16x16xf32>, tensor<1x64x16x16xi64>)
  %4:2 = ampc.max_pool %img {kernel_shape = array<i64: 2, 2>, ceil_mode = 1 : i64, strides = array<i64: 3, 3>, storage_order = 1 : i64} : (tensor<1x64x32x32xf32>) -> (tensor<1x64x11x11xf32>, tensor<1x64x11x11xi64>)
  %5 = ampc.average_pool %img {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x64x32x32xf32>) -> tensor<1x64x16x16xf32>
  %6 = ampc.average_pool %img {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, count_include_pad = 1 : i64, dilations = array<i64: 2, 2>} : (tensor<1x64x32x32xf32>) -> tensor<1x64x30x30xf32>
  %7 = ampc.global_average_pool %g : (tensor<2x512x2x2xf32>) -> tensor<2x512x1x1xf32>
  return
}

// A sum of FP16 written in FP32, its accumulator (issue 37, item 3).
// CHECK-LABEL: func.func @reduce_sum_widened
// CHECK-NEXT: ampc.reduce_sum %{{.+}} {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<4x8xf16>) -> tensor<8xf32>
func.func @reduce_sum_widened(%x: tensor<4x8xf16>) {
  %0 = ampc.reduce_sum %x {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<4x8xf16>) -> tensor<8xf32>
  return
}

// CHECK-LABEL: func.func @losses
// CHECK-SAME: (%[[S:[^:]+]]: tensor<4x10xf32>, %[[L:[^:]+]]: tensor<4xi64>, %[[W:[^:]+]]: tensor<10xf32>, %[[S3:[^:]+]]: tensor<2x10x5xf32>, %[[L3:[^:]+]]: tensor<2x5xi32>)
// CHECK-NEXT: %{{.+}}, %{{.+}} = ampc.softmax_cross_entropy_loss %[[S]], %[[L]] : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
// CHECK-NEXT: ampc.softmax_cross_entropy_loss %[[S]], %[[L]], %[[W]] {ignore_index = -100 : i64, reduction = #ampc<reduction none>} : (tensor<4x10xf32>, tensor<4xi64>, tensor<10xf32>) -> (tensor<4xf32>, tensor<4x10xf32>)
// CHECK-NEXT: ampc.softmax_cross_entropy_loss %[[S3]], %[[L3]] {reduction = #ampc<reduction sum>} : (tensor<2x10x5xf32>, tensor<2x5xi32>) -> (tensor<f32>, tensor<2x10x5xf32>)
// CHECK-NEXT: ampc.negative_log_likelihood_loss %[[S]], %[[L]] {reduction = #ampc<reduction sum>} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
// CHECK-NEXT: ampc.negative_log_likelihood_loss %[[S3]], %[[L3]], %[[W]] {ignore_index = 0 : i64, reduction = #ampc<reduction none>} : (tensor<2x10x5xf32>, tensor<2x5xi32>, tensor<10xf32>) -> tensor<2x5xf32>
// CHECK-NEXT: ampc.negative_log_likelihood_loss %[[S]], %[[L]] : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
// CHECK-NEXT: return
func.func @losses(%scores: tensor<4x10xf32>, %labels: tensor<4xi64>,
                  %w: tensor<10xf32>, %s3: tensor<2x10x5xf32>,
                  %l3: tensor<2x5xi32>) {
  %0:2 = ampc.softmax_cross_entropy_loss %scores, %labels {reduction = #ampc<reduction mean>} : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
  %1:2 = ampc.softmax_cross_entropy_loss %scores, %labels, %w {reduction = #ampc<reduction none>, ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>, tensor<10xf32>) -> (tensor<4xf32>, tensor<4x10xf32>)
  %2:2 = ampc.softmax_cross_entropy_loss %s3, %l3 {reduction = #ampc<reduction sum>} : (tensor<2x10x5xf32>, tensor<2x5xi32>) -> (tensor<f32>, tensor<2x10x5xf32>)
  %3 = ampc.negative_log_likelihood_loss %scores, %labels {reduction = #ampc<reduction sum>} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  %4 = ampc.negative_log_likelihood_loss %s3, %l3, %w {reduction = #ampc<reduction none>, ignore_index = 0 : i64} : (tensor<2x10x5xf32>, tensor<2x5xi32>, tensor<10xf32>) -> tensor<2x5xf32>
  %5 = ampc.negative_log_likelihood_loss %scores, %labels : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  return
}

// Backward ops (AMPCGradOps.td). Those whose result is a forward op's input
// type write it out; the verifier checks it with the forward shape rule.

// CHECK-LABEL: func.func @elementwise_backward
// CHECK-SAME: (%[[DY:[^:]+]]: tensor<4x8xf16>, %[[Y:[^:]+]]: tensor<4x8xf16>)
// CHECK-NEXT: ampc.relu_grad %[[DY]], %[[Y]] : tensor<4x8xf16>
// CHECK-NEXT: ampc.relu_grad %[[DY]], %[[Y]] {alpha = 1.000000e-01 : f32} : tensor<4x8xf16>
// CHECK-NEXT: ampc.gelu_grad %[[DY]], %[[Y]] : tensor<4x8xf16>
// CHECK-NEXT: ampc.gelu_grad %[[DY]], %[[Y]] {approximate = #ampc<approximate tanh>} : tensor<4x8xf16>
// CHECK-NEXT: return
func.func @elementwise_backward(%dy: tensor<4x8xf16>, %y: tensor<4x8xf16>) {
  %0 = ampc.relu_grad %dy, %y : tensor<4x8xf16>
  %1 = ampc.relu_grad %dy, %y {alpha = 0.1 : f32} : tensor<4x8xf16>
  %2 = ampc.gelu_grad %dy, %y {approximate = #ampc<approximate none>} : tensor<4x8xf16>
  %3 = ampc.gelu_grad %dy, %y {approximate = #ampc<approximate tanh>} : tensor<4x8xf16>
  return
}

// CHECK-LABEL: func.func @conv_and_pool_backward
// CHECK-SAME: (%[[X:[^:]+]]: tensor<1x3x8x8xf16>, %[[W:[^:]+]]: tensor<16x3x3x3xf16>, %[[DY:[^:]+]]: tensor<1x16x4x4xf16>, %[[GW:[^:]+]]: tensor<4x2x3xf32>, %[[GX:[^:]+]]: tensor<2x4x7xf32>, %[[GY:[^:]+]]: tensor<2x4x3xf32>, %[[P:[^:]+]]: tensor<1x8x4x4xf16>, %[[I:[^:]+]]: tensor<1x8x4x4xi64>)
// CHECK-NEXT: ampc.conv_backward_data %[[DY]], %[[W]] {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x16x4x4xf16>, tensor<16x3x3x3xf16>) -> tensor<1x3x8x8xf16>
// CHECK-NEXT: ampc.conv_backward_weight %[[X]], %[[DY]] {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf16>, tensor<1x16x4x4xf16>) -> tensor<16x3x3x3xf16>
// CHECK-NEXT: ampc.conv_backward_data %[[GY]], %[[GW]] {dilations = array<i64: 2>, group = 2 : i64} : (tensor<2x4x3xf32>, tensor<4x2x3xf32>) -> tensor<2x4x7xf32>
// CHECK-NEXT: ampc.conv_backward_weight %[[GX]], %[[GY]] {dilations = array<i64: 2>, group = 2 : i64} : (tensor<2x4x7xf32>, tensor<2x4x3xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT: ampc.max_pool_grad %[[P]], %[[I]] {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x8x4x4xf16>, tensor<1x8x4x4xi64>) -> tensor<1x8x8x8xf16>
// CHECK-NEXT: ampc.max_pool_grad %[[P]], %[[I]] {kernel_shape = array<i64: 3, 3>, storage_order = 1 : i64, strides = array<i64: 2, 2>} : (tensor<1x8x4x4xf16>, tensor<1x8x4x4xi64>) -> tensor<1x8x9x9xf16>
// CHECK-NEXT: ampc.average_pool_grad %[[P]] {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x8x4x4xf16>) -> tensor<1x8x8x8xf16>
// CHECK-NEXT: ampc.average_pool_grad %[[P]] {ceil_mode = 1 : i64, count_include_pad = 1 : i64, kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x8x4x4xf16>) -> tensor<1x8x7x7xf16>
// CHECK-NEXT: return
func.func @conv_and_pool_backward(%x: tensor<1x3x8x8xf16>, %w: tensor<16x3x3x3xf16>,
                                  %dy: tensor<1x16x4x4xf16>, %gw: tensor<4x2x3xf32>,
                                  %gx: tensor<2x4x7xf32>, %gy: tensor<2x4x3xf32>,
                                  %p: tensor<1x8x4x4xf16>, %i: tensor<1x8x4x4xi64>) {
  %0 = ampc.conv_backward_data %dy, %w {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x16x4x4xf16>, tensor<16x3x3x3xf16>) -> tensor<1x3x8x8xf16>
  %1 = ampc.conv_backward_weight %x, %dy {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf16>, tensor<1x16x4x4xf16>) -> tensor<16x3x3x3xf16>
  %2 = ampc.conv_backward_data %gy, %gw {group = 2 : i64, dilations = array<i64: 2>} : (tensor<2x4x3xf32>, tensor<4x2x3xf32>) -> tensor<2x4x7xf32>
  %3 = ampc.conv_backward_weight %gx, %gy {group = 2 : i64, dilations = array<i64: 2>} : (tensor<2x4x7xf32>, tensor<2x4x3xf32>) -> tensor<4x2x3xf32>
  %4 = ampc.max_pool_grad %p, %i {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x8x4x4xf16>, tensor<1x8x4x4xi64>) -> tensor<1x8x8x8xf16>
  %5 = ampc.max_pool_grad %p, %i {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, storage_order = 1 : i64} : (tensor<1x8x4x4xf16>, tensor<1x8x4x4xi64>) -> tensor<1x8x9x9xf16>
  %6 = ampc.average_pool_grad %p {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x8x4x4xf16>) -> tensor<1x8x8x8xf16>
  %7 = ampc.average_pool_grad %p {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, ceil_mode = 1 : i64, count_include_pad = 1 : i64} : (tensor<1x8x4x4xf16>) -> tensor<1x8x7x7xf16>
  return
}

// CHECK-LABEL: func.func @normalization_backward
// CHECK-SAME: (%[[DY:[^:]+]]: tensor<2x16x8x8xf16>, %[[X:[^:]+]]: tensor<2x16x8x8xf16>, %[[S:[^:]+]]: tensor<16xf32>, %[[M:[^:]+]]: tensor<16xf32>, %[[V:[^:]+]]: tensor<16xf32>, %[[LX:[^:]+]]: tensor<2x16x64xf32>, %[[G:[^:]+]]: tensor<64xf32>, %[[LM:[^:]+]]: tensor<2x16x1xf32>, %[[LR:[^:]+]]: tensor<2x16x1xf32>)
// CHECK-NEXT: %{{.+}}, %{{.+}}, %{{.+}} = ampc.batch_norm_grad %[[DY]], %[[X]], %[[S]], %[[M]], %[[V]] : (tensor<2x16x8x8xf16>, tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>)
// CHECK-NEXT: %{{.+}}, %{{.+}}, %{{.+}} = ampc.batch_norm_grad %[[DY]], %[[X]], %[[S]], %[[M]], %[[V]] {training_mode = 0 : i64} : (tensor<2x16x8x8xf16>, tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>)
// CHECK-NEXT: ampc.layer_norm_grad %[[LX]], %[[LX]], %[[G]], %[[LM]], %[[LR]] {axis = 2 : i64} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<64xf32>, tensor<2x16x1xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
// CHECK-NEXT: return
func.func @normalization_backward(%dy: tensor<2x16x8x8xf16>, %x: tensor<2x16x8x8xf16>,
                                  %s: tensor<16xf32>, %m: tensor<16xf32>, %v: tensor<16xf32>,
                                  %lx: tensor<2x16x64xf32>, %g: tensor<64xf32>,
                                  %lm: tensor<2x16x1xf32>, %lr: tensor<2x16x1xf32>) {
  %0:3 = ampc.batch_norm_grad %dy, %x, %s, %m, %v : (tensor<2x16x8x8xf16>, tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>)
  %1:3 = ampc.batch_norm_grad %dy, %x, %s, %m, %v {training_mode = 0 : i64} : (tensor<2x16x8x8xf16>, tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>)
  %2 = ampc.layer_norm_grad %lx, %lx, %g, %lm, %lr {axis = 2 : i64} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<64xf32>, tensor<2x16x1xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
  return
}

// SoftmaxCrossEntropyLoss's adjoint as one op (nll_loss_grad with
// log_prob), in log_prob's type or in 16 bits; the loss on 16-bit scores
// with FP32 results (a widening cast folded in).
// CHECK-LABEL: func.func @softmax_loss_backward
// CHECK-SAME: (%[[D:[^:]+]]: tensor<f32>, %[[T:[^:]+]]: tensor<4xi64>, %[[W:[^:]+]]: tensor<10xf32>, %[[LP:[^:]+]]: tensor<4x10xf32>, %[[S:[^:]+]]: tensor<4x10xf16>)
// CHECK-NEXT: ampc.nll_loss_grad %[[D]], %[[T]] log_prob(%[[LP]]) : (tensor<f32>, tensor<4xi64>, tensor<4x10xf32>) -> tensor<4x10xf32>
// CHECK-NEXT: ampc.nll_loss_grad %[[D]], %[[T]], %[[W]] log_prob(%[[LP]]) {ignore_index = -100 : i64} : (tensor<f32>, tensor<4xi64>, tensor<10xf32>, tensor<4x10xf32>) -> tensor<4x10xf16>
// CHECK-NEXT: ampc.softmax_cross_entropy_loss %[[S]], %[[T]] : (tensor<4x10xf16>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
// CHECK-NEXT: return
func.func @softmax_loss_backward(%d: tensor<f32>, %t: tensor<4xi64>, %w: tensor<10xf32>,
                                 %lp: tensor<4x10xf32>, %s: tensor<4x10xf16>) {
  %0 = ampc.nll_loss_grad %d, %t log_prob(%lp) : (tensor<f32>, tensor<4xi64>, tensor<4x10xf32>) -> tensor<4x10xf32>
  %1 = ampc.nll_loss_grad %d, %t, %w log_prob(%lp) {ignore_index = -100 : i64} : (tensor<f32>, tensor<4xi64>, tensor<10xf32>, tensor<4x10xf32>) -> tensor<4x10xf16>
  %2:2 = ampc.softmax_cross_entropy_loss %s, %t : (tensor<4x10xf16>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
  return
}

// CHECK-LABEL: func.func @loss_and_data_backward
// CHECK-SAME: (%[[D:[^:]+]]: tensor<f32>, %[[T:[^:]+]]: tensor<4xi64>, %[[W:[^:]+]]: tensor<10xf32>, %[[DN:[^:]+]]: tensor<2x5xf32>, %[[T3:[^:]+]]: tensor<2x5xi32>, %[[DG:[^:]+]]: tensor<4x16x64xf32>, %[[IDS:[^:]+]]: tensor<4x16xi64>, %[[DS:[^:]+]]: tensor<2x4xf32>, %[[IDS1:[^:]+]]: tensor<16xi64>)
// CHECK-NEXT: ampc.nll_loss_grad %[[D]], %[[T]] : (tensor<f32>, tensor<4xi64>) -> tensor<4x10xf32>
// CHECK-NEXT: ampc.nll_loss_grad %[[D]], %[[T]], %[[W]] {ignore_index = -100 : i64, reduction = #ampc<reduction sum>} : (tensor<f32>, tensor<4xi64>, tensor<10xf32>) -> tensor<4x10xf32>
// CHECK-NEXT: ampc.nll_loss_grad %[[DN]], %[[T3]] {reduction = #ampc<reduction none>} : (tensor<2x5xf32>, tensor<2x5xi32>) -> tensor<2x10x5xf32>
// CHECK-NEXT: ampc.gather_grad %[[DG]], %[[IDS]] : (tensor<4x16x64xf32>, tensor<4x16xi64>) -> tensor<100x64xf32>
// CHECK-NEXT: ampc.gather_grad %[[DG]], %[[IDS1]] {axis = 1 : i64} : (tensor<4x16x64xf32>, tensor<16xi64>) -> tensor<4x7x64xf32>
// CHECK-NEXT: ampc.slice_grad %[[DS]] {axes = array<i64: 1>, ends = array<i64: 4>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<2x4xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: ampc.slice_grad %[[DS]] {axes = array<i64: -1>, ends = array<i64: -100>, starts = array<i64: -1>, steps = array<i64: -2>} : (tensor<2x4xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: return
func.func @loss_and_data_backward(%d: tensor<f32>, %t: tensor<4xi64>, %w: tensor<10xf32>,
                                  %dn: tensor<2x5xf32>, %t3: tensor<2x5xi32>,
                                  %dg: tensor<4x16x64xf32>, %ids: tensor<4x16xi64>,
                                  %ds: tensor<2x4xf32>, %ids1: tensor<16xi64>) {
  %0 = ampc.nll_loss_grad %d, %t {reduction = #ampc<reduction mean>} : (tensor<f32>, tensor<4xi64>) -> tensor<4x10xf32>
  %1 = ampc.nll_loss_grad %d, %t, %w {reduction = #ampc<reduction sum>, ignore_index = -100 : i64} : (tensor<f32>, tensor<4xi64>, tensor<10xf32>) -> tensor<4x10xf32>
  %2 = ampc.nll_loss_grad %dn, %t3 {reduction = #ampc<reduction none>} : (tensor<2x5xf32>, tensor<2x5xi32>) -> tensor<2x10x5xf32>
  %3 = ampc.gather_grad %dg, %ids {axis = 0 : i64} : (tensor<4x16x64xf32>, tensor<4x16xi64>) -> tensor<100x64xf32>
  %4 = ampc.gather_grad %dg, %ids1 {axis = 1 : i64} : (tensor<4x16x64xf32>, tensor<16xi64>) -> tensor<4x7x64xf32>
  %5 = ampc.slice_grad %ds {axes = array<i64: 1>, ends = array<i64: 4>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<2x4xf32>) -> tensor<2x8xf32>
  %6 = ampc.slice_grad %ds {axes = array<i64: -1>, ends = array<i64: -100>, starts = array<i64: -1>, steps = array<i64: -2>} : (tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// ampc.scatter (Gather's inverse: updates of a Gather's shape, reduction
// none by default), ampc.top_k (int64 positions, k along the axis) and
// ampc.reduce_prod round-trip with their inferred types.

// CHECK-LABEL: func.func @indexing
// CHECK-SAME: (%[[D:[^:]+]]: tensor<8x4xf32>, %[[R:[^:]+]]: tensor<3xi64>, %[[U:[^:]+]]: tensor<3x4xf32>, %[[C:[^:]+]]: tensor<2xi32>, %[[V:[^:]+]]: tensor<8x2xf32>, %[[X:[^:]+]]: tensor<4x10xf16>)
// CHECK-NEXT: ampc.scatter %[[D]], %[[R]], %[[U]] : (tensor<8x4xf32>, tensor<3xi64>, tensor<3x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: ampc.scatter %[[D]], %[[C]], %[[V]] {axis = 1 : i64, reduction = "max"} : (tensor<8x4xf32>, tensor<2xi32>, tensor<8x2xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: ampc.top_k %[[X]] {k = 3 : i64} : (tensor<4x10xf16>) -> tensor<4x3xi64>
// CHECK-NEXT: ampc.top_k %[[X]] {axis = 0 : i64, k = 2 : i64, largest = 0 : i64} : (tensor<4x10xf16>) -> tensor<2x10xi64>
// CHECK-NEXT: ampc.reduce_prod %[[X]] {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x10xf16>) -> tensor<4xf16>
// CHECK-NEXT: return
func.func @indexing(%d: tensor<8x4xf32>, %r: tensor<3xi64>, %u: tensor<3x4xf32>,
                    %c: tensor<2xi32>, %v: tensor<8x2xf32>, %x: tensor<4x10xf16>) {
  %0 = ampc.scatter %d, %r, %u : (tensor<8x4xf32>, tensor<3xi64>, tensor<3x4xf32>) -> tensor<8x4xf32>
  %1 = ampc.scatter %d, %c, %v {axis = 1 : i64, reduction = "max"} : (tensor<8x4xf32>, tensor<2xi32>, tensor<8x2xf32>) -> tensor<8x4xf32>
  %2 = ampc.top_k %x {k = 3 : i64} : (tensor<4x10xf16>) -> tensor<4x3xi64>
  %3 = ampc.top_k %x {axis = 0 : i64, k = 2 : i64, largest = 0 : i64} : (tensor<4x10xf16>) -> tensor<2x10xi64>
  %4 = ampc.reduce_prod %x {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x10xf16>) -> tensor<4xf16>
  return
}
