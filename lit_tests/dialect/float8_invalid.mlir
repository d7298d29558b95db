// float8 is a float to every rule but the cross-device reductions', which XLA
// has no float8 kernel for.
// RUN: lazy-opt --split-input-file --verify-diagnostics %s

func.func @all_reduce(%a: tensor<8x6xf8E4M3FN>) -> tensor<4x6xf8E4M3FN> {
  // expected-error @+1 {{'lazy.all_reduce' op operand must have numeric element type other than float8, got f8E4M3FN (XLA has no float8 all-reduce: convert to a wider type first)}}
  %0 = "lazy.all_reduce"(%a) {mesh = array<i64: 2>, sharding = array<i64: 0, -1>, axis = 0, reduction = "sum"} : (tensor<8x6xf8E4M3FN>) -> tensor<4x6xf8E4M3FN>
  return %0 : tensor<4x6xf8E4M3FN>
}

// -----

// A float8 operand of a float op keeps its type.
func.func @tanh(%a: tensor<3xf8E5M2>) -> tensor<3xf32> {
  // expected-error @+1 {{'lazy.tanh' op result 'result' has type tensor<3xf32>, but the operands and attributes give tensor<3xf8E5M2>}}
  %0 = "lazy.tanh"(%a) : (tensor<3xf8E5M2>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
