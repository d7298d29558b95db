// The verifiers of a loop or branch reject regions whose signatures break
// its rules, naming the rule at the op's line (StableHLO's verifiers: the
// region ops are stablehlo.while and stablehlo.case, see control_flow.mlir);
// a `lazy` op inside a body is checked by its own rule.
// RUN: lazy-opt --split-input-file --verify-diagnostics %s

// The body yields the carried values' types.
func.func @body_changes_a_type(%n: tensor<i64>, %x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{expect operands to be compatible with body block return types but got 'tensor<i64>', 'tensor<3xf32>' vs 'tensor<i64>', 'tensor<3xf64>'}}
  %r:2 = stablehlo.while(%i = %n, %y = %x) : tensor<i64>, tensor<3xf32>
  cond {
    %c = "lazy.compare"(%i, %i) {direction = "LT"} : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %y2 = "lazy.convert"(%y) : (tensor<3xf32>) -> tensor<3xf64>
    stablehlo.return %i, %y2 : tensor<i64>, tensor<3xf64>
  }
  return %r#1 : tensor<3xf32>
}

// -----

// The condition yields one rank-0 i1.
func.func @condition_not_a_bool(%n: tensor<i64>, %x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{expect condition block return a zero-ranked tensor of i1 but got 'tensor<i64>'}}
  %r:2 = stablehlo.while(%i = %n, %y = %x) : tensor<i64>, tensor<3xf32>
  cond {
    stablehlo.return %i : tensor<i64>
  } do {
    stablehlo.return %i, %y : tensor<i64>, tensor<3xf32>
  }
  return %r#1 : tensor<3xf32>
}

// -----

// A region takes the carried values' types as its arguments.
func.func @region_arguments_differ(%n: tensor<i64>, %x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{expect operands to be compatible with condition block arguments but got 'tensor<i64>', 'tensor<3xf32>' vs 'tensor<i64>', 'tensor<3xf64>'}}
  %r:2 = "stablehlo.while"(%n, %x) ({
  ^bb0(%i: tensor<i64>, %y: tensor<3xf64>):
    %c = "lazy.compare"(%i, %i) {direction = "LT"} : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %y: tensor<3xf32>):
    stablehlo.return %i, %y : tensor<i64>, tensor<3xf32>
  }) : (tensor<i64>, tensor<3xf32>) -> (tensor<i64>, tensor<3xf32>)
  return %r#1 : tensor<3xf32>
}

// -----

// A branch index is a rank-0 i32 (a predicate is converted first).
func.func @index_is_a_bool(%p: tensor<i1>, %x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'stablehlo.case' op operand #0 must be ranked tensor of 32-bit signless integer values, but got 'tensor<i1>'}}
  %r = "stablehlo.case"(%p) ({
    stablehlo.return %x : tensor<3xf32>
  }, {
    stablehlo.return %x : tensor<3xf32>
  }) : (tensor<i1>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}

// -----

// Both branches yield the same types.
func.func @branches_differ(%p: tensor<i32>, %x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+2 {{branch 0 and branch 1 have mismatched return types: 'tensor<3xf32>' vs 'tensor<f32>'}}
  // expected-error @+1 {{'stablehlo.case' op failed to infer returned types}}
  %r = "stablehlo.case"(%p) ({
    stablehlo.return %x : tensor<3xf32>
  }, {
    %s = "lazy.reduce_sum"(%x) {dims = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<i32>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}

// -----

// A lazy op in a body follows its own rule.
func.func @lazy_op_in_a_body(%n: tensor<i64>, %x: tensor<3xf32>) -> tensor<3xf32> {
  %r:2 = stablehlo.while(%i = %n, %y = %x) : tensor<i64>, tensor<3xf32>
  cond {
    // expected-error @+1 {{'lazy.compare' op operands must have the same type, got tensor<i64> and tensor<3xf32>}}
    %c = "lazy.compare"(%i, %y) {direction = "LT"} : (tensor<i64>, tensor<3xf32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    stablehlo.return %i, %y : tensor<i64>, tensor<3xf32>
  }
  return %r#1 : tensor<3xf32>
}
