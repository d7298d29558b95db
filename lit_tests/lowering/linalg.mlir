// dot_general and convolution lower one to one, with the dimension numbers
// spelled out (convolution's layouts are fixed to PyTorch's N,C,spatial...).
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s

// CHECK-LABEL: func.func @matmul
// CHECK: stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
// CHECK-NOT: lazy.
func.func @matmul(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) -> tensor<3x5xf32> {
  %0 = "lazy.dot_general"(%a, %b) {lhs_batch = array<i64>, rhs_batch = array<i64>, lhs_contract = array<i64: 1>, rhs_contract = array<i64: 0>} : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

// Batch dims come first in the result, then lhs free, then rhs free dims.
// CHECK-LABEL: func.func @batched
// CHECK: stablehlo.dot_general %arg0, %arg1, batching_dims = [1] x [2], contracting_dims = [2] x [0], precision = [HIGHEST, HIGHEST] : (tensor<3x2x4xf32>, tensor<4x5x2xf32>) -> tensor<2x3x5xf32>
func.func @batched(%a: tensor<3x2x4xf32>, %b: tensor<4x5x2xf32>) -> tensor<2x3x5xf32> {
  %0 = "lazy.dot_general"(%a, %b) {lhs_batch = array<i64: 1>, rhs_batch = array<i64: 2>, lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>} : (tensor<3x2x4xf32>, tensor<4x5x2xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}

// -----

// CHECK-LABEL: func.func @two_contractions
// CHECK: stablehlo.dot_general %arg0, %arg1, contracting_dims = [1, 2] x [2, 0], precision = [HIGHEST, HIGHEST] : (tensor<2x3x4xi32>, tensor<4x5x3xi32>) -> tensor<2x5xi32>
func.func @two_contractions(%a: tensor<2x3x4xi32>, %b: tensor<4x5x3xi32>) -> tensor<2x5xi32> {
  %0 = "lazy.dot_general"(%a, %b) {lhs_batch = array<i64>, rhs_batch = array<i64>, lhs_contract = array<i64: 1, 2>, rhs_contract = array<i64: 2, 0>} : (tensor<2x3x4xi32>, tensor<4x5x3xi32>) -> tensor<2x5xi32>
  return %0 : tensor<2x5xi32>
}

// -----

// Grouped 2-d convolution: groups become feature_group_count; padding pairs
// are (low, high) per spatial dim.
// CHECK-LABEL: func.func @conv2d_groups
// CHECK: stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [2, 2], pad = {{\[}}[1, 1], [1, 0]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 2 : i64, precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x4x4xf32>
func.func @conv2d_groups(%x: tensor<1x4x8x8xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<1x6x4x4xf32> {
  %0 = "lazy.convolution"(%x, %w) {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 0>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 2} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x4x4xf32>
  return %0 : tensor<1x6x4x4xf32>
}

// -----

// 1-d convolution with input (lhs) dilation, as a transposed convolution uses:
// 5 inputs dilated by 2 are 9 wide, padded to 11, a 3-tap kernel leaves 9.
// CHECK-LABEL: func.func @conv1d_lhs_dilation
// CHECK: stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0], window = {stride = [1], pad = {{\[}}[1, 1]], lhs_dilate = [2], rhs_dilate = [1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]} : (tensor<1x2x5xf32>, tensor<3x2x3xf32>) -> tensor<1x3x9xf32>
func.func @conv1d_lhs_dilation(%x: tensor<1x2x5xf32>, %w: tensor<3x2x3xf32>) -> tensor<1x3x9xf32> {
  %0 = "lazy.convolution"(%x, %w) {strides = array<i64: 1>, padding = array<i64: 1, 1>, lhs_dilation = array<i64: 2>, rhs_dilation = array<i64: 1>, groups = 1} : (tensor<1x2x5xf32>, tensor<3x2x3xf32>) -> tensor<1x3x9xf32>
  return %0 : tensor<1x3x9xf32>
}

// -----

// A kernel larger than its input (3x3 over a 2x2 map, as in ResNet's last
// stage at small images): XLA would exchange the operands and run the
// reversed convolution as a naive loop, 10-16x slower on CPU. The input is
// padded explicitly instead, so the convolution XLA sees has the larger input
// and no padding of its own.
// CHECK-LABEL: func.func @kernel_larger_than_input
// CHECK: %[[ZERO:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[PADDED:.*]] = stablehlo.pad %arg0, %[[ZERO]], low = [0, 0, 1, 1], high = [0, 0, 1, 1], interior = [0, 0, 0, 0] : (tensor<4x8x2x2xf32>, tensor<f32>) -> tensor<4x8x4x4xf32>
// CHECK: stablehlo.convolution(%[[PADDED]], %arg1) {{.*}} window = {stride = [1, 1], pad = {{\[}}[0, 0], [0, 0]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]}
func.func @kernel_larger_than_input(%x: tensor<4x8x2x2xf32>, %w: tensor<8x8x3x3xf32>) -> tensor<4x8x2x2xf32> {
  %0 = "lazy.convolution"(%x, %w) {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1} : (tensor<4x8x2x2xf32>, tensor<8x8x3x3xf32>) -> tensor<4x8x2x2xf32>
  return %0 : tensor<4x8x2x2xf32>
}

// -----

// A dilated input (a transposed convolution's stride) is padded with its
// interior zeros too.
// CHECK-LABEL: func.func @dilated_input_smaller_than_kernel
// CHECK: stablehlo.pad %arg0, %{{.*}}, low = [0, 0, 2, 2], high = [0, 0, 2, 2], interior = [0, 0, 1, 1] : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x7x7xf32>
// CHECK: stablehlo.convolution({{.*}}) {{.*}} window = {stride = [1, 1], pad = {{\[}}[0, 0], [0, 0]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]}
func.func @dilated_input_smaller_than_kernel(%x: tensor<1x2x2x2xf32>, %w: tensor<3x2x5x5xf32>) -> tensor<1x3x3x3xf32> {
  %0 = "lazy.convolution"(%x, %w) {strides = array<i64: 1, 1>, padding = array<i64: 2, 2, 2, 2>, lhs_dilation = array<i64: 2, 2>, rhs_dilation = array<i64: 1, 1>, groups = 1} : (tensor<1x2x2x2xf32>, tensor<3x2x5x5xf32>) -> tensor<1x3x3x3xf32>
  return %0 : tensor<1x3x3x3xf32>
}
