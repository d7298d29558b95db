# Elementwise ops on operands of different shapes and dtypes. Like StableHLO,
# lazy elementwise ops take operands of one type: the frontends insert the
# broadcasts and conversions eager's rules imply, as explicit
# lazy.broadcast_in_dim and lazy.convert ops.
# RUN: %PYTHON %s | FileCheck %s

import numpy as np
import torch

import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.observe.testing import print_ir

dev = ltorch.device()
x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=dev)  # uploaded: device data,
b = torch.tensor([10.0, 20.0, 30.0], device=dev)  # so each one is a parameter


# A (3,) row added to a (2, 3) matrix: the row is broadcast along dimension 1.
# CHECK-LABEL: TEST: torch_broadcast_add
# CHECK:      tensor({{\[}}[11., 22., 33.],
# CHECK-NEXT:         [14., 25., 36.]])
# CHECK:      func.func @main(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> tensor<2x3xf32>
# CHECK-NEXT:   %0 = "lazy.broadcast_in_dim"(%arg1) {dims = array<i64: 1>} : (tensor<3xf32>) -> tensor<2x3xf32>
# CHECK-NEXT:   %1 = "lazy.add"(%arg0, %0)
# CHECK-NEXT:   return %1
# CHECK:      ----- stablehlo -----
# CHECK:        %0 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
# CHECK-NEXT:   %1 = stablehlo.add %arg0, %0 : tensor<2x3xf32>
@print_ir
def torch_broadcast_add():
    print((x + b).cpu())


# float32 times int64: torch's promotion gives float32, so the integers are
# converted first, then broadcast.
# CHECK-LABEL: TEST: torch_type_promotion
# CHECK:      func.func @main(%arg0: tensor<2x3xf32>, %arg1: tensor<3xi64>) -> tensor<2x3xf32>
# CHECK-NEXT:   %0 = "lazy.convert"(%arg1) : (tensor<3xi64>) -> tensor<3xf32>
# CHECK-NEXT:   %1 = "lazy.broadcast_in_dim"(%0) {dims = array<i64: 1>}
# CHECK-NEXT:   %2 = "lazy.mul"(%arg0, %1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
# CHECK:      ----- stablehlo -----
# CHECK:        stablehlo.convert %arg1 : (tensor<3xi64>) -> tensor<3xf32>
# CHECK:        stablehlo.multiply
@print_ir
def torch_type_promotion():
    (x * torch.tensor([1, 2, 3], device=dev)).cpu()


a = lnp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
c = lnp.asarray(np.array([[1.0], [2.0]], np.float32))


# NumPy's rules: a (2, 1) column against a (2, 3) matrix. The size-1
# dimension is dropped by a reshape, then the column is broadcast along
# dimension 0.
# CHECK-LABEL: TEST: numpy_broadcast_column
# CHECK:      {{\[}}[1. 1. 2.]
# CHECK-NEXT:  [3. 4. 5.]]
# CHECK:      func.func @main(%arg0: tensor<2x3xf32>, %arg1: tensor<2x1xf32>) -> tensor<2x3xf32>
# CHECK-NEXT:   %0 = "lazy.reshape"(%arg1) : (tensor<2x1xf32>) -> tensor<2xf32>
# CHECK-NEXT:   %1 = "lazy.broadcast_in_dim"(%0) {dims = array<i64: 0>} : (tensor<2xf32>) -> tensor<2x3xf32>
# NumPy's maximum keeps NaN from either side and, on a tie (0.0 and -0.0),
# gives the second operand, so it is a select, not stablehlo.maximum.
# CHECK-NEXT:   %2 = "lazy.compare"(%arg0, %1) {direction = "GT"}
# CHECK:        "lazy.select"(%{{.+}}, %arg0, %1)
# CHECK:      ----- stablehlo -----
# CHECK:        stablehlo.select %{{.+}}, %arg0, %1 : tensor<2x3xi1>, tensor<2x3xf32>
@print_ir
def numpy_broadcast_column():
    print(np.maximum(a, c))
