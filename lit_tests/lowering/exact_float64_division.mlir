// A float64 divide by a broadcast under lazy-to-stablehlo{division=exact} (what
// the runtime compiles for CPU): the divisor's bits are xor'ed with whether an
// iota over the shape is NaN (never), so that XLA divides (correctly rounded) instead of
// multiplying by the reciprocal (up to an ulp off). Without the option, and for
// elementwise divisors, the divide is left as it is.
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo=division=exact %s | filecheck %s --check-prefix=EXACT
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s --check-prefix=XLA

// EXACT-LABEL: func.func @by_scalar
// EXACT: %[[B:.*]] = stablehlo.broadcast_in_dim %arg1
// EXACT: %[[I:.*]] = stablehlo.iota dim = 0 : tensor<4xf64>
// EXACT: %[[NAN:.*]] = stablehlo.compare NE, %[[I]], %[[I]]
// EXACT: %[[BITS:.*]] = stablehlo.bitcast_convert %[[B]] : (tensor<4xf64>) -> tensor<4xi64>
// EXACT: %[[FLIP:.*]] = stablehlo.convert %[[NAN]] : (tensor<4xi1>) -> tensor<4xi64>
// EXACT: %[[X:.*]] = stablehlo.xor %[[BITS]], %[[FLIP]] : tensor<4xi64>
// EXACT: %[[D:.*]] = stablehlo.bitcast_convert %[[X]] : (tensor<4xi64>) -> tensor<4xf64>
// EXACT: %[[Q:.*]] = stablehlo.divide %arg0, %[[D]] : tensor<4xf64>
// EXACT-NEXT: return %[[Q]]
// XLA-LABEL: func.func @by_scalar
// XLA: %[[Q:.*]] = stablehlo.divide %arg0, %{{.*}} : tensor<4xf64>
// XLA-NEXT: return %[[Q]]
func.func @by_scalar(%a: tensor<4xf64>, %d: tensor<f64>) -> tensor<4xf64> {
  %0 = "lazy.broadcast_in_dim"(%d) {dims = array<i64>} : (tensor<f64>) -> tensor<4xf64>
  %1 = "lazy.div"(%a, %0) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>
  return %1 : tensor<4xf64>
}

// -----

// EXACT-LABEL: func.func @elementwise
// EXACT: %[[Q:.*]] = stablehlo.divide %arg0, %arg1 : tensor<4xf64>
// EXACT-NEXT: return %[[Q]]
func.func @elementwise(%a: tensor<4xf64>, %b: tensor<4xf64>) -> tensor<4xf64> {
  %0 = "lazy.div"(%a, %b) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>
  return %0 : tensor<4xf64>
}
