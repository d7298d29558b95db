// lazy.lane_sum and lazy.lane_moments: eager's fused multiply-adds in its
// vector loops are products marked lazy.fused and their sums, in float32 as
// in float64 (lazy-keep-roundings ties each to its sum, so that XLA's CPU
// backend contracts the two). float32's were a float64 sum of the exact
// product behind a replica-id fence (5 ops each), which rounded twice within
// 2**-29 of a float32 midpoint.
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s

// A fused lane_sum of rows of 3 in one lane: the first product, then two fused multiply-adds.
// CHECK-LABEL: func.func @lane_sum_fused
// CHECK-NOT: f64
// CHECK: stablehlo.multiply %arg0, %arg1 : tensor<4x3xf32>
// CHECK: %[[M1:.*]] = stablehlo.multiply %{{.*}}, %{{.*}} {lazy.fused = true} : tensor<4x1xf32>
// CHECK: %[[S1:.*]] = stablehlo.add %[[M1]], %{{.*}} : tensor<4x1xf32>
// CHECK: %[[M2:.*]] = stablehlo.multiply %{{.*}}, %{{.*}} {lazy.fused = true} : tensor<4x1xf32>
// CHECK: stablehlo.add %[[M2]], %[[S1]] : tensor<4x1xf32>
// CHECK-NOT: f64
// CHECK: return
func.func @lane_sum_fused(%a: tensor<4x3xf32>, %b: tensor<4x3xf32>) -> tensor<4xf32> {
  %0 = "lazy.lane_sum"(%a, %b) {fused = true, halving = false, lanes = 1 : i64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Welford's steps in two lanes of rows of 4: m1 = fma(d, 1 / count, m1), m2 = fma(d, x - m1, m2).
// CHECK-LABEL: func.func @lane_moments
// CHECK-NOT: f64
// CHECK: stablehlo.multiply %{{.*}}, %{{.*}} {lazy.fused = true} : tensor<3x2xf32>
// CHECK-NOT: f64
// CHECK: return
func.func @lane_moments(%x: tensor<3x4xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %0:2 = "lazy.lane_moments"(%x) {lanes = 2 : i64} : (tensor<3x4xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  return %0#0, %0#1 : tensor<3xf32>, tensor<3xf32>
}

// -----

// A lane_sum of rows of 257 vectors of 16 lanes and a tail of 5 (past UNROLL_VECTORS, 256): vector 0,
// then a loop of 4 iterations adding 64 vectors each in order, read from the products at element
// 16 + 1024 * i, the tail's products fused into the first 5 lanes, then the lanes halved.
// CHECK-LABEL: func.func @lane_sum_loop
// CHECK: stablehlo.while
// CHECK: cond {
// CHECK: stablehlo.constant dense<4> : tensor<i32>
// CHECK: } do {
// CHECK: stablehlo.constant dense<1024> : tensor<i32>
// CHECK: stablehlo.dynamic_slice %{{.*}}, sizes = [2, 1024]
// CHECK-COUNT-64: stablehlo.add %{{.*}} : tensor<2x16xf32>
// CHECK-NOT: stablehlo.add %{{.*}} : tensor<2x16xf32>
// CHECK: stablehlo.return
// CHECK: }
// CHECK: stablehlo.multiply %{{.*}}, %{{.*}} {lazy.fused = true} : tensor<2x5xf32>
// CHECK: stablehlo.concatenate
// CHECK: stablehlo.add %{{.*}} : tensor<2x8xf32>
// CHECK: stablehlo.add %{{.*}} : tensor<2x1xf32>
// CHECK: return
func.func @lane_sum_loop(%a: tensor<2x4117xf32>, %b: tensor<2x4117xf32>) -> tensor<2xf32> {
  %0 = "lazy.lane_sum"(%a, %b) {fused = false, halving = true, lanes = 16 : i64} : (tensor<2x4117xf32>, tensor<2x4117xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// lazy.vector_sum, torch.sum's CPU cascade, of rows of 1,100 in vectors of 8 lanes: 137 vectors, 34
// groups of four into four partial sums (two runs of 16 groups summed across the row at once, then
// the 2 groups after them), vector 136 into partial 0, the partials in order, then the tail of 4
// and the 8 lanes from zero (a -0 result made +0, as 0 + x makes it).
// CHECK-LABEL: func.func @vector_sum
// CHECK: stablehlo.reshape %{{.*}} : (tensor<3x1096xf32>) -> tensor<3x137x8xf32>
// CHECK: stablehlo.reshape %{{.*}} : (tensor<3x136x8xf32>) -> tensor<3x34x32xf32>
// CHECK: stablehlo.reshape %{{.*}} : (tensor<3x32x32xf32>) -> tensor<3x2x16x32xf32>
// CHECK-COUNT-15: stablehlo.add %{{.*}} : tensor<3x2x32xf32>
// CHECK: stablehlo.add %{{.*}} : tensor<3x32xf32>
// CHECK: stablehlo.compare EQ
// CHECK: stablehlo.select
// CHECK: return
func.func @vector_sum(%x: tensor<3x1100xf32>) -> tensor<3xf32> {
  %0 = "lazy.vector_sum"(%x) {lanes = 8 : i64, threads = 1 : i64} : (tensor<3x1100xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// lazy.column_sum, torch.sum's CPU cascade over leading dims, of 40 rows x 70 columns in vectors of
// 8 lanes: the first 64 columns (two blocks of four vectors) each a cascade down the rows (the two
// runs of 16 rows summed across the row at once, the 8 rows after them into level 0, which then
// takes level 1's two run sums), the last 6 columns four rows at a time, the two joined.
// CHECK-LABEL: func.func @column_sum
// CHECK: stablehlo.slice %arg0 [0:40, 0:64]
// CHECK-COUNT-15: stablehlo.add %{{.*}} : tensor<2x64xf32>
// CHECK: stablehlo.add %{{.*}} : tensor<64xf32>
// CHECK: stablehlo.slice %arg0 [0:40, 64:70]
// CHECK: stablehlo.reshape %{{.*}} : (tensor<40x6xf32>) -> tensor<10x24xf32>
// CHECK: stablehlo.concatenate {{.*}} : (tensor<64xf32>, tensor<6xf32>) -> tensor<70xf32>
// CHECK: stablehlo.compare EQ
// CHECK: stablehlo.select
// CHECK: return
func.func @column_sum(%x: tensor<40x70xf32>) -> tensor<70xf32> {
  %0 = "lazy.column_sum"(%x) {lanes = 8 : i64} : (tensor<40x70xf32>) -> tensor<70xf32>
  return %0 : tensor<70xf32>
}
