// A float divide by a broadcast: XLA's algebraic simplifier turns
// divide(a, broadcast(b)) into multiply(a, broadcast(1/b)), up to an ulp off
// the correctly rounded quotient eager CPU torch and NumPy give. With
// lazy-to-stablehlo{division=exact} (what the runtime compiles for CPU) the
// divisor's bits are xor'ed with whether an iota over the whole shape is NaN
// (never), which XLA cannot see through: it divides element by element,
// correctly rounded. Not the dividend's NaN-ness: XLA folds that for a constant
// dividend (integer linspace's step). A one-element divide has no iota to use
// (XLA makes it 0) and takes the dividend's. float16/bfloat16 divide in float32.
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo=division=exact %s | filecheck %s --check-prefix=EXACT
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s --check-prefix=XLA
// RUN: lazy-opt --split-input-file --pass-pipeline='builtin.module(lazy-to-stablehlo{division=xla})' %s | filecheck %s --check-prefix=XLA

// A number (or a 0-d tensor) as the divisor.
// EXACT-LABEL: func.func @by_scalar
// EXACT: %[[B:.*]] = stablehlo.broadcast_in_dim %arg1, dims = []
// EXACT: %[[I:.*]] = stablehlo.iota dim = 0 : tensor<6xf32>
// EXACT: %[[FLAT:.*]] = stablehlo.reshape %[[I]] : (tensor<6xf32>) -> tensor<2x3xf32>
// EXACT: %[[NAN:.*]] = stablehlo.compare NE, %[[FLAT]], %[[FLAT]]
// EXACT: %[[BITS:.*]] = stablehlo.bitcast_convert %[[B]] : (tensor<2x3xf32>) -> tensor<2x3xi32>
// EXACT: %[[FLIP:.*]] = stablehlo.convert %[[NAN]] : (tensor<2x3xi1>) -> tensor<2x3xi32>
// EXACT: %[[X:.*]] = stablehlo.xor %[[BITS]], %[[FLIP]] : tensor<2x3xi32>
// EXACT: %[[D:.*]] = stablehlo.bitcast_convert %[[X]] : (tensor<2x3xi32>) -> tensor<2x3xf32>
// EXACT: %[[Q:.*]] = stablehlo.divide %arg0, %[[D]] : tensor<2x3xf32>
// EXACT-NEXT: return %[[Q]]
// EXACT-NOT: f64
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
// EXACT: %[[A:.*]] = stablehlo.convert %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xf32>
// EXACT: stablehlo.xor
// EXACT: %[[Q:.*]] = stablehlo.divide %[[A]], %{{.*}} : tensor<2x3xf32>
// EXACT: stablehlo.convert %[[Q]] : (tensor<2x3xf32>) -> tensor<2x3xbf16>
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
// EXACT: stablehlo.xor
// EXACT: stablehlo.divide %arg0, %{{.*}} : tensor<4xf32>
// XLA-LABEL: func.func @by_count
// XLA: stablehlo.divide %arg0, %{{.*}} : tensor<4xf32>
// XLA-NOT: f64
func.func @by_count(%s: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.constant"() {value = dense<3.000000e+00> : tensor<4xf32>} : () -> tensor<4xf32>
  %1 = "lazy.div"(%s, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// A constant dividend (integer linspace's step, (end - start) / (n - 1)): the
// flag is the iota's, which XLA cannot fold; one element: the dividend's.
// EXACT-LABEL: func.func @constant_dividend
// EXACT: %[[C:.*]] = stablehlo.constant dense<-4.900000e+01> : tensor<50xf64>
// EXACT: %[[I:.*]] = stablehlo.iota dim = 0 : tensor<50xf64>
// EXACT: stablehlo.compare NE, %[[I]], %[[I]]
// EXACT-NOT: stablehlo.compare NE, %[[C]], %[[C]]
// EXACT: stablehlo.divide %[[C]], %{{.*}} : tensor<50xf64>
// EXACT: stablehlo.compare NE, %arg1, %arg1 : (tensor<1xf32>, tensor<1xf32>)
// EXACT: stablehlo.divide %arg1, %{{.*}} : tensor<1xf32>
// XLA-LABEL: func.func @constant_dividend
// XLA: stablehlo.divide %{{.*}}, %{{.*}} : tensor<50xf64>
// XLA-NOT: stablehlo.xor
func.func @constant_dividend(%n: tensor<f64>, %a: tensor<1xf32>, %b: tensor<f32>) -> (tensor<50xf64>, tensor<1xf32>) {
  %0 = "lazy.constant"() {value = dense<-4.900000e+01> : tensor<50xf64>} : () -> tensor<50xf64>
  %1 = "lazy.broadcast_in_dim"(%n) {dims = array<i64>} : (tensor<f64>) -> tensor<50xf64>
  %2 = "lazy.div"(%0, %1) : (tensor<50xf64>, tensor<50xf64>) -> tensor<50xf64>
  %3 = "lazy.broadcast_in_dim"(%b) {dims = array<i64>} : (tensor<f32>) -> tensor<1xf32>
  %4 = "lazy.div"(%a, %3) : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  return %2, %4 : tensor<50xf64>, tensor<1xf32>
}

// -----

// Elementwise divisors XLA divides by as they are, and a remainder is no
// quotient. (A float64 divide by a broadcast takes the same xor'ed divisor:
// exact_float64_division.mlir.)
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
