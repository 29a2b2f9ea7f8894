// RUN: not ampc-opt %s --ampc-assign-accumulation --ampc-plan-memory 2>&1 | FileCheck %s
// A scratch layout is not bounded as tensors are: a MaxPool with a 32768 x
// 32768 window over a 65536 x 65536 plane would need 2^30 windows of 2^30
// offsets (2^63 bytes). The layout saturates instead of overflowing and the
// plan refuses it with its limit, one line.
// CHECK: error: the memory plan of @forward needs {{[0-9]+}} bytes here, more than the limit of {{[0-9]+}} bytes (--max-tensor-bytes)
func.func @forward(%x: tensor<1x1x65536x65536xf16>) -> tensor<1x1x32769x32769xf16> {
  %y, %i = ampc.max_pool %x {kernel_shape = array<i64: 32768, 32768>} : (tensor<1x1x65536x65536xf16>) -> (tensor<1x1x32769x32769xf16>, tensor<1x1x32769x32769xi64>)
  return %y : tensor<1x1x32769x32769xf16>
}
