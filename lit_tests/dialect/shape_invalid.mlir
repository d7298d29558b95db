// The verifiers of the shape ops reject IR that breaks their shape rules and
// name the broken rule.
// Each case expects its error at the op (expected-error, checked by --verify-diagnostics).
// RUN: lazy-opt --split-input-file --verify-diagnostics %s

func.func @reshape_count(%x: tensor<2x3xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'lazy.reshape' op reshape must keep the element count: tensor<2x3xf32> has 6 elements, shape [4] has 4}}
  %0 = "lazy.reshape"(%x) : (tensor<2x3xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @broadcast_size(%x: tensor<3xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'lazy.broadcast_in_dim' op operand dim 0 of size 3 maps to result dim 1 of size 4; it must be 1 or equal to it}}
  %0 = "lazy.broadcast_in_dim"(%x) {dims = array<i64: 1>} : (tensor<3xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @broadcast_attr_kind(%x: tensor<3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'lazy.broadcast_in_dim' op attribute 'dims': expected a DenseI64ArrayAttr (array<i64: ...>), got [1]}}
  %0 = "lazy.broadcast_in_dim"(%x) {dims = [1]} : (tensor<3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @permute_repeat(%x: tensor<2x3xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'lazy.permute' op dims [0, 0] is not a permutation of [0, 2)}}
  %0 = "lazy.permute"(%x) {dims = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @permute_result(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'lazy.permute' op result 'result' has type tensor<2x3xf32>, but the operands and attributes give tensor<3x2xf32>}}
  %0 = "lazy.permute"(%x) {dims = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @slice_limit(%x: tensor<7xf32>) -> tensor<7xf32> {
  // expected-error @+1 {{'lazy.slice' op dim 0 needs 0 <= start <= limit <= 7, got start 1 and limit 8}}
  %0 = "lazy.slice"(%x) {start = array<i64: 1>, limit = array<i64: 8>, strides = array<i64: 1>} : (tensor<7xf32>) -> tensor<7xf32>
  return %0 : tensor<7xf32>
}

// -----

func.func @dynamic_slice_float_index(%x: tensor<4x5xf32>, %i: tensor<f32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'lazy.dynamic_slice' op start_indices[0] must have int element type, got f32}}
  %0 = "lazy.dynamic_slice"(%x, %i, %i) {operandSegmentSizes = array<i32: 1, 2>, sizes = array<i64: 2, 2>} : (tensor<4x5xf32>, tensor<f32>, tensor<f32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @dynamic_slice_index_count(%x: tensor<4x5xf32>, %i: tensor<i32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'lazy.dynamic_slice' op start_indices must have 2 entries (one per dimension), got 1}}
  %0 = "lazy.dynamic_slice"(%x, %i) {operandSegmentSizes = array<i32: 1, 1>, sizes = array<i64: 2, 2>} : (tensor<4x5xf32>, tensor<i32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @dynamic_update_slice_big(%x: tensor<4x5xf32>, %u: tensor<1x6xf32>, %i: tensor<i32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'lazy.dynamic_update_slice' op update dim 1 of size 6 is larger than the operand's (5)}}
  %0 = "lazy.dynamic_update_slice"(%x, %u, %i, %i) {operandSegmentSizes = array<i32: 1, 1, 2>} : (tensor<4x5xf32>, tensor<1x6xf32>, tensor<i32>, tensor<i32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @concatenate_dim(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'lazy.concatenate' op dim 2 out of range for rank 2}}
  %0 = "lazy.concatenate"(%x, %x) {dim = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @pad_value_type(%x: tensor<3xf32>, %v: tensor<i32>) -> tensor<4xf32> {
  // expected-error @+1 {{'lazy.pad' op padding_value must have the operand's element type f32, got i32}}
  %0 = "lazy.pad"(%x, %v) {low = array<i64: 1>, high = array<i64: 0>, interior = array<i64: 0>} : (tensor<3xf32>, tensor<i32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @pad_overcrop(%x: tensor<3xf32>, %v: tensor<f32>) -> tensor<0xf32> {
  // expected-error @+1 {{'lazy.pad' op padding crops dim 0 to a negative size (-1)}}
  %0 = "lazy.pad"(%x, %v) {low = array<i64: -2>, high = array<i64: -2>, interior = array<i64: 0>} : (tensor<3xf32>, tensor<f32>) -> tensor<0xf32>
  return %0 : tensor<0xf32>
}

// -----

func.func @reverse_repeat(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'lazy.reverse' op dims [1, 1] has repeated dimensions}}
  %0 = "lazy.reverse"(%x) {dims = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
