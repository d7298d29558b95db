// rsqrt, tanh, expm1 and atan2 under lazy-to-stablehlo{division=exact} (what
// the runtime compiles for CPU): rsqrt as eager's 1 / sqrt(x), each rounded
// (the quotient in float64, where XLA cannot turn it back into its rsqrt
// approximation); the functions of float16/bfloat16/float32 in float64 and
// rounded to float32 (then to the half type, as eager computes those in
// float32). Float64 and complex operands keep XLA's forms, and so do log,
// log1p and erf (their float64 forms cost too much).
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo=division=exact %s | filecheck %s --check-prefix=EXACT
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s --check-prefix=XLA

// EXACT-LABEL: func.func @rsqrt
// EXACT: %[[S:.*]] = stablehlo.sqrt %arg0 : tensor<4xf32>
// EXACT: %[[S64:.*]] = stablehlo.convert %[[S]] : (tensor<4xf32>) -> tensor<4xf64>
// EXACT: %[[ONE:.*]] = stablehlo.constant dense<1.000000e+00> : tensor<4xf64>
// EXACT: %[[Q:.*]] = stablehlo.divide %[[ONE]], %[[S64]] : tensor<4xf64>
// EXACT: %[[R:.*]] = stablehlo.convert %[[Q]] : (tensor<4xf64>) -> tensor<4xf32>
// EXACT: %[[H32:.*]] = stablehlo.convert %arg1 : (tensor<4xbf16>) -> tensor<4xf32>
// EXACT: stablehlo.sqrt %[[H32]] : tensor<4xf32>
// EXACT: stablehlo.divide %{{.*}}, %{{.*}} : tensor<4xf64>
// EXACT: %[[H:.*]] = stablehlo.convert %{{.*}} : (tensor<4xf64>) -> tensor<4xf32>
// EXACT: %[[HR:.*]] = stablehlo.convert %[[H]] : (tensor<4xf32>) -> tensor<4xbf16>
// EXACT: %[[D:.*]] = stablehlo.rsqrt %arg2 : tensor<4xf64>
// EXACT-NOT: stablehlo.rsqrt
// EXACT: return %[[R]], %[[HR]], %[[D]]
// XLA-LABEL: func.func @rsqrt
// XLA: stablehlo.rsqrt %arg0 : tensor<4xf32>
// XLA: stablehlo.rsqrt %arg1 : tensor<4xbf16>
// XLA: stablehlo.rsqrt %arg2 : tensor<4xf64>
// XLA-NOT: stablehlo.convert
func.func @rsqrt(%a: tensor<4xf32>, %h: tensor<4xbf16>, %d: tensor<4xf64>) -> (tensor<4xf32>, tensor<4xbf16>, tensor<4xf64>) {
  %0 = "lazy.rsqrt"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "lazy.rsqrt"(%h) : (tensor<4xbf16>) -> tensor<4xbf16>
  %2 = "lazy.rsqrt"(%d) : (tensor<4xf64>) -> tensor<4xf64>
  return %0, %1, %2 : tensor<4xf32>, tensor<4xbf16>, tensor<4xf64>
}

// -----

// EXACT-LABEL: func.func @functions
// EXACT: %[[T64:.*]] = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xf64>
// EXACT: %[[T:.*]] = stablehlo.tanh %[[T64]] : tensor<4xf64>
// EXACT: %[[TR:.*]] = stablehlo.convert %[[T]] : (tensor<4xf64>) -> tensor<4xf32>
// EXACT: %[[H64:.*]] = stablehlo.convert %arg1 : (tensor<4xf16>) -> tensor<4xf64>
// EXACT: %[[H:.*]] = stablehlo.tanh %[[H64]] : tensor<4xf64>
// EXACT: %[[H32:.*]] = stablehlo.convert %[[H]] : (tensor<4xf64>) -> tensor<4xf32>
// EXACT: %[[HR:.*]] = stablehlo.convert %[[H32]] : (tensor<4xf32>) -> tensor<4xf16>
// EXACT: %[[M:.*]] = stablehlo.exponential_minus_one %{{.*}} : tensor<4xf64>
// EXACT: %[[M32:.*]] = stablehlo.convert %[[M]] : (tensor<4xf64>) -> tensor<4xf32>
// EXACT: %[[MR:.*]] = stablehlo.convert %[[M32]] : (tensor<4xf32>) -> tensor<4xbf16>
// EXACT: %[[D:.*]] = stablehlo.tanh %arg3 : tensor<4xf64>
// EXACT: %[[L:.*]] = stablehlo.log %arg0 : tensor<4xf32>
// EXACT: %[[P:.*]] = stablehlo.log_plus_one %arg2 : tensor<4xbf16>
// EXACT: return %[[TR]], %[[HR]], %[[MR]], %[[D]], %[[L]], %[[P]]
// XLA-LABEL: func.func @functions
// XLA: stablehlo.tanh %arg0 : tensor<4xf32>
// XLA: stablehlo.tanh %arg1 : tensor<4xf16>
// XLA: stablehlo.exponential_minus_one %arg2 : tensor<4xbf16>
// XLA-NOT: stablehlo.convert
func.func @functions(%a: tensor<4xf32>, %h: tensor<4xf16>, %b: tensor<4xbf16>, %d: tensor<4xf64>)
    -> (tensor<4xf32>, tensor<4xf16>, tensor<4xbf16>, tensor<4xf64>, tensor<4xf32>, tensor<4xbf16>) {
  %0 = "lazy.tanh"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "lazy.tanh"(%h) : (tensor<4xf16>) -> tensor<4xf16>
  %2 = "lazy.expm1"(%b) : (tensor<4xbf16>) -> tensor<4xbf16>
  %3 = "lazy.tanh"(%d) : (tensor<4xf64>) -> tensor<4xf64>
  %4 = "lazy.log"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %5 = "lazy.log1p"(%b) : (tensor<4xbf16>) -> tensor<4xbf16>
  return %0, %1, %2, %3, %4, %5 : tensor<4xf32>, tensor<4xf16>, tensor<4xbf16>, tensor<4xf64>, tensor<4xf32>, tensor<4xbf16>
}

// -----

// A complex tanh or log keeps its special values' lowering.
// EXACT-LABEL: func.func @complex
// EXACT-NOT: f64
// EXACT: stablehlo.tanh %arg0 : tensor<4xcomplex<f32>>
// EXACT-NOT: f64
// EXACT: return
func.func @complex(%z: tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>> {
  %0 = "lazy.tanh"(%z) : (tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>>
  return %0 : tensor<4xcomplex<f32>>
}

// -----

// atan2 (XLA's float32 form 1.4 ulp off) takes both operands to float64.
// EXACT-LABEL: func.func @atan2
// EXACT: %[[Y:.*]] = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xf64>
// EXACT: %[[X:.*]] = stablehlo.convert %arg1 : (tensor<4xf32>) -> tensor<4xf64>
// EXACT: %[[A:.*]] = stablehlo.atan2 %[[Y]], %[[X]] : tensor<4xf64>
// EXACT: %[[R:.*]] = stablehlo.convert %[[A]] : (tensor<4xf64>) -> tensor<4xf32>
// EXACT: return %[[R]]
// XLA-LABEL: func.func @atan2
// XLA: stablehlo.atan2 %arg0, %arg1 : tensor<4xf32>
func.func @atan2(%y: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.atan2"(%y, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
