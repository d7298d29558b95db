// lazy-channels-last: StableHLO convolutions become the channels-last form
// XLA's CPU convolution library runs (input [b, 0, 1, f], kernel [0, 1, i, o],
// output [b, 0, 1, f]), and the layout is carried through the ops between
// them, so that only the program's edges transpose.
// RUN: lazy-opt --split-input-file --lazy-channels-last %s | filecheck %s

// One convolution: its input and kernel are transposed into the library's
// layout and its result back into torch's.
// CHECK-LABEL: func.func @one
// CHECK: %[[X:.*]] = stablehlo.transpose %arg0, dims = [0, 2, 3, 1] : (tensor<2x3x8x8xf32>) -> tensor<2x8x8x3xf32>
// CHECK: %[[W:.*]] = stablehlo.transpose %arg1, dims = [2, 3, 1, 0] : (tensor<4x3x3x3xf32>) -> tensor<3x3x3x4xf32>
// CHECK: %[[C:.*]] = stablehlo.convolution(%[[X]], %[[W]]) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [2, 2], pad = {{\[}}[1, 1], [1, 1]]{{.*}}} : (tensor<2x8x8x3xf32>, tensor<3x3x3x4xf32>) -> tensor<2x4x4x4xf32>
// CHECK: %[[Y:.*]] = stablehlo.transpose %[[C]], dims = [0, 3, 1, 2] : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
// CHECK: return %[[Y]]
func.func @one(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x4x4x4xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [2, 2], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x4x4xf32>
  return %0 : tensor<2x4x4x4xf32>
}

// -----

// conv, batch norm's per-channel scale (a broadcast of a vector, rebuilt
// along the last dimension), ReLU against a splat zero, the per-channel sum
// batch norm's statistics take (over dimensions 0, 1, 2 now, its result a
// vector as before), a second conv and a residual add: nothing transposes
// between the convolutions; the one transpose left is the result's.
// CHECK-LABEL: func.func @block
// CHECK: %[[C1:.*]] = stablehlo.convolution({{.*}}) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]{{.*}} -> tensor<2x8x8x4xf32>
// CHECK: %[[S:.*]] = stablehlo.broadcast_in_dim %arg3, dims = [3] : (tensor<4xf32>) -> tensor<2x8x8x4xf32>
// CHECK: %[[M:.*]] = stablehlo.multiply %[[C1]], %[[S]] : tensor<2x8x8x4xf32>
// CHECK: %[[R:.*]] = stablehlo.maximum %[[M]], %{{.*}} : tensor<2x8x8x4xf32>
// CHECK: %[[SUM:.*]] = stablehlo.reduce(%[[R]] init: %{{.*}}) applies stablehlo.add across dimensions = [0, 1, 2] : (tensor<2x8x8x4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NOT: stablehlo.transpose %[[R]]
// CHECK: %[[C2:.*]] = stablehlo.convolution(%[[R]], %{{.*}}) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]{{.*}} -> tensor<2x8x8x4xf32>
// CHECK: %[[A:.*]] = stablehlo.add %[[C2]], %[[R]] : tensor<2x8x8x4xf32>
// CHECK: %[[OUT:.*]] = stablehlo.transpose %[[A]], dims = [0, 3, 1, 2] : (tensor<2x8x8x4xf32>) -> tensor<2x4x8x8xf32>
// CHECK: return %[[OUT]], %[[SUM]]
func.func @block(%x: tensor<2x3x8x8xf32>, %w1: tensor<4x3x3x3xf32>, %w2: tensor<4x4x3x3xf32>, %scale: tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>) {
  %c = stablehlo.convolution(%x, %w1) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %b = stablehlo.broadcast_in_dim %scale, dims = [1] : (tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %m = stablehlo.multiply %c, %b : tensor<2x4x8x8xf32>
  %z = stablehlo.constant dense<0.0> : tensor<2x4x8x8xf32>
  %r = stablehlo.maximum %m, %z : tensor<2x4x8x8xf32>
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%r init: %init) applies stablehlo.add across dimensions = [0, 2, 3] : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<4xf32>
  %c2 = stablehlo.convolution(%r, %w2) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %o = stablehlo.add %c2, %r : tensor<2x4x8x8xf32>
  return %o, %s : tensor<2x4x8x8xf32>, tensor<4xf32>
}

// -----

