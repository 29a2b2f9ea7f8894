// RUN: ampc-opt %s --split-input-file --ampc-assign-precision=propagation=paint | FileCheck %s
// RUN: ampc-opt %s --split-input-file --ampc-assign-precision=propagation=autocast | FileCheck %s --check-prefix=AUTO
// RUN: ampc-opt %s --split-input-file --ampc-assign-precision=propagation=paint --ampc-optimize-casts | FileCheck %s --check-prefix=PAINT-OPT
// RUN: ampc-opt %s --split-input-file --ampc-assign-precision=propagation=autocast --ampc-optimize-casts | FileCheck %s --check-prefix=AUTO-OPT

// ampc-assign-precision with propagation=paint colours the graph the way
// TensorFlow's auto_mixed_precision does, with allow / deny (deny and
// fp32_output) / infer (promote) / clear (follow):
//   1. allow ops are allow, deny and fp32_output ops are deny;
//   2. deny spreads forward through infer ops, and through clear ops that
//      lead (through clear ops) to a deny or infer op;
//   3. infer and clear ops lying between allow ops become allow;
//   4. allow spreads both ways through clear ops;
// everything not painted allow runs in f32. Edges run only from one decided
// op to another: arguments, parameters and user casts are boundaries. The
// rule in ampc.precision names the step that decided. Expected colours are
// worked out from those steps by hand.

// TensorFlow's own example, deny -> infer -> clear -> infer -> clear -> allow
// -> infer, becomes deny -> deny -> deny -> deny -> clear -> allow -> infer
// (step 2), then the clear op next to the allow op turns allow (step 4) and
// the trailing infer op is not painted.
// CHECK-LABEL: func.func @deny_spreads_forward
// CHECK-SAME: (%[[X:.+]]: tensor<4x4xf32>, %[[R:.+]]: tensor<4x4xf32>, %[[W:.+]]: tensor<4x4xf32>)
// CHECK-NEXT: %[[E:.+]] = ampc.exp %[[X]] {ampc.precision = #ampc.precision<category = deny, compute = f32, rule = "paint: deny list">} : tensor<4x4xf32>
// CHECK-NEXT: %[[A:.+]] = ampc.add %[[E]], %[[R]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "paint: deny spreads forward">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.+]] = ampc.relu %[[A]] {ampc.precision = #ampc.precision<category = follow, compute = f32, rule = "paint: deny spreads forward">} : tensor<4x4xf32>
// CHECK-NEXT: %[[C:.+]] = ampc.mul %[[B]], %[[R]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "paint: deny spreads forward">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[CH:.+]] = ampc.cast %[[C]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[D:.+]] = ampc.tanh %[[CH]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "paint: follow op next to allow ops">} : tensor<4x4xf16>
// CHECK-NEXT: %[[WH:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[M:.+]] = ampc.matmul %[[D]], %[[WH]] {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "paint: allow list">} : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
// CHECK-NEXT: %[[M32:.+]] = ampc.cast %[[M]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// CHECK-NEXT: %[[S:.+]] = ampc.sub %[[M32]], %[[R]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "paint: not painted, stays f32">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: return %[[S]] : tensor<4x4xf32>
func.func @deny_spreads_forward(%x: tensor<4x4xf32>, %r: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %e = ampc.exp %x : tensor<4x4xf32>
  %a = ampc.add %e, %r : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %b = ampc.relu %a : tensor<4x4xf32>
  %c = ampc.mul %b, %r : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %d = ampc.tanh %c : tensor<4x4xf32>
  %m = ampc.matmul %d, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = ampc.sub %m, %r : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %s : tensor<4x4xf32>
}

// -----

