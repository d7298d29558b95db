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

// -----

// XLA's CPU backend moves f8E5M2 through f16, which would turn every NaN
// into 0x7F: ops that only move values take it as bytes. Other float8 types
// lower as they are; a scatter that adds computes and is left alone too.
// CHECK-LABEL: func.func @moved_as_bytes
// CHECK: %[[A:.*]] = stablehlo.bitcast_convert %arg0 : (tensor<4xf8E5M2>) -> tensor<4xui8>
// CHECK: %[[B:.*]] = stablehlo.bitcast_convert %arg0 : (tensor<4xf8E5M2>) -> tensor<4xui8>
// CHECK: %[[C:.*]] = stablehlo.concatenate %[[A]], %[[B]], dim = 0 : (tensor<4xui8>, tensor<4xui8>) -> tensor<8xui8>
// CHECK: %[[D:.*]] = stablehlo.bitcast_convert %[[C]] : (tensor<8xui8>) -> tensor<8xf8E5M2>
// CHECK: stablehlo.concatenate %arg1, %arg1, dim = 0 : (tensor<4xf8E4M3FN>, tensor<4xf8E4M3FN>) -> tensor<8xf8E4M3FN>
func.func @moved_as_bytes(%a: tensor<4xf8E5M2>, %b: tensor<4xf8E4M3FN>) -> (tensor<8xf8E5M2>, tensor<8xf8E4M3FN>) {
  %0 = "lazy.concatenate"(%a, %a) {dim = 0 : i64} : (tensor<4xf8E5M2>, tensor<4xf8E5M2>) -> tensor<8xf8E5M2>
  %1 = "lazy.concatenate"(%b, %b) {dim = 0 : i64} : (tensor<4xf8E4M3FN>, tensor<4xf8E4M3FN>) -> tensor<8xf8E4M3FN>
  return %0, %1 : tensor<8xf8E5M2>, tensor<8xf8E4M3FN>
}
