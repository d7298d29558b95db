// A divide by a constant +-2**k whose reciprocal is a normal number needs no
// exact form under lazy-to-stablehlo{division=exact}: XLA's a * (1/b) is a
// product by an exact power of two, rounded once, the correctly rounded
// quotient (a layer norm's mean over 64 features). Other constants and
// divisors that are no constants keep the exact forms (exact_division.mlir,
// exact_float64_division.mlir).
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo=division=exact %s | filecheck %s

// CHECK-LABEL: func.func @by_count
// CHECK: stablehlo.divide %arg0, %{{.*}} : tensor<8xf32>
// CHECK: stablehlo.divide %arg1, %{{.*}} : tensor<8xf64>
// CHECK: stablehlo.divide %arg2, %{{.*}} : tensor<8xbf16>
// CHECK-NOT: f64>) -> tensor<8xf32>
// CHECK-NOT: stablehlo.xor
// CHECK: return
func.func @by_count(%a: tensor<8xf32>, %b: tensor<8xf64>, %c: tensor<8xbf16>) -> (tensor<8xf32>, tensor<8xf64>, tensor<8xbf16>) {
  %0 = "lazy.constant"() {value = dense<6.400000e+01> : tensor<f32>} : () -> tensor<f32>
  %1 = "lazy.broadcast_in_dim"(%0) {dims = array<i64>} : (tensor<f32>) -> tensor<8xf32>
  %2 = "lazy.div"(%a, %1) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %3 = "lazy.constant"() {value = dense<-1.250000e-01> : tensor<8xf64>} : () -> tensor<8xf64>
  %4 = "lazy.div"(%b, %3) : (tensor<8xf64>, tensor<8xf64>) -> tensor<8xf64>
  %5 = "lazy.constant"() {value = dense<2.000000e+00> : tensor<8xbf16>} : () -> tensor<8xbf16>
  %6 = "lazy.div"(%c, %5) : (tensor<8xbf16>, tensor<8xbf16>) -> tensor<8xbf16>
  return %2, %4, %6 : tensor<8xf32>, tensor<8xf64>, tensor<8xbf16>
}

// -----

// 3 is no power of two; float16's 2**15 is, but its reciprocal is no
// normal float16 (their smallest is 2**-14): both keep the exact form.
// CHECK-LABEL: func.func @not_by_count
// CHECK: stablehlo.xor
// CHECK: stablehlo.divide %arg0, %{{.*}} : tensor<8xf32>
// CHECK: stablehlo.convert %arg1 : (tensor<8xf16>) -> tensor<8xf32>
// CHECK: stablehlo.xor
// CHECK: stablehlo.divide %{{.*}}, %{{.*}} : tensor<8xf32>
// CHECK: return
func.func @not_by_count(%a: tensor<8xf32>, %h: tensor<8xf16>) -> (tensor<8xf32>, tensor<8xf16>) {
  %0 = "lazy.constant"() {value = dense<3.000000e+00> : tensor<8xf32>} : () -> tensor<8xf32>
  %1 = "lazy.div"(%a, %0) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %2 = "lazy.constant"() {value = dense<3.276800e+04> : tensor<8xf16>} : () -> tensor<8xf16>
  %3 = "lazy.div"(%h, %2) : (tensor<8xf16>, tensor<8xf16>) -> tensor<8xf16>
  return %1, %3 : tensor<8xf32>, tensor<8xf16>
}
