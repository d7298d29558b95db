// Float8 element types: converts to and from f32 and float8 arithmetic lower
// one to one; reduce_max of a type without infinity (E4M3FN) starts at its
// lowest finite value, -448, where other floats start at -inf.
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s

// CHECK-LABEL: func.func @casts
// CHECK: %[[Q:.*]] = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xf8E4M3FN>
// CHECK: %[[P:.*]] = stablehlo.multiply %[[Q]], %[[Q]] : tensor<4xf8E4M3FN>
// CHECK: %[[E:.*]] = stablehlo.convert %[[P]] : (tensor<4xf8E4M3FN>) -> tensor<4xf8E5M2>
// CHECK: stablehlo.convert %[[E]] : (tensor<4xf8E5M2>) -> tensor<4xf32>
func.func @casts(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.convert"(%x) : (tensor<4xf32>) -> tensor<4xf8E4M3FN>
  %1 = "lazy.mul"(%0, %0) : (tensor<4xf8E4M3FN>, tensor<4xf8E4M3FN>) -> tensor<4xf8E4M3FN>
  %2 = "lazy.convert"(%1) : (tensor<4xf8E4M3FN>) -> tensor<4xf8E5M2>
  %3 = "lazy.convert"(%2) : (tensor<4xf8E5M2>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @max_without_infinity
// CHECK: %[[INIT:.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f8E4M3FN>
// CHECK: stablehlo.reduce(%arg0 init: %[[INIT]])
func.func @max_without_infinity(%x: tensor<2x3xf8E4M3FN>) -> tensor<2xf8E4M3FN> {
  %0 = "lazy.reduce_max"(%x) {dims = array<i64: 1>} : (tensor<2x3xf8E4M3FN>) -> tensor<2xf8E4M3FN>
  return %0 : tensor<2xf8E4M3FN>
}

// -----

// CHECK-LABEL: func.func @max_with_infinity
// CHECK: stablehlo.constant dense<0xFC> : tensor<f8E5M2>
func.func @max_with_infinity(%x: tensor<2x3xf8E5M2>) -> tensor<2xf8E5M2> {
  %0 = "lazy.reduce_max"(%x) {dims = array<i64: 1>} : (tensor<2x3xf8E5M2>) -> tensor<2xf8E5M2>
  return %0 : tensor<2xf8E5M2>
}
