// lazy-canonicalize: each pattern next to a nearby case it must leave alone.
// RUN: lazy-opt --split-input-file --lazy-canonicalize %s | filecheck %s

// x * 1 and 1 * x are x; x * 2 stays.
// CHECK-LABEL: func.func @mul_by_one
// CHECK: %[[TWO:.*]] = "lazy.constant"() {value = dense<2.000000e+00>
// CHECK: %[[M:.*]] = "lazy.mul"(%arg0, %[[TWO]])
// CHECK-NOT: lazy.mul
// CHECK: return %arg0, %arg0, %[[M]]
func.func @mul_by_one(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %one = "lazy.constant"() {value = dense<1.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %two = "lazy.constant"() {value = dense<2.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "lazy.mul"(%x, %one) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "lazy.mul"(%one, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = "lazy.mul"(%x, %two) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// x + 0 and 0 + x are x, also when the zero is a broadcast splat (folded to a
// splat first). A broadcast of a non-splat that merely contains a zero stays.
// CHECK-LABEL: func.func @add_zero
// CHECK: %[[C:.*]] = "lazy.constant"() {value = dense<[0, 1]> : tensor<2xi32>}
// CHECK: %[[B:.*]] = "lazy.broadcast_in_dim"(%[[C]])
// CHECK: %[[A:.*]] = "lazy.add"(%arg0, %[[B]])
// CHECK: return %arg0, %arg0, %[[A]]
func.func @add_zero(%x: tensor<3x2xi32>) -> (tensor<3x2xi32>, tensor<3x2xi32>, tensor<3x2xi32>) {
  %z = "lazy.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
  %zero = "lazy.broadcast_in_dim"(%z) {dims = array<i64>} : (tensor<i32>) -> tensor<3x2xi32>
  %0 = "lazy.add"(%x, %zero) : (tensor<3x2xi32>, tensor<3x2xi32>) -> tensor<3x2xi32>
  %1 = "lazy.add"(%zero, %x) : (tensor<3x2xi32>, tensor<3x2xi32>) -> tensor<3x2xi32>
  %c = "lazy.constant"() {value = dense<[0, 1]> : tensor<2xi32>} : () -> tensor<2xi32>
  %mixed = "lazy.broadcast_in_dim"(%c) {dims = array<i64: 1>} : (tensor<2xi32>) -> tensor<3x2xi32>
  %2 = "lazy.add"(%x, %mixed) : (tensor<3x2xi32>, tensor<3x2xi32>) -> tensor<3x2xi32>
  return %0, %1, %2 : tensor<3x2xi32>, tensor<3x2xi32>, tensor<3x2xi32>
}

// -----

// x - 0 is x; 0 - x is not. For floats x - (-0.0) is x + 0.0: it maps -0.0 to
// +0.0, so it becomes select(x == 0, +0.0, x) (XLA would drop a subtract of -0.0).
// CHECK-LABEL: func.func @sub_zero
// CHECK: %[[Z:.*]] = "lazy.constant"() {value = dense<0.000000e+00>
// CHECK: %[[S1:.*]] = "lazy.sub"(%[[Z]], %arg0)
// CHECK: %[[PZ:.*]] = "lazy.constant"() {value = dense<0.000000e+00>
// CHECK: %[[EQ:.*]] = "lazy.compare"(%arg0, %[[PZ]]) {direction = "EQ"}
// CHECK: %[[S2:.*]] = "lazy.select"(%[[EQ]], %[[PZ]], %arg0)
// CHECK-NOT: lazy.sub
// CHECK: return %arg0, %[[S1]], %[[S2]]
func.func @sub_zero(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %zero = "lazy.constant"() {value = dense<0.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %negzero = "lazy.constant"() {value = dense<-0.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "lazy.sub"(%x, %zero) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "lazy.sub"(%zero, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = "lazy.sub"(%x, %negzero) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Two permutes compose (result dim i is x's dim p1[p2[i]]); composing to the
// identity gives x. A single non-identity permute stays.
// CHECK-LABEL: func.func @permute_of_permute
// CHECK: %[[P:.*]] = "lazy.permute"(%arg0) {dims = array<i64: 1, 0>}
// CHECK: %[[Q:.*]] = "lazy.permute"(%arg1) {dims = array<i64: 2, 0, 1>}
// CHECK-NOT: lazy.permute
// CHECK: return %arg0, %[[P]], %[[Q]]
func.func @permute_of_permute(%x: tensor<2x3xf32>, %y: tensor<2x3x4xf32>) -> (tensor<2x3xf32>, tensor<3x2xf32>, tensor<4x2x3xf32>) {
  %t = "lazy.permute"(%x) {dims = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %back = "lazy.permute"(%t) {dims = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
  %a = "lazy.permute"(%y) {dims = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %b = "lazy.permute"(%a) {dims = array<i64: 2, 1, 0>} : (tensor<3x2x4xf32>) -> tensor<4x2x3xf32>
  return %back, %t, %b : tensor<2x3xf32>, tensor<3x2xf32>, tensor<4x2x3xf32>
}

// -----

// A reshape of a reshape is one reshape (back to the start: x); a reshape
// of a permute moves elements, so it stays.
// CHECK-LABEL: func.func @reshape_of_reshape
// CHECK: %[[R:.*]] = "lazy.reshape"(%arg0) : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK: %[[P:.*]] = "lazy.permute"(%arg0)
// CHECK: %[[PR:.*]] = "lazy.reshape"(%[[P]]) : (tensor<3x2xf32>) -> tensor<6xf32>
// CHECK: return %[[R]], %arg0, %[[PR]]
func.func @reshape_of_reshape(%x: tensor<2x3xf32>) -> (tensor<6xf32>, tensor<2x3xf32>, tensor<6xf32>) {
  %a = "lazy.reshape"(%x) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %b = "lazy.reshape"(%a) : (tensor<3x2xf32>) -> tensor<6xf32>
  %c = "lazy.reshape"(%b) : (tensor<6xf32>) -> tensor<2x3xf32>
  %t = "lazy.permute"(%x) {dims = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %d = "lazy.reshape"(%t) : (tensor<3x2xf32>) -> tensor<6xf32>
  return %b, %c, %d : tensor<6xf32>, tensor<2x3xf32>, tensor<6xf32>
}

// -----

// Broadcasting a splat constant is a splat constant of the result shape, at
// any size; broadcasting a non-splat constant stays.
// CHECK-LABEL: func.func @broadcast_of_splat
// CHECK-DAG: %[[S:.*]] = "lazy.constant"() {value = dense<1.500000e+00> : tensor<512x1024xf32>}
// CHECK-DAG: %[[C:.*]] = "lazy.constant"() {value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>}
// CHECK: %[[B:.*]] = "lazy.broadcast_in_dim"(%[[C]]) {dims = array<i64: 0>}
// CHECK: return %[[S]], %[[B]]
func.func @broadcast_of_splat() -> (tensor<512x1024xf32>, tensor<2x5xf32>) {
  %c = "lazy.constant"() {value = dense<1.5> : tensor<1xf32>} : () -> tensor<1xf32>
  %0 = "lazy.broadcast_in_dim"(%c) {dims = array<i64: 1>} : (tensor<1xf32>) -> tensor<512x1024xf32>
  %d = "lazy.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %1 = "lazy.broadcast_in_dim"(%d) {dims = array<i64: 0>} : (tensor<2xf32>) -> tensor<2x5xf32>
  return %0, %1 : tensor<512x1024xf32>, tensor<2x5xf32>
}

// -----

// Shape and type ops that change nothing are their operand. A same-shape
// broadcast_in_dim with swapped dims is a transpose, and stays.
// CHECK-LABEL: func.func @noops
// CHECK: %[[T:.*]] = "lazy.broadcast_in_dim"(%arg0) {dims = array<i64: 1, 0>}
// CHECK: %[[C:.*]] = "lazy.convert"(%arg0) : (tensor<2x2xf32>) -> tensor<2x2xf16>
// CHECK: return %arg0, %arg0, %arg0, %arg0, %[[T]], %[[C]]
func.func @noops(%x: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf16>) {
  %0 = "lazy.convert"(%x) : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %1 = "lazy.reshape"(%x) : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %2 = "lazy.permute"(%x) {dims = array<i64: 0, 1>} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %3 = "lazy.broadcast_in_dim"(%x) {dims = array<i64: 0, 1>} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %4 = "lazy.broadcast_in_dim"(%x) {dims = array<i64: 1, 0>} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %5 = "lazy.convert"(%x) : (tensor<2x2xf32>) -> tensor<2x2xf16>
  return %0, %1, %2, %3, %4, %5 : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf16>
}

// -----

// convert(convert(x)) skips the middle type when the first step is exact
// (i8 -> i32, f32 -> f64); a round trip through it is x. A lossy first step
// (f32 -> f16, i32 -> f32, f64 -> f32) must stay: it rounds.
// CHECK-LABEL: func.func @convert_chains
// CHECK: %[[W:.*]] = "lazy.convert"(%arg0) : (tensor<4xi8>) -> tensor<4xi64>
// CHECK: %[[H:.*]] = "lazy.convert"(%arg1) : (tensor<4xf32>) -> tensor<4xf16>
// CHECK: %[[HB:.*]] = "lazy.convert"(%[[H]]) : (tensor<4xf16>) -> tensor<4xf32>
// CHECK: %[[F:.*]] = "lazy.convert"(%arg2) : (tensor<4xi32>) -> tensor<4xf32>
// CHECK: %[[FB:.*]] = "lazy.convert"(%[[F]]) : (tensor<4xf32>) -> tensor<4xi32>
// CHECK: %[[D:.*]] = "lazy.convert"(%arg3) : (tensor<4xf64>) -> tensor<4xf32>
// CHECK: %[[DB:.*]] = "lazy.convert"(%[[D]]) : (tensor<4xf32>) -> tensor<4xf64>
// CHECK: return %[[W]], %arg1, %[[HB]], %[[FB]], %[[DB]]
func.func @convert_chains(%i: tensor<4xi8>, %f: tensor<4xf32>, %n: tensor<4xi32>, %d: tensor<4xf64>)
    -> (tensor<4xi64>, tensor<4xf32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf64>) {
  %a = "lazy.convert"(%i) : (tensor<4xi8>) -> tensor<4xi32>
  %0 = "lazy.convert"(%a) : (tensor<4xi32>) -> tensor<4xi64>
  %b = "lazy.convert"(%f) : (tensor<4xf32>) -> tensor<4xf64>
  %1 = "lazy.convert"(%b) : (tensor<4xf64>) -> tensor<4xf32>
  %c = "lazy.convert"(%f) : (tensor<4xf32>) -> tensor<4xf16>
  %2 = "lazy.convert"(%c) : (tensor<4xf16>) -> tensor<4xf32>
  %e = "lazy.convert"(%n) : (tensor<4xi32>) -> tensor<4xf32>
  %3 = "lazy.convert"(%e) : (tensor<4xf32>) -> tensor<4xi32>
  %g = "lazy.convert"(%d) : (tensor<4xf64>) -> tensor<4xf32>
  %4 = "lazy.convert"(%g) : (tensor<4xf32>) -> tensor<4xf64>
  return %0, %1, %2, %3, %4 : tensor<4xi64>, tensor<4xf32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf64>
}

// -----

// Constant folding with StableHLO's integer semantics: division truncates
// toward zero and the remainder takes the dividend's sign.
// CHECK-LABEL: func.func @fold_int_div_rem
// CHECK-DAG: %[[Q:.*]] = "lazy.constant"() {value = dense<[3, -3, -3, 3]> : tensor<4xi32>}
// CHECK-DAG: %[[R:.*]] = "lazy.constant"() {value = dense<[1, -1, 1, -1]> : tensor<4xi32>}
// CHECK-NOT: lazy.div
// CHECK-NOT: lazy.rem
// CHECK: return %[[Q]], %[[R]]
func.func @fold_int_div_rem() -> (tensor<4xi32>, tensor<4xi32>) {
  %a = "lazy.constant"() {value = dense<[7, -7, 7, -7]> : tensor<4xi32>} : () -> tensor<4xi32>
  %b = "lazy.constant"() {value = dense<[2, 2, -2, -2]> : tensor<4xi32>} : () -> tensor<4xi32>
  %0 = "lazy.div"(%a, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %1 = "lazy.rem"(%a, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %0, %1 : tensor<4xi32>, tensor<4xi32>
}

// -----

// Integer division and remainder by zero fold to 0, the ops' value (NumPy's).
// CHECK-LABEL: func.func @fold_int_division_by_zero
// CHECK: %[[Q:.*]] = "lazy.constant"() {value = dense<[0, 3]> : tensor<2xi32>}
// CHECK: %[[R:.*]] = "lazy.constant"() {value = dense<[0, 1]> : tensor<2xi32>}
// CHECK-NOT: lazy.div
// CHECK-NOT: lazy.rem
// CHECK: return %[[Q]], %[[R]]
func.func @fold_int_division_by_zero() -> (tensor<2xi32>, tensor<2xi32>) {
  %a = "lazy.constant"() {value = dense<[7, 7]> : tensor<2xi32>} : () -> tensor<2xi32>
  %b = "lazy.constant"() {value = dense<[0, 2]> : tensor<2xi32>} : () -> tensor<2xi32>
  %0 = "lazy.div"(%a, %b) : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
  %1 = "lazy.rem"(%a, %b) : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
  return %0, %1 : tensor<2xi32>, tensor<2xi32>
}

// -----

// What is left to the backend does not fold: INT_MIN / -1 and float -> int
// conversion out of range.
// CHECK-LABEL: func.func @no_fold_undefined
// CHECK: lazy.div
// CHECK: lazy.rem
// CHECK: lazy.convert
func.func @no_fold_undefined() -> (tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) {
  %a = "lazy.constant"() {value = dense<[7, -2147483648]> : tensor<2xi32>} : () -> tensor<2xi32>
  %m = "lazy.constant"() {value = dense<[1, -1]> : tensor<2xi32>} : () -> tensor<2xi32>
  %0 = "lazy.div"(%a, %m) : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
  %1 = "lazy.rem"(%a, %m) : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
  %f = "lazy.constant"() {value = dense<[1.0, 3.0e9]> : tensor<2xf32>} : () -> tensor<2xf32>
  %2 = "lazy.convert"(%f) : (tensor<2xf32>) -> tensor<2xi32>
  return %0, %1, %2 : tensor<2xi32>, tensor<2xi32>, tensor<2xi32>
}

// -----

// Splats fold at any size into a splat; non-splats fold up to 16 elements,
// so a 17-element sum stays.
// CHECK-LABEL: func.func @fold_sizes
// CHECK-DAG: %[[BIG:.*]] = "lazy.constant"() {value = dense<5> : tensor<1024x1024xi64>}
// CHECK-DAG: %[[SMALL:.*]] = "lazy.constant"() {value = dense<[2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32]> : tensor<16xi64>}
// CHECK: %[[NOT:.*]] = "lazy.add"(%{{.*}}, %{{.*}}) : (tensor<17xi64>, tensor<17xi64>) -> tensor<17xi64>
// CHECK: return %[[BIG]], %[[SMALL]], %[[NOT]]
func.func @fold_sizes() -> (tensor<1024x1024xi64>, tensor<16xi64>, tensor<17xi64>) {
  %two = "lazy.constant"() {value = dense<2> : tensor<1024x1024xi64>} : () -> tensor<1024x1024xi64>
  %three = "lazy.constant"() {value = dense<3> : tensor<1024x1024xi64>} : () -> tensor<1024x1024xi64>
  %0 = "lazy.add"(%two, %three) : (tensor<1024x1024xi64>, tensor<1024x1024xi64>) -> tensor<1024x1024xi64>
  %s = "lazy.constant"() {value = dense<[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]> : tensor<16xi64>} : () -> tensor<16xi64>
  %1 = "lazy.add"(%s, %s) : (tensor<16xi64>, tensor<16xi64>) -> tensor<16xi64>
  %l = "lazy.constant"() {value = dense<[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]> : tensor<17xi64>} : () -> tensor<17xi64>
  %2 = "lazy.add"(%l, %l) : (tensor<17xi64>, tensor<17xi64>) -> tensor<17xi64>
  return %0, %1, %2 : tensor<1024x1024xi64>, tensor<16xi64>, tensor<17xi64>
}

// -----

// Folding chains through unary, compare, select and convert; a constant
// mixed with an argument does not fold.
// CHECK-LABEL: func.func @fold_chain
// CHECK-DAG: %[[R:.*]] = "lazy.constant"() {value = dense<[2, 0, 3]> : tensor<3xi32>}
// CHECK-DAG: %[[C:.*]] = "lazy.constant"() {value = dense<[1.500000e+00, -2.000000e+00, 3.000000e+00]> : tensor<3xf32>}
// CHECK: %[[M:.*]] = "lazy.maximum"(%arg0, %[[C]])
// CHECK: return %[[R]], %[[M]]
func.func @fold_chain(%x: tensor<3xf32>) -> (tensor<3xi32>, tensor<3xf32>) {
  %c = "lazy.constant"() {value = dense<[1.5, -2.0, 3.0]> : tensor<3xf32>} : () -> tensor<3xf32>
  %zero = "lazy.constant"() {value = dense<0.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %r = "lazy.round"(%c) : (tensor<3xf32>) -> tensor<3xf32>
  %pos = "lazy.compare"(%c, %zero) {direction = "GT"} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  %s = "lazy.select"(%pos, %r, %zero) : (tensor<3xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %i = "lazy.convert"(%s) : (tensor<3xf32>) -> tensor<3xi32>
  %m = "lazy.maximum"(%x, %c) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %i, %m : tensor<3xi32>, tensor<3xf32>
}

// -----

// Signed zeros fold as the ops say: sign(-0.0) is +0.0 (NumPy's and torch's),
// max(-0.0, +0.0) is +0.0 and min is -0.0 in either operand order (IEEE).
// CHECK-LABEL: func.func @fold_signed_zero
// CHECK-DAG: %[[S:.*]] = "lazy.constant"() {value = dense<[0.000000e+00, 0.000000e+00, -1.000000e+00]> : tensor<3xf32>}
// CHECK-DAG: %[[MAX:.*]] = "lazy.constant"() {value = dense<0.000000e+00> : tensor<2xf32>}
// CHECK-DAG: %[[MIN:.*]] = "lazy.constant"() {value = dense<-0.000000e+00> : tensor<2xf32>}
// CHECK: return %[[S]], %[[MAX]], %[[MIN]]
func.func @fold_signed_zero() -> (tensor<3xf32>, tensor<2xf32>, tensor<2xf32>) {
  %n = "lazy.constant"() {value = dense<[-0.0, 0.0, -7.0]> : tensor<3xf32>} : () -> tensor<3xf32>
  %a = "lazy.constant"() {value = dense<[-0.0, 0.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %b = "lazy.constant"() {value = dense<[0.0, -0.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %0 = "lazy.sign"(%n) : (tensor<3xf32>) -> tensor<3xf32>
  %1 = "lazy.maximum"(%a, %b) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %2 = "lazy.minimum"(%a, %b) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0, %1, %2 : tensor<3xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// An exact step is not enough when the last step changes kind: i16 -> f32 is
// exact, but f32 -> i8 saturates where i16 -> i8 wraps, so this chain stays.
// Skipping an exact i16 -> i32 before i8 is fine: both wrap.
// CHECK-LABEL: func.func @convert_kind_change
// CHECK: %[[F:.*]] = "lazy.convert"(%arg0) : (tensor<4xi16>) -> tensor<4xf32>
// CHECK: %[[S:.*]] = "lazy.convert"(%[[F]]) : (tensor<4xf32>) -> tensor<4xi8>
// CHECK: %[[W:.*]] = "lazy.convert"(%arg0) : (tensor<4xi16>) -> tensor<4xi8>
// CHECK: return %[[S]], %[[W]]
func.func @convert_kind_change(%x: tensor<4xi16>) -> (tensor<4xi8>, tensor<4xi8>) {
  %f = "lazy.convert"(%x) : (tensor<4xi16>) -> tensor<4xf32>
  %0 = "lazy.convert"(%f) : (tensor<4xf32>) -> tensor<4xi8>
  %w = "lazy.convert"(%x) : (tensor<4xi16>) -> tensor<4xi32>
  %1 = "lazy.convert"(%w) : (tensor<4xi32>) -> tensor<4xi8>
  return %0, %1 : tensor<4xi8>, tensor<4xi8>
}
