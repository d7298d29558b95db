// The verifiers of the reduction and linalg ops reject malformed IR with the
// broken rule in the diagnostic.
// Each case expects its error at the op (expected-error, checked by --verify-diagnostics).
// RUN: lazy-opt --split-input-file --verify-diagnostics %s

func.func @dims_out_of_range(%x: tensor<2x3xf32>) -> tensor<f32> {
  // expected-error @+1 {{'lazy.reduce_sum' op dims [0, 2] out of range for rank 2}}
  %0 = "lazy.reduce_sum"(%x) {dims = array<i64: 0, 2>} : (tensor<2x3xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Reduced dims are removed, not kept as size 1.
func.func @keepdims_result(%x: tensor<2x3xf32>) -> tensor<2x1xf32> {
  // expected-error @+1 {{'lazy.reduce_max' op result 'result' has type tensor<2x1xf32>, but the operands and attributes give tensor<2xf32>}}
  %0 = "lazy.reduce_max"(%x) {dims = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// -----

func.func @bool_prod(%x: tensor<4xi1>) -> tensor<i1> {
  // expected-error @+1 {{'lazy.reduce_prod' op operand must have numeric or complex element type, got i1}}
  %0 = "lazy.reduce_prod"(%x) {dims = array<i64: 0>} : (tensor<4xi1>) -> tensor<i1>
  return %0 : tensor<i1>
}

// -----

func.func @float_index(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'lazy.argmax' op result must have int element type, got f32}}
  %0 = "lazy.argmax"(%x) {dim = 1} : (tensor<2x3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @dim_is_scalar(%x: tensor<2x3xf32>) -> tensor<2xi64> {
  // expected-error @+1 {{'lazy.argmin' op attribute 'dim': expected a 64-bit integer attribute, got array<i64: 1>}}
  %0 = "lazy.argmin"(%x) {dim = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

func.func @contract_mismatch(%a: tensor<3x4xf32>, %b: tensor<5x6xf32>) -> tensor<3x6xf32> {
  // expected-error @+1 {{'lazy.dot_general' op contract dims must have equal sizes: lhs dim 1 is 4, rhs dim 0 is 5}}
  %0 = "lazy.dot_general"(%a, %b) {lhs_batch = array<i64>, rhs_batch = array<i64>, lhs_contract = array<i64: 1>, rhs_contract = array<i64: 0>} : (tensor<3x4xf32>, tensor<5x6xf32>) -> tensor<3x6xf32>
  return %0 : tensor<3x6xf32>
}

// -----

func.func @mixed_dtypes(%a: tensor<3x4xf32>, %b: tensor<4x6xf16>) -> tensor<3x6xf32> {
  // expected-error @+1 {{'lazy.dot_general' op lhs and rhs must have the same element type, got f32 and f16}}
  %0 = "lazy.dot_general"(%a, %b) {lhs_batch = array<i64>, rhs_batch = array<i64>, lhs_contract = array<i64: 1>, rhs_contract = array<i64: 0>} : (tensor<3x4xf32>, tensor<4x6xf16>) -> tensor<3x6xf32>
  return %0 : tensor<3x6xf32>
}

// -----

func.func @conv_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<6x3x3x3xf32>) -> tensor<1x6x6x6xf32> {
  // expected-error @+1 {{'lazy.convolution' op input channels (4) must equal kernel input channels (3) times groups (1)}}
  %0 = "lazy.convolution"(%x, %w) {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1} : (tensor<1x4x8x8xf32>, tensor<6x3x3x3xf32>) -> tensor<1x6x6x6xf32>
  return %0 : tensor<1x6x6x6xf32>
}

// -----

func.func @conv_padding_pairs(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) -> tensor<1x6x8x8xf32> {
  // expected-error @+1 {{'lazy.convolution' op padding (low, high per spatial dim) must have 4 entries (one per dimension), got 2}}
  %0 = "lazy.convolution"(%x, %w) {strides = array<i64: 1, 1>, padding = array<i64: 1, 1>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1} : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x8x8xf32>
  return %0 : tensor<1x6x8x8xf32>
}

// -----

// Output size is floor((in + pad_lo + pad_hi - dilated_kernel) / stride) + 1.
func.func @conv_output_size(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) -> tensor<1x6x4x4xf32> {
  // expected-error @+1 {{'lazy.convolution' op result 'result' has type tensor<1x6x4x4xf32>, but the operands and attributes give tensor<1x6x3x3xf32>}}
  %0 = "lazy.convolution"(%x, %w) {strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1} : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x4x4xf32>
  return %0 : tensor<1x6x4x4xf32>
}

// -----

func.func @sort_of_a_scalar(%x: tensor<f32>) -> (tensor<f32>, tensor<i64>) {
  // expected-error @+1 {{sort needs an operand of rank 1 or more}}
  %v, %i = "lazy.sort"(%x) {dim = 0 : i64, descending = false} : (tensor<f32>) -> (tensor<f32>, tensor<i64>)
  return %v, %i : tensor<f32>, tensor<i64>
}

// -----

func.func @sort_indices_of_floats(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  // expected-error @+1 {{indices}}
  %v, %i = "lazy.sort"(%x) {dim = 0 : i64, descending = false} : (tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  return %v, %i : tensor<3xf32>, tensor<3xf32>
}
