// lazy-channels-last{products=true}: a 1x1 convolution (one feature group) becomes a matrix
// product over channels in the channels-last layout, which XLA's CPU backend
// runs with its matrix kernels rather than a convolution library. A window
// stride is a strided slice of the input first; base dilation and edge
// padding (a strided 1x1 convolution's input gradient) a zero pad of the
// product. Off by default (the pass keeps them convolutions): a product sums
// in another order than XLA's convolution, and tests/consumers' Faster R-CNN
// then ends 1.6e-5 from eager's losses where its bound is 1e-5.
// RUN: lazy-opt --split-input-file --lazy-channels-last=products=true %s | filecheck %s

// ResNet's downsample: 1x1, stride 2.
// CHECK-LABEL: func.func @strided
// CHECK: %[[X:.*]] = stablehlo.transpose %arg0, dims = [0, 2, 3, 1] : (tensor<2x3x8x8xf32>) -> tensor<2x8x8x3xf32>
// CHECK: %[[W:.*]] = stablehlo.transpose %arg1, dims = [2, 3, 1, 0] : (tensor<4x3x1x1xf32>) -> tensor<1x1x3x4xf32>
// CHECK: %[[S:.*]] = stablehlo.slice %[[X]] [0:2, 0:7:2, 0:7:2, 0:3] : (tensor<2x8x8x3xf32>) -> tensor<2x4x4x3xf32>
// CHECK: %[[K:.*]] = stablehlo.reshape %[[W]] : (tensor<1x1x3x4xf32>) -> tensor<3x4xf32>
// CHECK: %[[P:.*]] = stablehlo.dot_general %[[S]], %[[K]], contracting_dims = [3] x [0], precision = [HIGHEST, HIGHEST] : (tensor<2x4x4x3xf32>, tensor<3x4xf32>) -> tensor<2x4x4x4xf32>
// CHECK-NOT: stablehlo.convolution
// CHECK: %[[Y:.*]] = stablehlo.transpose %[[P]], dims = [0, 3, 1, 2] : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
// CHECK: return %[[Y]]
func.func @strided(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x1x1xf32>) -> tensor<2x4x4x4xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [2, 2], pad = [[0, 0], [0, 0]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]} : (tensor<2x3x8x8xf32>, tensor<4x3x1x1xf32>) -> tensor<2x4x4x4xf32>
  return %0 : tensor<2x4x4x4xf32>
}

// -----

// Its input gradient (the lowering's transposed convolution: base dilation
// 2, one row and column of high padding): the product, then a zero pad
// with interior padding.
// CHECK-LABEL: func.func @input_gradient
// CHECK: %[[P:.*]] = stablehlo.dot_general %{{.*}}, %{{.*}}, contracting_dims = [3] x [0] : (tensor<2x4x4x4xf32>, tensor<4x3xf32>) -> tensor<2x4x4x3xf32>
// CHECK: %[[Z:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[D:.*]] = stablehlo.pad %[[P]], %[[Z]], low = [0, 0, 0, 0], high = [0, 1, 1, 0], interior = [0, 1, 1, 0] : (tensor<2x4x4x3xf32>, tensor<f32>) -> tensor<2x8x8x3xf32>
// CHECK-NOT: stablehlo.convolution
// CHECK: stablehlo.transpose %[[D]], dims = [0, 3, 1, 2]
func.func @input_gradient(%g: tensor<2x4x4x4xf32>, %w: tensor<3x4x1x1xf32>) -> tensor<2x3x8x8xf32> {
  %0 = stablehlo.convolution(%g, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[0, 1], [0, 1]], lhs_dilate = [2, 2], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x4x4x4xf32>, tensor<3x4x1x1xf32>) -> tensor<2x3x8x8xf32>
  return %0 : tensor<2x3x8x8xf32>
}

// -----

// Padding and a stride together: pad the product, then take every third row
// and every second column.
// CHECK-LABEL: func.func @padded_strided
// CHECK: %[[P:.*]] = stablehlo.dot_general {{.*}} -> tensor<1x5x5x2xf32>
// CHECK: %[[D:.*]] = stablehlo.pad %[[P]], %{{.*}}, low = [0, 1, 1, 0], high = [0, 1, 1, 0], interior = [0, 0, 0, 0] : (tensor<1x5x5x2xf32>, tensor<f32>) -> tensor<1x7x7x2xf32>
// CHECK: %[[S:.*]] = stablehlo.slice %[[D]] [0:1, 0:7:3, 0:7:2, 0:2] : (tensor<1x7x7x2xf32>) -> tensor<1x3x4x2xf32>
// CHECK-NOT: stablehlo.convolution
func.func @padded_strided(%x: tensor<1x3x5x5xf32>, %w: tensor<2x3x1x1xf32>) -> tensor<1x2x3x4xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [3, 2], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x3x5x5xf32>, tensor<2x3x1x1xf32>) -> tensor<1x2x3x4xf32>
  return %0 : tensor<1x2x3x4xf32>
}

// -----

// Grouped 1x1 (feature groups) and spatial kernels stay convolutions.
// CHECK-LABEL: func.func @stays
// CHECK: stablehlo.convolution({{.*}}) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]{{.*}}feature_group_count = 2
// CHECK: stablehlo.convolution({{.*}}) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]{{.*}}feature_group_count = 1
// CHECK-NOT: stablehlo.dot_general
func.func @stays(%x: tensor<2x4x8x8xf32>, %wg: tensor<4x2x1x1xf32>, %w3: tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32> {
  %0 = stablehlo.convolution(%x, %wg) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[0, 0], [0, 0]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 2 : i64} : (tensor<2x4x8x8xf32>, tensor<4x2x1x1xf32>) -> tensor<2x4x8x8xf32>
  %1 = stablehlo.convolution(%0, %w3) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  return %1 : tensor<2x4x8x8xf32>
}
