// A textual pipeline mixes lazycore passes with upstream ones; the same
// pipeline given as per-pass flags gives the same IR.
// RUN: lazy-opt --pass-pipeline="builtin.module(lazy-canonicalize,cse,lazy-to-stablehlo)" %s | filecheck %s
// RUN: lazy-opt --lazy-canonicalize --cse --lazy-to-stablehlo %s | filecheck %s

// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[S:.*]] = stablehlo.add %arg0, %arg1 : tensor<4xf32>
// CHECK-NEXT: %[[P:.*]] = stablehlo.multiply %[[S]], %[[S]] : tensor<4xf32>
// CHECK-NEXT: return %[[P]]
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %one = "lazy.constant"() {value = dense<1.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "lazy.add"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "lazy.add"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = "lazy.mul"(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = "lazy.mul"(%2, %one) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
}
