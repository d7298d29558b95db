// rsqrt, tanh, expm1 and atan2 under lazy-to-stablehlo{division=exact} (what
// the runtime compiles for CPU): rsqrt as eager's 1 / sqrt(x), each rounded
// (the quotient in float64, where XLA cannot turn it back into its rsqrt
// approximation); the functions of float16/bfloat16/float32 in float64 and
// rounded to float32 (then to the half type, as eager computes those in
// float32), float32 tanh as expm1(2|x|) / (expm1(2|x|) + 2) from a float64
// polynomial instead of XLA's float64 tanh (no fence in it after
// lazy-keep-roundings). Float64 and complex operands keep XLA's forms, and so
// do log, log1p and erf (their float64 forms cost too much).
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo=division=exact %s | filecheck %s --check-prefix=EXACT
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s --check-prefix=XLA
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo=division=exact --lazy-keep-roundings %s | filecheck %s --check-prefix=FENCE

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
// EXACT-NOT: stablehlo.tanh %{{.*}} : tensor<4xf32>
// EXACT: %[[TR:.*]] = stablehlo.select %{{.*}}, %arg0, %{{.*}} : tensor<4xi1>, tensor<4xf32>
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

// Float32 tanh: |x| (at most 9.5) in float64, 2|x| = k ln2 + r, expm1(r) from a
// polynomial of multiply-adds left to XLA's contraction, u = 2**k expm1(r) +
// (2**k - 1), u / (u + 2) rounded to float32 and signed as x; x itself below
// 2**-12 (and for NaN).
// EXACT-LABEL: func.func @tanh_float32
// EXACT-NOT: stablehlo.tanh
// EXACT: %[[A:.*]] = stablehlo.abs %arg0 : tensor<4xf32>
// EXACT: %[[M:.*]] = stablehlo.minimum %[[A]], %{{.*}} : tensor<4xf32>
// EXACT: %[[W:.*]] = stablehlo.convert %[[M]] : (tensor<4xf32>) -> tensor<4xf64>
// EXACT: %[[Y:.*]] = stablehlo.add %[[W]], %[[W]] : tensor<4xf64>
// EXACT: %[[K:.*]] = stablehlo.round_nearest_even %{{.*}} : tensor<4xf64>
// EXACT-COUNT-13: stablehlo.multiply %{{.*}}, %{{.*}} {lazy.either = true} : tensor<4xf64>
// EXACT: %[[KB:.*]] = stablehlo.add %[[K]], %{{.*}} : tensor<4xf64>
// EXACT: %[[I:.*]] = stablehlo.bitcast_convert %[[KB]] : (tensor<4xf64>) -> tensor<4xi64>
// EXACT: stablehlo.shift_left
// EXACT: %[[S:.*]] = stablehlo.bitcast_convert %{{.*}} : (tensor<4xi64>) -> tensor<4xf64>
// EXACT: stablehlo.multiply %[[S]], %{{.*}} {lazy.either = true} : tensor<4xf64>
// EXACT: %[[U:.*]] = stablehlo.add
// EXACT: %[[D:.*]] = stablehlo.add %[[U]], %{{.*}} : tensor<4xf64>
// EXACT: %[[Q:.*]] = stablehlo.divide %[[U]], %[[D]] : tensor<4xf64>
// EXACT: %[[T:.*]] = stablehlo.convert %[[Q]] : (tensor<4xf64>) -> tensor<4xf32>
// EXACT: %[[N:.*]] = stablehlo.negate %[[T]] : tensor<4xf32>
// EXACT: %[[SIGNED:.*]] = stablehlo.select %{{.*}}, %[[N]], %[[T]] : tensor<4xi1>, tensor<4xf32>
// EXACT: %[[TINY:.*]] = stablehlo.not %{{.*}} : tensor<4xi1>
// EXACT: %[[R:.*]] = stablehlo.select %[[TINY]], %arg0, %[[SIGNED]] : tensor<4xi1>, tensor<4xf32>
// EXACT-NOT: stablehlo.tanh
// EXACT: return %[[R]]
// FENCE-LABEL: func.func @tanh_float32
// FENCE-NOT: stablehlo.xor
// FENCE-NOT: lazy.fused
// FENCE-NOT: lazy.either
// FENCE: return
// XLA-LABEL: func.func @tanh_float32
// XLA: stablehlo.tanh %arg0 : tensor<4xf32>
func.func @tanh_float32(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.tanh"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
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
