// The factorizations lower, on the CPU (a module without lazy.platform), to
// the LAPACK FFI handlers jaxlib registers with XLA, as jax 0.10 calls them:
// column-major layouts for the batch of matrices, the matrix aliased to the
// first result, the settings in mhlo.backend_config. On any other platform
// (the runtime sets lazy.platform for it) cholesky and triangular_solve are
// StableHLO's own ops; the loop that turns pivots into a permutation is
// StableHLO everywhere.
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s

// CHECK-LABEL: func.func @cholesky_cpu
// CHECK: %[[F:.*]]:2 = stablehlo.custom_call @lapack_spotrf_ffi(%arg0) {backend_config = "", mhlo.backend_config = {uplo = 76 : ui8}, mhlo.frontend_attributes = {num_batch_dims = "1"}, operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<0> : tensor<1xindex>]}
// CHECK: %[[LOWER:.*]] = stablehlo.compare GE
// CHECK: %[[L:.*]] = stablehlo.select %[[LOWER]], %[[F]]#0
// CHECK: return %[[L]], %[[F]]#1
func.func @cholesky_cpu(%x: tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2xi32>) {
  %0:2 = "lazy.cholesky"(%x) : (tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2xi32>)
  return %0#0, %0#1 : tensor<2x4x4xf32>, tensor<2xi32>
}

// -----

// CHECK-LABEL: func.func @cholesky_gpu
// CHECK-NOT: custom_call
// CHECK: %[[F:.*]] = stablehlo.cholesky %arg0, lower = true : tensor<2x4x4xf32>
// CHECK: %[[NAN:.*]] = stablehlo.compare NE, %[[F]], %[[F]]
// CHECK: stablehlo.reduce(%[[NAN]] init: %{{.*}}) applies stablehlo.or across dimensions = [1, 2]
module attributes {lazy.platform = "cuda"} {
func.func @cholesky_gpu(%x: tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2xi32>) {
  %0:2 = "lazy.cholesky"(%x) : (tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2xi32>)
  return %0#0, %0#1 : tensor<2x4x4xf32>, tensor<2xi32>
}
}

// -----

// LAPACK's 1-based pivots become 0-based; a matrix alone has no batch.
// CHECK-LABEL: func.func @lu
// CHECK: %[[F:.*]]:3 = stablehlo.custom_call @lapack_dgetrf_ffi(%arg0) {{.*}}num_batch_dims = "0"{{.*}}operand_layouts = [dense<[0, 1]> : tensor<2xindex>]{{.*}}result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>]
// CHECK: stablehlo.subtract %[[F]]#1
func.func @lu(%x: tensor<4x3xf64>) -> (tensor<4x3xf64>, tensor<3xi32>, tensor<i32>) {
  %0:3 = "lazy.lu"(%x) : (tensor<4x3xf64>) -> (tensor<4x3xf64>, tensor<3xi32>, tensor<i32>)
  return %0#0, %0#1, %0#2 : tensor<4x3xf64>, tensor<3xi32>, tensor<i32>
}

// -----

// CHECK-LABEL: func.func @permutation
// CHECK: stablehlo.while
// CHECK: stablehlo.dynamic_slice
func.func @permutation(%p: tensor<2x3xi32>) -> tensor<2x4xi32> {
  %0 = "lazy.pivots_to_permutation"(%p) {size = 4 : i64} : (tensor<2x3xi32>) -> tensor<2x4xi32>
  return %0 : tensor<2x4xi32>
}

// -----

// CHECK-LABEL: func.func @eigh_and_svd
// CHECK: stablehlo.custom_call @lapack_cheevd_ffi(%arg0) {backend_config = "", mhlo.backend_config = {mode = 86 : ui8, uplo = 85 : ui8}
// CHECK: stablehlo.custom_call @lapack_dgesdd_ffi(%arg1) {backend_config = "", mhlo.backend_config = {mode = 83 : ui8}
// CHECK-SAME: -> (tensor<3x5xf64>, tensor<3xf64>, tensor<3x3xf64>, tensor<3x5xf64>, tensor<i32>)
func.func @eigh_and_svd(%h: tensor<2x3x3xcomplex<f32>>, %x: tensor<3x5xf64>) -> (tensor<2x3xf32>, tensor<3xf64>) {
  %0:3 = "lazy.eigh"(%h) {lower = false} : (tensor<2x3x3xcomplex<f32>>) -> (tensor<2x3x3xcomplex<f32>>, tensor<2x3xf32>, tensor<2xi32>)
  %1:4 = "lazy.svd"(%x) {full_matrices = false} : (tensor<3x5xf64>) -> (tensor<3xf64>, tensor<3x3xf64>, tensor<3x5xf64>, tensor<i32>)
  return %0#1, %1#0 : tensor<2x3xf32>, tensor<3xf64>
}

// -----

// CHECK-LABEL: func.func @qr_and_solve
// CHECK: stablehlo.custom_call @lapack_sgeqrf_ffi
// CHECK: stablehlo.custom_call @lapack_sorgqr_ffi{{.*}}output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]
// CHECK: "stablehlo.triangular_solve"(%{{.*}}, %arg1) <{left_side = true, lower = true, transpose_a = #stablehlo<transpose TRANSPOSE>, unit_diagonal = false}>
func.func @qr_and_solve(%x: tensor<5x3xf32>, %b: tensor<3x2xf32>) -> (tensor<5x3xf32>, tensor<3x2xf32>) {
  %0:2 = "lazy.geqrf"(%x) : (tensor<5x3xf32>) -> (tensor<5x3xf32>, tensor<3xf32>)
  %1 = "lazy.householder_product"(%0#0, %0#1) : (tensor<5x3xf32>, tensor<3xf32>) -> tensor<5x3xf32>
  %r = "lazy.slice"(%0#0) {start = array<i64: 0, 0>, limit = array<i64: 3, 3>, strides = array<i64: 1, 1>} : (tensor<5x3xf32>) -> tensor<3x3xf32>
  %2 = "lazy.triangular_solve"(%r, %b) {left_side = true, lower = true, transpose_a = "TRANSPOSE", unit_diagonal = false} : (tensor<3x3xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  return %1, %2 : tensor<5x3xf32>, tensor<3x2xf32>
}