// A weight gradient: the lowering exchanges batch and channels of the
// activation and of the output gradient with transposes. They fold into the
// convolution's dimension numbers and compose with the transposes into the
// library's layout, for an argument as for a value carried channels-last:
// one transpose of each operand.
// CHECK-LABEL: func.func @weight_gradient
// CHECK: %[[Y:.*]] = stablehlo.convolution(%{{.*}}) dim_numbers = [b, 0, 1, f]{{.*}} -> tensor<2x8x8x4xf32>
// CHECK: %[[XT:.*]] = stablehlo.transpose %arg0, dims = [1, 2, 3, 0] : (tensor<2x3x8x8xf32>) -> tensor<3x8x8x2xf32>
// CHECK: %[[GT:.*]] = stablehlo.transpose %[[Y]], dims = [1, 2, 0, 3] : (tensor<2x8x8x4xf32>) -> tensor<8x8x2x4xf32>
// CHECK: %[[G:.*]] = stablehlo.convolution(%[[XT]], %[[GT]]) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]{{.*}} -> tensor<3x3x3x4xf32>
// CHECK: %[[GW:.*]] = stablehlo.transpose %[[G]], dims = [3, 0, 1, 2] : (tensor<3x3x3x4xf32>) -> tensor<4x3x3x3xf32>
// CHECK: return %[[GW]]
func.func @weight_gradient(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<4x3x3x3xf32> {
  %y = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %xt = stablehlo.transpose %x, dims = [1, 0, 2, 3] : (tensor<2x3x8x8xf32>) -> tensor<3x2x8x8xf32>
  %gt = stablehlo.transpose %y, dims = [1, 0, 2, 3] : (tensor<2x4x8x8xf32>) -> tensor<4x2x8x8xf32>
  %g = stablehlo.convolution(%xt, %gt) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<3x2x8x8xf32>, tensor<4x2x8x8xf32>) -> tensor<3x4x3x3xf32>
  %gw = stablehlo.transpose %g, dims = [1, 0, 2, 3] : (tensor<3x4x3x3xf32>) -> tensor<4x3x3x3xf32>
  return %gw : tensor<4x3x3x3xf32>
}

// -----

// XLA folds a zero pad right before a convolution into its window. The
// lowering pads a 2x2 map explicitly for a 3x3 kernel (folded back, XLA
// would exchange the operands and run a naive loop), so an optimization
// barrier keeps that pad apart once no transpose sits between them.
// CHECK-LABEL: func.func @explicit_pad
// CHECK: %[[P:.*]] = stablehlo.pad %{{.*}}, low = [0, 1, 1, 0], high = [0, 1, 1, 0]{{.*}} -> tensor<4x4x4x8xf32>
// CHECK: %[[B:.*]] = stablehlo.optimization_barrier %[[P]]
// CHECK: stablehlo.convolution(%[[B]], %{{.*}}) dim_numbers = [b, 0, 1, f]
func.func @explicit_pad(%x: tensor<4x8x2x2xf32>, %w: tensor<8x8x1x1xf32>, %w3: tensor<8x8x3x3xf32>) -> tensor<4x8x2x2xf32> {
  %c0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[0, 0], [0, 0]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<4x8x2x2xf32>, tensor<8x8x1x1xf32>) -> tensor<4x8x2x2xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %p = stablehlo.pad %c0, %z, low = [0, 0, 1, 1], high = [0, 0, 1, 1], interior = [0, 0, 0, 0] : (tensor<4x8x2x2xf32>, tensor<f32>) -> tensor<4x8x4x4xf32>
  %c = stablehlo.convolution(%p, %w3) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[0, 0], [0, 0]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<4x8x4x4xf32>, tensor<8x8x3x3xf32>) -> tensor<4x8x2x2xf32>
  return %c : tensor<4x8x2x2xf32>
}

// -----

// Global average pooling's reshapes and the flatten before the classifier:
// a reshape that splits or merges dimensions in the physical order, or only
// moves dimensions of size 1, carries the layout; the pooled (2, 4) value
// needs no transpose at all.
// CHECK-LABEL: func.func @pool_flatten
// CHECK: %[[C:.*]] = stablehlo.convolution({{.*}} -> tensor<2x2x2x4xf32>
// CHECK-NOT: stablehlo.transpose %[[C]]
// CHECK: stablehlo.reduce
// CHECK-NOT: stablehlo.transpose
// CHECK: return
func.func @pool_flatten(%x: tensor<2x3x2x2xf32>, %w: tensor<4x3x1x1xf32>) -> tensor<2x4xf32> {
  %c = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[0, 0], [0, 0]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x3x2x2xf32>, tensor<4x3x1x1xf32>) -> tensor<2x4x2x2xf32>
  %r = stablehlo.reshape %c : (tensor<2x4x2x2xf32>) -> tensor<2x4x4xf32>
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%r init: %init) applies stablehlo.add across dimensions = [2] : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  return %s : tensor<2x4xf32>
}

