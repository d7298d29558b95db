// Shape lazy ops lower one to one onto the StableHLO op with their semantics;
// only the attribute names change.
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s

// broadcast_in_dim's dims become broadcast_dimensions.
// CHECK-LABEL: func.func @broadcast_in_dim
// CHECK: stablehlo.broadcast_in_dim %arg0, dims = [2, 0] : (tensor<5x1xf32>) -> tensor<3x4x5xf32>
// CHECK-NOT: lazy.
func.func @broadcast_in_dim(%x: tensor<5x1xf32>) -> tensor<3x4x5xf32> {
  %0 = "lazy.broadcast_in_dim"(%x) {dims = array<i64: 2, 0>} : (tensor<5x1xf32>) -> tensor<3x4x5xf32>
  return %0 : tensor<3x4x5xf32>
}

// -----

// CHECK-LABEL: func.func @reshape
// CHECK: stablehlo.reshape %arg0 : (tensor<2x3xi32>) -> tensor<3x2xi32>
func.func @reshape(%x: tensor<2x3xi32>) -> tensor<3x2xi32> {
  %0 = "lazy.reshape"(%x) : (tensor<2x3xi32>) -> tensor<3x2xi32>
  return %0 : tensor<3x2xi32>
}

// -----

// permute is StableHLO's transpose.
// CHECK-LABEL: func.func @permute
// CHECK: stablehlo.transpose %arg0, dims = [2, 0, 1] : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
func.func @permute(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = "lazy.permute"(%x) {dims = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  return %0 : tensor<4x2x3xf32>
}

// -----

// CHECK-LABEL: func.func @slice
// CHECK: stablehlo.slice %arg0 [1:6:2, 0:4:3] : (tensor<7x4xf32>) -> tensor<3x2xf32>
func.func @slice(%x: tensor<7x4xf32>) -> tensor<3x2xf32> {
  %0 = "lazy.slice"(%x) {start = array<i64: 1, 0>, limit = array<i64: 6, 4>, strides = array<i64: 2, 3>} : (tensor<7x4xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// The variadic start indices become dynamic_slice's trailing operands.
// CHECK-LABEL: func.func @dynamic_slice
// CHECK: stablehlo.dynamic_slice %arg0, %arg1, %arg2, sizes = [2, 3] : (tensor<4x5xf32>, tensor<i64>, tensor<i64>) -> tensor<2x3xf32>
func.func @dynamic_slice(%x: tensor<4x5xf32>, %i: tensor<i64>, %j: tensor<i64>) -> tensor<2x3xf32> {
  %0 = "lazy.dynamic_slice"(%x, %i, %j) {operandSegmentSizes = array<i32: 1, 2>, sizes = array<i64: 2, 3>} : (tensor<4x5xf32>, tensor<i64>, tensor<i64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @dynamic_update_slice
// CHECK: stablehlo.dynamic_update_slice %arg0, %arg1, %arg2, %arg2 : (tensor<4x5xi1>, tensor<1x5xi1>, tensor<i32>, tensor<i32>) -> tensor<4x5xi1>
func.func @dynamic_update_slice(%x: tensor<4x5xi1>, %u: tensor<1x5xi1>, %i: tensor<i32>) -> tensor<4x5xi1> {
  %0 = "lazy.dynamic_update_slice"(%x, %u, %i, %i) {operandSegmentSizes = array<i32: 1, 1, 2>} : (tensor<4x5xi1>, tensor<1x5xi1>, tensor<i32>, tensor<i32>) -> tensor<4x5xi1>
  return %0 : tensor<4x5xi1>
}

// -----

// CHECK-LABEL: func.func @concatenate
// Binary: three inputs are two concatenates (XLA flattens them).
// CHECK: %[[C:.*]] = stablehlo.concatenate %arg0, %arg1, dim = 1 : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
// CHECK: stablehlo.concatenate %[[C]], %arg0, dim = 1 : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<2x7xf32>
func.func @concatenate(%x: tensor<2x3xf32>, %y: tensor<2x1xf32>) -> tensor<2x7xf32> {
  %0 = "lazy.concatenate"(%x, %y) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %1 = "lazy.concatenate"(%0, %x) {dim = 1 : i64} : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<2x7xf32>
  return %1 : tensor<2x7xf32>
}

// -----

// A negative low edge crops; interior padding goes between elements.
// CHECK-LABEL: func.func @pad
// CHECK: stablehlo.pad %arg0, %arg1, low = [-1, 2], high = [0, 1], interior = [0, 1] : (tensor<3x4xf32>, tensor<f32>) -> tensor<2x10xf32>
func.func @pad(%x: tensor<3x4xf32>, %v: tensor<f32>) -> tensor<2x10xf32> {
  %0 = "lazy.pad"(%x, %v) {low = array<i64: -1, 2>, high = array<i64: 0, 1>, interior = array<i64: 0, 1>} : (tensor<3x4xf32>, tensor<f32>) -> tensor<2x10xf32>
  return %0 : tensor<2x10xf32>
}

// -----

// CHECK-LABEL: func.func @reverse
// CHECK: stablehlo.reverse %arg0, dims = [0, 2] : tensor<2x3x4xi64>
func.func @reverse(%x: tensor<2x3x4xi64>) -> tensor<2x3x4xi64> {
  %0 = "lazy.reverse"(%x) {dims = array<i64: 0, 2>} : (tensor<2x3x4xi64>) -> tensor<2x3x4xi64>
  return %0 : tensor<2x3x4xi64>
}
