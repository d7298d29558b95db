// Loops and branches: `lazy` ops inside StableHLO's region ops.
//
// A loop's body is a region that holds `lazy` ops: the graph keeps one loop
// of a thousand iterations as one loop. The region op is `stablehlo.while`
// (or `stablehlo.case` for a branch), not a `lazy` op: IRDL binds one type to
// a whole variadic operand group (a constraint variable takes one value for
// the op), and a loop carries values of many types. StableHLO's own verifiers
// check the region signatures (invalid IR: control_flow_invalid.mlir); every
// `lazy` op inside is verified by its own rule, as anywhere.
// RUN: lazy-opt %s | filecheck %s

// CHECK-LABEL: func.func @power
// CHECK:         stablehlo.while(%[[I:.*]] = %{{.*}}, %[[N:.*]] = %arg0, %[[Y:.*]] = %arg1)
// CHECK-NEXT:    cond {
// CHECK-NEXT:      %[[C:.*]] = "lazy.compare"(%[[I]], %[[N]]) {direction = "LT"}
// CHECK-NEXT:      stablehlo.return %[[C]] : tensor<i1>
// CHECK-NEXT:    } do {
// CHECK:           "lazy.add"(%[[I]],
// CHECK:           "lazy.mul"(%[[Y]], %arg1)
// CHECK:           stablehlo.return
func.func @power(%n: tensor<i64>, %x: tensor<3xf32>) -> tensor<3xf32> {
  %zero = "lazy.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %r:3 = stablehlo.while(%i = %zero, %m = %n, %y = %x) : tensor<i64>, tensor<i64>, tensor<3xf32>
  cond {
    %c = "lazy.compare"(%i, %m) {direction = "LT"} : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %one = "lazy.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %j = "lazy.add"(%i, %one) : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %y2 = "lazy.mul"(%y, %x) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    stablehlo.return %j, %m, %y2 : tensor<i64>, tensor<i64>, tensor<3xf32>
  }
  return %r#2 : tensor<3xf32>
}

// A branch: index 0 (false) takes the first region, any other the last.
// lazycore.cond converts its i1 predicate to the i32 index stablehlo.case takes.
// CHECK-LABEL: func.func @select_branch
// CHECK:         %[[IDX:.*]] = "lazy.convert"(%arg0) : (tensor<i1>) -> tensor<i32>
// CHECK-NEXT:    "stablehlo.case"(%[[IDX]]) ({
// CHECK-NEXT:      "lazy.neg"(%arg1)
// CHECK:         }, {
// CHECK-NEXT:      "lazy.exp"(%arg1)
func.func @select_branch(%p: tensor<i1>, %x: tensor<3xf32>) -> tensor<3xf32> {
  %index = "lazy.convert"(%p) : (tensor<i1>) -> tensor<i32>
  %r = "stablehlo.case"(%index) ({
    %n = "lazy.neg"(%x) : (tensor<3xf32>) -> tensor<3xf32>
    stablehlo.return %n : tensor<3xf32>
  }, {
    %e = "lazy.exp"(%x) : (tensor<3xf32>) -> tensor<3xf32>
    stablehlo.return %e : tensor<3xf32>
  }) : (tensor<i32>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}
