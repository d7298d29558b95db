// The verifiers of the complex and fft ops reject malformed IR with the
// broken rule in the diagnostic.
// RUN: lazy-opt --split-input-file --verify-diagnostics %s

func.func @fft_of_real(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'lazy.fft' op operand must have complex element type, got f32}}
  %0 = "lazy.fft"(%x) {fft_type = "FFT", length = array<i64: 8>} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @fft_length(%x: tensor<2x8xcomplex<f32>>) -> tensor<2x8xcomplex<f32>> {
  // expected-error @+1 {{'lazy.fft' op FFT of length [4] needs innermost dimensions [4], got tensor<2x8xcomplex<f32>>}}
  %0 = "lazy.fft"(%x) {fft_type = "FFT", length = array<i64: 4>} : (tensor<2x8xcomplex<f32>>) -> tensor<2x8xcomplex<f32>>
  return %0 : tensor<2x8xcomplex<f32>>
}

// -----

// Complex numbers have no order.
func.func @complex_less(%a: tensor<3xcomplex<f32>>) -> tensor<3xi1> {
  // expected-error @+1 {{'lazy.compare' op complex operands have no order: direction must be EQ or NE, got 'LT'}}
  %0 = "lazy.compare"(%a, %a) {direction = "LT"} : (tensor<3xcomplex<f32>>, tensor<3xcomplex<f32>>) -> tensor<3xi1>
  return %0 : tensor<3xi1>
}

// -----

func.func @real_of_real(%x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'lazy.real' op operand must have complex element type, got f32}}
  %0 = "lazy.real"(%x) : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
