// Annotations that do not agree with the diagnostics (for
// tools/verify_diagnostics.mlir): lines matter, so edit with care.

// The message differs: the diagnostic is unexpected and the expectation unmet.
func.func @other_message(%a: tensor<4xf32>, %b: tensor<4xf64>) -> tensor<4xf32> {
  // (the expectation is on the next line)
  // expected-error @+1 {{got tensor<4xf32> and tensor<4xi32>}}
  %0 = "lazy.add"(%a, %b) : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Valid IR: the expectation is never met.
  // expected-error @+1 {{never emitted}}
func.func @valid(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}

// -----

func.func @wrong_severity(%a: tensor<4xi32>) -> tensor<4xi32> {
  // expected-warning @+1 {{operand must have float or complex element type}}
  %0 = "lazy.exp"(%a) : (tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}
