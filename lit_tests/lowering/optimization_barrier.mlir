// lazy.optimization_barrier lowers to stablehlo.optimization_barrier with
// every operand and result. The op's MLIR form declares 16 optional operands
// and results (IRDL binds a variadic group to one type), so the segment sizes
// say how many are present. An op computed from a barrier's result is not
// the op computed from its operand: CSE keeps both tanh below.
// RUN: lazy-opt --split-input-file --cse --lazy-to-stablehlo %s | filecheck %s

// CHECK-LABEL: func.func @recompute
// CHECK: %[[T0:.*]] = stablehlo.tanh %arg0
// CHECK: %[[B:.*]]:2 = stablehlo.optimization_barrier %arg0, %arg1 : tensor<4x3xf32>, tensor<2xi64>
// CHECK: %[[T1:.*]] = stablehlo.tanh %[[B]]#0
// CHECK: stablehlo.add %[[T0]], %[[T1]]
// CHECK: return %{{.*}}, %[[B]]#1
func.func @recompute(%a: tensor<4x3xf32>, %i: tensor<2xi64>) -> (tensor<4x3xf32>, tensor<2xi64>) {
  %0 = "lazy.tanh"(%a) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %1:2 = "lazy.optimization_barrier"(%a, %i) {operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4x3xf32>, tensor<2xi64>) -> (tensor<4x3xf32>, tensor<2xi64>)
  %2 = "lazy.tanh"(%1#0) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %3 = "lazy.add"(%0, %2) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %3, %1#1 : tensor<4x3xf32>, tensor<2xi64>
}

// -----

// One operand, and three of three types.
// CHECK-LABEL: func.func @sizes
// CHECK: %[[ONE:.*]] = stablehlo.optimization_barrier %arg0 : tensor<4x3xf32>
// CHECK: %[[THREE:.*]]:3 = stablehlo.optimization_barrier %[[ONE]], %arg1, %arg2 : tensor<4x3xf32>, tensor<2xi64>, tensor<i1>
// CHECK: return %[[THREE]]#0, %[[THREE]]#1, %[[THREE]]#2
func.func @sizes(%a: tensor<4x3xf32>, %i: tensor<2xi64>, %p: tensor<i1>) -> (tensor<4x3xf32>, tensor<2xi64>, tensor<i1>) {
  %0 = "lazy.optimization_barrier"(%a) {operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %1:3 = "lazy.optimization_barrier"(%0, %i, %p) {operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4x3xf32>, tensor<2xi64>, tensor<i1>) -> (tensor<4x3xf32>, tensor<2xi64>, tensor<i1>)
  return %1#0, %1#1, %1#2 : tensor<4x3xf32>, tensor<2xi64>, tensor<i1>
}
