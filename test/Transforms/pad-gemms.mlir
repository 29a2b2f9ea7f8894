// Tensor Core shapes (issue 37, item 11): ampc-pad-gemms pads a Linear's
// output features to a multiple of 8, ampc-gemm-alignment records every
// GEMM's alignment.
//
// Up to the pass (FP16, the loss attached): the 1,001-class head's
// weight copy and bias get 7 zero rows, the GEMM computes 1,008 columns and
// the slice gives the loss and the output the first 1,001; the parameters
// keep their shapes. fc1's K (the input's 20 features) is not padded and
// the decision says why.
// RUN: ampc-opt %s --ampc-pipeline="precision=fp16 mode=train pad-gemms=on emit-after=ampc-pad-gemms" | FileCheck %s
// CHECK-DAG: ampc.parameter @fc2.weight : tensor<1001x40xf32>
// CHECK-DAG: ampc.parameter @fc2.bias : tensor<1001xf32>
// CHECK-LABEL: func.func @forward
// CHECK: ampc.gemm {{.*}}ampc.gemm_shape = "fc1 (f16, needs 8): M 16, N 40, K 20; K 20 not padded: the features of 'input0', a user-visible input"{{.*}} -> tensor<16x40xf16>
// CHECK: %[[W:.+]] = ampc.cast %{{.+}} {ampc.autocast} : tensor<1001x40xf32> to tensor<1001x40xf16>
// CHECK: %[[B:.+]] = ampc.cast %{{.+}} {ampc.autocast} : tensor<1001xf32> to tensor<1001xf16>
// CHECK: %[[ZW:.+]] = ampc.constant dense<0.000000e+00> : tensor<7x40xf16>
// CHECK: %[[PW:.+]] = ampc.concat %[[W]], %[[ZW]] {ampc.padding, axis = 0 : i64} : (tensor<1001x40xf16>, tensor<7x40xf16>) -> tensor<1008x40xf16>
// CHECK: %[[ZB:.+]] = ampc.constant dense<0.000000e+00> : tensor<7xf16>
// CHECK: %[[PB:.+]] = ampc.concat %[[B]], %[[ZB]] {ampc.padding, axis = 0 : i64} : (tensor<1001xf16>, tensor<7xf16>) -> tensor<1008xf16>
// CHECK: %[[Y:.+]] = ampc.gemm %{{.+}}, %[[PW]], %[[PB]] {{{.*}}ampc.gemm_shape = "fc2 (f16, needs 8): M 16, N 1001, K 40; N 1001 padded to 1008 (the weight's low-precision copy and the bias with 7 zero rows; the result sliced back to 1001 columns for every reader)"{{.*}} -> tensor<16x1008xf16>
// CHECK: %[[S:.+]] = ampc.slice %[[Y]] {ampc.padding, axes = array<i64: 1>, ends = array<i64: 1001>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<16x1008xf16>) -> tensor<16x1001xf16>
// CHECK: ampc.cast %[[S]] {ampc.autocast} : tensor<16x1001xf16> to tensor<16x1001xf32>
// CHECK: return
//
// The whole pipeline (FP16 training): every GEMM the kernels run, the
// backward ones too, carries its alignment; the head's forward, dX and dW
// GEMMs have N or M or K 1008 (aligned 16), none 1001.
// RUN: ampc-opt %s --ampc-pipeline="precision=fp16 mode=train optimizer=adamw pad-gemms=on" | FileCheck %s --check-prefix=ALIGN
// ALIGN-LABEL: func.func @train_step
// ALIGN-NOT: ampc.gemm {{[^{]*}} : (tensor<{{[^)]*}}1001x40xf16
// ALIGN: ampc.gemm {{.*}}ampc.alignment = {k = array<i64: 20, 4>, m = array<i64: 16, 16>, n = array<i64: 40, 8>, needs = 8 : i64}
// ALIGN: ampc.gemm {{.*}}ampc.alignment = {k = array<i64: 40, 8>, m = array<i64: 16, 16>, n = array<i64: 1008, 16>, needs = 8 : i64}
// ALIGN-NOT: ampc.gemm {{.*}}array<i64: 1001
// ALIGN: return
// Without padding the head's GEMMs stay at 1001 (aligned 1).
// RUN: ampc-opt %s --ampc-pipeline="precision=fp16 mode=train optimizer=adamw pad-gemms=off" | FileCheck %s --check-prefix=OFF
// OFF-LABEL: func.func @train_step
// OFF: ampc.gemm {{.*}}ampc.alignment = {k = array<i64: 40, 8>, m = array<i64: 16, 16>, n = array<i64: 1001, 1>, needs = 8 : i64}
// OFF-NOT: 1008
module {
  ampc.parameter @fc1.weight : tensor<40x20xf32> = dense<0.5> : tensor<40x20xf32>
  ampc.parameter @fc1.bias : tensor<40xf32> = dense<0.25> : tensor<40xf32>
  ampc.parameter @fc2.weight : tensor<1001x40xf32> = dense<0.125> : tensor<1001x40xf32>
  ampc.parameter @fc2.bias : tensor<1001xf32> = dense<0.0> : tensor<1001xf32>
  func.func @forward(%arg0: tensor<16x20xf32> {ampc.name = "input0"}) -> (tensor<16x1001xf32> {ampc.name = "output"}) {
    %0 = ampc.load_parameter @fc1.weight : tensor<40x20xf32>
    %1 = ampc.load_parameter @fc1.bias : tensor<40xf32>
    %2 = ampc.load_parameter @fc2.weight : tensor<1001x40xf32>
    %3 = ampc.load_parameter @fc2.bias : tensor<1001xf32>
    %output = ampc.gemm %arg0, %0, %1 {transB = 1 : i64} : (tensor<16x20xf32>, tensor<40x20xf32>, tensor<40xf32>) -> tensor<16x40xf32> loc("fc1")
    %4 = ampc.relu %output : tensor<16x40xf32>
    %output_0 = ampc.gemm %4, %2, %3 {transB = 1 : i64} : (tensor<16x40xf32>, tensor<1001x40xf32>, tensor<1001xf32>) -> tensor<16x1001xf32> loc("fc2")
    return %output_0 : tensor<16x1001xf32>
  }
}
