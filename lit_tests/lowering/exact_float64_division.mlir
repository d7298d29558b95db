// A float64 divide by a broadcast under lazy-to-stablehlo{division=exact} (what
// the runtime compiles for CPU): XLA's quotient (a times the reciprocal) is
// corrected by its remainder, computed exactly from 26-bit halves of the
// quotient and the divisor; outside the range where the halves and the
// remainder are exact the quotient stays XLA's. Without the option, and for
// elementwise divisors, the divide is left as it is.
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo=division=exact %s | filecheck %s --check-prefix=EXACT
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s --check-prefix=XLA

// EXACT-LABEL: func.func @by_scalar
// EXACT: %[[B:.*]] = stablehlo.broadcast_in_dim %arg1
// EXACT: %[[R:.*]] = stablehlo.divide %{{.*}}, %[[B]] : tensor<4xf64>
// EXACT: %[[Q:.*]] = stablehlo.divide %arg0, %[[B]] : tensor<4xf64>
// EXACT: %[[P:.*]] = stablehlo.multiply %[[Q]], %[[B]] : tensor<4xf64>
// EXACT: stablehlo.constant dense<0x41A0000002000000> : tensor<4xf64>
// EXACT: %[[AP:.*]] = stablehlo.subtract %arg0, %[[P]] : tensor<4xf64>
// EXACT: %[[REM:.*]] = stablehlo.subtract %[[AP]], %{{.*}} : tensor<4xf64>
// EXACT: %[[FIX:.*]] = stablehlo.multiply %[[REM]], %[[R]] : tensor<4xf64>
// EXACT: %[[C:.*]] = stablehlo.add %[[Q]], %[[FIX]] : tensor<4xf64>
// EXACT: %[[OUT:.*]] = stablehlo.select %{{.*}}, %[[C]], %[[Q]] : tensor<4xi1>, tensor<4xf64>
// EXACT: return %[[OUT]]
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
