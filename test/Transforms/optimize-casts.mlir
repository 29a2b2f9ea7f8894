// RUN: ampc-opt %s --split-input-file --ampc-optimize-casts | FileCheck %s
// The pass is declared on functions: it runs nested in func.func (as
// buildPipeline nests it), and a module pipeline does not take it.
// RUN: ampc-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(ampc-optimize-casts))" | FileCheck %s
// RUN: not ampc-opt %s --split-input-file --pass-pipeline="builtin.module(ampc-optimize-casts)" 2>&1 | FileCheck %s --check-prefix=NOT-ON-MODULE
// NOT-ON-MODULE: restricted to 'func.func' on a PassManager intended to run on 'builtin.module'

// ampc-optimize-casts rewrites only the casts marked ampc.autocast (those
// ampc-assign-precision inserted): one cast per value and type, round trips
// through an exact widening folded, identity casts removed, casts of small
// constants folded into constants, unused casts erased. A user's cast (no
// ampc.autocast) is never removed or changed. The inputs are written by
// hand, so every rule is seen in isolation.

// Casts of one value to one type merge into the first; its users take it.
// CHECK-LABEL: func.func @merge_same_type
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-NEXT: %[[C:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
// CHECK-NEXT: %[[A:.+]] = ampc.relu %[[C]] : tensor<4xf16>
// CHECK-NEXT: %[[B:.+]] = ampc.add %[[C]], %[[A]] : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
// CHECK-NEXT: %[[D:.+]] = ampc.mul %[[B]], %[[C]] : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
// CHECK-NEXT: return %[[D]] : tensor<4xf16>
func.func @merge_same_type(%x: tensor<4xf32>) -> tensor<4xf16> {
  %c1 = ampc.cast %x {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
  %a = ampc.relu %c1 : tensor<4xf16>
  %c2 = ampc.cast %x {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
  %b = ampc.add %c2, %a : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  %c3 = ampc.cast %x {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
  %d = ampc.mul %b, %c3 : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  return %d : tensor<4xf16>
}

// -----

// Casts of one value to different types are not merged.
// CHECK-LABEL: func.func @different_types_not_merged
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-NEXT: %[[H:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
// CHECK-NEXT: %[[B:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<4xf32> to tensor<4xbf16>
// CHECK-NEXT: %[[D:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<4xf32> to tensor<4xf64>
// CHECK-NEXT: return %[[H]], %[[B]], %[[D]] : tensor<4xf16>, tensor<4xbf16>, tensor<4xf64>
func.func @different_types_not_merged(%x: tensor<4xf32>) -> (tensor<4xf16>, tensor<4xbf16>, tensor<4xf64>) {
  %h = ampc.cast %x {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
  %b = ampc.cast %x {ampc.autocast} : tensor<4xf32> to tensor<4xbf16>
  %d = ampc.cast %x {ampc.autocast} : tensor<4xf32> to tensor<4xf64>
  return %h, %b, %d : tensor<4xf16>, tensor<4xbf16>, tensor<4xf64>
}

// -----

// An autocast after an identical user cast reuses the user's cast. A user
// cast after an identical autocast is not merged away: it stays, and keeps
// its users.
// CHECK-LABEL: func.func @reuse_user_cast
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>, %[[Y:.+]]: tensor<4xf32>)
// CHECK-NEXT: %[[U:.+]] = ampc.cast %[[X]] : tensor<4xf32> to tensor<4xf16>
// CHECK-NEXT: %[[A:.+]] = ampc.add %[[U]], %[[U]] : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
// CHECK-NEXT: %[[AC:.+]] = ampc.cast %[[Y]] {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
// CHECK-NEXT: %[[V:.+]] = ampc.cast %[[Y]] : tensor<4xf32> to tensor<4xf16>
// CHECK-NEXT: %[[B:.+]] = ampc.add %[[AC]], %[[V]] : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
// CHECK-NEXT: return %[[A]], %[[B]]
func.func @reuse_user_cast(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf16>, tensor<4xf16>) {
  %u = ampc.cast %x : tensor<4xf32> to tensor<4xf16>
  %c = ampc.cast %x {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
  %a = ampc.add %u, %c : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  %ac = ampc.cast %y {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
  %v = ampc.cast %y : tensor<4xf32> to tensor<4xf16>
  %b = ampc.add %ac, %v : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  return %a, %b : tensor<4xf16>, tensor<4xf16>
}

// -----

// Round trips whose first step widens exactly fold back to the original
// value: f16 -> f32 -> f16, bf16 -> f32 -> bf16, f32 -> f64 -> f32 and
// f16 -> f64 -> f16. Both casts disappear.
// CHECK-LABEL: func.func @exact_round_trips
// CHECK-SAME: (%[[H:.+]]: tensor<4xf16>, %[[B:.+]]: tensor<4xbf16>, %[[F:.+]]: tensor<4xf32>)
// CHECK-NEXT: %[[E1:.+]] = ampc.exp %[[H]] : tensor<4xf16>
// CHECK-NEXT: %[[E2:.+]] = ampc.exp %[[B]] : tensor<4xbf16>
// CHECK-NEXT: %[[E3:.+]] = ampc.exp %[[F]] : tensor<4xf32>
// CHECK-NEXT: %[[E4:.+]] = ampc.neg %[[H]] : tensor<4xf16>
// CHECK-NEXT: return %[[E1]], %[[E2]], %[[E3]], %[[E4]]
func.func @exact_round_trips(%h: tensor<4xf16>, %b: tensor<4xbf16>, %f: tensor<4xf32>) -> (tensor<4xf16>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf16>) {
  %h1 = ampc.cast %h {ampc.autocast} : tensor<4xf16> to tensor<4xf32>
  %h2 = ampc.cast %h1 {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
  %e1 = ampc.exp %h2 : tensor<4xf16>
  %b1 = ampc.cast %b {ampc.autocast} : tensor<4xbf16> to tensor<4xf32>
  %b2 = ampc.cast %b1 {ampc.autocast} : tensor<4xf32> to tensor<4xbf16>
  %e2 = ampc.exp %b2 : tensor<4xbf16>
  %f1 = ampc.cast %f {ampc.autocast} : tensor<4xf32> to tensor<4xf64>
  %f2 = ampc.cast %f1 {ampc.autocast} : tensor<4xf64> to tensor<4xf32>
  %e3 = ampc.exp %f2 : tensor<4xf32>
  %d1 = ampc.cast %h {ampc.autocast} : tensor<4xf16> to tensor<4xf64>
  %d2 = ampc.cast %d1 {ampc.autocast} : tensor<4xf64> to tensor<4xf16>
  %e4 = ampc.neg %d2 : tensor<4xf16>
  return %e1, %e2, %e3, %e4 : tensor<4xf16>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf16>
}

// -----

// A round trip that is the whole function body: the returned autocast
// folds to %x, and the inner autocast, unused once the outer one is gone,
// is erased too.
// CHECK-LABEL: func.func @round_trip_chain_erased
// CHECK-SAME: (%[[X:.+]]: tensor<4xf16>) -> tensor<4xf16>
// CHECK-NEXT: return %[[X]] : tensor<4xf16>
func.func @round_trip_chain_erased(%x: tensor<4xf16>) -> tensor<4xf16> {
  %a = ampc.cast %x {ampc.autocast} : tensor<4xf16> to tensor<4xf32>
  %b = ampc.cast %a {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
  return %b : tensor<4xf16>
}

// -----

// An exact widening followed by a cast to a third type becomes one cast
// from the original value; the intermediate cast is erased when nothing
// else uses it and kept when something does.
// CHECK-LABEL: func.func @widen_then_other
// CHECK-SAME: (%[[H:.+]]: tensor<4xf16>, %[[F:.+]]: tensor<4xf32>)
// CHECK-NEXT: %[[HB:.+]] = ampc.cast %[[H]] {ampc.autocast} : tensor<4xf16> to tensor<4xbf16>
// CHECK-NEXT: %[[E1:.+]] = ampc.exp %[[HB]] : tensor<4xbf16>
// CHECK-NEXT: %[[FD:.+]] = ampc.cast %[[F]] {ampc.autocast} : tensor<4xf32> to tensor<4xf64>
// CHECK-NEXT: %[[FH:.+]] = ampc.cast %[[F]] {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
// CHECK-NEXT: %[[E2:.+]] = ampc.exp %[[FH]] : tensor<4xf16>
// CHECK-NEXT: %[[E3:.+]] = ampc.exp %[[FD]] : tensor<4xf64>
// CHECK-NEXT: return %[[E1]], %[[E2]], %[[E3]]
func.func @widen_then_other(%h: tensor<4xf16>, %f: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xf16>, tensor<4xf64>) {
  %h1 = ampc.cast %h {ampc.autocast} : tensor<4xf16> to tensor<4xf32>
  %h2 = ampc.cast %h1 {ampc.autocast} : tensor<4xf32> to tensor<4xbf16>
  %e1 = ampc.exp %h2 : tensor<4xbf16>
  %f1 = ampc.cast %f {ampc.autocast} : tensor<4xf32> to tensor<4xf64>
  %f2 = ampc.cast %f1 {ampc.autocast} : tensor<4xf64> to tensor<4xf16>
  %e2 = ampc.exp %f2 : tensor<4xf16>
  %e3 = ampc.exp %f1 : tensor<4xf64>
  return %e1, %e2, %e3 : tensor<4xbf16>, tensor<4xf16>, tensor<4xf64>
}

// -----

// Lossy pairs must not fold: f32 -> f16 -> f32 rounds, f16 -> bf16 -> f16
// and bf16 -> f16 -> bf16 round or overflow, f64 -> f32 -> f64 rounds.
// Every cast stays.
// CHECK-LABEL: func.func @lossy_not_folded
// CHECK-SAME: (%[[F:.+]]: tensor<4xf32>, %[[H:.+]]: tensor<4xf16>, %[[B:.+]]: tensor<4xbf16>, %[[D:.+]]: tensor<4xf64>)
// CHECK-NEXT: %[[F1:.+]] = ampc.cast %[[F]] {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
// CHECK-NEXT: %[[F2:.+]] = ampc.cast %[[F1]] {ampc.autocast} : tensor<4xf16> to tensor<4xf32>
// CHECK-NEXT: %[[H1:.+]] = ampc.cast %[[H]] {ampc.autocast} : tensor<4xf16> to tensor<4xbf16>
// CHECK-NEXT: %[[H2:.+]] = ampc.cast %[[H1]] {ampc.autocast} : tensor<4xbf16> to tensor<4xf16>
// CHECK-NEXT: %[[B1:.+]] = ampc.cast %[[B]] {ampc.autocast} : tensor<4xbf16> to tensor<4xf16>
// CHECK-NEXT: %[[B2:.+]] = ampc.cast %[[B1]] {ampc.autocast} : tensor<4xf16> to tensor<4xbf16>
// CHECK-NEXT: %[[D1:.+]] = ampc.cast %[[D]] {ampc.autocast} : tensor<4xf64> to tensor<4xf32>
// CHECK-NEXT: %[[D2:.+]] = ampc.cast %[[D1]] {ampc.autocast} : tensor<4xf32> to tensor<4xf64>
// CHECK-NEXT: return %[[F2]], %[[H2]], %[[B2]], %[[D2]]
func.func @lossy_not_folded(%f: tensor<4xf32>, %h: tensor<4xf16>, %b: tensor<4xbf16>, %d: tensor<4xf64>) -> (tensor<4xf32>, tensor<4xf16>, tensor<4xbf16>, tensor<4xf64>) {
  %f1 = ampc.cast %f {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
  %f2 = ampc.cast %f1 {ampc.autocast} : tensor<4xf16> to tensor<4xf32>
  %h1 = ampc.cast %h {ampc.autocast} : tensor<4xf16> to tensor<4xbf16>
  %h2 = ampc.cast %h1 {ampc.autocast} : tensor<4xbf16> to tensor<4xf16>
  %b1 = ampc.cast %b {ampc.autocast} : tensor<4xbf16> to tensor<4xf16>
  %b2 = ampc.cast %b1 {ampc.autocast} : tensor<4xf16> to tensor<4xbf16>
  %d1 = ampc.cast %d {ampc.autocast} : tensor<4xf64> to tensor<4xf32>
  %d2 = ampc.cast %d1 {ampc.autocast} : tensor<4xf32> to tensor<4xf64>
  return %f2, %h2, %b2, %d2 : tensor<4xf32>, tensor<4xf16>, tensor<4xbf16>, tensor<4xf64>
}

// -----

// Round trips through a user's cast: an autocast back from a user's exact
// widening folds to the original value (the user cast itself stays, even
// unused); a user's cast back from an autocast is not touched, so that pair
// stays.
// CHECK-LABEL: func.func @round_trip_with_user_cast
// CHECK-SAME: (%[[H:.+]]: tensor<4xf16>, %[[G:.+]]: tensor<4xf16>)
// CHECK-NEXT: %[[U:.+]] = ampc.cast %[[H]] : tensor<4xf16> to tensor<4xf32>
// CHECK-NEXT: %[[E1:.+]] = ampc.exp %[[H]] : tensor<4xf16>
// CHECK-NEXT: %[[A:.+]] = ampc.cast %[[G]] {ampc.autocast} : tensor<4xf16> to tensor<4xf32>
// CHECK-NEXT: %[[V:.+]] = ampc.cast %[[A]] : tensor<4xf32> to tensor<4xf16>
// CHECK-NEXT: %[[E2:.+]] = ampc.exp %[[V]] : tensor<4xf16>
// CHECK-NEXT: return %[[E1]], %[[E2]]
func.func @round_trip_with_user_cast(%h: tensor<4xf16>, %g: tensor<4xf16>) -> (tensor<4xf16>, tensor<4xf16>) {
  %u = ampc.cast %h : tensor<4xf16> to tensor<4xf32>
  %c = ampc.cast %u {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
  %e1 = ampc.exp %c : tensor<4xf16>
  %a = ampc.cast %g {ampc.autocast} : tensor<4xf16> to tensor<4xf32>
  %v = ampc.cast %a : tensor<4xf32> to tensor<4xf16>
  %e2 = ampc.exp %v : tensor<4xf16>
  return %e1, %e2 : tensor<4xf16>, tensor<4xf16>
}

// -----

// A fold exposes a merge: after the round trip %b casts %x to bf16
// directly, and the later cast of %x to bf16 merges into it.
// CHECK-LABEL: func.func @fold_then_merge
// CHECK-SAME: (%[[X:.+]]: tensor<4xf16>)
// CHECK-NEXT: %[[B:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<4xf16> to tensor<4xbf16>
// CHECK-NEXT: %[[R:.+]] = ampc.add %[[B]], %[[B]] : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
// CHECK-NEXT: return %[[R]] : tensor<4xbf16>
func.func @fold_then_merge(%x: tensor<4xf16>) -> tensor<4xbf16> {
  %a = ampc.cast %x {ampc.autocast} : tensor<4xf16> to tensor<4xf32>
  %b = ampc.cast %a {ampc.autocast} : tensor<4xf32> to tensor<4xbf16>
  %c = ampc.cast %x {ampc.autocast} : tensor<4xf16> to tensor<4xbf16>
  %r = ampc.add %b, %c : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  return %r : tensor<4xbf16>
}

// -----

// Identity autocasts disappear; a user's identity cast stays.
// CHECK-LABEL: func.func @identity
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-NEXT: %[[A:.+]] = ampc.exp %[[X]] : tensor<4xf32>
// CHECK-NEXT: %[[U:.+]] = ampc.cast %[[A]] : tensor<4xf32> to tensor<4xf32>
// CHECK-NEXT: return %[[U]] : tensor<4xf32>
func.func @identity(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = ampc.cast %x {ampc.autocast} : tensor<4xf32> to tensor<4xf32>
  %a = ampc.exp %c : tensor<4xf32>
  %u = ampc.cast %a : tensor<4xf32> to tensor<4xf32>
  return %u : tensor<4xf32>
}

// -----

// An autocast of a small constant becomes a constant of the new type,
// rounded to nearest even (0.1 -> 0x2E66 = 0.0999755859375; 70000 overflows
// to inf), and the f32 constant, dead now, is erased.
// CHECK-LABEL: func.func @fold_constant
// CHECK-NEXT: %[[K:.+]] = ampc.constant dense<[1.000000e+00, 9.997550e-02, 6.550400e+04, 0x7C00]> : tensor<4xf16>
// CHECK-NEXT: return %[[K]] : tensor<4xf16>
func.func @fold_constant() -> tensor<4xf16> {
  %k = ampc.constant dense<[1.0, 0.1, 65504.0, 70000.0]> : tensor<4xf32>
  %c = ampc.cast %k {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
  return %c : tensor<4xf16>
}

// -----

// A lossy round trip of a constant folds step by step, so the result
// carries the f16 rounding (it is not the original f32 constant).
// CHECK-LABEL: func.func @fold_constant_lossy_pair
// CHECK-NEXT: %[[K:.+]] = ampc.constant dense<[1.000000e+00, 0.0999755859, 6.550400e+04, 0x7F800000]> : tensor<4xf32>
// CHECK-NEXT: return %[[K]] : tensor<4xf32>
func.func @fold_constant_lossy_pair() -> tensor<4xf32> {
  %k = ampc.constant dense<[1.0, 0.1, 65504.0, 70000.0]> : tensor<4xf32>
  %a = ampc.cast %k {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
  %b = ampc.cast %a {ampc.autocast} : tensor<4xf16> to tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// A constant with other users stays next to the folded one; a user's cast
// of a constant is not folded.
// CHECK-LABEL: func.func @fold_constant_kept
// CHECK-NEXT: %[[K:.+]] = ampc.constant dense<2.500000e-01> : tensor<4xf32>
// CHECK-NEXT: %[[KH:.+]] = ampc.constant dense<2.500000e-01> : tensor<4xf16>
// CHECK-NEXT: %[[E:.+]] = ampc.exp %[[KH]] : tensor<4xf16>
// CHECK-NEXT: %[[U:.+]] = ampc.cast %[[K]] : tensor<4xf32> to tensor<4xbf16>
// CHECK-NEXT: return %[[K]], %[[E]], %[[U]] : tensor<4xf32>, tensor<4xf16>, tensor<4xbf16>
func.func @fold_constant_kept() -> (tensor<4xf32>, tensor<4xf16>, tensor<4xbf16>) {
  %k = ampc.constant dense<0.25> : tensor<4xf32>
  %c = ampc.cast %k {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
  %e = ampc.exp %c : tensor<4xf16>
  %u = ampc.cast %k : tensor<4xf32> to tensor<4xbf16>
  return %k, %e, %u : tensor<4xf32>, tensor<4xf16>, tensor<4xbf16>
}

// -----

// A constant larger than the folding limit (4096 elements) is not folded:
// its autocast stays.
// CHECK-LABEL: func.func @large_constant_not_folded
// CHECK-NEXT: %[[K:.+]] = ampc.constant dense<5.000000e-01> : tensor<65x64xf32>
// CHECK-NEXT: %[[C:.+]] = ampc.cast %[[K]] {ampc.autocast} : tensor<65x64xf32> to tensor<65x64xf16>
// CHECK-NEXT: return %[[C]] : tensor<65x64xf16>
func.func @large_constant_not_folded() -> tensor<65x64xf16> {
  %k = ampc.constant dense<0.5> : tensor<65x64xf32>
  %c = ampc.cast %k {ampc.autocast} : tensor<65x64xf32> to tensor<65x64xf16>
  return %c : tensor<65x64xf16>
}

// -----

// Unused autocasts are erased; unused user casts are kept.
// CHECK-LABEL: func.func @unused
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-NEXT: %[[U:.+]] = ampc.cast %[[X]] : tensor<4xf32> to tensor<4xbf16>
// CHECK-NEXT: return %[[X]] : tensor<4xf32>
func.func @unused(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = ampc.cast %x {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
  %u = ampc.cast %x : tensor<4xf32> to tensor<4xbf16>
  return %x : tensor<4xf32>
}

// -----

// Integer casts are left as they are unless identical: i64 -> i32 -> i64
// is not an exact widening first, so it does not fold.
// CHECK-LABEL: func.func @integer_casts
// CHECK-SAME: (%[[I:.+]]: tensor<4xi64>)
// CHECK-NEXT: %[[A:.+]] = ampc.cast %[[I]] {ampc.autocast} : tensor<4xi64> to tensor<4xi32>
// CHECK-NEXT: %[[B:.+]] = ampc.cast %[[A]] {ampc.autocast} : tensor<4xi32> to tensor<4xi64>
// CHECK-NEXT: return %[[B]] : tensor<4xi64>
func.func @integer_casts(%i: tensor<4xi64>) -> tensor<4xi64> {
  %a = ampc.cast %i {ampc.autocast} : tensor<4xi64> to tensor<4xi32>
  %b = ampc.cast %a {ampc.autocast} : tensor<4xi32> to tensor<4xi64>
  return %b : tensor<4xi64>
}
