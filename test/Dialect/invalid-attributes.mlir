// RUN: ampc-opt %s -split-input-file -verify-diagnostics

// The discardable `ampc.*` attributes the passes write are checked by the
// dialect (AMPCDialect::verifyOperationAttribute and the function argument
// and result verifiers): each message once, with the attribute on the wrong
// op, of the wrong kind, or in the old string form the dialect no longer
// reads. attributes.mlir has the well-formed ones.

func.func @autocast_on_a_relu(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.relu' op 'ampc.autocast' must be a unit attribute on an ampc.cast}}
  %0 = ampc.relu %x {ampc.autocast} : tensor<4xf32>
  return
}

// -----

func.func @loss_seed_on_a_relu(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.relu' op 'ampc.loss_seed' must be a unit attribute on an ampc.constant}}
  %0 = ampc.relu %x {ampc.loss_seed} : tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{'ampc.parameter' op 'ampc.frozen' must be a unit attribute or a reason (a string) on an ampc.parameter}}
ampc.parameter @w {ampc.frozen = 1 : i64} : tensor<2xf32> = dense<1.0> : tensor<2xf32>

// -----

// expected-error @+1 {{'ampc.parameter' op 'ampc.buffer' must be a unit attribute on an ampc.state}}
ampc.parameter @p {ampc.buffer} : tensor<2xf32> = dense<1.0> : tensor<2xf32>

// -----

// The dictionary that ampc.precision was before it had its own attribute.
func.func @precision_as_a_dictionary(%a: tensor<4x4xf16>) {
  // expected-error @+1 {{'ampc.matmul' op 'ampc.precision' must be a precision decision (#ampc.precision<...>), got}}
  %0 = ampc.matmul %a, %a {ampc.precision = {category = "allow", compute = f16, rule = "allow list"}} : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
  return
}

// -----

