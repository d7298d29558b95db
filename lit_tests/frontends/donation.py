# Donation: an input buffer that no live tensor holds any more after the step
# (it was overwritten in place) is donated to a result of the same type, so
# XLA writes the result into it instead of allocating (tf.aliasing_output on
# the argument, set by lazy-aliasing). A buffer some tensor still holds is
# never donated.
# RUN: %PYTHON %s | FileCheck %s

import numpy as np
import torch

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.observe.testing import print_ir

dev = ltorch.device()
w = torch.ones(4, device=dev)
g = torch.full((4,), 0.5, device=dev)
lazycore.mark_step()  # w and g are device data now


# An SGD update: w's old buffer (%arg0) is dead after w.sub_, so it is
# donated to the new w (result 0); g (%arg1) is still held and is not.
# CHECK-LABEL: TEST: torch_sgd_update
# CHECK:      tensor([0.9500, 0.9500, 0.9500, 0.9500])
# CHECK:      func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>, %arg2: tensor<1xf32>) -> tensor<4xf32>
# CHECK:        "lazy.mul"(%arg1,
# CHECK:        "lazy.sub"(%arg0,
# CHECK:      ----- stablehlo -----
# CHECK:      func.func @main(%arg0: tensor<4xf32> {tf.aliasing_output = 0 : i32}, %arg1: tensor<4xf32>, %arg2: tensor<1xf32>)
@print_ir
def torch_sgd_update():
    w.sub_(g * 0.1)
    lazycore.mark_step()
    print(w.cpu())


# The same update while `old` keeps w's previous value: nothing is donated.
# CHECK-LABEL: TEST: torch_old_value_kept
# CHECK:      ----- stablehlo -----
# CHECK-NOT:  tf.aliasing_output
# CHECK:      func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>, %arg2: tensor<1xf32>)
# CHECK:      old: tensor([0.9500, 0.9500, 0.9500, 0.9500]) new: tensor([0.9000, 0.9000, 0.9000, 0.9000])
@print_ir
def torch_old_value_kept():
    global old
    old = w.clone()  # a copy of device data is that data: old holds w's buffer
    w.sub_(g * 0.1)
    lazycore.mark_step()


print("old:", old.cpu(), "new:", w.cpu())

a = lnp.asarray(np.zeros((2, 2), np.float32))
lazycore.mark_step()


# NumPy's in-place operators donate the same way.
# CHECK-LABEL: TEST: numpy_augmented_assignment
# CHECK:      {{\[}}[1. 1.]
# CHECK-NEXT:  [1. 1.]]
# CHECK:      ----- stablehlo -----
# CHECK:      func.func @main(%arg0: tensor<2x2xf32> {tf.aliasing_output = 0 : i32}) -> tensor<2x2xf32>
# CHECK:        stablehlo.add %arg0
@print_ir
def numpy_augmented_assignment():
    global a
    a += 1
    lazycore.mark_step()
    print(a)
