// Complex element types and lazy.fft lower one to one: lazy.fft is
// stablehlo.fft's twin (the innermost dims, lengths as an attribute); abs of
// a complex number is its real modulus (from its parts: complex_exact.py);
// a complex -> real convert keeps the real part and real -> complex adds a
// zero imaginary part.
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s

// CHECK-LABEL: func.func @rfft_then_irfft
// CHECK: %[[F:.*]] = stablehlo.fft %arg0, type = RFFT, length = [8] : (tensor<2x8xf32>) -> tensor<2x5xcomplex<f32>>
// CHECK: stablehlo.fft %[[F]], type = IRFFT, length = [8] : (tensor<2x5xcomplex<f32>>) -> tensor<2x8xf32>
func.func @rfft_then_irfft(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = "lazy.fft"(%x) {fft_type = "RFFT", length = array<i64: 8>} : (tensor<2x8xf32>) -> tensor<2x5xcomplex<f32>>
  %1 = "lazy.fft"(%0) {fft_type = "IRFFT", length = array<i64: 8>} : (tensor<2x5xcomplex<f32>>) -> tensor<2x8xf32>
  return %1 : tensor<2x8xf32>
}

// -----

// CHECK-LABEL: func.func @parts
// CHECK: stablehlo.real %arg0 : (tensor<3xcomplex<f64>>) -> tensor<3xf64>
// CHECK: stablehlo.sqrt
// CHECK: stablehlo.real %arg0 : (tensor<3xcomplex<f64>>) -> tensor<3xf64>
// CHECK: stablehlo.imag %arg0 : (tensor<3xcomplex<f64>>) -> tensor<3xf64>
// CHECK: stablehlo.complex
func.func @parts(%z: tensor<3xcomplex<f64>>) -> (tensor<3xf64>, tensor<3xcomplex<f64>>) {
  %0 = "lazy.abs"(%z) : (tensor<3xcomplex<f64>>) -> tensor<3xf64>
  %1 = "lazy.real"(%z) : (tensor<3xcomplex<f64>>) -> tensor<3xf64>
  %2 = "lazy.imag"(%z) : (tensor<3xcomplex<f64>>) -> tensor<3xf64>
  %3 = "lazy.complex"(%1, %2) : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xcomplex<f64>>
  return %0, %3 : tensor<3xf64>, tensor<3xcomplex<f64>>
}

// -----

// CHECK-LABEL: func.func @converts
// CHECK: %[[RE:.*]] = stablehlo.real %arg0
// CHECK: stablehlo.convert %[[RE]] : (tensor<4xf32>) -> tensor<4xf64>
// CHECK: stablehlo.complex
func.func @converts(%z: tensor<4xcomplex<f32>>, %x: tensor<4xi32>) -> (tensor<4xf64>, tensor<4xcomplex<f32>>) {
  %0 = "lazy.convert"(%z) : (tensor<4xcomplex<f32>>) -> tensor<4xf64>
  %1 = "lazy.convert"(%x) : (tensor<4xi32>) -> tensor<4xcomplex<f32>>
  return %0, %1 : tensor<4xf64>, tensor<4xcomplex<f32>>
}
