// Indexing ops lower one to one: lazy.gather to stablehlo.gather with the same
// dimension numbers, lazy.scatter to stablehlo.scatter whose body is built from
// the `mode` attribute.
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s

// np.take(x, idx, axis=0): one coordinate per index, implicit index vector dim.
// CHECK-LABEL: func.func @take_rows
// CHECK: "stablehlo.gather"(%arg0, %arg1)
// CHECK-SAME: dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>
// CHECK-SAME: indices_are_sorted = false, slice_sizes = array<i64: 1, 3>
// CHECK-SAME: (tensor<5x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
// CHECK-NOT: lazy.
func.func @take_rows(%x: tensor<5x3xf32>, %idx: tensor<4xi64>) -> tensor<4x3xf32> {
  %0 = "lazy.gather"(%x, %idx) {offset_dims = array<i64: 1>, collapsed_slice_dims = array<i64: 0>,
      operand_batching_dims = array<i64>, start_indices_batching_dims = array<i64>,
      start_index_map = array<i64: 0>, index_vector_dim = 1 : i64, slice_sizes = array<i64: 1, 3>,
      indices_are_sorted = false} : (tensor<5x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// torch.gather(x, 1, idx): batching dims carry over, and so does indices_are_sorted.
// CHECK-LABEL: func.func @per_element
// CHECK: "stablehlo.gather"
// CHECK-SAME: #stablehlo.gather<collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2>
// CHECK-SAME: indices_are_sorted = true, slice_sizes = array<i64: 1, 1>
func.func @per_element(%x: tensor<4x7xf32>, %idx: tensor<4x5xi32>) -> tensor<4x5xf32> {
  %0 = "lazy.gather"(%x, %idx) {offset_dims = array<i64>, collapsed_slice_dims = array<i64: 1>,
      operand_batching_dims = array<i64: 0>, start_indices_batching_dims = array<i64: 0>,
      start_index_map = array<i64: 1>, index_vector_dim = 2 : i64, slice_sizes = array<i64: 1, 1>,
      indices_are_sorted = true} : (tensor<4x7xf32>, tensor<4x5xi32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

// np.add.at(x, idx, u): mode "add" becomes an add in the scatter body.
// CHECK-LABEL: func.func @scatter_add
// CHECK: %[[S:.*]] = "stablehlo.scatter"(%arg0, %arg1, %arg2)
// CHECK-SAME: scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>
// CHECK: ^bb0(%[[OLD:.*]]: tensor<f32>, %[[NEW:.*]]: tensor<f32>):
// CHECK-NEXT: %[[SUM:.*]] = stablehlo.add %[[OLD]], %[[NEW]] : tensor<f32>
// CHECK-NEXT: stablehlo.return %[[SUM]] : tensor<f32>
// CHECK: (tensor<6x3xf32>, tensor<7x1xi64>, tensor<7x3xf32>) -> tensor<6x3xf32>
// CHECK: return %[[S]]
func.func @scatter_add(%x: tensor<6x3xf32>, %idx: tensor<7x1xi64>, %u: tensor<7x3xf32>) -> tensor<6x3xf32> {
  %0 = "lazy.scatter"(%x, %idx, %u) {update_window_dims = array<i64: 1>, inserted_window_dims = array<i64: 0>,
      input_batching_dims = array<i64>, scatter_indices_batching_dims = array<i64>,
      scatter_dims_to_operand_dims = array<i64: 0>, index_vector_dim = 1 : i64, mode = "add"}
      : (tensor<6x3xf32>, tensor<7x1xi64>, tensor<7x3xf32>) -> tensor<6x3xf32>
  return %0 : tensor<6x3xf32>
}

// -----

// x[idx] = u: mode "replace" yields the update itself.
// CHECK-LABEL: func.func @scatter_replace
// CHECK: "stablehlo.scatter"
// CHECK: ^bb0(%{{.*}}: tensor<i32>, %[[NEW:.*]]: tensor<i32>):
// CHECK-NEXT: stablehlo.return %[[NEW]] : tensor<i32>
func.func @scatter_replace(%x: tensor<6xi32>, %idx: tensor<2x1xi32>, %u: tensor<2xi32>) -> tensor<6xi32> {
  %0 = "lazy.scatter"(%x, %idx, %u) {update_window_dims = array<i64>, inserted_window_dims = array<i64: 0>,
      input_batching_dims = array<i64>, scatter_indices_batching_dims = array<i64>,
      scatter_dims_to_operand_dims = array<i64: 0>, index_vector_dim = 1 : i64, mode = "replace"}
      : (tensor<6xi32>, tensor<2x1xi32>, tensor<2xi32>) -> tensor<6xi32>
  return %0 : tensor<6xi32>
}

// -----

// torch.scatter_reduce(..., "amax") along dim 1: batching dims, and a maximum in the body.
// CHECK-LABEL: func.func @scatter_max
// CHECK: "stablehlo.scatter"
// CHECK-SAME: #stablehlo.scatter<inserted_window_dims = [1], input_batching_dims = [0], scatter_indices_batching_dims = [0], scatter_dims_to_operand_dims = [1], index_vector_dim = 2>
// CHECK: stablehlo.maximum
func.func @scatter_max(%x: tensor<3x6xf32>, %idx: tensor<3x4xi64>, %u: tensor<3x4xf32>) -> tensor<3x6xf32> {
  %0 = "lazy.scatter"(%x, %idx, %u) {update_window_dims = array<i64>, inserted_window_dims = array<i64: 1>,
      input_batching_dims = array<i64: 0>, scatter_indices_batching_dims = array<i64: 0>,
      scatter_dims_to_operand_dims = array<i64: 1>, index_vector_dim = 2 : i64, mode = "max"}
      : (tensor<3x6xf32>, tensor<3x4xi64>, tensor<3x4xf32>) -> tensor<3x6xf32>
  return %0 : tensor<3x6xf32>
}

// -----

// Modes "mul" and "min" pick multiply and minimum.
// CHECK-LABEL: func.func @scatter_mul_min
// CHECK: "stablehlo.scatter"
// CHECK: stablehlo.multiply
// CHECK: "stablehlo.scatter"
// CHECK: stablehlo.minimum
func.func @scatter_mul_min(%x: tensor<6xf32>, %idx: tensor<2x1xi64>, %u: tensor<2xf32>) -> tensor<6xf32> {
  %0 = "lazy.scatter"(%x, %idx, %u) {update_window_dims = array<i64>, inserted_window_dims = array<i64: 0>,
      input_batching_dims = array<i64>, scatter_indices_batching_dims = array<i64>,
      scatter_dims_to_operand_dims = array<i64: 0>, index_vector_dim = 1 : i64, mode = "mul"}
      : (tensor<6xf32>, tensor<2x1xi64>, tensor<2xf32>) -> tensor<6xf32>
  %1 = "lazy.scatter"(%0, %idx, %u) {update_window_dims = array<i64>, inserted_window_dims = array<i64: 0>,
      input_batching_dims = array<i64>, scatter_indices_batching_dims = array<i64>,
      scatter_dims_to_operand_dims = array<i64: 0>, index_vector_dim = 1 : i64, mode = "min"}
      : (tensor<6xf32>, tensor<2x1xi64>, tensor<2xf32>) -> tensor<6xf32>
  return %1 : tensor<6xf32>
}
