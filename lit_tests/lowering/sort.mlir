// lazy.sort is one stable stablehlo.sort of the operand and an iota along
// dim (the positions it returns as indices). The comparator says when the
// left element goes first: a smaller number (larger when descending), and for
// floats NaN last (first when descending), as torch and NumPy sort.
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s

// CHECK-LABEL: func.func @ascending
// CHECK: %[[I:.*]] = stablehlo.iota dim = 1 : tensor<2x5xi64>
// CHECK: %[[S:.*]]:2 = "stablehlo.sort"(%arg0, %[[I]]) <{dimension = 1 : i64, is_stable = true}>
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<f32>, %[[B:.*]]: tensor<f32>, %{{.*}}: tensor<i64>, %{{.*}}: tensor<i64>):
// CHECK-NEXT: %[[LT:.*]] = stablehlo.compare LT, %[[A]], %[[B]]
// CHECK-NEXT: %[[ANAN:.*]] = stablehlo.compare NE, %[[A]], %[[A]]
// CHECK-NEXT: %[[BNAN:.*]] = stablehlo.compare NE, %[[B]], %[[B]]
// A number goes before NaN:
// CHECK-NEXT: %[[NUM:.*]] = stablehlo.not %[[ANAN]]
// CHECK-NEXT: %[[BEFORE_NAN:.*]] = stablehlo.and %[[NUM]], %[[BNAN]]
// CHECK-NEXT: %[[FIRST:.*]] = stablehlo.or %[[LT]], %[[BEFORE_NAN]]
// CHECK-NEXT: stablehlo.return %[[FIRST]]
// CHECK: return %[[S]]#0, %[[S]]#1
func.func @ascending(%x: tensor<2x5xf32>) -> (tensor<2x5xf32>, tensor<2x5xi64>) {
  %v, %i = "lazy.sort"(%x) {dim = 1 : i64, descending = false} : (tensor<2x5xf32>) -> (tensor<2x5xf32>, tensor<2x5xi64>)
  return %v, %i : tensor<2x5xf32>, tensor<2x5xi64>
}

// -----

// Integers have no NaN: the comparator is one compare, GT when descending.
// CHECK-LABEL: func.func @descending_integers
// CHECK: "stablehlo.sort"
// CHECK-SAME: dimension = 0 : i64, is_stable = true
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[GT:.*]] = stablehlo.compare GT
// CHECK-NEXT: stablehlo.return %[[GT]]
func.func @descending_integers(%x: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>) {
  %v, %i = "lazy.sort"(%x) {dim = 0 : i64, descending = true} : (tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>)
  return %v, %i : tensor<4xi32>, tensor<4xi32>
}
