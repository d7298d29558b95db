// lazy-keep-roundings: a float product that a sum takes is fenced, so that
// XLA's CPU backend cannot contract the two into one fused multiply-add and
// the product keeps its own rounding, as eager's two kernels round it. The
// fence is an integer xor with the replica id (0: lazycore compiles one
// replica), which neither XLA nor LLVM can prove to be zero.
// RUN: lazy-opt --split-input-file --lazy-keep-roundings %s | filecheck %s
// The final canonicalize of the pipelines does not fold the fence away.
// RUN: lazy-opt --split-input-file --lazy-keep-roundings --canonicalize %s | filecheck %s

// x * 0.3 + y: the add takes the fenced product.
// CHECK-LABEL: func.func @axpy
// CHECK: %[[R:.*]] = stablehlo.replica_id : tensor<ui32>
// CHECK: %[[Z:.*]] = stablehlo.convert %[[R]] : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[I:.*]] = stablehlo.broadcast_in_dim %[[Z]], dims = [] : (tensor<i32>) -> tensor<8xi32>
// CHECK: %[[M:.*]] = stablehlo.multiply %arg0, %{{.*}} : tensor<8xf32>
// CHECK: %[[B:.*]] = stablehlo.bitcast_convert %[[M]] : (tensor<8xf32>) -> tensor<8xi32>
// CHECK: %[[X:.*]] = stablehlo.xor %[[B]], %[[I]] : tensor<8xi32>
// CHECK: %[[F:.*]] = stablehlo.bitcast_convert %[[X]] : (tensor<8xi32>) -> tensor<8xf32>
// CHECK: %[[S:.*]] = stablehlo.add %[[F]], %arg1 : tensor<8xf32>
// CHECK: return %[[S]]
func.func @axpy(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
  %c = stablehlo.constant dense<3.0e-01> : tensor<8xf32>
  %0 = stablehlo.multiply %x, %c : tensor<8xf32>
  %1 = stablehlo.add %0, %y : tensor<8xf32>
  return %1 : tensor<8xf32>
}

// -----

// float64 fences through a 64-bit integer; a product reaching a subtract
// through a broadcast is fenced too, and the product the function returns as
// well keeps its unfenced value there.
// CHECK-LABEL: func.func @through_broadcast
// CHECK: %[[M:.*]] = stablehlo.multiply %arg0, %arg1 : tensor<4xf64>
// CHECK: stablehlo.bitcast_convert %[[M]] : (tensor<4xf64>) -> tensor<4xi64>
// CHECK: %[[F:.*]] = stablehlo.bitcast_convert %{{.*}} : (tensor<4xi64>) -> tensor<4xf64>
// CHECK: %[[B:.*]] = stablehlo.broadcast_in_dim %[[F]], dims = [1] : (tensor<4xf64>) -> tensor<2x4xf64>
// CHECK: %[[S:.*]] = stablehlo.subtract %arg2, %[[B]] : tensor<2x4xf64>
// CHECK: return %[[S]], %[[M]]
func.func @through_broadcast(%a: tensor<4xf64>, %b: tensor<4xf64>, %c: tensor<2x4xf64>) -> (tensor<2x4xf64>, tensor<4xf64>) {
  %0 = stablehlo.multiply %a, %b : tensor<4xf64>
  %1 = stablehlo.broadcast_in_dim %0, dims = [1] : (tensor<4xf64>) -> tensor<2x4xf64>
  %2 = stablehlo.subtract %c, %1 : tensor<2x4xf64>
  return %2, %0 : tensor<2x4xf64>, tensor<4xf64>
}

// -----

// Left alone: a product no sum takes, an integer product, and a float64
// product of two float32s (exact: the float32 fused multiply-add the torch
// lowerings compute for eager's addcmul and add(alpha=) this way).
// CHECK-LABEL: func.func @left
// CHECK-NOT: stablehlo.xor
// CHECK: return
func.func @left(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf64>, %i: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>, tensor<4xf64>) {
  %0 = stablehlo.multiply %a, %b : tensor<4xf32>
  %1 = stablehlo.exponential %0 : tensor<4xf32>
  %2 = stablehlo.multiply %i, %i : tensor<4xi32>
  %3 = stablehlo.add %2, %i : tensor<4xi32>
  %4 = stablehlo.convert %a : (tensor<4xf32>) -> tensor<4xf64>
  %5 = stablehlo.convert %b : (tensor<4xf32>) -> tensor<4xf64>
  %6 = stablehlo.multiply %4, %5 : tensor<4xf64>
  %7 = stablehlo.add %6, %c : tensor<4xf64>
  return %1, %3, %7 : tensor<4xf32>, tensor<4xi32>, tensor<4xf64>
}

