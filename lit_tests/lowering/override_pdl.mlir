// PDL patterns loaded with --load-pdl-patterns (lazycore.passes.load_pdl_patterns
// in Python) run before the Python lowerings and win where they match.
// RUN: lazy-opt --load-pdl-patterns %S/../Inputs/pdl_lowerings.mlir --split-input-file --lazy-to-stablehlo %s \
// RUN:   | filecheck %s
// lazy-apply-pdl applies them alone, to see what they do before any lowering:
// RUN: lazy-opt --load-pdl-patterns %S/../Inputs/pdl_lowerings.mlir --split-input-file --lazy-apply-pdl %s \
// RUN:   | filecheck %s --check-prefix=APPLY

// APPLY-LABEL: func.func @neg
// APPLY: stablehlo.subtract
// APPLY: "lazy.neg"(%arg1)
// APPLY-LABEL: func.func @abs
// APPLY: %[[N:.*]] = "lazy.neg"(%arg0)
// APPLY: "lazy.maximum"(%arg0, %[[N]])

// The neg pattern matches tensor<4xf32> only: 0 - x there, the built-in negate elsewhere.
// CHECK-LABEL: func.func @neg
// CHECK: %[[ZERO:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK: %[[A:.*]] = stablehlo.subtract %[[ZERO]], %arg0 : tensor<4xf32>
// CHECK: %[[B:.*]] = stablehlo.negate %arg1 : tensor<3xf64>
// CHECK: return %[[A]], %[[B]]
func.func @neg(%a: tensor<4xf32>, %b: tensor<3xf64>) -> (tensor<4xf32>, tensor<3xf64>) {
  %0 = "lazy.neg"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "lazy.neg"(%b) : (tensor<3xf64>) -> tensor<3xf64>
  return %0, %1 : tensor<4xf32>, tensor<3xf64>
}

// -----

// abs becomes max(x, -x) in lazy ops, which the Python lowerings then take.
// CHECK-LABEL: func.func @abs
// CHECK-NOT: stablehlo.abs
// CHECK: %[[N:.*]] = stablehlo.negate %arg0 : tensor<2x2xi32>
// CHECK: %[[M:.*]] = stablehlo.maximum %arg0, %[[N]] : tensor<2x2xi32>
// CHECK: return %[[M]]
func.func @abs(%a: tensor<2x2xi32>) -> tensor<2x2xi32> {
  %0 = "lazy.abs"(%a) : (tensor<2x2xi32>) -> tensor<2x2xi32>
  return %0 : tensor<2x2xi32>
}
