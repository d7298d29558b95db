// Float64 lazy.log1p: XLA's log_plus_one is up to 128 ulps off eager's on
// (-1/2, -0.3), so on (-1, -1/4) it is log(u) - ((u - 1) - x) / u with
// u = 1 + x (the log of u corrected by the rounding of 1 + x), XLA's
// elsewhere; with or without division=exact (every backend). Float32 and
// narrower keep log_plus_one alone (tests/torch/test_log1p_float64.py).
// RUN: lazy-opt --lazy-to-stablehlo=division=exact %s | filecheck %s
// RUN: lazy-opt --lazy-to-stablehlo %s | filecheck %s

// CHECK-LABEL: func.func @log1p
// CHECK: %[[PLAIN:.*]] = stablehlo.log_plus_one %arg0 : tensor<4xf64>
// CHECK: %[[ONE:.*]] = stablehlo.constant dense<1.000000e+00> : tensor<4xf64>
// CHECK: %[[U:.*]] = stablehlo.add %arg0, %[[ONE]] : tensor<4xf64>
// CHECK: %[[UM1:.*]] = stablehlo.subtract %[[U]], %{{.*}} : tensor<4xf64>
// CHECK: %[[ROUNDING:.*]] = stablehlo.subtract %[[UM1]], %arg0 : tensor<4xf64>
// CHECK: %[[LOG:.*]] = stablehlo.log %[[U]] : tensor<4xf64>
// CHECK: %[[FIX:.*]] = stablehlo.divide %[[ROUNDING]], %[[U]] : tensor<4xf64>
// CHECK: %[[CORRECTED:.*]] = stablehlo.subtract %[[LOG]], %[[FIX]] : tensor<4xf64>
// CHECK: %[[QUARTER:.*]] = stablehlo.constant dense<-2.500000e-01> : tensor<4xf64>
// CHECK: %[[BELOW:.*]] = stablehlo.compare LT, %arg0, %[[QUARTER]]
// CHECK: %[[MINUS_ONE:.*]] = stablehlo.constant dense<-1.000000e+00> : tensor<4xf64>
// CHECK: %[[ABOVE:.*]] = stablehlo.compare GT, %arg0, %[[MINUS_ONE]]
// CHECK: %[[NEAR:.*]] = stablehlo.and %[[BELOW]], %[[ABOVE]]
// CHECK: %[[D:.*]] = stablehlo.select %[[NEAR]], %[[CORRECTED]], %[[PLAIN]] : tensor<4xi1>, tensor<4xf64>
// CHECK: %[[F:.*]] = stablehlo.log_plus_one %arg1 : tensor<4xf32>
// CHECK-NOT: stablehlo.log %
// CHECK: return %[[D]], %[[F]]
func.func @log1p(%d: tensor<4xf64>, %f: tensor<4xf32>) -> (tensor<4xf64>, tensor<4xf32>) {
  %0 = "lazy.log1p"(%d) : (tensor<4xf64>) -> tensor<4xf64>
  %1 = "lazy.log1p"(%f) : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf64>, tensor<4xf32>
}
