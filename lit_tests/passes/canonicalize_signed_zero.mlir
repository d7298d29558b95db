// lazy-canonicalize keeps the sign of zero as eager torch and NumPy do (IEEE
// round to nearest): -0.0 + 0.0 is +0.0, so a float x + (+0.0) is not x.
// Only x + (-0.0) is x. x + (+0.0) becomes select(x == 0, +0.0, x), not a
// kept add: XLA's algebraic simplifier rewrites A + 0 => A for any zero
// constant, which would give -0.0 back. Integer x + 0 is x.
// RUN: lazy-opt --split-input-file --lazy-canonicalize %s | filecheck %s

// CHECK-LABEL: func.func @float_add_zero
// CHECK: %[[Z:.*]] = "lazy.constant"() {value = dense<0.000000e+00> : tensor<4xf32>}
// CHECK: %[[EQ:.*]] = "lazy.compare"(%arg0, %[[Z]]) {direction = "EQ"}
// CHECK: %[[S:.*]] = "lazy.select"(%[[EQ]], %[[Z]], %arg0)
// CHECK: %[[EQ2:.*]] = "lazy.compare"(%arg0, %[[Z2:.*]]) {direction = "EQ"}
// CHECK: %[[S2:.*]] = "lazy.select"(%[[EQ2]], %[[Z2]], %arg0)
// CHECK-NOT: lazy.add
// CHECK: return %[[S]], %[[S2]], %arg0, %arg0
func.func @float_add_zero(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %zero = "lazy.constant"() {value = dense<0.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %negzero = "lazy.constant"() {value = dense<-0.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "lazy.add"(%x, %zero) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "lazy.add"(%zero, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = "lazy.add"(%x, %negzero) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = "lazy.add"(%negzero, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A constant plus zero folds to the exact sum (-0.0 + 0.0 = +0.0).
// CHECK-LABEL: func.func @constant_add_zero
// CHECK: %[[C:.*]] = "lazy.constant"() {value = dense<0.000000e+00> : tensor<4xf32>}
// CHECK-NOT: lazy.add
// CHECK-NOT: lazy.select
// CHECK: return %[[C]]
func.func @constant_add_zero() -> tensor<4xf32> {
  %zero = "lazy.constant"() {value = dense<0.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %negzero = "lazy.constant"() {value = dense<-0.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "lazy.add"(%negzero, %zero) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Integers have one zero: x + 0 and 0 + x are x.
// CHECK-LABEL: func.func @int_add_zero
// CHECK-NOT: lazy.add
// CHECK-NOT: lazy.select
// CHECK: return %arg0, %arg0
func.func @int_add_zero(%x: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>) {
  %zero = "lazy.constant"() {value = dense<0> : tensor<4xi32>} : () -> tensor<4xi32>
  %0 = "lazy.add"(%x, %zero) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %1 = "lazy.add"(%zero, %x) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %0, %1 : tensor<4xi32>, tensor<4xi32>
}
