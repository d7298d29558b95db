// Every error lazy-opt reports reads file:line:col: error: ... on stderr, with
// a non-zero exit status and never a Python traceback: input it cannot parse,
// IR that does not verify, a pass that fails. The other chunks still run.
// RUN: not lazy-opt --split-input-file --lazy-to-stablehlo %s 2>&1 | filecheck %s
// RUN: not lazy-opt --split-input-file --lazy-to-stablehlo %s 2>&1 | not grep Traceback
// A file that is not there is named:
// RUN: not lazy-opt %S/no-such-file.mlir 2>&1 | filecheck %s --check-prefix=MISSING
// MISSING: lazy-opt: error: could not open input file '{{.*}}no-such-file.mlir': No such file or directory

// The lazy ops have only the generic form: one written in custom assembly is
// named at its position (MLIR's parser gives up on it without a word).
// CHECK: errors.mlir:[[# @LINE + 2]]:8: error: custom assembly is not supported for 'lazy.add'
func.func @custom_form(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = lazy.add %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// An op with the wrong number of operands is refused by its verifier.
// CHECK: errors.mlir:[[# @LINE + 2]]:8: error: 'lazy.add' op expected 2 operands (lhs, rhs), got 1
func.func @operand_count(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.add"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// An op the dialect does not have.
// CHECK: errors.mlir:[[# @LINE + 2]]:8: error: unregistered operation 'lazy.frobnicate' found in dialect ('lazy')
func.func @unknown_op(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.frobnicate"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// MLIR's own parse errors keep their positions.
// CHECK: errors.mlir:[[# @LINE + 2]]:19: error: use of undeclared SSA value name
func.func @undefined_value(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.neg"(%b) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// This chunk is fine: it is lowered and printed.
// CHECK-NOT: error
// CHECK: func.func @fine
// CHECK: stablehlo.negate
func.func @fine(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.neg"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
