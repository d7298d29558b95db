// Malformed IR is rejected by the verifier generated from each op's shape rule,
// with a diagnostic that names the op and the broken rule.
// Each case expects its error at the op (expected-error, checked by --verify-diagnostics).
// RUN: lazy-opt --split-input-file --verify-diagnostics %s

func.func @mismatched(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'lazy.add' op operands must have the same type, got tensor<2x3xf32> and tensor<3x2xf32>}}
  %0 = "lazy.add"(%a, %b) : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @int_exp(%a: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'lazy.exp' op operand must have float or complex element type, got i32}}
  %0 = "lazy.exp"(%a) : (tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @compare_result(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'lazy.compare' op result 'result' has type tensor<4xf32>, but the operands and attributes give tensor<4xi1>}}
  %0 = "lazy.compare"(%a, %a) {direction = "LT"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @compare_direction(%a: tensor<4xf32>) -> tensor<4xi1> {
  // expected-error @+1 {{'lazy.compare' op direction must be one of EQ, NE, LT, LE, GT, GE, got 'BELOW'}}
  %0 = "lazy.compare"(%a, %a) {direction = "BELOW"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}
