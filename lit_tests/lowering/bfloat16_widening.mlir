// A bfloat16 -> float32 convert of an op's result widens by the bits
// (bfloat16 is float32's high half): XLA's CPU backend computes the op in
// float32 and, with a convert to float32 after it, drops the rounding to
// bfloat16 in between ((x + 0.3).float() came out unrounded). A function's
// argument was never rounded there and converts as it is. Any target.
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo=division=exact %s | filecheck %s

// CHECK-LABEL: func.func @after_an_op
// CHECK: %[[S:.*]] = stablehlo.add %arg0, %arg1 : tensor<4xbf16>
// CHECK: %[[B:.*]] = stablehlo.bitcast_convert %[[S]] : (tensor<4xbf16>) -> tensor<4xui16>
// CHECK: %[[W:.*]] = stablehlo.convert %[[B]] : (tensor<4xui16>) -> tensor<4xui32>
// CHECK: %[[C:.*]] = stablehlo.constant dense<16> : tensor<4xui32>
// CHECK: %[[H:.*]] = stablehlo.shift_left %[[W]], %[[C]] : tensor<4xui32>
// CHECK: %[[F:.*]] = stablehlo.bitcast_convert %[[H]] : (tensor<4xui32>) -> tensor<4xf32>
// CHECK: stablehlo.shift_left
// CHECK: %[[F2:.*]] = stablehlo.bitcast_convert %{{.*}} : (tensor<4xui32>) -> tensor<4xf32>
// CHECK: %[[D:.*]] = stablehlo.convert %[[F2]] : (tensor<4xf32>) -> tensor<4xf64>
// CHECK: stablehlo.shift_left
// CHECK: %[[R:.*]] = stablehlo.bitcast_convert %{{.*}} : (tensor<4xui32>) -> tensor<4xf32>
// CHECK: stablehlo.complex %[[R]], %{{.*}} : tensor<4xcomplex<f32>>
// CHECK: return %[[F]], %[[D]]
func.func @after_an_op(%a: tensor<4xbf16>, %b: tensor<4xbf16>) -> (tensor<4xf32>, tensor<4xf64>, tensor<4xcomplex<f32>>) {
  %0 = "lazy.add"(%a, %b) : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  %1 = "lazy.convert"(%0) : (tensor<4xbf16>) -> tensor<4xf32>
  %2 = "lazy.convert"(%0) : (tensor<4xbf16>) -> tensor<4xf64>
  %3 = "lazy.convert"(%0) : (tensor<4xbf16>) -> tensor<4xcomplex<f32>>
  return %1, %2, %3 : tensor<4xf32>, tensor<4xf64>, tensor<4xcomplex<f32>>
}

// -----

// CHECK-LABEL: func.func @an_argument
// CHECK-NEXT: %[[F:.*]] = stablehlo.convert %arg0 : (tensor<4xbf16>) -> tensor<4xf32>
// CHECK-NEXT: return %[[F]]
func.func @an_argument(%a: tensor<4xbf16>) -> tensor<4xf32> {
  %0 = "lazy.convert"(%a) : (tensor<4xbf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