// Deny enters a clear op only when the clear op leads to a deny or infer op:
// relu (feeding add) turns deny; tanh (feeding a matmul) does not, and turns
// allow next to the matmul; sigmoid (feeding nothing) is not painted.
// CHECK-LABEL: func.func @deny_through_clear
// CHECK-SAME: (%[[X:.+]]: tensor<4x4xf32>, %[[R:.+]]: tensor<4x4xf32>, %[[W:.+]]: tensor<4x4xf32>)
// CHECK-NEXT: %[[E:.+]] = ampc.exp %[[X]] {ampc.precision = #ampc.precision<category = deny, compute = f32, rule = "paint: deny list">} : tensor<4x4xf32>
// CHECK-NEXT: %[[A:.+]] = ampc.relu %[[E]] {ampc.precision = #ampc.precision<category = follow, compute = f32, rule = "paint: deny spreads forward">} : tensor<4x4xf32>
// CHECK-NEXT: %[[B:.+]] = ampc.add %[[A]], %[[R]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "paint: deny spreads forward">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[E1:.+]] = ampc.cast %[[E]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[T:.+]] = ampc.tanh %[[E1]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "paint: follow op next to allow ops">} : tensor<4x4xf16>
// CHECK-NEXT: %[[WH:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[N:.+]] = ampc.matmul %[[T]], %[[WH]] {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "paint: allow list">} : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
// CHECK-NEXT: %[[S:.+]] = ampc.sigmoid %[[E]] {ampc.precision = #ampc.precision<category = follow, compute = f32, rule = "paint: not painted, stays f32">} : tensor<4x4xf32>
// CHECK-NEXT: %[[N32:.+]] = ampc.cast %[[N]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// CHECK-NEXT: return %[[B]], %[[N32]], %[[S]]
func.func @deny_through_clear(%x: tensor<4x4xf32>, %r: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %e = ampc.exp %x : tensor<4x4xf32>
  %a = ampc.relu %e : tensor<4x4xf32>
  %b = ampc.add %a, %r : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %t = ampc.tanh %e : tensor<4x4xf32>
  %n = ampc.matmul %t, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = ampc.sigmoid %e : tensor<4x4xf32>
  return %b, %n, %s : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Step 3: relu, add and transpose lie between two matmuls and become allow
// (add casts its f32 operand down). The mul after the second matmul leads
// only to a deny op (exp), so it is not between allow ops and stays f32.
// CHECK-LABEL: func.func @between_allow_ops
// CHECK-SAME: (%[[X:.+]]: tensor<4x4xf32>, %[[W:.+]]: tensor<4x4xf32>, %[[R:.+]]: tensor<4x4xf32>)
// CHECK-NEXT: ampc.cast %[[X]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: ampc.cast %[[W]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[M:.+]] = ampc.matmul {{.+}} {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "paint: allow list">}
// CHECK-NEXT: %[[A:.+]] = ampc.relu %[[M]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "paint: between allow ops">} : tensor<4x4xf16>
// CHECK-NEXT: %[[RH:.+]] = ampc.cast %[[R]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[B:.+]] = ampc.add %[[A]], %[[RH]] {ampc.precision = #ampc.precision<category = promote, compute = f16, rule = "paint: between allow ops">} : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
// CHECK-NEXT: %[[C:.+]] = ampc.transpose %[[B]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "paint: between allow ops">, perm = array<i64: 1, 0>} : (tensor<4x4xf16>) -> tensor<4x4xf16>
// CHECK-NEXT: %[[WH2:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[N:.+]] = ampc.matmul %[[C]], %[[WH2]] {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "paint: allow list">}
// CHECK-NEXT: %[[N32:.+]] = ampc.cast %[[N]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// CHECK-NEXT: %[[D:.+]] = ampc.mul %[[N32]], %[[R]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "paint: not painted, stays f32">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[E:.+]] = ampc.exp %[[D]] {ampc.precision = #ampc.precision<category = deny, compute = f32, rule = "paint: deny list">} : tensor<4x4xf32>
// CHECK-NEXT: %[[EH:.+]] = ampc.cast %[[E]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[WH3:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[O:.+]] = ampc.matmul %[[EH]], %[[WH3]] {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "paint: allow list">}
// CHECK-NEXT: %[[O32:.+]] = ampc.cast %[[O]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// CHECK-NEXT: return %[[O32]] : tensor<4x4xf32>
func.func @between_allow_ops(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, %r: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %m = ampc.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %a = ampc.relu %m : tensor<4x4xf32>
  %b = ampc.add %a, %r : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %c = ampc.transpose %b {perm = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %n = ampc.matmul %c, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %d = ampc.mul %n, %r : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e = ampc.exp %d : tensor<4x4xf32>
  %o = ampc.matmul %e, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

// Step 4: allow spreads through chains of clear ops both upstream
// (transpose, slice) and downstream (reshape, gelu) of an allow op, so the
// only casts are at the function boundary.
// CHECK-LABEL: func.func @allow_through_clear
// CHECK-SAME: (%[[X:.+]]: tensor<4x8xf32>, %[[W:.+]]: tensor<4x4xf32>) -> tensor<16xf32>
// CHECK-NEXT: %[[XH:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<4x8xf32> to tensor<4x8xf16>
// CHECK-NEXT: %[[T:.+]] = ampc.transpose %[[XH]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "paint: follow op next to allow ops">, perm = array<i64: 1, 0>} : (tensor<4x8xf16>) -> tensor<8x4xf16>
// CHECK-NEXT: %[[S:.+]] = ampc.slice %[[T]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "paint: follow op next to allow ops">, {{.+}}} : (tensor<8x4xf16>) -> tensor<4x4xf16>
// CHECK-NEXT: %[[WH:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[M:.+]] = ampc.matmul %[[S]], %[[WH]] {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "paint: allow list">} : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
// CHECK-NEXT: %[[R:.+]] = ampc.reshape %[[M]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "paint: follow op next to allow ops">} : tensor<4x4xf16> to tensor<16xf16>
// CHECK-NEXT: %[[G:.+]] = ampc.gelu %[[R]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "paint: follow op next to allow ops">} : tensor<16xf16>
// CHECK-NEXT: %[[G32:.+]] = ampc.cast %[[G]] {ampc.autocast} : tensor<16xf16> to tensor<16xf32>
// CHECK-NEXT: return %[[G32]] : tensor<16xf32>

// Autocast runs transpose and slice in f32 (their input is f32) and casts
// in front of the matmul instead.
// AUTO-LABEL: func.func @allow_through_clear
// AUTO-SAME: (%[[X:.+]]: tensor<4x8xf32>, %[[W:.+]]: tensor<4x4xf32>) -> tensor<16xf32>
// AUTO-NEXT: %[[T:.+]] = ampc.transpose %[[X]] {ampc.precision = #ampc.precision<category = follow, compute = f32, rule = "follow list: input is f32">, perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
// AUTO-NEXT: %[[S:.+]] = ampc.slice %[[T]] {{.+}} : (tensor<8x4xf32>) -> tensor<4x4xf32>
// AUTO-NEXT: %[[SH:.+]] = ampc.cast %[[S]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
func.func @allow_through_clear(%x: tensor<4x8xf32>, %w: tensor<4x4xf32>) -> tensor<16xf32> {
  %t = ampc.transpose %x {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %s = ampc.slice %t {axes = array<i64: 0>, ends = array<i64: 4>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<8x4xf32>) -> tensor<4x4xf32>
  %m = ampc.matmul %s, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = ampc.reshape %m : tensor<4x4xf32> to tensor<16xf32>
  %g = ampc.gelu %r : tensor<16xf32>
  return %g : tensor<16xf32>
}

// -----

// An fp32_output op (softmax) is deny in paint mode. Deny does not spread
// into relu, which leads only to an allow op; relu then turns allow next to
// the second matmul (one cast f32 -> f16 between softmax and relu).
// CHECK-LABEL: func.func @fp32_output_is_deny
// CHECK: %[[M:.+]] = ampc.matmul {{.+}} -> tensor<4x4xf16>
// CHECK-NEXT: %[[M32:.+]] = ampc.cast %[[M]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// CHECK-NEXT: %[[S:.+]] = ampc.softmax %[[M32]] {ampc.precision = #ampc.precision<category = fp32_output, compute = f32, rule = "paint: fp32_output list">} : tensor<4x4xf32>
// CHECK-NEXT: %[[SH:.+]] = ampc.cast %[[S]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[A:.+]] = ampc.relu %[[SH]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "paint: follow op next to allow ops">} : tensor<4x4xf16>
// CHECK-NEXT: ampc.cast %{{.+}} {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[N:.+]] = ampc.matmul %[[A]], %{{.+}} {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "paint: allow list">}
func.func @fp32_output_is_deny(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %m = ampc.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = ampc.softmax %m : tensor<4x4xf32>
  %a = ampc.relu %s : tensor<4x4xf32>
  %n = ampc.matmul %a, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %n : tensor<4x4xf32>
}

// -----

// A user's cast is a boundary: the relu behind it is not next to the matmul
// and stays f32 (the user cast keeps its f32 result). An op not painted runs
// in f32 even when its input is f16, as in TensorFlow's f32 graph.
// CHECK-LABEL: func.func @boundaries
// CHECK-SAME: (%[[X:.+]]: tensor<4x4xf32>, %[[W:.+]]: tensor<4x4xf32>, %[[H:.+]]: tensor<4x4xf16>)
// CHECK: %[[M:.+]] = ampc.matmul {{.+}} -> tensor<4x4xf16>
// CHECK-NEXT: %[[U:.+]] = ampc.cast %[[M]] : tensor<4x4xf16> to tensor<4x4xf32>
// CHECK-NEXT: %[[R:.+]] = ampc.relu %[[U]] {ampc.precision = #ampc.precision<category = follow, compute = f32, rule = "paint: not painted, stays f32">} : tensor<4x4xf32>
// CHECK-NEXT: %[[H32:.+]] = ampc.cast %[[H]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// CHECK-NEXT: %[[N:.+]] = ampc.neg %[[H32]] {ampc.precision = #ampc.precision<category = follow, compute = f32, rule = "paint: not painted, stays f32">} : tensor<4x4xf32>
// CHECK-NEXT: %[[NH:.+]] = ampc.cast %[[N]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: return %[[R]], %[[NH]] : tensor<4x4xf32>, tensor<4x4xf16>

// Autocast lets neg follow its f16 input.
// AUTO-LABEL: func.func @boundaries
// AUTO-SAME: (%[[X:.+]]: tensor<4x4xf32>, %[[W:.+]]: tensor<4x4xf32>, %[[H:.+]]: tensor<4x4xf16>)
// AUTO: %[[N:.+]] = ampc.neg %[[H]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "follow list: input is f16">} : tensor<4x4xf16>
// AUTO-NEXT: return %{{.+}}, %[[N]] : tensor<4x4xf32>, tensor<4x4xf16>
func.func @boundaries(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, %h: tensor<4x4xf16>) -> (tensor<4x4xf32>, tensor<4x4xf16>) {
  %m = ampc.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %u = ampc.cast %m : tensor<4x4xf32> to tensor<4x4xf32>
  %r = ampc.relu %u : tensor<4x4xf32>
  %n = ampc.neg %h : tensor<4x4xf16>
  return %r, %n : tensor<4x4xf32>, tensor<4x4xf16>
}

// -----

// Paint needs fewer casts than autocast. Two residual adds between three
// matmuls: autocast runs each add in f32 (its other input is the f32 %x), a
// round trip f16 -> f32 -> f16 per add; paint runs the adds in f16 (step 3)
// and only casts %x down, which ampc-optimize-casts then shares.
// Autocast: 9 casts before and after optimisation; paint: 7 before, 5 after.
// CHECK-LABEL: func.func @fewer_casts
// CHECK-SAME: (%[[X:.+]]: tensor<4x4xf32>, %[[W1:.+]]: tensor<4x4xf32>, %[[W2:.+]]: tensor<4x4xf32>, %[[W3:.+]]: tensor<4x4xf32>)
// CHECK-NEXT: %[[X1:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[W1H:.+]] = ampc.cast %[[W1]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[M1:.+]] = ampc.matmul %[[X1]], %[[W1H]] {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "paint: allow list">} : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
// CHECK-NEXT: %[[X2:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[A1:.+]] = ampc.add %[[M1]], %[[X2]] {ampc.precision = #ampc.precision<category = promote, compute = f16, rule = "paint: between allow ops">} : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
// CHECK-NEXT: %[[W2H:.+]] = ampc.cast %[[W2]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[M2:.+]] = ampc.matmul %[[A1]], %[[W2H]] {{.+}} -> tensor<4x4xf16>
// CHECK-NEXT: %[[X3:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[A2:.+]] = ampc.add %[[M2]], %[[X3]] {ampc.precision = #ampc.precision<category = promote, compute = f16, rule = "paint: between allow ops">} : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
// CHECK-NEXT: %[[W3H:.+]] = ampc.cast %[[W3]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[M3:.+]] = ampc.matmul %[[A2]], %[[W3H]] {{.+}} -> tensor<4x4xf16>
// CHECK-NEXT: %[[R:.+]] = ampc.cast %[[M3]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<4x4xf32>

// AUTO-LABEL: func.func @fewer_casts
// AUTO-SAME: (%[[X:.+]]: tensor<4x4xf32>, %[[W1:.+]]: tensor<4x4xf32>, %[[W2:.+]]: tensor<4x4xf32>, %[[W3:.+]]: tensor<4x4xf32>)
// AUTO-NEXT: %[[X1:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// AUTO-NEXT: %[[W1H:.+]] = ampc.cast %[[W1]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// AUTO-NEXT: %[[M1:.+]] = ampc.matmul %[[X1]], %[[W1H]] {{.+}} -> tensor<4x4xf16>
// AUTO-NEXT: %[[M1U:.+]] = ampc.cast %[[M1]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// AUTO-NEXT: %[[A1:.+]] = ampc.add %[[M1U]], %[[X]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "promote list: widest input is f32">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// AUTO-NEXT: %[[A1D:.+]] = ampc.cast %[[A1]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// AUTO-NEXT: %[[W2H:.+]] = ampc.cast %[[W2]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// AUTO-NEXT: %[[M2:.+]] = ampc.matmul %[[A1D]], %[[W2H]] {{.+}} -> tensor<4x4xf16>
// AUTO-NEXT: %[[M2U:.+]] = ampc.cast %[[M2]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// AUTO-NEXT: %[[A2:.+]] = ampc.add %[[M2U]], %[[X]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "promote list: widest input is f32">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// AUTO-NEXT: %[[A2D:.+]] = ampc.cast %[[A2]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// AUTO-NEXT: %[[W3H:.+]] = ampc.cast %[[W3]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// AUTO-NEXT: %[[M3:.+]] = ampc.matmul %[[A2D]], %[[W3H]] {{.+}} -> tensor<4x4xf16>
// AUTO-NEXT: %[[R:.+]] = ampc.cast %[[M3]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// AUTO-NEXT: return %[[R]] : tensor<4x4xf32>

// After ampc-optimize-casts paint is left with 5 casts: %x once, the three
// weights and the result.
// PAINT-OPT-LABEL: func.func @fewer_casts
// PAINT-OPT-SAME: (%[[X:.+]]: tensor<4x4xf32>, %[[W1:.+]]: tensor<4x4xf32>, %[[W2:.+]]: tensor<4x4xf32>, %[[W3:.+]]: tensor<4x4xf32>)
// PAINT-OPT-NEXT: %[[XH:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// PAINT-OPT-NEXT: %[[W1H:.+]] = ampc.cast %[[W1]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// PAINT-OPT-NEXT: %[[M1:.+]] = ampc.matmul %[[XH]], %[[W1H]]
// PAINT-OPT-NEXT: %[[A1:.+]] = ampc.add %[[M1]], %[[XH]]
// PAINT-OPT-NEXT: %[[W2H:.+]] = ampc.cast %[[W2]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// PAINT-OPT-NEXT: %[[M2:.+]] = ampc.matmul %[[A1]], %[[W2H]]
// PAINT-OPT-NEXT: %[[A2:.+]] = ampc.add %[[M2]], %[[XH]]
// PAINT-OPT-NEXT: %[[W3H:.+]] = ampc.cast %[[W3]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// PAINT-OPT-NEXT: %[[M3:.+]] = ampc.matmul %[[A2]], %[[W3H]]
// PAINT-OPT-NEXT: %[[R:.+]] = ampc.cast %[[M3]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// PAINT-OPT-NEXT: return %[[R]] : tensor<4x4xf32>

// Autocast keeps all 9: no two of them cast the same value to the same type
// and no round trip starts with an exact widening that comes back.
// AUTO-OPT-LABEL: func.func @fewer_casts
// AUTO-OPT-NEXT: ampc.cast {{.+}} {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// AUTO-OPT-NEXT: ampc.cast {{.+}} {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// AUTO-OPT-NEXT: ampc.matmul
// AUTO-OPT-NEXT: ampc.cast {{.+}} {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// AUTO-OPT-NEXT: ampc.add
// AUTO-OPT-NEXT: ampc.cast {{.+}} {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// AUTO-OPT-NEXT: ampc.cast {{.+}} {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// AUTO-OPT-NEXT: ampc.matmul
// AUTO-OPT-NEXT: ampc.cast {{.+}} {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// AUTO-OPT-NEXT: ampc.add
// AUTO-OPT-NEXT: ampc.cast {{.+}} {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// AUTO-OPT-NEXT: ampc.cast {{.+}} {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// AUTO-OPT-NEXT: ampc.matmul
// AUTO-OPT-NEXT: ampc.cast {{.+}} {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// AUTO-OPT-NEXT: return
func.func @fewer_casts(%x: tensor<4x4xf32>, %w1: tensor<4x4xf32>, %w2: tensor<4x4xf32>, %w3: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %m1 = ampc.matmul %x, %w1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %a1 = ampc.add %m1, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %m2 = ampc.matmul %a1, %w2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %a2 = ampc.add %m2, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %m3 = ampc.matmul %a2, %w3 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %m3 : tensor<4x4xf32>
}