// -----

// A lazy.fma's product (marked lazy.fused by its lowering) is left for XLA to
// fuse into its sum, as eager's fmadd computes it; the mark is taken off. Its
// first operand is tied to its addend, a xor (c and 0), so that LLVM cannot
// share the product with another a * b nor compute it apart from its sum,
// which would leave it unfused. Another product beside it is fenced as before.
// CHECK-LABEL: func.func @fused
// CHECK: %[[Z:.*]] = stablehlo.broadcast_in_dim %{{.*}}, dims = [] : (tensor<i64>) -> tensor<4xi64>
// CHECK: %[[C:.*]] = stablehlo.bitcast_convert %arg2 : (tensor<4xf64>) -> tensor<4xi64>
// CHECK: %[[N:.*]] = stablehlo.and %[[C]], %[[Z]] : tensor<4xi64>
// CHECK: %[[A:.*]] = stablehlo.bitcast_convert %arg0 : (tensor<4xf64>) -> tensor<4xi64>
// CHECK: %[[X:.*]] = stablehlo.xor %[[A]], %[[N]] : tensor<4xi64>
// CHECK: %[[T:.*]] = stablehlo.bitcast_convert %[[X]] : (tensor<4xi64>) -> tensor<4xf64>
// CHECK: %[[M:.*]] = stablehlo.multiply %[[T]], %arg1 : tensor<4xf64>
// CHECK-NEXT: %[[S:.*]] = stablehlo.add %[[M]], %arg2 : tensor<4xf64>
// CHECK: stablehlo.xor
// CHECK-NOT: lazy.fused
// CHECK: return %[[S]]
func.func @fused(%a: tensor<4xf64>, %b: tensor<4xf64>, %c: tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>) {
  %0 = stablehlo.multiply %a, %b {lazy.fused = true} : tensor<4xf64>
  %1 = stablehlo.add %0, %c : tensor<4xf64>
  %2 = stablehlo.multiply %a, %c : tensor<4xf64>
  %3 = stablehlo.add %2, %b : tensor<4xf64>
  return %1, %3 : tensor<4xf64>, tensor<4xf64>
}

// -----