func.func @precision_category_unknown(%a: tensor<4x4xf16>) {
  // expected-error @+2 {{expected ::ampc::PrecisionCategory to be one of: allow, deny, fp32_output, promote, follow}}
  // expected-error @+1 {{failed to parse AMPC_PrecisionDecisionAttr parameter 'category'}}
  %0 = ampc.matmul %a, %a {ampc.precision = #ampc.precision<category = lowp, compute = f16, rule = "allow list">} : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
  return
}

// -----

func.func @precision_compute_not_a_float(%a: tensor<4x4xf16>) {
  // expected-error @+2 {{invalid kind of type specified}}
  // expected-error @+1 {{failed to parse AMPC_PrecisionDecisionAttr parameter 'compute' which is to be a `::mlir::FloatType`}}
  %0 = ampc.matmul %a, %a {ampc.precision = #ampc.precision<category = allow, compute = i16, rule = "allow list">} : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
  return
}

// -----

func.func @offsets_not_an_array(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.exp' op 'ampc.offsets' must be an array<i64>, got [0]}}
  %0 = ampc.exp %x {ampc.offsets = [0]} : tensor<4xf32>
  return
}

// -----

func.func @offsets_per_result(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.exp' op 'ampc.offsets' must have one entry per result (1), got 2}}
  %0 = ampc.exp %x {ampc.offsets = array<i64: 0, 64>} : tensor<4xf32>
  return
}

// -----

func.func @offsets_unaligned(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.exp' op 'ampc.offsets' entries must be -1 or a non-negative multiple of 64, got 32 for result #0}}
  %0 = ampc.exp %x {ampc.offsets = array<i64: 32>} : tensor<4xf32>
  return
}

// -----

func.func @offsets_negative(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.offsets' entries must be -1 or a non-negative multiple of 64, got -64 for result #0}}
  %0 = ampc.exp %x {ampc.offsets = array<i64: -64>} : tensor<4xf32>
  return
}

// -----

// 4x8 f32 is 128 bytes; at 0 it ends past an arena of 64.
func.func @offsets_past_the_arena(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {ampc.arena_bytes = 64 : i64} {
  // expected-error @+1 {{'ampc.exp' op 'ampc.offsets' puts result #0 (128 bytes at offset 0) past the arena of @offsets_past_the_arena (64 bytes)}}
  %0 = ampc.exp %x {ampc.offsets = array<i64: 0>} : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{'func.func' op 'ampc.arena_bytes' must be a non-negative i64 on a function, got -64 : i64}}
func.func @arena_negative() attributes {ampc.arena_bytes = -64 : i64} {
  return
}

// -----

// expected-error @+1 {{'ampc.arena_bytes' must be a non-negative i64 on a function, got 64 : i32}}
func.func @arena_i32() attributes {ampc.arena_bytes = 64 : i32} {
  return
}

// -----

func.func @arena_on_an_op(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.exp' op 'ampc.arena_bytes' must be a non-negative i64 on a function, got 64 : i64}}
  %0 = ampc.exp %x {ampc.arena_bytes = 64 : i64} : tensor<4xf32>
  return
}

// -----

// The string that ampc.loss_scaling was before it was an enum.
// expected-error @+1 {{'builtin.module' op 'ampc.loss_scaling' must be a loss-scaling mode (#ampc<loss_scaling ...>) on the module, got "dynamic"}}
module attributes {ampc.loss_scaling = "dynamic"} {
}

// -----

func.func @loss_scaling_on_a_function() attributes {ampc.loss_scaling = #ampc<loss_scaling dynamic>} {
  // expected-error @-1 {{'func.func' op 'ampc.loss_scaling' must be a loss-scaling mode (#ampc<loss_scaling ...>) on the module, got #ampc<loss_scaling dynamic>}}
  return
}

// -----

// expected-error @+1 {{'builtin.module' op 'ampc.optimizer' must be sgd, adam or adamw (#ampc<optimizer ...>) on the module, got #ampc<optimizer none>}}
module attributes {ampc.optimizer = #ampc<optimizer none>} {
}

// -----

// expected-error @+1 {{'ampc.optimizer' must be sgd, adam or adamw (#ampc<optimizer ...>) on the module, got "adamw"}}
module attributes {ampc.optimizer = "adamw"} {
}

// -----

// expected-error @+1 {{'builtin.module' op 'ampc.hyperparameters' must be a string on the module, got 1 : i64}}
module attributes {ampc.hyperparameters = 1 : i64} {
}

// -----

func.func @name_on_an_op(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.relu' op has the function argument or result attribute 'ampc.name' as an attribute of its own}}
  %0 = ampc.relu %x {ampc.name = "y"} : tensor<4xf32>
  return
}

// -----

func.func @misspelt(%a: tensor<4x4xf16>) {
  // expected-error @+1 {{'ampc.matmul' op has an unknown attribute 'ampc.precison' in the ampc namespace}}
  %0 = ampc.matmul %a, %a {ampc.precison = #ampc.precision<category = allow, compute = f16, rule = "allow list">} : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
  return
}

// -----

// expected-error @+1 {{'func.func' op 'ampc.name' must be a string, got 1 : i64 on argument #0}}
func.func @name_not_a_string(%x: tensor<4xf32> {ampc.name = 1}) {
  return
}

// -----

// expected-error @+1 {{'ampc.name' must be a string, got 2 : i64 on result #0}}
func.func @result_name_not_a_string(%x: tensor<4xf32>) -> (tensor<4xf32> {ampc.name = 2}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{'func.func' op 'ampc.label' must be a unit attribute, got true on argument #1}}
func.func @label_not_unit(%x: tensor<4xf32>, %l: tensor<4xi64> {ampc.label = true}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'ampc.input_precision' must be a string (why the input has its type), got unit on argument #0}}
func.func @input_precision_not_a_string(%x: tensor<4xf16> {ampc.input_precision}) {
  return
}

// -----

ampc.parameter @w : tensor<4xf32> = dense<1.0> : tensor<4xf32>
// expected-error @+1 {{'func.func' op has an unknown argument attribute 'ampc.gradient_of' on argument #0}}
func.func @gradient_of_an_argument(%x: tensor<4xf32> {ampc.gradient_of = @w}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'ampc.gradient_of' must name a parameter (@name), got "w" on result #0}}
func.func @gradient_of_a_string(%x: tensor<4xf32>) -> (tensor<4xf32> {ampc.gradient_of = "w"}) {
  return %x : tensor<4xf32>
}

// -----

ampc.state @w : tensor<4xf32> = dense<0.0> : tensor<4xf32>
// expected-error @+1 {{'func.func' op 'ampc.gradient_of' names no ampc.parameter: @w on result #0}}
func.func @gradient_of_a_state(%x: tensor<4xf32>) -> (tensor<4xf32> {ampc.gradient_of = @w}) {
  return %x : tensor<4xf32>
}

// -----

ampc.parameter @w : tensor<4xf32> = dense<1.0> : tensor<4xf32>
// expected-error @+1 {{'func.func' op 'ampc.gradient_of' needs the parameter's type: @w is 'tensor<4xf32>', result #0 is 'tensor<4xf16>'}}
func.func @gradient_of_another_type(%x: tensor<4xf16>) -> (tensor<4xf16> {ampc.gradient_of = @w}) {
  return %x : tensor<4xf16>
}

// -----

// expected-error @+1 {{'func.func' op has an unknown result attribute 'ampc.label' on result #0}}
func.func @label_on_a_result(%x: tensor<4xf32>) -> (tensor<4xf32> {ampc.label}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{'func.func' op 'ampc.error_slot' must be an i64 multiple of 64 on a function, got 8 : i64}}
func.func @error_slot_unaligned(%x: tensor<4xf32>) -> tensor<4xf32> attributes {ampc.error_slot = 8 : i64} {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{'func.func' op 'ampc.guard_bytes' must be a positive i64 on a function, got 0 : i64}}
func.func @guard_bytes_zero(%x: tensor<4xf32>) -> tensor<4xf32> attributes {ampc.guard_bytes = 0 : i64} {
  return %x : tensor<4xf32>
}

// -----

func.func @scratch_without_bytes(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'ampc.matmul' op 'ampc.scratch' must be array<i64: offset, bytes> with the offset a multiple of 64 and bytes positive, got array<i64: 0>}}
  %0 = ampc.matmul %x, %x {ampc.scratch = array<i64: 0>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// ampc.launch (ampc-assign-launch-geometry): known keys of their types.
func.func @launch_splits_zero(%x: tensor<4x4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ampc.reduce_sum' op 'ampc.launch' must be a dictionary of launch decisions (parallelism: a string; cudnn, log_prob: bools; splits, threads, groups, images_per_gemm: positive i64; partials, workspace: non-negative i64), got {parallelism = "split", splits = 0 : i64}}}
  %0 = ampc.reduce_sum %x {axes = array<i64: 1>, keepdims = 0 : i64, ampc.launch = {parallelism = "split", splits = 0 : i64}} : (tensor<4x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @launch_unknown_key(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'ampc.softmax' op 'ampc.launch' must be a dictionary of launch decisions (parallelism: a string; cudnn, log_prob: bools; splits, threads, groups, images_per_gemm: positive i64; partials, workspace: non-negative i64), got {blocks = 4 : i64}}}
  %0 = ampc.softmax %x {ampc.launch = {blocks = 4 : i64}} : tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// expected-error @+1 {{'func.func' op 'ampc.input_offsets' must be an array<i64> with one entry per argument of a function, got array<i64: 0, 64>}}
func.func @input_offsets_too_many(%x: tensor<4xf32>) -> tensor<4xf32> attributes {ampc.input_offsets = array<i64: 0, 64>} {
  return %x : tensor<4xf32>
}

// -----

func.func @accumulate_in_f16(%x: tensor<4x4xf16>) -> tensor<4x4xf16> {
  // expected-error @+1 {{'ampc.matmul' op 'ampc.accumulate' must be f32, f64, i64 or ui64 on an op that accumulates, got f16}}
  %0 = ampc.matmul %x, %x {ampc.accumulate = f16} : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
  return %0 : tensor<4x4xf16>
}

// -----

func.func @accumulate_on_elementwise(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ampc.exp' op 'ampc.accumulate' must be f32, f64, i64 or ui64 on an op that accumulates, got f32}}
  %0 = ampc.exp %x {ampc.accumulate = f32} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tensor Core shapes (issue 37 item 11).
func.func @gemm_shape_on_a_relu(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.relu' op 'ampc.gemm_shape' must be a string on an ampc.gemm, ampc.batched_gemm or ampc.conv}}
  %0 = ampc.relu %x {ampc.gemm_shape = "M 4"} : tensor<4xf32>
  return
}

// -----

func.func @padding_on_a_relu(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.relu' op 'ampc.padding' must be a unit attribute on an ampc.concat or ampc.slice}}
  %0 = ampc.relu %x {ampc.padding} : tensor<4xf32>
  return
}

// -----

func.func @alignment_without_needs(%a: tensor<4x4xf16>) {
  // expected-error @+1 {{'ampc.matmul' op 'ampc.alignment' must be {m, n, k = array<i64: dim, alignment>, needs = i64} on an ampc.gemm, batched_gemm or matmul, got}}
  %0 = ampc.matmul %a, %a {ampc.alignment = {m = array<i64: 4, 4>, n = array<i64: 4, 4>, k = array<i64: 4, 4>}} : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
  return
}

// -----

func.func @attention_unfused_not_softmax(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ampc.exp' op 'ampc.attention_unfused' must be a string (the reason) on an ampc.softmax}}
  %0 = ampc.exp %x {ampc.attention_unfused = "why"} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @attention_saves_not_attention(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ampc.exp' op 'ampc.attention_saves' must be a non-negative i64 (bytes) on an ampc.attention}}
  %0 = ampc.exp %x {ampc.attention_saves = 16 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @attention_merged_heads_not_attention(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ampc.exp' op 'ampc.attention_merged_heads' must be a unit attribute on an ampc.attention}}
  %0 = ampc.exp %x {ampc.attention_merged_heads} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @attention_saves_negative(%q: tensor<1x1x2x16xf16>) -> tensor<1x1x2x16xf16> {
  // expected-error @+1 {{'ampc.attention' op 'ampc.attention_saves' must be a non-negative i64 (bytes) on an ampc.attention}}
  %o, %lse = ampc.attention %q, %q, %q {ampc.attention_saves = -1 : i64, scale = 2.500000e-01 : f32} : (tensor<1x1x2x16xf16>, tensor<1x1x2x16xf16>, tensor<1x1x2x16xf16>) -> (tensor<1x1x2x16xf16>, tensor<1x1x2xf32>)
  return %o : tensor<1x1x2x16xf16>
}

// -----

// Channels-last images (issue 39 item 3): ampc-channels-last's marks.
func.func @layout_on_a_relu(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.relu' op 'ampc.layout' must be a string on an ampc.transpose, ampc.reshape or ampc.reduce_mean}}
  %0 = ampc.relu %x {ampc.layout = "X to channels-last"} : tensor<4xf32>
  return
}

// -----

// Data parallel (issue 41): ampc-insert-all-reduce's overlap count.
func.func @overlap_on_a_relu(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.relu' op 'ampc.overlap' must be a non-negative i64 on an ampc.all_reduce_start, got 3 : i64}}
  %0 = ampc.relu %x {ampc.overlap = 3 : i64} : tensor<4xf32>
  return
}

// -----

func.func @negative_overlap(%g: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.all_reduce_start' op 'ampc.overlap' must be a non-negative i64 on an ampc.all_reduce_start, got -1 : i64}}
  %p = ampc.all_reduce_start %g {ampc.overlap = -1 : i64, bucket = 0 : i64} : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

// The FP8 decision (issue 42): on a GEMM only, a format it knows, a reason.
func.func @fp8_on_a_relu(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.relu' op 'ampc.fp8' must be {format = "hybrid", "e4m3" or "bf16", reason = a non-empty string} on an ampc.gemm, ampc.matmul or ampc.batched_gemm, got {format = "hybrid", reason = "x"}}}
  %0 = ampc.relu %x {ampc.fp8 = {format = "hybrid", reason = "x"}} : tensor<4xf32>
  return
}

// -----

func.func @fp8_unknown_format(%a: tensor<16x16xbf16>, %b: tensor<16x16xbf16>) {
  // expected-error @+1 {{'ampc.matmul' op 'ampc.fp8' must be {format = "hybrid", "e4m3" or "bf16", reason = a non-empty string} on an ampc.gemm, ampc.matmul or ampc.batched_gemm, got {format = "e5m2", reason = "x"}}}
  %0 = ampc.matmul %a, %b {ampc.fp8 = {format = "e5m2", reason = "x"}} : (tensor<16x16xbf16>, tensor<16x16xbf16>) -> tensor<16x16xbf16>
  return
}

// -----

func.func @fp8_without_reason(%a: tensor<16x16xbf16>, %b: tensor<16x16xbf16>) {
  // expected-error @+1 {{'ampc.matmul' op 'ampc.fp8' must be {format = "hybrid", "e4m3" or "bf16", reason = a non-empty string} on an ampc.gemm, ampc.matmul or ampc.batched_gemm, got "hybrid"}}
  %0 = ampc.matmul %a, %b {ampc.fp8 = "hybrid"} : (tensor<16x16xbf16>, tensor<16x16xbf16>) -> tensor<16x16xbf16>
  return
}

// -----

// expected-error @+1 {{'builtin.module' op 'ampc.fp8_recipe' must be {amax_history = 1..65536, margin = 0..127, amax_algo = "max" or "most_recent"} on the module, got {amax_algo = "max", amax_history = 0 : i64, margin = 0 : i64}}}
module attributes {ampc.fp8_recipe = {amax_history = 0 : i64, margin = 0 : i64, amax_algo = "max"}} {
}

// -----

func.func @fp8_recipe_on_a_function() attributes {ampc.fp8_recipe = {amax_history = 16 : i64, margin = 0 : i64, amax_algo = "max"}} {
  return
}
// expected-error @-3 {{'func.func' op 'ampc.fp8_recipe' must be {amax_history = 1..65536, margin = 0..127, amax_algo = "max" or "most_recent"} on the module, got {amax_algo = "max", amax_history = 16 : i64, margin = 0 : i64}}}

// -----

// --sync-batchnorm (issue 41): ampc-sync-batch-norm's request number, only
// on a training-mode BatchNorm or BatchNorm adjoint.
func.func @sync_request_on_a_relu(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.relu' op 'ampc.sync_request' must be an i64 request number in [0, 2^31) on a training-mode ampc.batch_normalization or ampc.batch_norm_grad, got 3 : i64}}
  %0 = ampc.relu %x {ampc.sync_request = 3 : i64} : tensor<4xf32>
  return
}

// -----

func.func @sync_request_in_inference(%x: tensor<2x3x4xf32>, %s: tensor<3xf32>) {
  // expected-error @+1 {{'ampc.batch_normalization' op 'ampc.sync_request' must be an i64 request number in [0, 2^31) on a training-mode ampc.batch_normalization or ampc.batch_norm_grad, got 1 : i64}}
  %y, %m, %v = ampc.batch_normalization %x, %s, %s, %s, %s {ampc.sync_request = 1 : i64} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @negative_sync_request(%x: tensor<2x3x4xf32>, %s: tensor<3xf32>) {
  // expected-error @+1 {{'ampc.batch_normalization' op 'ampc.sync_request' must be an i64 request number in [0, 2^31) on a training-mode ampc.batch_normalization or ampc.batch_norm_grad, got -1 : i64}}
  %y, %m, %v = ampc.batch_normalization %x, %s, %s, %s, %s {ampc.sync_request = -1 : i64, training_mode = 1 : i64} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

// ZeRO-1 (issue 41, item 3): ampc-insert-all-reduce's shard marker.
func.func @shard_on_a_relu(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.relu' op 'ampc.shard_optimizer' must be a unit attribute on a module or an ampc.all_reduce_start, got true}}
  %0 = ampc.relu %x {ampc.shard_optimizer = true} : tensor<4xf32>
  return
}

// -----

func.func @shard_not_unit(%g: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.all_reduce_start' op 'ampc.shard_optimizer' must be a unit attribute on a module or an ampc.all_reduce_start, got 1 : i64}}
  %p = ampc.all_reduce_start %g {ampc.shard_optimizer = 1 : i64, bucket = 0 : i64} : (tensor<4xf32>) -> tensor<4xf16>
  return
}
