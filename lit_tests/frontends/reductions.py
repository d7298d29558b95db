# Reductions. Each is one lazy.reduce_* op over a list of dimensions (a kept
# dimension is a reshape after it); it lowers to stablehlo.reduce with the
# combining op in its body. What eager does at the edges comes along: the
# max of floats is NaN where any element is NaN, NumPy sums int32 in int64.
# torch's float sums are eager's CPU kernel's adds instead: lazy.vector_sum
# (rows of the trailing dims; a whole tensor's sum is cut among eager's
# threads as its kernel cuts it) and lazy.column_sum (leading dims), static
# slices and adds in that kernel's order.
# RUN: %PYTHON %s | FileCheck %s

import numpy as np
import torch

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.observe.testing import print_ir

dev = ltorch.device()
x = torch.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]], device=dev)


# Rows of 3, under one vector: added in order, then a -0 made +0 as eager's
# 0 + sum makes it (XLA would fold an add of zero away).
# CHECK-LABEL: TEST: torch_sum_keepdim
# CHECK:      tensor({{\[}}[2.],
# CHECK-NEXT:         [3.]])
# CHECK:      %0 = "lazy.vector_sum"(%arg0) {lanes = {{[0-9]+}} : i64, threads = 1 : i64} : (tensor<2x3xf32>) -> tensor<2xf32>
# CHECK-NEXT: %1 = "lazy.reshape"(%0) : (tensor<2xf32>) -> tensor<2x1xf32>
# CHECK:      ----- stablehlo -----
# CHECK-NOT:  stablehlo.reduce
# CHECK:      %[[S:.*]] = stablehlo.add %{{.*}}, %{{.*}} : tensor<2x1xf32>
# CHECK-NEXT: %{{.*}} = stablehlo.slice
# CHECK-NEXT: %{{.*}} = stablehlo.reshape
# CHECK-NEXT: %{{.*}} = stablehlo.add %[[S]], %{{.*}} : tensor<2x1xf32>
# CHECK:      stablehlo.compare EQ
# CHECK-NEXT: stablehlo.select
@print_ir
def torch_sum_keepdim():
    print(x.sum(1, keepdim=True).cpu())


# Two reads, two programs: the mean (a sum of the whole tensor, divided by
# the count), then the column maxima: torch's amax is NaN where a column has
# a NaN, so the lowering tests for one (x != x) and selects.
# CHECK-LABEL: TEST: torch_mean_then_max
# CHECK:      tensor(0.8333) tensor([4., 5., 3.])
# CHECK:      ----- graph 0 -----
# CHECK:        %0 = "lazy.reshape"(%arg0) : (tensor<2x3xf32>) -> tensor<6xf32>
# CHECK-NEXT:   %1 = "lazy.vector_sum"(%0) {lanes = {{[0-9]+}} : i64, threads = {{[0-9]+}} : i64} : (tensor<6xf32>) -> tensor<f32>
# CHECK-NEXT:   %2 = "lazy.constant"() {value = dense<6.000000e+00> : tensor<f32>}
# CHECK-NEXT:   %3 = "lazy.div"(%1, %2)
# CHECK:      ----- graph 1 -----
# CHECK:        %[[NAN:.*]] = "lazy.compare"(%arg0, %arg0) {direction = "NE"}
# CHECK-NEXT:   %[[ANY:.*]] = "lazy.reduce_max"(%[[NAN]]) {dims = array<i64: 0>} : (tensor<2x3xi1>) -> tensor<3xi1>
# CHECK:        %[[MAX:.*]] = "lazy.reduce_max"(%arg0) {dims = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<3xf32>
# CHECK-NEXT:   "lazy.select"(%[[ANY]], %{{.*}}, %[[MAX]])
# CHECK:      ----- stablehlo -----
# CHECK:        stablehlo.reduce(%{{.*}} init: %{{.*}}) applies stablehlo.or across dimensions = [0]
# CHECK:        stablehlo.reduce(%arg0 init: %{{.*}}) applies stablehlo.maximum across dimensions = [0]
@print_ir
def torch_mean_then_max():
    print(x.mean().cpu(), x.amax(0).cpu())


a = lnp.asarray(np.array([[1, 2, 3], [4, 5, 6]], np.int32))


# NumPy: the sum of int32 is int64 (a convert first); argmax is one op whose
# lowering reduces values and indices together. (Both are computed by the
# barrier first: an integer value made of device data, read while other work
# is pending, would be computed by a program of its own, as a mask is.)
# CHECK-LABEL: TEST: numpy_integer_sum_and_argmax
# CHECK:      [5 7 9] [2 2]
# CHECK:      func.func @main(%arg0: tensor<2x3xi32>) -> (tensor<3xi64>, tensor<2xi64>)
# CHECK-NEXT:   %0 = "lazy.convert"(%arg0) : (tensor<2x3xi32>) -> tensor<2x3xi64>
# CHECK-NEXT:   %1 = "lazy.reduce_sum"(%0) {dims = array<i64: 0>} : (tensor<2x3xi64>) -> tensor<3xi64>
# CHECK-NEXT:   %2 = "lazy.argmax"(%arg0) {dim = 1 : i64} : (tensor<2x3xi32>) -> tensor<2xi64>
# CHECK:      ----- stablehlo -----
# CHECK:        %{{.*}}:2 = stablehlo.reduce(%arg0 init: %{{.*}}), (%{{.*}} init: %{{.*}}) across dimensions = [1]
@print_ir
def numpy_integer_sum_and_argmax():
    total, where = a.sum(axis=0), np.argmax(a, axis=1)
    lazycore.mark_step()
    print(total, where)
