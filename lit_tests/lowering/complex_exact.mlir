// Complex mul and div lower on real and imaginary parts (complex_exact.py),
// so lazy-keep-roundings sees their products: mul's four are fenced (each
// rounds, as eager's kernel: no fused multiply-add), div's six x + y * rat are
// left to the backend to fuse (eager's kernel is GCC's fused Smith division),
// each product's first operand tied to its addend (an and, then a xor).
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo --lazy-keep-roundings %s | filecheck %s

// CHECK-LABEL: func.func @mul
// CHECK-DAG: %[[A:.*]] = stablehlo.real %arg0
// CHECK-DAG: %[[B:.*]] = stablehlo.imag %arg0
// CHECK-DAG: %[[C:.*]] = stablehlo.real %arg1
// CHECK-DAG: %[[D:.*]] = stablehlo.imag %arg1
// CHECK: %[[AC:.*]] = stablehlo.multiply %[[A]], %[[C]] : tensor<4xf32>
// CHECK: stablehlo.xor
// CHECK: %[[BD:.*]] = stablehlo.multiply %[[B]], %[[D]] : tensor<4xf32>
// CHECK: stablehlo.xor
// CHECK: stablehlo.subtract
// CHECK: stablehlo.multiply %[[A]], %[[D]]
// CHECK: stablehlo.xor
// CHECK: stablehlo.multiply %[[B]], %[[C]]
// CHECK: stablehlo.xor
// CHECK: stablehlo.add
// CHECK: stablehlo.complex
func.func @mul(%a: tensor<4xcomplex<f32>>, %b: tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>> {
  %0 = "lazy.mul"(%a, %b) : (tensor<4xcomplex<f32>>, tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>>
  return %0 : tensor<4xcomplex<f32>>
}

// -----

// CHECK-LABEL: func.func @div
// CHECK-NOT: lazy.fused
// CHECK-COUNT-6: stablehlo.xor %{{.*}} : tensor<4xi64>
// CHECK-NOT: stablehlo.xor
// CHECK-NOT: lazy.fused
// CHECK: stablehlo.complex
func.func @div(%a: tensor<4xcomplex<f64>>, %b: tensor<4xcomplex<f64>>) -> tensor<4xcomplex<f64>> {
  %0 = "lazy.div"(%a, %b) : (tensor<4xcomplex<f64>>, tensor<4xcomplex<f64>>) -> tensor<4xcomplex<f64>>
  return %0 : tensor<4xcomplex<f64>>
}

// -----

// A real mul is the built-in lowering's.
// CHECK-LABEL: func.func @real_mul
// CHECK: stablehlo.multiply %arg0, %arg1 : tensor<4xf32>
func.func @real_mul(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.mul"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
