// lazy.log_sleef (SLEEF's float32 logf_u10, the log of eager torch's vectorized
// float32 kernels: log_softmax's, so cross-entropy's) is one op whose lowering
// builds SLEEF's steps (dialect/log_f32.py): the exponent e of x * (1/0.75) and
// the mantissa m in [0.75, 1.5) from the bits (a subnormal x through its
// mantissa field as an integer: XLA's CPU loops treat it as zero), the
// double-float quotient (m - 1) / (m + 1) with its pairs' errors in float64,
// then e * ln2 + 2x + x**3 * t(x**2) in double-float sums, each multiply-add one
// rounding (a lazy.fused product, which lazy-keep-roundings ties to its sum),
// and SLEEF's fixups (+inf, +-0, negative or NaN) from the bits. No
// stablehlo.log in float32; half types compute in float32; float64 is XLA's log.
// RUN: lazy-opt --lazy-to-stablehlo %s | filecheck %s
// RUN: lazy-opt --lazy-to-stablehlo --lazy-keep-roundings %s | filecheck %s --check-prefix=TIED

// CHECK-LABEL: func.func @log_sleef
// CHECK-NOT: stablehlo.log %{{.*}} : tensor<4xf32>
// CHECK: %[[BITS:.*]] = stablehlo.bitcast_convert %arg0 : (tensor<4xf32>) -> tensor<4xi32>
// CHECK: %[[INT:.*]] = stablehlo.convert %[[BITS]] : (tensor<4xi32>) -> tensor<4xf32>
// CHECK: %[[D:.*]] = stablehlo.select %{{.*}}, %[[INT]], %arg0 : tensor<4xi1>, tensor<4xf32>
// CHECK: %[[P:.*]] = stablehlo.multiply %[[D]], %{{.*}} : tensor<4xf32>
// CHECK: stablehlo.bitcast_convert %[[P]] : (tensor<4xf32>) -> tensor<4xi32>
// CHECK: stablehlo.shift_right_logical
// CHECK: %[[M:.*]] = stablehlo.bitcast_convert %{{.*}} : (tensor<4xi32>) -> tensor<4xf32>
// CHECK: stablehlo.convert %[[M]] : (tensor<4xf32>) -> tensor<4xf64>
// CHECK: stablehlo.divide
// CHECK: stablehlo.multiply %{{.*}}, %{{.*}} {lazy.fused = true} : tensor<4xf32>
// CHECK: stablehlo.compare EQ, %[[BITS]], %{{.*}} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
// CHECK: %[[BAD:.*]] = stablehlo.or %{{.*}}, %{{.*}} : tensor<4xi1>
// CHECK: %[[R:.*]] = stablehlo.select %[[BAD]], %{{.*}}, %{{.*}} : tensor<4xi1>, tensor<4xf32>
// CHECK: stablehlo.convert %arg1 : (tensor<4xf16>) -> tensor<4xf32>
// CHECK-NOT: stablehlo.log %{{.*}} : tensor<4xf32>
// CHECK: %[[H:.*]] = stablehlo.convert %{{.*}} : (tensor<4xf32>) -> tensor<4xf16>
// CHECK: %[[W:.*]] = stablehlo.log %arg2 : tensor<4xf64>
// CHECK: return %[[R]], %[[H]], %[[W]] : tensor<4xf32>, tensor<4xf16>, tensor<4xf64>
// TIED-LABEL: func.func @log_sleef
// TIED-NOT: lazy.fused
// TIED: return
func.func @log_sleef(%x: tensor<4xf32>, %h: tensor<4xf16>, %d: tensor<4xf64>) -> (tensor<4xf32>, tensor<4xf16>, tensor<4xf64>) {
  %a = "lazy.log_sleef"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = "lazy.log_sleef"(%h) : (tensor<4xf16>) -> tensor<4xf16>
  %c = "lazy.log_sleef"(%d) : (tensor<4xf64>) -> tensor<4xf64>
  return %a, %b, %c : tensor<4xf32>, tensor<4xf16>, tensor<4xf64>
}
