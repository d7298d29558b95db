// --verify-diagnostics checks the diagnostics against expected-* annotations
// in the input instead of printing them, as mlir-opt does: lazy-opt exits 0
// when every diagnostic was expected and every expectation was met.
// RUN: lazy-opt --split-input-file --verify-diagnostics %s
// A diagnostic nobody expected, or an expectation nothing met, is an error:
// RUN: not lazy-opt --split-input-file --verify-diagnostics %S/../Inputs/verify_mismatch.mlir 2>&1 \
// RUN:   | filecheck %s --check-prefix=MISMATCH

// @+N names the line N below the annotation; the text is a substring of the message.
func.func @below(%a: tensor<4xf32>, %b: tensor<4xf64>) -> tensor<4xf32> {
  // expected-error @+1 {{operands must have the same type}}
  %0 = "lazy.add"(%a, %b) : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// @-N names a line above; an annotation without @ names its own line.
func.func @above(%a: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>) {
  %0 = "lazy.exp"(%a) : (tensor<4xi32>) -> tensor<4xi32>
  // expected-error @-1 {{'lazy.exp' op operand must have float or complex element type, got i32}}
  return %0, %0 : tensor<4xi32>, tensor<4xi32>
}

// -----

func.func @same_line(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.neg"(%a) : (tensor<4xf32>) -> tensor<4xf64> // expected-error {{result 'result' has type tensor<4xf64>}}
  return %a : tensor<4xf32>
}

// -----

// @above (and @below) name the closest line above (below) that holds no annotation.
func.func @nearest(%a: tensor<2x3xf32>) -> tensor<4xf32> {
  %0 = "lazy.reshape"(%a) : (tensor<2x3xf32>) -> tensor<4xf32>
  // expected-error @above {{reshape must keep the element count}}
  return %0 : tensor<4xf32>
}

// -----

// Notes are diagnostics too: MLIR's type mismatch points at the prior use.
func.func @notes(%a: tensor<4xf32>) -> tensor<3xf32> {
  // expected-note @below {{prior use here}}
  %0 = "lazy.neg"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error @below {{use of value '%0' expects different type than prior uses}}
  return %0 : tensor<3xf32>
}

// -----

// expected-error-re: the {{...}} parts inside the text are regular expressions.
func.func @regex(%x: tensor<2x3xf32>) -> tensor<f32> {
  // expected-error-re @+1 {{'lazy.reduce_sum' op dims [0, {{[0-9]+}}] out of range for rank 2}}
  %0 = "lazy.reduce_sum"(%x) {dims = array<i64: 0, 2>} : (tensor<2x3xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// MISMATCH: verify_mismatch.mlir:8:{{[0-9]+}}: error: unexpected error: 'lazy.add' op operands must have the same type
// MISMATCH: verify_mismatch.mlir:7:6: error: expected error "got tensor<4xf32> and tensor<4xi32>" was not produced
// MISMATCH: verify_mismatch.mlir:15:6: error: expected error "never emitted" was not produced
// MISMATCH: verify_mismatch.mlir:23:6: error: 'error' diagnostic emitted when expecting a 'warning'
