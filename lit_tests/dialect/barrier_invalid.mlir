// lazy.optimization_barrier's results are its operands' types, one per operand.
// RUN: lazy-opt --split-input-file --verify-diagnostics %s

func.func @case0(%a: tensor<4x3xf32>, %i: tensor<2xi64>) -> (tensor<4x3xf32>, tensor<2xi32>) {
  // expected-error @+1 {{'lazy.optimization_barrier' op result 'results #1' has type tensor<2xi32>, but the operands and attributes give tensor<2xi64>}}
  %0:2 = "lazy.optimization_barrier"(%a, %i) {operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4x3xf32>, tensor<2xi64>) -> (tensor<4x3xf32>, tensor<2xi32>)
  return %0#0, %0#1 : tensor<4x3xf32>, tensor<2xi32>
}
