// lazy.exp_sleef (eager torch's vectorized float32 exp, SLEEF's expf_u10) is
// one op whose lowering builds SLEEF's steps: q = rint(x / ln2), a two-part
// Cody-Waite reduction and a degree-5 polynomial, each multiply-add one
// rounding as SLEEF's are (a lazy.fused product, which lazy-keep-roundings
// ties to its sum), then 2**q in two halves. Half types compute in float32;
// float64 builds eager's float64 exp, MKL VML's vdExp (dialect/exp_f64.py):
// 2**(j/64) from a 64-entry table (two gathers, for both of its paths), the
// scalar routine's index from the low 32 bits of an integer, no
// stablehlo.exponential. Float32 logistic under division=exact (the CPU's)
// takes this exp, eager's sigmoid; XLA's exp otherwise.
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo=division=exact %s | filecheck %s --check-prefix=EXACT
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s --check-prefix=XLA
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo=division=exact --lazy-keep-roundings %s | filecheck %s --check-prefix=TIED

// EXACT-LABEL: func.func @exp_sleef
// EXACT: %[[L:.*]] = stablehlo.multiply %arg0, %{{.*}} : tensor<4xf32>
// EXACT: %[[Q:.*]] = stablehlo.round_nearest_even %[[L]] : tensor<4xf32>
// EXACT: %[[P:.*]] = stablehlo.multiply %[[Q]], %{{.*}} {lazy.fused = true} : tensor<4xf32>
// EXACT: stablehlo.add %[[P]], %arg0 : tensor<4xf32>
// EXACT: stablehlo.bitcast_convert %{{.*}} : (tensor<4xi32>) -> tensor<4xf32>
// EXACT: stablehlo.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<4xi1>, tensor<4xf32>
// EXACT: %[[R:.*]] = stablehlo.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<4xi1>, tensor<4xf32>
// EXACT: %[[W:.*]] = stablehlo.convert %arg1 : (tensor<4xbf16>) -> tensor<4xf32>
// EXACT: stablehlo.round_nearest_even
// EXACT: %[[H:.*]] = stablehlo.convert %{{.*}} : (tensor<4xf32>) -> tensor<4xbf16>
// EXACT-NOT: stablehlo.exponential
// EXACT: stablehlo.round_nearest_even %{{.*}} : tensor<4xf64>
// EXACT: "stablehlo.gather"(%{{.*}}, %{{.*}}) {{.*}} : (tensor<64xf64>, tensor<4x1xi64>) -> tensor<4xf64>
// EXACT: "stablehlo.gather"(%{{.*}}, %{{.*}}) {{.*}} : (tensor<64xf64>, tensor<4x1xi64>) -> tensor<4xf64>
// EXACT-NOT: stablehlo.gather
// EXACT: stablehlo.shift_right_logical %{{.*}}, %{{.*}} : tensor<4xi64>
// EXACT-NOT: stablehlo.exponential
// EXACT: return %[[R]], %[[H]], %{{.*}} : tensor<4xf32>, tensor<4xbf16>, tensor<4xf64>
// XLA-LABEL: func.func @exp_sleef
// XLA: stablehlo.round_nearest_even
// XLA: stablehlo.multiply %{{.*}}, %{{.*}} {lazy.fused = true} : tensor<4xf32>
// XLA-NOT: stablehlo.exponential %{{.*}} : tensor<4xf32>
// XLA: stablehlo.bitcast_convert
// TIED-LABEL: func.func @exp_sleef
// TIED: stablehlo.xor
// TIED-NOT: lazy.fused
func.func @exp_sleef(%x: tensor<4xf32>, %h: tensor<4xbf16>, %d: tensor<4xf64>) -> (tensor<4xf32>, tensor<4xbf16>, tensor<4xf64>) {
  %a = "lazy.exp_sleef"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = "lazy.exp_sleef"(%h) : (tensor<4xbf16>) -> tensor<4xbf16>
  %c = "lazy.exp_sleef"(%d) : (tensor<4xf64>) -> tensor<4xf64>
  return %a, %b, %c : tensor<4xf32>, tensor<4xbf16>, tensor<4xf64>
}

// -----

// EXACT-LABEL: func.func @logistic
// EXACT: %[[N:.*]] = stablehlo.negate %arg0 : tensor<4xf32>
// EXACT: stablehlo.round_nearest_even
// EXACT-NOT: stablehlo.exponential %{{.*}} : tensor<4xf32>
// EXACT: stablehlo.select
// EXACT: %[[E:.*]] = stablehlo.select
// EXACT: %[[S:.*]] = stablehlo.add %{{.*}}, %[[E]] : tensor<4xf32>
// EXACT-NEXT: stablehlo.divide %{{.*}}, %[[S]] : tensor<4xf32>
// EXACT: stablehlo.exponential %{{.*}} : tensor<4xf64>
// XLA-LABEL: func.func @logistic
// XLA: %[[N:.*]] = stablehlo.negate %arg0 : tensor<4xf32>
// XLA: stablehlo.exponential %[[N]] : tensor<4xf32>
// TIED-LABEL: func.func @logistic
func.func @logistic(%x: tensor<4xf32>, %d: tensor<4xf64>) -> (tensor<4xf32>, tensor<4xf64>) {
  %a = "lazy.logistic"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %c = "lazy.logistic"(%d) : (tensor<4xf64>) -> tensor<4xf64>
  return %a, %c : tensor<4xf32>, tensor<4xf64>
}

// -----

// lazy.exp_vml is eager's float32 torch.exp, MKL VML's vsExp (dialect/exp_f32.py):
// 2**(j/32) and its low part from two 32-entry float32 gathers, every multiply-add
// one rounding; only the scalar routine's side (|x| >= 87.34) takes XLA's float64
// exp, rounded once (no float32 stablehlo.exponential). Float64 is lazy.exp_sleef's.
// EXACT-LABEL: func.func @exp_vml
// EXACT-NOT: stablehlo.exponential %{{.*}} : tensor<4xf32>
// EXACT: "stablehlo.gather"(%{{.*}}, %{{.*}}) {{.*}} : (tensor<32xf32>, tensor<4x1xi32>) -> tensor<4xf32>
// EXACT: "stablehlo.gather"(%{{.*}}, %{{.*}}) {{.*}} : (tensor<32xf32>, tensor<4x1xi32>) -> tensor<4xf32>
// EXACT: stablehlo.multiply %{{.*}}, %{{.*}} {lazy.fused = true} : tensor<4xf32>
// EXACT: stablehlo.exponential %{{.*}} : tensor<4xf64>
// EXACT-NOT: stablehlo.exponential %{{.*}} : tensor<4xf32>
// EXACT: "stablehlo.gather"(%{{.*}}, %{{.*}}) {{.*}} : (tensor<64xf64>, tensor<4x1xi64>) -> tensor<4xf64>
// XLA-LABEL: func.func @exp_vml
// XLA-NOT: stablehlo.exponential %{{.*}} : tensor<4xf32>
// XLA: stablehlo.exponential %{{.*}} : tensor<4xf64>
// TIED-LABEL: func.func @exp_vml
// TIED-NOT: lazy.fused
func.func @exp_vml(%x: tensor<4xf32>, %d: tensor<4xf64>) -> (tensor<4xf32>, tensor<4xf64>) {
  %a = "lazy.exp_vml"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %c = "lazy.exp_vml"(%d) : (tensor<4xf64>) -> tensor<4xf64>
  return %a, %c : tensor<4xf32>, tensor<4xf64>
}
