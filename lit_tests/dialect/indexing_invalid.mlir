// The verifiers of gather, scatter and rng_bit_generator run their shape rules:
// malformed dimension numbers, update shapes or generator states are rejected
// with the broken rule (numbered as in the StableHLO spec where it has one).
// Each case expects its error at the op (expected-error, checked by --verify-diagnostics).
// RUN: lazy-opt --split-input-file --verify-diagnostics %s

// A collapsed dimension must be sliced to size <= 1 (gather C9).
func.func @gather_collapsed_wide(%x: tensor<5x3xf32>, %idx: tensor<4x1xi64>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'lazy.gather' op slice_sizes[0] = 2 must be <= 1: dim 0 is collapsed or batching}}
  %0 = "lazy.gather"(%x, %idx) {offset_dims = array<i64: 1>, collapsed_slice_dims = array<i64: 0>,
      operand_batching_dims = array<i64>, start_indices_batching_dims = array<i64>,
      start_index_map = array<i64: 0>, index_vector_dim = 1 : i64, slice_sizes = array<i64: 2, 3>,
      indices_are_sorted = false} : (tensor<5x3xf32>, tensor<4x1xi64>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// The index vector holds one coordinate, so start_index_map has one entry (gather C3).
func.func @gather_index_map(%x: tensor<5x3xf32>, %idx: tensor<4x1xi64>) -> tensor<4xf32> {
  // expected-error @+1 {{'lazy.gather' op start_index_map must have the index vector size = 1 entries, got 2}}
  %0 = "lazy.gather"(%x, %idx) {offset_dims = array<i64>, collapsed_slice_dims = array<i64: 0, 1>,
      operand_batching_dims = array<i64>, start_indices_batching_dims = array<i64>,
      start_index_map = array<i64: 0, 1>, index_vector_dim = 1 : i64, slice_sizes = array<i64: 1, 1>,
      indices_are_sorted = false} : (tensor<5x3xf32>, tensor<4x1xi64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// The declared result shape must be the one the dimension numbers give (gather C22).
func.func @gather_result(%x: tensor<5x3xf32>, %idx: tensor<4xi64>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'lazy.gather' op result 'result' has type tensor<3x4xf32>, but the operands and attributes give tensor<4x3xf32>}}
  %0 = "lazy.gather"(%x, %idx) {offset_dims = array<i64: 1>, collapsed_slice_dims = array<i64: 0>,
      operand_batching_dims = array<i64>, start_indices_batching_dims = array<i64>,
      start_index_map = array<i64: 0>, index_vector_dim = 1 : i64, slice_sizes = array<i64: 1, 3>,
      indices_are_sorted = false} : (tensor<5x3xf32>, tensor<4xi64>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// Indices are integers.
func.func @gather_float_indices(%x: tensor<5x3xf32>, %idx: tensor<4xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'lazy.gather' op start_indices must have int element type, got f32}}
  %0 = "lazy.gather"(%x, %idx) {offset_dims = array<i64: 1>, collapsed_slice_dims = array<i64: 0>,
      operand_batching_dims = array<i64>, start_indices_batching_dims = array<i64>,
      start_index_map = array<i64: 0>, index_vector_dim = 1 : i64, slice_sizes = array<i64: 1, 3>,
      indices_are_sorted = false} : (tensor<5x3xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// One update row per index (scatter C4).
func.func @scatter_update_count(%x: tensor<5x3xf32>, %idx: tensor<4x1xi64>, %u: tensor<3x3xf32>) -> tensor<5x3xf32> {
  // expected-error @+1 {{'lazy.scatter' op updates dim 0 is 3, but scatter_indices give 4}}
  %0 = "lazy.scatter"(%x, %idx, %u) {update_window_dims = array<i64: 1>, inserted_window_dims = array<i64: 0>,
      input_batching_dims = array<i64>, scatter_indices_batching_dims = array<i64>,
      scatter_dims_to_operand_dims = array<i64: 0>, index_vector_dim = 1 : i64, mode = "add"}
      : (tensor<5x3xf32>, tensor<4x1xi64>, tensor<3x3xf32>) -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// -----

// The update computation is one of a fixed set.
func.func @scatter_mode(%x: tensor<5xf32>, %idx: tensor<2x1xi64>, %u: tensor<2xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{'lazy.scatter' op mode must be one of replace, add, mul, max, min, got 'sub'}}
  %0 = "lazy.scatter"(%x, %idx, %u) {update_window_dims = array<i64>, inserted_window_dims = array<i64: 0>,
      input_batching_dims = array<i64>, scatter_indices_batching_dims = array<i64>,
      scatter_dims_to_operand_dims = array<i64: 0>, index_vector_dim = 1 : i64, mode = "sub"}
      : (tensor<5xf32>, tensor<2x1xi64>, tensor<2xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

// Batching dimensions of operand and indices pair up with equal sizes (scatter C18).
func.func @scatter_batching(%x: tensor<3x6xf32>, %idx: tensor<2x4xi64>, %u: tensor<2x4xf32>) -> tensor<3x6xf32> {
  // expected-error @+1 {{'lazy.scatter' op batching dimension sizes differ: operand dim 0 is 3, scatter_indices dim 0 is 2}}
  %0 = "lazy.scatter"(%x, %idx, %u) {update_window_dims = array<i64>, inserted_window_dims = array<i64: 1>,
      input_batching_dims = array<i64: 0>, scatter_indices_batching_dims = array<i64: 0>,
      scatter_dims_to_operand_dims = array<i64: 1>, index_vector_dim = 2 : i64, mode = "max"}
      : (tensor<3x6xf32>, tensor<2x4xi64>, tensor<2x4xf32>) -> tensor<3x6xf32>
  return %0 : tensor<3x6xf32>
}

// -----

// Threefry's state is exactly two u64 words.
func.func @rng_state(%s: tensor<3xui64>) -> tensor<4xui32> {
  // expected-error @+1 {{'lazy.rng_bit_generator' op state must be tensor<2xui64> for algorithm 'three_fry', got tensor<3xui64>}}
  %0:2 = "lazy.rng_bit_generator"(%s) {algorithm = "three_fry"} : (tensor<3xui64>) -> (tensor<3xui64>, tensor<4xui32>)
  return %0#1 : tensor<4xui32>
}

// -----

// Bits are unsigned integers; floats are made from them by the frontend.
func.func @rng_float_bits(%s: tensor<2xui64>) -> tensor<4xf32> {
  // expected-error @+1 {{'lazy.rng_bit_generator' op bits must have unsigned integer element type, got f32}}
  %0:2 = "lazy.rng_bit_generator"(%s) {algorithm = "philox"} : (tensor<2xui64>) -> (tensor<2xui64>, tensor<4xf32>)
  return %0#1 : tensor<4xf32>
}

// -----

// The new state has the type of the old one.
func.func @rng_new_state(%s: tensor<2xui64>) -> tensor<4xui32> {
  // expected-error @+1 {{'lazy.rng_bit_generator' op result 'new_state' has type tensor<3xui64>, but the operands and attributes give tensor<2xui64>}}
  %0:2 = "lazy.rng_bit_generator"(%s) {algorithm = "philox"} : (tensor<2xui64>) -> (tensor<3xui64>, tensor<4xui32>)
  return %0#1 : tensor<4xui32>
}
