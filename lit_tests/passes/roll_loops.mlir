// lazy-roll-loops: a run of identical layers, each with its own weights,
// becomes one stablehlo.while over the weights stacked along a new leading
// axis, whose body is one layer. It is what the compiler does to a
// barrier's graph unless LAZYCORE_ROLL_LOOPS=0 (src/lazycore/runtime/rolling.py),
// on a module: the same matcher (passes/rolled_chains.py) and the same loop
// (passes/rolled_emit.py).
// RUN: lazy-opt --split-input-file --lazy-roll-loops %s | filecheck %s

// Three layers h = h + tanh(h @ w_i + b_i). The loop carries a counter, its
// limit, h, and each per-layer input stacked once (a concatenate of the
// three); the body slices its layer's rows at the counter, and the function
// returns the loop's final h. One tanh is left: XLA compiles one layer.
// CHECK-LABEL: func.func @three_layers
// CHECK: %[[W:.*]] = stablehlo.concatenate {{.*}}, dim = 0 : {{.*}} -> tensor<3x4x4xf32>
// CHECK: %[[B:.*]] = stablehlo.concatenate {{.*}}, dim = 0 : {{.*}} -> tensor<3x2x4xf32>
// CHECK: %[[N:.*]] = "lazy.constant"() {value = dense<3> : tensor<i64>}
// CHECK: %[[LOOP:.*]]:5 = stablehlo.while(%[[I:.*]] = %{{.*}}, %{{.*}} = %[[N]], %[[H:.*]] = %arg0, %[[WS:.*]] = %[[W]], %{{.*}} = %[[B]])
// CHECK: "lazy.compare"({{.*}}) {direction = "LT"}
// CHECK: } do {
// CHECK: %[[ROW:.*]] = "lazy.dynamic_slice"(%[[WS]], %[[I]],
// CHECK: %[[WI:.*]] = "lazy.reshape"(%[[ROW]]) : (tensor<1x4x4xf32>) -> tensor<4x4xf32>
// CHECK: "lazy.dot_general"(%[[H]], %[[WI]])
// CHECK: "lazy.tanh"
// CHECK-NOT: "lazy.tanh"
// CHECK: return %[[LOOP]]#2
func.func @three_layers(%h: tensor<2x4xf32>, %w0: tensor<4x4xf32>, %b0: tensor<2x4xf32>, %w1: tensor<4x4xf32>, %b1: tensor<2x4xf32>, %w2: tensor<4x4xf32>, %b2: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = "lazy.dot_general"(%h, %w0) {lhs_batch = array<i64>, lhs_contract = array<i64: 1>, rhs_batch = array<i64>, rhs_contract = array<i64: 0>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %1 = "lazy.add"(%0, %b0) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %2 = "lazy.tanh"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %3 = "lazy.add"(%h, %2) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %4 = "lazy.dot_general"(%3, %w1) {lhs_batch = array<i64>, lhs_contract = array<i64: 1>, rhs_batch = array<i64>, rhs_contract = array<i64: 0>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %5 = "lazy.add"(%4, %b1) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %6 = "lazy.tanh"(%5) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %7 = "lazy.add"(%3, %6) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %8 = "lazy.dot_general"(%7, %w2) {lhs_batch = array<i64>, lhs_contract = array<i64: 1>, rhs_batch = array<i64>, rhs_contract = array<i64: 0>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %9 = "lazy.add"(%8, %b2) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %10 = "lazy.tanh"(%9) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %11 = "lazy.add"(%7, %10) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %11 : tensor<2x4xf32>
}

// -----

// Something outside the run reads the first two layers' tanh (as a backward
// pass reads the activations it keeps): the loop writes every layer's tanh
// into a stack in place (dynamic_update_slice at the counter) and returns
// it, with the index each row went to; the reader takes its rows from there.
// The tanh has the biases' type and the body reads nothing else of their
// stack, so it is written over the bias row the body read: no stack of its
// own (what makes a layer's new weights leave an optimizer loop in place).
// CHECK-LABEL: func.func @kept
// CHECK: %[[B:.*]] = stablehlo.concatenate {{.*}} -> tensor<3x2x4xf32>
// CHECK: %[[LOOP:.*]]:8 = stablehlo.while(%[[I:.*]] = %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[BS:.*]] = %[[B]], %[[R0:.*]] = %{{.*}}, %[[R1:.*]] = %{{.*}}, %[[R2:.*]] = %{{.*}})
// CHECK: } do {
// CHECK: %[[T:.*]] = "lazy.tanh"
// CHECK: %[[ONE:.*]] = "lazy.reshape"(%[[T]]) : (tensor<2x4xf32>) -> tensor<1x2x4xf32>
// CHECK: %[[KEPT:.*]] = "lazy.dynamic_update_slice"(%[[BS]], %[[ONE]], %[[I]],
// CHECK: stablehlo.return {{.*}}, %[[KEPT]],
// CHECK: %[[A:.*]] = "lazy.dynamic_slice"(%[[LOOP]]#4, %[[LOOP]]#5,
// CHECK: %[[RA:.*]] = "lazy.reshape"(%[[A]])
// CHECK: %[[C:.*]] = "lazy.dynamic_slice"(%[[LOOP]]#4, %[[LOOP]]#6,
// CHECK: %[[RC:.*]] = "lazy.reshape"(%[[C]])
// CHECK: %[[M:.*]] = "lazy.mul"(%[[RA]], %[[RC]])
// CHECK: return %[[LOOP]]#2, %[[M]]
func.func @kept(%h: tensor<2x4xf32>, %w0: tensor<4x4xf32>, %b0: tensor<2x4xf32>, %w1: tensor<4x4xf32>, %b1: tensor<2x4xf32>, %w2: tensor<4x4xf32>, %b2: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %0 = "lazy.dot_general"(%h, %w0) {lhs_batch = array<i64>, lhs_contract = array<i64: 1>, rhs_batch = array<i64>, rhs_contract = array<i64: 0>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %1 = "lazy.add"(%0, %b0) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %2 = "lazy.tanh"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %3 = "lazy.add"(%h, %2) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %4 = "lazy.dot_general"(%3, %w1) {lhs_batch = array<i64>, lhs_contract = array<i64: 1>, rhs_batch = array<i64>, rhs_contract = array<i64: 0>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %5 = "lazy.add"(%4, %b1) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %6 = "lazy.tanh"(%5) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %7 = "lazy.add"(%3, %6) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %8 = "lazy.dot_general"(%7, %w2) {lhs_batch = array<i64>, lhs_contract = array<i64: 1>, rhs_batch = array<i64>, rhs_contract = array<i64: 0>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %9 = "lazy.add"(%8, %b2) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %10 = "lazy.tanh"(%9) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %11 = "lazy.add"(%7, %10) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %12 = "lazy.mul"(%2, %6) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %11, %12 : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Layers that differ in a constant compute different things: no loop.
// CHECK-LABEL: func.func @different_constants
// CHECK-NOT: stablehlo.while

func.func @different_constants(%h: tensor<2x4xf32>, %w0: tensor<4x4xf32>, %w1: tensor<4x4xf32>, %w2: tensor<4x4xf32>) -> tensor<2x4xf32> {
  %0 = "lazy.constant"() {value = dense<2.0> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %1 = "lazy.dot_general"(%h, %w0) {lhs_batch = array<i64>, lhs_contract = array<i64: 1>, rhs_batch = array<i64>, rhs_contract = array<i64: 0>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %2 = "lazy.mul"(%1, %0) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %3 = "lazy.tanh"(%2) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %4 = "lazy.add"(%h, %3) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %5 = "lazy.constant"() {value = dense<3.0> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %6 = "lazy.dot_general"(%4, %w1) {lhs_batch = array<i64>, lhs_contract = array<i64: 1>, rhs_batch = array<i64>, rhs_contract = array<i64: 0>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %7 = "lazy.mul"(%6, %5) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %8 = "lazy.tanh"(%7) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %9 = "lazy.add"(%4, %8) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %10 = "lazy.constant"() {value = dense<4.0> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %11 = "lazy.dot_general"(%9, %w2) {lhs_batch = array<i64>, lhs_contract = array<i64: 1>, rhs_batch = array<i64>, rhs_contract = array<i64: 0>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %12 = "lazy.mul"(%11, %10) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %13 = "lazy.tanh"(%12) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %14 = "lazy.add"(%9, %13) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %14 : tensor<2x4xf32>
}

// -----

// A scalar the layers share, read out of an argument as the compiler reads
// its scalar pack (one element: slice, reshape): the loop carries the whole
// argument and slices the element in its body, next to the layer that uses
// it, where XLA fuses it into the layer's kernels. (Sliced before the loop,
// a loop operand, each such scalar was a kernel of its own.)
// CHECK-LABEL: func.func @pack_scalar
// CHECK: %[[LOOP:.*]]:5 = stablehlo.while({{.*}}, %[[P:.*]] = %arg4)
// CHECK: } do {
// CHECK: %[[E:.*]] = "lazy.slice"(%[[P]]) {limit = array<i64: 2>, start = array<i64: 1>, strides = array<i64: 1>}
// CHECK: %[[S:.*]] = "lazy.reshape"(%[[E]]) : (tensor<1xf32>) -> tensor<f32>
// CHECK: "lazy.broadcast_in_dim"(%[[S]])
// CHECK: stablehlo.return {{.*}}, %[[P]] :
func.func @pack_scalar(%h: tensor<2x4xf32>, %w0: tensor<4x4xf32>, %w1: tensor<4x4xf32>, %w2: tensor<4x4xf32>, %pack: tensor<2xf32>) -> tensor<2x4xf32> {
  %e = "lazy.slice"(%pack) {limit = array<i64: 2>, start = array<i64: 1>, strides = array<i64: 1>} : (tensor<2xf32>) -> tensor<1xf32>
  %s = "lazy.reshape"(%e) : (tensor<1xf32>) -> tensor<f32>
  %0 = "lazy.dot_general"(%h, %w0) {lhs_batch = array<i64>, lhs_contract = array<i64: 1>, rhs_batch = array<i64>, rhs_contract = array<i64: 0>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %b0 = "lazy.broadcast_in_dim"(%s) {dims = array<i64>} : (tensor<f32>) -> tensor<2x4xf32>
  %1 = "lazy.mul"(%0, %b0) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %2 = "lazy.tanh"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %3 = "lazy.dot_general"(%2, %w1) {lhs_batch = array<i64>, lhs_contract = array<i64: 1>, rhs_batch = array<i64>, rhs_contract = array<i64: 0>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %b1 = "lazy.broadcast_in_dim"(%s) {dims = array<i64>} : (tensor<f32>) -> tensor<2x4xf32>
  %4 = "lazy.mul"(%3, %b1) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %5 = "lazy.tanh"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %6 = "lazy.dot_general"(%5, %w2) {lhs_batch = array<i64>, lhs_contract = array<i64: 1>, rhs_batch = array<i64>, rhs_contract = array<i64: 0>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %b2 = "lazy.broadcast_in_dim"(%s) {dims = array<i64>} : (tensor<f32>) -> tensor<2x4xf32>
  %7 = "lazy.mul"(%6, %b2) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %8 = "lazy.tanh"(%7) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %8 : tensor<2x4xf32>
}
