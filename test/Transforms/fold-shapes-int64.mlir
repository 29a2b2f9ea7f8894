// RUN: ampc-opt %s --ampc-fold-shapes --split-input-file | FileCheck %s

// Integer folds must be exact over the whole int64 range: exported models use
// INT64_MAX as the "to the end" Slice sentinel, and shape arithmetic must not
// round through double (2^53 + 1 is the first int64 a double cannot hold).

// CHECK-LABEL: func.func @add_mul_exact
// CHECK-DAG: %[[C:.+]] = ampc.constant dense<[9007199254740993, 9223372036854775807]> : tensor<2xi64>
// CHECK-NOT: ampc.add
// CHECK-NOT: ampc.mul
// CHECK: return %[[C]], %[[C]]
func.func @add_mul_exact() -> (tensor<2xi64>, tensor<2xi64>) {
  %a = ampc.constant dense<[9007199254740993, 9223372036854775807]> : tensor<2xi64>
  %zero = ampc.constant dense<0> : tensor<i64>
  %sum = ampc.add %a, %zero : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  %one = ampc.constant dense<1> : tensor<i64>
  %product = ampc.mul %a, %one : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  return %sum, %product : tensor<2xi64>, tensor<2xi64>
}

// -----

// CHECK-LABEL: func.func @sub_div_exact
// CHECK-DAG: %[[S:.+]] = ampc.constant dense<9223372036854775806> : tensor<1xi64>
// CHECK-DAG: %[[D:.+]] = ampc.constant dense<4611686018427387903> : tensor<1xi64>
// CHECK: return %[[S]], %[[D]]
func.func @sub_div_exact() -> (tensor<1xi64>, tensor<1xi64>) {
  %max = ampc.constant dense<[9223372036854775807]> : tensor<1xi64>
  %one = ampc.constant dense<1> : tensor<i64>
  %two = ampc.constant dense<2> : tensor<i64>
  %s = ampc.sub %max, %one : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %d = ampc.div %max, %two : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  return %s, %d : tensor<1xi64>, tensor<1xi64>
}

// -----

// Narrowing integer casts keep the low bits, as they already do for values
// that a double holds exactly (2^32 + 1 -> 1).
// CHECK-LABEL: func.func @narrowing_cast_exact
// CHECK-NEXT: %[[C:.+]] = ampc.constant dense<[1, 1, -1]> : tensor<3xi32>
// CHECK-NEXT: return %[[C]]
func.func @narrowing_cast_exact() -> tensor<3xi32> {
  %a = ampc.constant dense<[4294967297, 9007199254740993, 9223372036854775807]> : tensor<3xi64>
  %c = ampc.cast %a : tensor<3xi64> to tensor<3xi32>
  return %c : tensor<3xi32>
}
