// Reductions lower to stablehlo.reduce with the combiner's identity as init;
// argmax/argmin lower to a two-operand reduce over (value, iota index).
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s

// Sum starts from 0 and removes the reduced dims from the shape.
// CHECK-LABEL: func.func @sum
// CHECK: %[[ZERO:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK: stablehlo.reduce(%arg0 init: %[[ZERO]]) applies stablehlo.add across dimensions = [0, 2] : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK-NOT: lazy.
func.func @sum(%x: tensor<2x3x4xf32>) -> tensor<3xf32> {
  %0 = "lazy.reduce_sum"(%x) {dims = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// Float max starts from -inf, so NaN still propagates through stablehlo.maximum.
// CHECK-LABEL: func.func @max_f32
// CHECK: %[[NEG_INF:.*]] = stablehlo.constant dense<0xFF800000> : tensor<f32>
// CHECK: stablehlo.reduce(%arg0 init: %[[NEG_INF]]) applies stablehlo.maximum across dimensions = [1]
func.func @max_f32(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  %0 = "lazy.reduce_max"(%x) {dims = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Integer min starts from the dtype's largest value.
// CHECK-LABEL: func.func @min_i32
// CHECK: %[[MAX:.*]] = stablehlo.constant dense<2147483647> : tensor<i32>
// CHECK: stablehlo.reduce(%arg0 init: %[[MAX]]) applies stablehlo.minimum across dimensions = [0]
func.func @min_i32(%x: tensor<2x3xi32>) -> tensor<3xi32> {
  %0 = "lazy.reduce_min"(%x) {dims = array<i64: 0>} : (tensor<2x3xi32>) -> tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

// CHECK-LABEL: func.func @prod
// CHECK: %[[ONE:.*]] = stablehlo.constant dense<1> : tensor<i64>
// CHECK: stablehlo.reduce(%arg0 init: %[[ONE]]) applies stablehlo.multiply across dimensions = [0] : (tensor<5xi64>, tensor<i64>) -> tensor<i64>
func.func @prod(%x: tensor<5xi64>) -> tensor<i64> {
  %0 = "lazy.reduce_prod"(%x) {dims = array<i64: 0>} : (tensor<5xi64>) -> tensor<i64>
  return %0 : tensor<i64>
}

// -----

// Boolean max/min are any/all: or from false, and from true.
// CHECK-LABEL: func.func @bool_any_all
// CHECK: %[[F:.*]] = stablehlo.constant dense<false> : tensor<i1>
// CHECK: stablehlo.reduce(%arg0 init: %[[F]]) applies stablehlo.or across dimensions = [0]
// CHECK: %[[T:.*]] = stablehlo.constant dense<true> : tensor<i1>
// CHECK: stablehlo.reduce(%arg0 init: %[[T]]) applies stablehlo.and across dimensions = [0]
func.func @bool_any_all(%x: tensor<4xi1>) -> (tensor<i1>, tensor<i1>) {
  %0 = "lazy.reduce_max"(%x) {dims = array<i64: 0>} : (tensor<4xi1>) -> tensor<i1>
  %1 = "lazy.reduce_min"(%x) {dims = array<i64: 0>} : (tensor<4xi1>) -> tensor<i1>
  return %0, %1 : tensor<i1>, tensor<i1>
}

// -----

// Reducing over no dims is the identity: no reduce is emitted.
// CHECK-LABEL: func.func @no_dims
// CHECK-NOT: stablehlo.reduce
// CHECK: return %arg0
func.func @no_dims(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "lazy.reduce_max"(%x) {dims = array<i64>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// A float sum that adds one element (no dims, or dims of size 1) is still
// 0 + x: -0 becomes +0, as eager's and NumPy's sums from zero give. XLA would
// fold the reduce into a reshape (and an add of 0 away), so it is a select.
// CHECK-LABEL: func.func @sum_of_one_element
// CHECK: %[[R:.*]] = stablehlo.reduce(%arg0 init: %{{.*}}) applies stablehlo.add across dimensions = [0]
// CHECK: %[[ZERO:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: %[[EQ:.*]] = stablehlo.compare EQ, %[[R]], %[[ZERO]]
// CHECK: stablehlo.select %[[EQ]], %[[ZERO]], %[[R]]
// CHECK: %[[ZERO2:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<2x3xf32>
// CHECK: %[[EQ2:.*]] = stablehlo.compare EQ, %arg1, %[[ZERO2]]
// CHECK: stablehlo.select %[[EQ2]], %[[ZERO2]], %arg1
func.func @sum_of_one_element(%x: tensor<1x3xf32>, %y: tensor<2x3xf32>) -> (tensor<3xf32>, tensor<2x3xf32>) {
  %0 = "lazy.reduce_sum"(%x) {dims = array<i64: 0>} : (tensor<1x3xf32>) -> tensor<3xf32>
  %1 = "lazy.reduce_sum"(%y) {dims = array<i64>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0, %1 : tensor<3xf32>, tensor<2x3xf32>
}

// -----

// argmax on floats: NaN beats every number, ties (NaN with NaN too) go to the
// lower index; the result is the index half of the variadic reduce.
// CHECK-LABEL: func.func @argmax_f32
// CHECK: %[[IOTA:.*]] = stablehlo.iota dim = 1 : tensor<2x3xi64>
// CHECK: %[[INIT:.*]] = stablehlo.constant dense<0xFF800000> : tensor<f32>
// CHECK: %[[ZERO:.*]] = stablehlo.constant dense<0> : tensor<i64>
// CHECK: %[[R:.*]]:2 = stablehlo.reduce(%arg0 init: %[[INIT]]), (%[[IOTA]] init: %[[ZERO]]) across dimensions = [1] : (tensor<2x3xf32>, tensor<2x3xi64>, tensor<f32>, tensor<i64>) -> (tensor<2xf32>, tensor<2xi64>)
// CHECK: reducer(%[[A:.*]]: tensor<f32>, %[[B:.*]]: tensor<f32>) (%[[AI:.*]]: tensor<i64>, %[[BI:.*]]: tensor<i64>)
// CHECK-DAG: stablehlo.compare GT, %[[A]], %[[B]]
// CHECK-DAG: stablehlo.compare NE, %[[A]], %[[A]]
// CHECK-DAG: stablehlo.compare NE, %[[B]], %[[B]]
// CHECK-DAG: stablehlo.compare LT, %[[AI]], %[[BI]]
// CHECK: %[[PICK:.*]] = stablehlo.or
// CHECK: %[[V:.*]] = stablehlo.select %[[PICK]], %[[A]], %[[B]]
// CHECK: %[[I:.*]] = stablehlo.select %[[PICK]], %[[AI]], %[[BI]]
// CHECK: stablehlo.return %[[V]], %[[I]]
// CHECK: return %[[R]]#1
func.func @argmax_f32(%x: tensor<2x3xf32>) -> tensor<2xi64> {
  %0 = "lazy.argmax"(%x) {dim = 1} : (tensor<2x3xf32>) -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// argmin on integers needs no NaN checks; init is the dtype's largest value.
// The index dtype (i32 here) comes from the result type.
// CHECK-LABEL: func.func @argmin_i32
// CHECK: stablehlo.iota dim = 0 : tensor<4x3xi32>
// CHECK: stablehlo.constant dense<127> : tensor<i8>
// CHECK: reducer(%[[A:.*]]: tensor<i8>, %[[B:.*]]: tensor<i8>)
// CHECK-NOT: compare NE
// CHECK: stablehlo.compare LT, %[[A]], %[[B]]
// CHECK: stablehlo.return
func.func @argmin_i32(%x: tensor<4x3xi8>) -> tensor<3xi32> {
  %0 = "lazy.argmin"(%x) {dim = 0} : (tensor<4x3xi8>) -> tensor<3xi32>
  return %0 : tensor<3xi32>
}
