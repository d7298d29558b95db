// lazy.fma, a fused multiply-add where eager computes one (torch's addcmul,
// add with alpha, lerp): a product marked lazy.fused and a sum. The default
// pipeline's lazy-keep-roundings fences every other product a sum takes and
// leaves this one to XLA's CPU backend, which contracts the two into one
// fused multiply-add; it takes the mark off and ties the product's first
// operand to the addend (a xor (c and 0)), so that LLVM neither shares the
// product nor computes it apart from its sum.
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s
// RUN: lazy-opt --split-input-file --lazy-default-pipeline %s | filecheck %s --check-prefix=DEFAULT

// CHECK-LABEL: func.func @fma
// CHECK: %[[M:.*]] = stablehlo.multiply %arg0, %arg1 {lazy.fused = true} : tensor<8xf32>
// CHECK: %[[S:.*]] = stablehlo.add %[[M]], %arg2 : tensor<8xf32>
// CHECK: return %[[S]]
// DEFAULT-LABEL: func.func @fma
// DEFAULT-NOT: lazy.fused
// DEFAULT: %[[C:.*]] = stablehlo.bitcast_convert %arg2 : (tensor<8xf32>) -> tensor<8xi32>
// DEFAULT: %[[N:.*]] = stablehlo.and %[[C]], %{{.*}} : tensor<8xi32>
// DEFAULT: %[[A:.*]] = stablehlo.bitcast_convert %arg0 : (tensor<8xf32>) -> tensor<8xi32>
// DEFAULT: %[[X:.*]] = stablehlo.xor %[[A]], %[[N]] : tensor<8xi32>
// DEFAULT: %[[T:.*]] = stablehlo.bitcast_convert %[[X]] : (tensor<8xi32>) -> tensor<8xf32>
// DEFAULT: %[[M:.*]] = stablehlo.multiply %[[T]], %arg1 : tensor<8xf32>
// DEFAULT: %[[S:.*]] = stablehlo.add %[[M]], %arg2 : tensor<8xf32>
// DEFAULT: return %[[S]]
func.func @fma(%a: tensor<8xf32>, %b: tensor<8xf32>, %c: tensor<8xf32>) -> tensor<8xf32> {
  %0 = "lazy.fma"(%a, %b, %c) : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// The same program as a multiply and an add: its product is fenced.
// DEFAULT-LABEL: func.func @mul_add
// DEFAULT: %[[M:.*]] = stablehlo.multiply %arg0, %arg1 : tensor<8xf32>
// DEFAULT: stablehlo.xor
// DEFAULT: %[[F:.*]] = stablehlo.bitcast_convert %{{.*}} : (tensor<8xi32>) -> tensor<8xf32>
// DEFAULT: stablehlo.add %[[F]], %arg2 : tensor<8xf32>
func.func @mul_add(%a: tensor<8xf32>, %b: tensor<8xf32>, %c: tensor<8xf32>) -> tensor<8xf32> {
  %0 = "lazy.mul"(%a, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = "lazy.add"(%0, %c) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %1 : tensor<8xf32>
}
