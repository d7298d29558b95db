// Elementwise lazy ops lower one to one onto StableHLO.
// RUN: lazy-opt --lazy-to-stablehlo %s | filecheck %s

// CHECK-LABEL: func.func @binary
// CHECK: %[[A:.*]] = stablehlo.add %arg0, %arg1 : tensor<2x3xf32>
// CHECK: %[[M:.*]] = stablehlo.multiply %[[A]], %arg1 : tensor<2x3xf32>
// CHECK: %[[T:.*]] = stablehlo.tanh %[[M]] : tensor<2x3xf32>
// CHECK: return %[[T]]
// CHECK-NOT: lazy.
func.func @binary(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "lazy.add"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "lazy.mul"(%0, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = "lazy.tanh"(%1) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %2 : tensor<2x3xf32>
}
