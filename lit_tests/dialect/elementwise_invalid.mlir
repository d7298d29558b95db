// The verifier of every elementwise op rejects IR that breaks its shape/dtype rule,
// naming the op and the rule, at the op's line.
// Each case expects its error at the op (expected-error, checked by --verify-diagnostics).
// RUN: lazy-opt --split-input-file --verify-diagnostics %s

// Element-type classes: `not` is for booleans and integers.
func.func @case0(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'lazy.not' op operand must have integral element type, got f32}}
  %0 = "lazy.not"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// atan2 is float-only.
func.func @case1(%a: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'lazy.atan2' op operands must have float element type, got i32}}
  %0 = "lazy.atan2"(%a, %a) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Bitwise ops reject floats.
func.func @case2(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'lazy.xor' op operands must have integral element type, got f32}}
  %0 = "lazy.xor"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Arithmetic rejects booleans.
func.func @case3(%a: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'lazy.add' op operands must have numeric or complex element type, got i1}}
  %0 = "lazy.add"(%a, %a) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// No implicit promotion: both operands of a binary op have one type.
func.func @case4(%a: tensor<4xf32>, %b: tensor<4xf64>) -> tensor<4xf32> {
  // expected-error @+1 {{'lazy.sub' op operands must have the same type, got tensor<4xf32> and tensor<4xf64>}}
  %0 = "lazy.sub"(%a, %b) : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A unary op keeps its operand type.
func.func @case5(%a: tensor<4xf32>) -> tensor<4xf64> {
  // expected-error @+1 {{'lazy.neg' op result 'result' has type tensor<4xf64>, but the operands and attributes give tensor<4xf32>}}
  %0 = "lazy.neg"(%a) : (tensor<4xf32>) -> tensor<4xf64>
  return %0 : tensor<4xf64>
}

// -----

// is_finite answers in i1.
func.func @case6(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'lazy.is_finite' op result 'result' has type tensor<4xf32>, but the operands and attributes give tensor<4xi1>}}
  %0 = "lazy.is_finite"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// compare's direction is a string attribute.
func.func @case7(%a: tensor<4xf32>) -> tensor<4xi1> {
  // expected-error @+1 {{'lazy.compare' op attribute 'direction': expected a string attribute, got 1 : i64}}
  %0 = "lazy.compare"(%a, %a) {direction = 1} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// select's predicate is i1.
func.func @case8(%p: tensor<4xi32>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'lazy.select' op pred must have bool element type, got i32}}
  %0 = "lazy.select"(%p, %a, %a) : (tensor<4xi32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// select does not broadcast its predicate.
func.func @case9(%p: tensor<1xi1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'lazy.select' op pred shape [1] must match operand shape [4]}}
  %0 = "lazy.select"(%p, %a, %a) : (tensor<1xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// select's two branches have one type.
func.func @case10(%p: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xi32>) -> tensor<4xf32> {
  // expected-error @+1 {{'lazy.select' op on_true and on_false must have the same type, got tensor<4xf32> and tensor<4xi32>}}
  %0 = "lazy.select"(%p, %a, %b) : (tensor<4xi1>, tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// convert changes the element type only, never the shape.
func.func @case11(%a: tensor<4xf32>) -> tensor<2x2xi32> {
  // expected-error @+1 {{'lazy.convert' op result 'result' has type tensor<2x2xi32>, but the operands and attributes give tensor<4xi32>}}
  %0 = "lazy.convert"(%a) : (tensor<4xf32>) -> tensor<2x2xi32>
  return %0 : tensor<2x2xi32>
}

// -----

// iota's dim must name a dimension of the result.
func.func @case12() -> tensor<2x3xf32> {
  // expected-error @+1 {{'lazy.iota' op dim 2 out of range for rank 2}}
  %0 = "lazy.iota"() {dim = 2} : () -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// iota counts in numbers, not booleans.
func.func @case13() -> tensor<3xi1> {
  // expected-error @+1 {{'lazy.iota' op result must have numeric element type, got i1}}
  %0 = "lazy.iota"() {dim = 0} : () -> tensor<3xi1>
  return %0 : tensor<3xi1>
}

// -----

// A constant's result type is its value's type.
func.func @case14() -> tensor<3xf32> {
  // expected-error @+1 {{'lazy.constant' op result 'result' has type tensor<3xf32>, but the operands and attributes give tensor<2xf32>}}
  %0 = "lazy.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// A constant needs its value.
func.func @case15() -> tensor<3xf32> {
  // expected-error @+1 {{'lazy.constant' op requires attribute 'value'}}
  %0 = "lazy.constant"() : () -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// bitcast_convert keeps the element width.
func.func @case16(%a: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{bitcast_convert of f32 to f16: element widths differ (32 and 16 bits)}}
  %0 = "lazy.bitcast_convert"(%a) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}
