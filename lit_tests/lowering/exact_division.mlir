// A float divide by a broadcast: XLA's algebraic simplifier turns
// divide(a, broadcast(b)) into multiply(a, broadcast(1/b)), up to an ulp off
// the correctly rounded quotient eager CPU torch and NumPy give. With
// lazy-to-stablehlo{division=exact} (what the runtime compiles for CPU) such a
// divide of float16/bfloat16/float32 goes through float64, where the reciprocal's
// error is too small to change the rounding back to float32.
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo=division=exact %s | filecheck %s --check-prefix=EXACT
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s --check-prefix=XLA
// RUN: lazy-opt --split-input-file --pass-pipeline='builtin.module(lazy-to-stablehlo{division=xla})' %s | filecheck %s --check-prefix=XLA

// A number (or a 0-d tensor) as the divisor.
// EXACT-LABEL: func.func @by_scalar
// EXACT: %[[B:.*]] = stablehlo.broadcast_in_dim %arg1, dims = []
// EXACT: %[[A64:.*]] = stablehlo.convert %arg0 : (tensor<2x3xf32>) -> tensor<2x3xf64>
// EXACT: %[[B64:.*]] = stablehlo.convert %[[B]] : (tensor<2x3xf32>) -> tensor<2x3xf64>
// EXACT: %[[Q:.*]] = stablehlo.divide %[[A64]], %[[B64]] : tensor<2x3xf64>
// EXACT: %[[R:.*]] = stablehlo.convert %[[Q]] : (tensor<2x3xf64>) -> tensor<2x3xf32>
// EXACT: return %[[R]]
// XLA-LABEL: func.func @by_scalar
// XLA: stablehlo.divide %arg0, %{{.*}} : tensor<2x3xf32>
// XLA-NOT: f64
func.func @by_scalar(%a: tensor<2x3xf32>, %b: tensor<f32>) -> tensor<2x3xf32> {
  %0 = "lazy.broadcast_in_dim"(%b) {dims = array<i64>} : (tensor<f32>) -> tensor<2x3xf32>
  %1 = "lazy.div"(%a, %0) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----

// A row's sum kept as a column (x / x.sum(-1, keepdim=True)), in bfloat16.
// EXACT-LABEL: func.func @by_row_sums
// EXACT: stablehlo.divide %{{.*}}, %{{.*}} : tensor<2x3xf64>
// EXACT: stablehlo.convert %{{.*}} : (tensor<2x3xf64>) -> tensor<2x3xbf16>
// XLA-LABEL: func.func @by_row_sums
// XLA: stablehlo.divide %arg0, %{{.*}} : tensor<2x3xbf16>
// XLA-NOT: f64
func.func @by_row_sums(%a: tensor<2x3xbf16>, %s: tensor<2xbf16>) -> tensor<2x3xbf16> {
  %0 = "lazy.broadcast_in_dim"(%s) {dims = array<i64: 0>} : (tensor<2xbf16>) -> tensor<2x3xbf16>
  %1 = "lazy.div"(%a, %0) : (tensor<2x3xbf16>, tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %1 : tensor<2x3xbf16>
}

// -----

// A splat constant: a mean's count.
// EXACT-LABEL: func.func @by_count
// EXACT: stablehlo.divide %{{.*}}, %{{.*}} : tensor<4xf64>
// XLA-LABEL: func.func @by_count
// XLA: stablehlo.divide %arg0, %{{.*}} : tensor<4xf32>
// XLA-NOT: f64
func.func @by_count(%s: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.constant"() {value = dense<3.000000e+00> : tensor<4xf32>} : () -> tensor<4xf32>
  %1 = "lazy.div"(%s, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Elementwise divisors XLA divides by as they are, and a remainder is no
// quotient. (A float64 divide by a broadcast keeps its divide here and gains a
// remainder correction after it: exact_float64_division.mlir.)
// EXACT-LABEL: func.func @left_alone
// XLA-LABEL: func.func @left_alone
// EXACT: stablehlo.divide %arg0, %arg1 : tensor<2x3xf32>
// EXACT: stablehlo.divide %arg2, %{{.*}} : tensor<2x3xf64>
// EXACT: stablehlo.remainder %arg0, %{{.*}} : tensor<2x3xf32>
// EXACT-NOT: stablehlo.convert
func.func @left_alone(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %c: tensor<2x3xf64>, %d: tensor<f64>, %e: tensor<f32>)
    -> (tensor<2x3xf32>, tensor<2x3xf64>, tensor<2x3xf32>) {
  %0 = "lazy.div"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "lazy.broadcast_in_dim"(%d) {dims = array<i64>} : (tensor<f64>) -> tensor<2x3xf64>
  %2 = "lazy.div"(%c, %1) : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
  %3 = "lazy.broadcast_in_dim"(%e) {dims = array<i64>} : (tensor<f32>) -> tensor<2x3xf32>
  %4 = "lazy.rem"(%a, %3) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0, %2, %4 : tensor<2x3xf32>, tensor<2x3xf64>, tensor<2x3xf32>
}
