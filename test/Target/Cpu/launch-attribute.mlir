// RUN: ampc-opt %s --ampc-assign-accumulation --ampc-assign-launch-geometry --ampc-plan-memory | ampc-translate --ampc-to-cpp | FileCheck %s --check-prefix=DECIDED
// RUN: ampc-opt %s --ampc-assign-accumulation --ampc-plan-memory | ampc-translate --ampc-to-cpp | FileCheck %s --check-prefix=HAND

// The CPU emitter prints the images per GEMM ampc.launch records, whatever
// set it (docs/design.md, "Launch geometry in the IR"): both images of
// output planes of 3 positions in one GEMM as ampc-assign-launch-geometry
// decides, through the columns and the staging; set to one by hand, one
// image at a time through the columns alone (the plan sizes them for one).
// DECIDED-LABEL: static int32_t infer(
// DECIDED:         ampc::cpu::conv<float>(w_in0, w_in1, nullptr, acc, 2LL, 4LL, 4LL, 2LL, win, 2LL, reinterpret_cast<float *>(state + {{[0-9]+}}), reinterpret_cast<float *>(state + {{[0-9]+}}));
// HAND-LABEL: static int32_t infer(
// HAND:         ampc::cpu::conv<float>(w_in0, w_in1, nullptr, acc, 2LL, 4LL, 4LL, 2LL, win, 1LL, reinterpret_cast<float *>(state + {{[0-9]+}}), nullptr);
func.func @forward(%x: tensor<2x4x7xf16>, %w: tensor<4x2x3xf16>) -> tensor<2x4x3xf16> {
  %0 = ampc.conv %x, %w {group = 2 : i64, dilations = array<i64: 2>, ampc.launch = {images_per_gemm = 1 : i64}} : (tensor<2x4x7xf16>, tensor<4x2x3xf16>) -> tensor<2x4x3xf16>
  return %0 : tensor<2x4x3xf16>
}
