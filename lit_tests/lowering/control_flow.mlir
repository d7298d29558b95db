// lazy-to-stablehlo lowers the `lazy` ops inside a loop's or branch's
// regions in place, like any other: each op by its own lowering pattern. The
// region ops (stablehlo.while, stablehlo.case) are StableHLO already; their
// regions keep their arguments and terminators.
// RUN: lazy-opt --lazy-to-stablehlo %s | filecheck %s

// CHECK-LABEL: func.func @power
// CHECK:         %[[ZERO:.*]] = stablehlo.constant dense<0> : tensor<i64>
// CHECK:         stablehlo.while(%[[I:.*]] = %[[ZERO]], %[[N:.*]] = %arg0, %[[Y:.*]] = %arg1)
// CHECK-NEXT:    cond {
// CHECK-NEXT:      %[[C:.*]] = stablehlo.compare LT, %[[I]], %[[N]]
// CHECK-NEXT:      stablehlo.return %[[C]] : tensor<i1>
// CHECK-NEXT:    } do {
// CHECK-NEXT:      %[[ONE:.*]] = stablehlo.constant dense<1> : tensor<i64>
// CHECK-NEXT:      %[[J:.*]] = stablehlo.add %[[I]], %[[ONE]]
// CHECK-NEXT:      %[[Y2:.*]] = stablehlo.multiply %[[Y]], %arg1
// CHECK-NEXT:      stablehlo.return %[[J]], %[[N]], %[[Y2]]
// CHECK-NOT:     lazy.
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

// CHECK-LABEL: func.func @select_branch
// CHECK:         %[[IDX:.*]] = stablehlo.convert %arg0 : (tensor<i1>) -> tensor<i32>
// CHECK-NEXT:    "stablehlo.case"(%[[IDX]]) ({
// CHECK-NEXT:      stablehlo.negate %arg1
// CHECK:         }, {
// CHECK-NEXT:      stablehlo.exponential %arg1
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