// A fused product a subtract takes, whose addend is computed after it: the
// product moves to its sum, after the addend it is tied to.
// CHECK-LABEL: func.func @fused_subtract
// CHECK: %[[D:.*]] = stablehlo.exponential %arg2 : tensor<4xf32>
// CHECK: %[[C:.*]] = stablehlo.bitcast_convert %[[D]] : (tensor<4xf32>) -> tensor<4xi32>
// CHECK: stablehlo.and %[[C]]
// CHECK: %[[T:.*]] = stablehlo.bitcast_convert %{{.*}} : (tensor<4xi32>) -> tensor<4xf32>
// CHECK: %[[M:.*]] = stablehlo.multiply %[[T]], %arg1 : tensor<4xf32>
// CHECK-NEXT: %[[S:.*]] = stablehlo.subtract %[[D]], %[[M]] : tensor<4xf32>
// CHECK: return %[[S]]
func.func @fused_subtract(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %a, %b {lazy.fused = true} : tensor<4xf32>
  %1 = stablehlo.exponential %c : tensor<4xf32>
  %2 = stablehlo.subtract %1, %0 : tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

// A fused product of broadcast numbers onto a broadcast number is not tied:
// XLA computes it once as a scalar (see @uniform).
// CHECK-LABEL: func.func @fused_uniform
// CHECK-NOT: stablehlo.xor
// CHECK-NOT: lazy.fused
// CHECK: return
func.func @fused_uniform(%a: tensor<f32>, %b: tensor<f32>) -> tensor<8xf32> {
  %0 = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> tensor<8xf32>
  %1 = stablehlo.broadcast_in_dim %b, dims = [] : (tensor<f32>) -> tensor<8xf32>
  %2 = stablehlo.multiply %0, %1 {lazy.fused = true} : tensor<8xf32>
  %3 = stablehlo.add %2, %1 : tensor<8xf32>
  return %3 : tensor<8xf32>
}

// -----

// A product of broadcast numbers is one number everywhere: XLA computes the
// chain once as a scalar, and its algebraic simplifier cycles on fences there
// (x = x * 0.999 + 0.01 from ones, a hundred times), so it is left.
// CHECK-LABEL: func.func @uniform
// CHECK-NOT: stablehlo.xor
// CHECK: return
func.func @uniform(%a: tensor<f32>, %b: tensor<f32>) -> tensor<8xf32> {
  %0 = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> tensor<8xf32>
  %1 = stablehlo.broadcast_in_dim %b, dims = [] : (tensor<f32>) -> tensor<8xf32>
  %2 = stablehlo.add %0, %1 : tensor<8xf32>
  %3 = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> tensor<8xf32>
  %4 = stablehlo.multiply %2, %3 : tensor<8xf32>
  %5 = stablehlo.broadcast_in_dim %b, dims = [] : (tensor<f32>) -> tensor<8xf32>
  %6 = stablehlo.add %4, %5 : tensor<8xf32>
  return %6 : tensor<8xf32>
}

// -----

// A product a summing reduce takes is fenced: XLA unrolls a short reduction
// (rows of 2) into an add and would contract the product into it. A reduce
// that takes the maximum is no sum: its product is left.
// CHECK-LABEL: func.func @short_sum
// CHECK: %[[M:.*]] = stablehlo.multiply %arg0, %arg0 : tensor<4x2xf32>
// CHECK: stablehlo.xor
// CHECK: %[[F:.*]] = stablehlo.bitcast_convert %{{.*}} : (tensor<4x2xi32>) -> tensor<4x2xf32>
// CHECK: stablehlo.reduce(%[[F]] init: %{{.*}}) applies stablehlo.add
// CHECK-LABEL: func.func @max_reduce
// CHECK-NOT: stablehlo.xor
// CHECK: return
func.func @short_sum(%x: tensor<4x2xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %x, %x : tensor<4x2xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %1 = stablehlo.reduce(%0 init: %z) applies stablehlo.add across dimensions = [1] : (tensor<4x2xf32>, tensor<f32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
func.func @max_reduce(%x: tensor<4x2xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %x, %x : tensor<4x2xf32>
  %z = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %1 = stablehlo.reduce(%0 init: %z) applies stablehlo.maximum across dimensions = [1] : (tensor<4x2xf32>, tensor<f32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// A sum over dimensions of 8 or more elements each is XLA's loop, which
// contracts nothing (fenced or not, the same bits): its product is left. A
// reduce over a long and a short dimension keeps the fence.
// CHECK-LABEL: func.func @long_sum
// CHECK-NOT: stablehlo.xor
// CHECK: return
// CHECK-LABEL: func.func @long_and_short_sum
// CHECK: stablehlo.xor
// CHECK: return
func.func @long_sum(%x: tensor<4x8xf32>, %y: tensor<8x4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = stablehlo.multiply %x, %x : tensor<4x8xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %1 = stablehlo.reduce(%0 init: %z) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  %2 = stablehlo.multiply %y, %y : tensor<8x4xf32>
  %3 = stablehlo.reduce(%2 init: %z) applies stablehlo.add across dimensions = [0] : (tensor<8x4xf32>, tensor<f32>) -> tensor<4xf32>
  return %1, %3 : tensor<4xf32>, tensor<4xf32>
}
func.func @long_and_short_sum(%x: tensor<16x3x4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %x, %x : tensor<16x3x4xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %1 = stablehlo.reduce(%0 init: %z) applies stablehlo.add across dimensions = [0, 1] : (tensor<16x3x4xf32>, tensor<f32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// A divide's dividend that is a divide, and a divisor that is a divide or a
// sqrt, are fenced for that divide only: XLA's algebraic simplifier would
// rewrite (a / b) / b to a / (b * b) (the backward of a / b) and a / sqrt(b) to
// a * rsqrt(b), rounded otherwise than eager's divides. The quotient returned
// as it is keeps its unfenced value.
// CHECK-LABEL: func.func @divide_of_divide
// CHECK: %[[Q:.*]] = stablehlo.divide %arg0, %arg1 : tensor<8xf32>
// CHECK: stablehlo.bitcast_convert %[[Q]] : (tensor<8xf32>) -> tensor<8xi32>
// CHECK: %[[F:.*]] = stablehlo.bitcast_convert %{{.*}} : (tensor<8xi32>) -> tensor<8xf32>
// CHECK: %[[D:.*]] = stablehlo.divide %[[F]], %arg1 : tensor<8xf32>
// CHECK: %[[S:.*]] = stablehlo.sqrt %arg1 : tensor<8xf32>
// CHECK: stablehlo.bitcast_convert %[[S]] : (tensor<8xf32>) -> tensor<8xi32>
// CHECK: %[[G:.*]] = stablehlo.bitcast_convert %{{.*}} : (tensor<8xi32>) -> tensor<8xf32>
// CHECK: %[[R:.*]] = stablehlo.divide %arg0, %[[G]] : tensor<8xf32>
// CHECK: return %[[D]], %[[R]], %[[Q]]
func.func @divide_of_divide(%a: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %0 = stablehlo.divide %a, %b : tensor<8xf32>
  %1 = stablehlo.divide %0, %b : tensor<8xf32>
  %2 = stablehlo.sqrt %b : tensor<8xf32>
  %3 = stablehlo.divide %a, %2 : tensor<8xf32>
  return %1, %3, %0 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Divides XLA does not rewrite around (a divisor that is an add, a quotient
// a multiply takes) are not fenced.
// CHECK-LABEL: func.func @plain_divides
// CHECK-NOT: stablehlo.xor
// CHECK: return
func.func @plain_divides(%a: tensor<8xf64>, %b: tensor<8xf64>) -> tensor<8xf64> {
  %0 = stablehlo.add %a, %b : tensor<8xf64>
  %1 = stablehlo.divide %a, %0 : tensor<8xf64>
  %2 = stablehlo.multiply %1, %b : tensor<8xf64>
  return %2 : tensor<8xf64>
}

// -----

// A scatter-add an add takes is fenced for that add: XLA's simplifier would
// fold `a + scatter(b, i, u)` into `scatter(a + b, i, u)`, adding `a` before
// the updates (a tied embedding's gradient: the head's product plus the
// lookup's scatter into zeros); eager adds the updates' sum. The scatter the
// function returns keeps its unfenced value.
// CHECK-LABEL: func.func @scatter_then_add
// CHECK: %[[S:.*]] = "stablehlo.scatter"
// CHECK: %[[B:.*]] = stablehlo.bitcast_convert %[[S]] : (tensor<6x2xf32>) -> tensor<6x2xi32>
// CHECK: %[[X:.*]] = stablehlo.xor %[[B]], %{{.*}} : tensor<6x2xi32>
// CHECK: %[[F:.*]] = stablehlo.bitcast_convert %[[X]] : (tensor<6x2xi32>) -> tensor<6x2xf32>
// CHECK: %[[A:.*]] = stablehlo.add %arg2, %[[F]] : tensor<6x2xf32>
// CHECK: return %[[A]], %[[S]]
func.func @scatter_then_add(%i: tensor<3x1xi64>, %u: tensor<3x2xf32>, %a: tensor<6x2xf32>) -> (tensor<6x2xf32>, tensor<6x2xf32>) {
  %z = stablehlo.constant dense<0.0> : tensor<6x2xf32>
  %s = "stablehlo.scatter"(%z, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%p: tensor<f32>, %q: tensor<f32>):
    %t = stablehlo.add %p, %q : tensor<f32>
    stablehlo.return %t : tensor<f32>
  }) : (tensor<6x2xf32>, tensor<3x1xi64>, tensor<3x2xf32>) -> tensor<6x2xf32>
  %r = stablehlo.add %a, %s : tensor<6x2xf32>
  return %r, %s : tensor<6x2xf32>, tensor<6x2xf32>
}
