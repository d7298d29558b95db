# Views and in-place writes. A view is no copy in the program: reading one is
# the ops that compute it from its base (lazy.permute, lazy.slice, ...);
# writing through one updates the base, as lazy.dynamic_update_slice of the
# written part, and every view of that base sees the new value.
# RUN: %PYTHON %s | FileCheck %s

import numpy as np
import torch

import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.observe.testing import print_ir

dev = ltorch.device()
x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=dev)


# x.t()[1:]: a transpose, then a slice of it.
# CHECK-LABEL: TEST: torch_read_a_view_of_a_view
# CHECK:      tensor({{\[}}[2., 5.],
# CHECK-NEXT:         [3., 6.]])
# CHECK:      func.func @main(%arg0: tensor<2x3xf32>) -> tensor<2x2xf32>
# CHECK-NEXT:   %0 = "lazy.permute"(%arg0) {dims = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
# CHECK-NEXT:   %1 = "lazy.slice"(%0) {limit = array<i64: 3, 2>, start = array<i64: 1, 0>, strides = array<i64: 1, 1>}
# CHECK-NEXT:   return %1 : tensor<2x2xf32>
# CHECK:      ----- stablehlo -----
# CHECK:        stablehlo.transpose %arg0, dims = [1, 0]
# CHECK-NEXT:   stablehlo.slice %0 [1:3, 0:2]
@print_ir
def torch_read_a_view_of_a_view():
    print(x.t()[1:].cpu())


# col = x[:, 1]; col.mul_(10): the column is read (slice, reshape), scaled,
# and written back into x at column 1. x's old buffer is dead afterwards, so
# the program may write the result into it (tf.aliasing_output: donation).
# CHECK-LABEL: TEST: torch_write_through_a_view
# CHECK:      tensor({{\[}}[ 1., 20.,  3.],
# CHECK-NEXT:         [ 4., 50.,  6.]])
# CHECK:      func.func @main(%arg0: tensor<2x3xf32>, %arg1: tensor<1xf32>) -> tensor<2x3xf32>
# CHECK:        %[[COL:.*]] = "lazy.slice"(%arg0) {limit = array<i64: 2, 2>, start = array<i64: 0, 1>, strides = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x1xf32>
# CHECK:        %[[SCALED:.*]] = "lazy.mul"
# CHECK-NEXT:   %[[BACK:.*]] = "lazy.reshape"(%[[SCALED]]) : (tensor<2xf32>) -> tensor<2x1xf32>
# CHECK-NEXT:   %[[ROW:.*]] = "lazy.constant"() {value = dense<0> : tensor<i64>}
# CHECK-NEXT:   %[[COLUMN:.*]] = "lazy.constant"() {value = dense<1> : tensor<i64>}
# CHECK-NEXT:   %[[NEW:.*]] = "lazy.dynamic_update_slice"(%arg0, %[[BACK]], %[[ROW]], %[[COLUMN]])
# CHECK-NEXT:   return %[[NEW]] : tensor<2x3xf32>
# CHECK:      ----- stablehlo -----
# CHECK:      func.func @main(%arg0: tensor<2x3xf32> {tf.aliasing_output = 0 : i32}, %arg1: tensor<1xf32>)
# CHECK:        stablehlo.dynamic_update_slice %arg0
@print_ir
def torch_write_through_a_view():
    col = x[:, 1]
    col.mul_(10)
    print(x.cpu())


u = lnp.asarray(np.array([0.0, 1.0, 4.0, 9.0, 16.0], np.float32))


# A NumPy stencil step, u[1:-1] = (u[:-2] + u[2:]) / 2: both slices read the
# old u. The update covers most of u and reads it, so lazy-update-to-select
# turns it into one select over the whole array (no copy of u for XLA's
# in-place update).
# CHECK-LABEL: TEST: numpy_slice_assignment
# CHECK:      [ 0.  2.  5. 10. 16.]
# CHECK:      func.func @main(%arg0: tensor<5xf32>, %arg1: tensor<1xf32>) -> tensor<5xf32>
# CHECK:        %[[LEFT:.*]] = "lazy.slice"(%arg0) {limit = array<i64: 3>, start = array<i64: 0>
# CHECK-NEXT:   %[[RIGHT:.*]] = "lazy.slice"(%arg0) {limit = array<i64: 5>, start = array<i64: 2>
# CHECK-NEXT:   "lazy.add"(%[[LEFT]], %[[RIGHT]])
# CHECK:        "lazy.div"
# CHECK:        "lazy.dynamic_update_slice"(%arg0,
# CHECK:      ----- stablehlo -----
# CHECK-NOT:    dynamic_update_slice
# CHECK:        stablehlo.pad
# CHECK:        stablehlo.select %{{.*}}, %{{.*}}, %arg0 : tensor<5xi1>, tensor<5xf32>
@print_ir
def numpy_slice_assignment():
    u[1:-1] = (u[:-2] + u[2:]) / 2
    print(u)
