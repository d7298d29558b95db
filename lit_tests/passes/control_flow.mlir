// lazy-canonicalize and cse on a module with a loop. Patterns rewrite the
// ops inside a body (y * 1 -> y) but never see through the region boundary:
// the carried %y starts as the constant 1, yet inside the body it is a block
// argument (a new value every iteration), so y * y is not folded. cse may
// reuse an outer value inside a body that it dominates (tanh(x) is computed
// once), which is what the body computed.
// RUN: lazy-opt --lazy-canonicalize --cse %s | filecheck %s
// The donation plan is the function's, whatever its body holds: the loop
// reads %arg0 and the result may take its buffer.
// RUN: lazy-opt --lazy-aliasing=donate=0:0 --lazy-to-stablehlo %s | filecheck %s --check-prefix=ALIAS
// ALIAS: func.func @f(%arg0: tensor<3xf32> {tf.aliasing_output = 0 : i32}) -> tensor<3xf32>
// ALIAS: stablehlo.while

// CHECK-LABEL: func.func @f
// CHECK:         %[[T:.*]] = "lazy.tanh"(%arg0)
// CHECK:         stablehlo.while(%[[I:.*]] = %{{.*}}, %[[Y:.*]] = %{{.*}}, %[[W:.*]] = %arg0)
// CHECK:         } do {
// CHECK:           %[[SQ:.*]] = "lazy.mul"(%[[Y]], %[[Y]])
// CHECK-NEXT:      %[[NEXT:.*]] = "lazy.add"(%[[SQ]], %[[T]])
// CHECK-NEXT:      stablehlo.return %{{.*}}, %[[NEXT]], %[[W]]
// CHECK-NOT:     "lazy.tanh"
func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
  %one = "lazy.constant"() {value = dense<1.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %n = "lazy.constant"() {value = dense<4> : tensor<i64>} : () -> tensor<i64>
  %t = "lazy.tanh"(%x) : (tensor<3xf32>) -> tensor<3xf32>
  %r:3 = stablehlo.while(%i = %n, %y = %one, %w = %x) : tensor<i64>, tensor<3xf32>, tensor<3xf32>
  cond {
    %z = "lazy.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %c = "lazy.compare"(%i, %z) {direction = "GT"} : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %k = "lazy.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %j = "lazy.sub"(%i, %k) : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %u = "lazy.constant"() {value = dense<1.0> : tensor<3xf32>} : () -> tensor<3xf32>
    %a = "lazy.mul"(%y, %u) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %b = "lazy.mul"(%a, %y) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %t2 = "lazy.tanh"(%x) : (tensor<3xf32>) -> tensor<3xf32>
    %c = "lazy.add"(%b, %t2) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    stablehlo.return %j, %c, %w : tensor<i64>, tensor<3xf32>, tensor<3xf32>
  }
  %s = "lazy.add"(%r#1, %t) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %s : tensor<3xf32>
}
