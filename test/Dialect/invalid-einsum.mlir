// RUN: ampc-opt %s -split-input-file -verify-diagnostics

// ampc.einsum's equation is read against its operands (readEinsum,
// include/ampc/Dialect/Einsum.h) by the op's shape rule: one invalid
// equation per section, each message the importer reports for an Einsum
// node (test/Import/errors/composed-ops-bad-input.test) and the op's
// verifier reports for the op. (A diagonal past 2^63 elements, which
// readEinsum also refuses, needs an operand past the dialect's tensor
// bound, which the op's verifier reports first.)

func.func @einsum_no_operands() {
  // expected-error @+2 {{ampc.einsum: needs at least one operand}}
  // expected-error @+1 {{'ampc.einsum' op failed to infer returned types}}
  %0 = ampc.einsum {equation = "->"} : () -> tensor<f32>
  return
}

// -----

func.func @einsum_element_types(%a: tensor<2x3xf32>, %b: tensor<3x4xf16>) {
  // expected-error @+2 {{ampc.einsum: operand element types differ: f32 vs f16}}
  // expected-error @+1 {{'ampc.einsum' op failed to infer returned types}}
  %0 = ampc.einsum %a, %b {equation = "ij,jk->ik"} : (tensor<2x3xf32>, tensor<3x4xf16>) -> tensor<2x4xf32>
  return
}

// -----

func.func @einsum_arrows(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{ampc.einsum: equation 'ij->i->i' has more than one '->'}}
  // expected-error @+1 {{'ampc.einsum' op failed to infer returned types}}
  %0 = ampc.einsum %a {equation = "ij->i->i"} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @einsum_terms(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+2 {{ampc.einsum: equation 'ij->i' has 1 operand term(s) for 2 inputs}}
  // expected-error @+1 {{'ampc.einsum' op failed to infer returned types}}
  %0 = ampc.einsum %a, %b {equation = "ij->i"} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @einsum_bad_char(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{ampc.einsum: equation 'i1->1i': term 'i1' must be letters and at most one '...'}}
  // expected-error @+1 {{'ampc.einsum' op failed to infer returned types}}
  %0 = ampc.einsum %a {equation = "i1 -> 1i"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @einsum_rank(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{ampc.einsum: equation 'ijk->i': term 'ijk' has 3 labels for input 0 of rank 2}}
  // expected-error @+1 {{'ampc.einsum' op failed to infer returned types}}
  %0 = ampc.einsum %a {equation = "ijk->i"} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @einsum_output_twice(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{ampc.einsum: equation 'ij->ii': output label 'i' appears twice}}
  // expected-error @+1 {{'ampc.einsum' op failed to infer returned types}}
  %0 = ampc.einsum %a {equation = "ij->ii"} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @einsum_output_label(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{ampc.einsum: equation 'ij->k': output label 'k' is in no input}}
  // expected-error @+1 {{'ampc.einsum' op failed to infer returned types}}
  %0 = ampc.einsum %a {equation = "ij->k"} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @einsum_sizes(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{ampc.einsum: equation 'ij,jk->ik': label 'j' has sizes 3 and 4}}
  // expected-error @+1 {{'ampc.einsum' op failed to infer returned types}}
  %0 = ampc.einsum %a, %b {equation = "ij,jk->ik"} : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @einsum_diagonal_sizes(%a: tensor<1x3xf32>) {
  // expected-error @+2 {{ampc.einsum: equation 'ii->i': label 'i' repeats in term 'ii' with sizes 1 and 3}}
  // expected-error @+1 {{'ampc.einsum' op failed to infer returned types}}
  %0 = ampc.einsum %a {equation = "ii->i"} : (tensor<1x3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @einsum_contraction_huge(%a: tensor<8589934592xf32>, %b: tensor<8589934592xf32>) {
  // expected-error @+2 {{ampc.einsum: the contraction's result [8589934592, 8589934592] has more than 2^63 elements}}
  // expected-error @+1 {{'ampc.einsum' op failed to infer returned types}}
  %0 = ampc.einsum %a, %b {equation = "i,j->ij"} : (tensor<8589934592xf32>, tensor<8589934592xf32>) -> tensor<1x1xf32>
  return
}

// -----

func.func @einsum_result_type(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{'ampc.einsum' op inferred type(s) 'tensor<3x2xf32>' are incompatible with return type(s) of operation 'tensor<2x3xf32>'}}
  // expected-error @+1 {{'ampc.einsum' op failed to infer returned types}}
  %0 = ampc.einsum %a {equation = "ij->ji"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}
