// The verifier of every elementwise op rejects IR that breaks its shape/dtype rule,
// naming the op and the rule, at the op's line.
// RUN: not lazy-opt --split-input-file %s 2>&1 | filecheck %s

// Element-type classes: `not` is for booleans and integers.
// CHECK: elementwise_invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: 'lazy.not' op operand must have integral element type, got f32
func.func @case0(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.not"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// atan2 is float-only.
// CHECK: elementwise_invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: 'lazy.atan2' op operands must have float element type, got i32
func.func @case1(%a: tensor<4xi32>) -> tensor<4xi32> {
  %0 = "lazy.atan2"(%a, %a) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Bitwise ops reject floats.
// CHECK: elementwise_invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: 'lazy.xor' op operands must have integral element type, got f32
func.func @case2(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.xor"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Arithmetic rejects booleans.
// CHECK: elementwise_invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: 'lazy.add' op operands must have numeric element type, got i1
func.func @case3(%a: tensor<4xi1>) -> tensor<4xi1> {
  %0 = "lazy.add"(%a, %a) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// No implicit promotion: both operands of a binary op have one type.
// CHECK: elementwise_invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: 'lazy.sub' op operands must have the same type, got tensor<4xf32> and tensor<4xf64>
func.func @case4(%a: tensor<4xf32>, %b: tensor<4xf64>) -> tensor<4xf32> {
  %0 = "lazy.sub"(%a, %b) : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A unary op keeps its operand type.
// CHECK: elementwise_invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: 'lazy.neg' op result 'result' has type tensor<4xf64>, but the operands and attributes give tensor<4xf32>
func.func @case5(%a: tensor<4xf32>) -> tensor<4xf64> {
  %0 = "lazy.neg"(%a) : (tensor<4xf32>) -> tensor<4xf64>
  return %0 : tensor<4xf64>
}

// -----

// is_finite answers in i1.
// CHECK: elementwise_invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: 'lazy.is_finite' op result 'result' has type tensor<4xf32>, but the operands and attributes give tensor<4xi1>
func.func @case6(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.is_finite"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// compare's direction is a string attribute.
// CHECK: elementwise_invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: 'lazy.compare' op attribute 'direction': expected a string attribute, got 1 : i64
func.func @case7(%a: tensor<4xf32>) -> tensor<4xi1> {
  %0 = "lazy.compare"(%a, %a) {direction = 1} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// select's predicate is i1.
// CHECK: elementwise_invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: 'lazy.select' op pred must have bool element type, got i32
func.func @case8(%p: tensor<4xi32>, %a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.select"(%p, %a, %a) : (tensor<4xi32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// select does not broadcast its predicate.
// CHECK: elementwise_invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: 'lazy.select' op pred shape [1] must match operand shape [4]
func.func @case9(%p: tensor<1xi1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.select"(%p, %a, %a) : (tensor<1xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// select's two branches have one type.
// CHECK: elementwise_invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: 'lazy.select' op on_true and on_false must have the same type, got tensor<4xf32> and tensor<4xi32>
func.func @case10(%p: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xi32>) -> tensor<4xf32> {
  %0 = "lazy.select"(%p, %a, %b) : (tensor<4xi1>, tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// convert changes the element type only, never the shape.
// CHECK: elementwise_invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: 'lazy.convert' op result 'result' has type tensor<2x2xi32>, but the operands and attributes give tensor<4xi32>
func.func @case11(%a: tensor<4xf32>) -> tensor<2x2xi32> {
  %0 = "lazy.convert"(%a) : (tensor<4xf32>) -> tensor<2x2xi32>
  return %0 : tensor<2x2xi32>
}

// -----

// iota's dim must name a dimension of the result.
// CHECK: elementwise_invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: 'lazy.iota' op dim 2 out of range for rank 2
func.func @case12() -> tensor<2x3xf32> {
  %0 = "lazy.iota"() {dim = 2} : () -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// iota counts in numbers, not booleans.
// CHECK: elementwise_invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: 'lazy.iota' op result must have numeric element type, got i1
func.func @case13() -> tensor<3xi1> {
  %0 = "lazy.iota"() {dim = 0} : () -> tensor<3xi1>
  return %0 : tensor<3xi1>
}

// -----

// A constant's result type is its value's type.
// CHECK: elementwise_invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: 'lazy.constant' op result 'result' has type tensor<3xf32>, but the operands and attributes give tensor<2xf32>
func.func @case14() -> tensor<3xf32> {
  %0 = "lazy.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// A constant needs its value.
// CHECK: elementwise_invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: 'lazy.constant' op requires attribute 'value'
func.func @case15() -> tensor<3xf32> {
  %0 = "lazy.constant"() : () -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