// -----

// A program without a convolution keeps its transposes.
// CHECK-LABEL: func.func @no_convolution
// CHECK: stablehlo.transpose %arg0, dims = [1, 0]
// CHECK: stablehlo.exponential
func.func @no_convolution(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %e = stablehlo.exponential %t : tensor<3x2xf32>
  return %e : tensor<3x2xf32>
}

// -----

// The kernel of an input gradient (a transposed convolution's): the
// lowering exchanges a weight's in and out channels with reshapes and a
// transpose and flips its window. The chain reaches the convolution as one
// permutation: a single transpose of the flipped weight into [0, 1, i, o].
// CHECK-LABEL: func.func @kernel_chain
// CHECK: %[[F:.*]] = stablehlo.reverse %{{.*}}, dims = [2, 3] : tensor<4x3x3x3xf32>
// CHECK-NOT: stablehlo.transpose %{{.*}} : (tensor<1x
// CHECK: %[[K:.*]] = stablehlo.transpose %[[F]], dims = [2, 3, 0, 1] : (tensor<4x3x3x3xf32>) -> tensor<3x3x4x3xf32>
// CHECK: stablehlo.convolution(%{{.*}}, %[[K]])
func.func @kernel_chain(%x: tensor<2x4x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32> {
  %r = stablehlo.reshape %w : (tensor<4x3x3x3xf32>) -> tensor<1x4x3x3x3xf32>
  %t = stablehlo.transpose %r, dims = [0, 2, 1, 3, 4] : (tensor<1x4x3x3x3xf32>) -> tensor<1x3x4x3x3xf32>
  %k = stablehlo.reshape %t : (tensor<1x3x4x3x3xf32>) -> tensor<3x4x3x3xf32>
  %v = stablehlo.reverse %k, dims = [2, 3] : tensor<3x4x3x3xf32>
  %c = stablehlo.convolution(%x, %v) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x4x8x8xf32>, tensor<3x4x3x3xf32>) -> tensor<2x3x8x8xf32>
  return %c : tensor<2x3x8x8xf32>
}

// -----

// A weight's update from its gradient: the gradient is one transpose away
// from the weight's layout and the momentum buffer is an argument, so the
// update stays in the weight's layout (taking the gradient's would
// transpose the buffer and the weight in and the results out).
// CHECK-LABEL: func.func @update
// CHECK: %[[G:.*]] = stablehlo.transpose %{{.*}}, dims = [3, 0, 1, 2] : (tensor<3x3x3x4xf32>) -> tensor<4x3x3x3xf32>
// CHECK: %[[M:.*]] = stablehlo.add %arg3, %[[G]] : tensor<4x3x3x3xf32>
// CHECK: stablehlo.subtract %arg2, %[[M]] : tensor<4x3x3x3xf32>
func.func @update(%x: tensor<2x3x8x8xf32>, %g: tensor<2x4x8x8xf32>, %w: tensor<4x3x3x3xf32>, %buf: tensor<4x3x3x3xf32>) -> tensor<4x3x3x3xf32> {
  %xt = stablehlo.transpose %x, dims = [1, 0, 2, 3] : (tensor<2x3x8x8xf32>) -> tensor<3x2x8x8xf32>
  %gt = stablehlo.transpose %g, dims = [1, 0, 2, 3] : (tensor<2x4x8x8xf32>) -> tensor<4x2x8x8xf32>
  %d = stablehlo.convolution(%xt, %gt) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<3x2x8x8xf32>, tensor<4x2x8x8xf32>) -> tensor<3x4x3x3xf32>
  %dw = stablehlo.transpose %d, dims = [1, 0, 2, 3] : (tensor<3x4x3x3xf32>) -> tensor<4x3x3x3xf32>
  %m = stablehlo.add %buf, %dw : tensor<4x3x3x3xf32>
  %n = stablehlo.subtract %w, %m : tensor<4x3x3x3xf32>
  return %n : tensor<4x3x3x3xf32>
}
