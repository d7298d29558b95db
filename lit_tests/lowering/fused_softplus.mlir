// A user's fused lowering, loaded as a plugin: examples/softplus_lowering.py
// lowers lazy.log of 1 + exp(x) as max(x, 0) + log1p(exp(-|x|)) and declines
// every other lazy.log, which the built-in lowering then takes (docs/dev/lowerings.md,
// "Adding or overriding a lowering").
// RUN: lazy-opt --load-python-module %S/../../examples/softplus_lowering.py --split-input-file \
// RUN:   --lazy-canonicalize --lazy-to-stablehlo --canonicalize %s | filecheck %s
// (upstream canonicalize drops the exp and add nothing uses any more.)
// Without the plugin, the built-in lowering computes log(1 + exp(x)) as written:
// RUN: lazy-opt --split-input-file --lazy-canonicalize --lazy-to-stablehlo %s | filecheck %s --check-prefix=BUILTIN

// CHECK-LABEL: func.func @softplus
// CHECK: %[[ZERO:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: %[[ABS:.*]] = stablehlo.abs %arg0
// CHECK: %[[NEG:.*]] = stablehlo.negate %[[ABS]]
// CHECK: %[[EXP:.*]] = stablehlo.exponential %[[NEG]]
// CHECK: %[[TAIL:.*]] = stablehlo.log_plus_one %[[EXP]]
// CHECK: %[[MAX:.*]] = stablehlo.maximum %arg0, %[[ZERO]]
// CHECK: %[[SUM:.*]] = stablehlo.add %[[MAX]], %[[TAIL]]
// CHECK-NOT: stablehlo.log %
// CHECK: return %[[SUM]]
// BUILTIN-LABEL: func.func @softplus
// BUILTIN: %[[E:.*]] = stablehlo.exponential %arg0
// BUILTIN: %[[S:.*]] = stablehlo.add %[[E]], %{{.*}}
// BUILTIN: stablehlo.log %[[S]]
func.func @softplus(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = "lazy.exp"(%x) : (tensor<3xf32>) -> tensor<3xf32>
  %1 = "lazy.constant"() {value = dense<1.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %2 = "lazy.add"(%0, %1) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %3 = "lazy.log"(%2) : (tensor<3xf32>) -> tensor<3xf32>
  return %3 : tensor<3xf32>
}

// -----

// 1 on the left (as NumPy's 1 + np.exp(x) records it), x computed by another op:
// CHECK-LABEL: func.func @one_first
// CHECK: %[[X:.*]] = stablehlo.multiply %arg0, %arg0
// CHECK: stablehlo.abs %[[X]]
// CHECK: stablehlo.log_plus_one
// CHECK-NOT: stablehlo.log %
func.func @one_first(%a: tensor<2x2xf64>) -> tensor<2x2xf64> {
  %x = "lazy.mul"(%a, %a) : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
  %0 = "lazy.constant"() {value = dense<1.0> : tensor<f64>} : () -> tensor<f64>
  %1 = "lazy.broadcast_in_dim"(%0) {dims = array<i64>} : (tensor<f64>) -> tensor<2x2xf64>
  %2 = "lazy.exp"(%x) : (tensor<2x2xf64>) -> tensor<2x2xf64>
  %3 = "lazy.add"(%1, %2) : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
  %4 = "lazy.log"(%3) : (tensor<2x2xf64>) -> tensor<2x2xf64>
  return %4 : tensor<2x2xf64>
}

// -----

// Declined: a log of something else (returns None), and log(2 + exp(x))
// (raises Decline): the built-in lowering's stablehlo.log.
// CHECK-LABEL: func.func @declined
// CHECK-NOT: stablehlo.log_plus_one
// CHECK: stablehlo.log %arg0
// CHECK: %[[S:.*]] = stablehlo.add
// CHECK: stablehlo.log %[[S]]
// CHECK-NOT: stablehlo.log_plus_one
func.func @declined(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %0 = "lazy.log"(%x) : (tensor<3xf32>) -> tensor<3xf32>
  %1 = "lazy.exp"(%x) : (tensor<3xf32>) -> tensor<3xf32>
  %2 = "lazy.constant"() {value = dense<2.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %3 = "lazy.add"(%1, %2) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %4 = "lazy.log"(%3) : (tensor<3xf32>) -> tensor<3xf32>
  return %0, %4 : tensor<3xf32>, tensor<3xf32>
}
