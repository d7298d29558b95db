// lazy-aliasing donates entry arguments to results: argument i gets
// tf.aliasing_output = j, which XLA turns into an input/output alias.
// RUN: lazy-opt --lazy-aliasing=donate=0:1,2:0 %s | filecheck %s
// A plan that cannot hold for this function is refused with the reason:
// RUN: not lazy-opt --lazy-aliasing=donate=1:1 %s 2>&1 | filecheck %s --check-prefix=TYPE
// RUN: not lazy-opt --lazy-aliasing=donate=0:0,0:1 %s 2>&1 | filecheck %s --check-prefix=TWICE
// RUN: not lazy-opt --lazy-aliasing=donate=0:1,2:1 %s 2>&1 | filecheck %s --check-prefix=TARGET
// RUN: not lazy-opt --lazy-aliasing=donate=3:0 %s 2>&1 | filecheck %s --check-prefix=ARG-RANGE
// RUN: not lazy-opt --lazy-aliasing=donate=0:2 %s 2>&1 | filecheck %s --check-prefix=RESULT-RANGE
// RUN: not lazy-opt --lazy-aliasing=donate=0-1 %s 2>&1 | filecheck %s --check-prefix=SYNTAX
// An empty plan changes nothing:
// RUN: lazy-opt --lazy-aliasing %s | filecheck %s --check-prefix=EMPTY
// Donors only (a program split over a mesh): XLA picks the results they alias.
// RUN: lazy-opt --lazy-aliasing=donors=0,2 %s | filecheck %s --check-prefix=DONORS
// RUN: not lazy-opt --lazy-aliasing=donors=0,0 %s 2>&1 | filecheck %s --check-prefix=DONOR-TWICE
// RUN: not lazy-opt --lazy-aliasing=donors=5 %s 2>&1 | filecheck %s --check-prefix=DONOR-RANGE

// CHECK-LABEL: func.func @main
// CHECK-SAME: %arg0: tensor<4xf32> {tf.aliasing_output = 1 : i32}
// CHECK-SAME: %arg1: tensor<2xi32> {lazy.note = "kept"}
// CHECK-SAME: %arg2: tensor<4xf32> {tf.aliasing_output = 0 : i32}
// TYPE: error: lazy-aliasing: cannot donate argument 1 (tensor<2xi32>) to result 1 (tensor<4xf32>): types differ
// TWICE: error: lazy-aliasing: argument 0 is donated twice
// TARGET: error: lazy-aliasing: result 1 is the target of arguments 0 and 2
// ARG-RANGE: error: lazy-aliasing: argument 3 out of range (@main has 3)
// RESULT-RANGE: error: lazy-aliasing: result 2 out of range (@main has 2)
// SYNTAX: error: lazy-aliasing: bad plan entry '0-1' (expected ARG:RESULT)
// EMPTY-NOT: tf.aliasing_output
// DONORS-LABEL: func.func @main
// DONORS-SAME: %arg0: tensor<4xf32> {jax.buffer_donor = true}
// DONORS-SAME: %arg1: tensor<2xi32> {lazy.note = "kept"}
// DONORS-SAME: %arg2: tensor<4xf32> {jax.buffer_donor = true}
// DONORS-NOT: tf.aliasing_output
// DONOR-TWICE: error: lazy-aliasing: argument 0 is donated twice
// DONOR-RANGE: error: lazy-aliasing: argument 5 out of range (@main has 3)
func.func @main(%a: tensor<4xf32>, %n: tensor<2xi32> {lazy.note = "kept"}, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "lazy.add"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "lazy.mul"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}
