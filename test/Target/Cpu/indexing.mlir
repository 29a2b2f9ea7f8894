// RUN: ampc-opt %s --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry --ampc-plan-memory \
// RUN:   | ampc-translate --ampc-to-cpp | FileCheck %s

// The indexing kernels on the CPU target: ampc.scatter (f16 data combined
// in float, int32 indices; a bad index fails the step naming the op),
// ampc.top_k with its scratch row of positions, ampc.reduce_prod the
// reduce kernel's ReduceProd.

// CHECK-LABEL: static int32_t infer(
// CHECK:         if (!(ampc::cpu::scatter<float, ampc::cpu::AsF16>(in0, in1, in2, [[S:v[0-9]+]], 1LL, 8LL, 3LL, 4LL, ampc::math::ScatterMax))) return ampc::cpu::fail(state + 0, "ampc.scatter: an index is out of range");
// CHECK-NEXT:    int64_t *[[T:v[0-9]+]] = reinterpret_cast<int64_t *>(state + {{[0-9]+}});
// CHECK-NEXT:    ampc::cpu::topK<float, ampc::cpu::As<float>>(in3, [[T]], 2LL, 5LL, 3LL, 2LL, false, reinterpret_cast<int64_t *>(state + {{[0-9]+}}));
// CHECK:         ampc::cpu::reduce<float, ampc::cpu::As<float>, ampc::cpu::As<float>>(in3, {{v[0-9]+}}, 2, kept, keptStrides, 1, reduced, reducedStrides, ampc::cpu::ReduceProd,
func.func @forward(%d: tensor<8x4xf16>, %i: tensor<3xi32>, %u: tensor<3x4xf16>, %x: tensor<2x5x3xf32>) -> (tensor<8x4xf16>, tensor<2x2x3xi64>, tensor<2x3xf32>) {
  %0 = ampc.scatter %d, %i, %u {reduction = "max"} : (tensor<8x4xf16>, tensor<3xi32>, tensor<3x4xf16>) -> tensor<8x4xf16>
  %1 = ampc.top_k %x {axis = 1 : i64, k = 2 : i64, largest = 0 : i64} : (tensor<2x5x3xf32>) -> tensor<2x2x3xi64>
  %2 = ampc.reduce_prod %x {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<2x5x3xf32>) -> tensor<2x3xf32>
  return %0, %1, %2 : tensor<8x4xf16>, tensor<2x2x3xi64>, tensor<2x3xf32>
}
