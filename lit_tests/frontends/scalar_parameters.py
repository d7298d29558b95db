# Python numbers in a program. 0 and 1 are baked in as constants (so x * 1
# and x + 0 fold away); any other number is a parameter of the program,
# hashed by its dtype only, so a new value (a learning rate that changes
# every step) runs the same compiled program. The parameters of one dtype
# travel packed in one vector argument, each one sliced out of it.
# RUN: %PYTHON %s | FileCheck %s

import numpy as np
import torch

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.observe.testing import print_ir

dev = ltorch.device()
w = torch.tensor([1.0, 2.0, 3.0], device=dev)


# 0.5 and 2 are the two f32 parameters, packed as %arg1.
# CHECK-LABEL: TEST: torch_scale_and_shift
# CHECK:      func.func @main(%arg0: tensor<3xf32>, %arg1: tensor<2xf32>) -> tensor<3xf32>
# CHECK-NEXT:   %0 = "lazy.slice"(%arg1) {limit = array<i64: 1>, start = array<i64: 0>, strides = array<i64: 1>}
# CHECK-NEXT:   %1 = "lazy.reshape"(%0) : (tensor<1xf32>) -> tensor<f32>
# CHECK-NEXT:   %2 = "lazy.slice"(%arg1) {limit = array<i64: 2>, start = array<i64: 1>, strides = array<i64: 1>}
# CHECK-NEXT:   %3 = "lazy.reshape"(%2) : (tensor<1xf32>) -> tensor<f32>
# CHECK-NEXT:   %4 = "lazy.broadcast_in_dim"(%1) {dims = array<i64>} : (tensor<f32>) -> tensor<3xf32>
# CHECK-NEXT:   %5 = "lazy.mul"(%arg0, %4)
# CHECK-NEXT:   %6 = "lazy.broadcast_in_dim"(%3)
# CHECK-NEXT:   %7 = "lazy.add"(%5, %6)
# CHECK:      ----- stablehlo -----
# CHECK:        stablehlo.slice %arg1 [0:1]
# CHECK:        stablehlo.slice %arg1 [1:2]
# CHECK:        stablehlo.multiply %arg0
@print_ir
def torch_scale_and_shift():
    (w * 0.5 + 2).cpu()


# x * 1 - 0: constants, which lazy-canonicalize folds; the program returns its input.
# (x + 0 would not: -0.0 + 0 is +0.0, see lit_tests/passes/canonicalize_signed_zero.mlir.)
# CHECK-LABEL: TEST: torch_zero_and_one_fold
# CHECK:      func.func @main(%arg0: tensor<3xf32>) -> tensor<3xf32>
# CHECK-NEXT:   "lazy.constant"() {value = dense<1.000000e+00> : tensor<f32>}
# CHECK:        "lazy.mul"
# CHECK:        "lazy.constant"() {value = dense<0.000000e+00> : tensor<f32>}
# CHECK:        "lazy.sub"
# CHECK:      ----- stablehlo -----
# CHECK:      func.func @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
# CHECK-NEXT:   return %arg0 : tensor<3xf32>
@print_ir
def torch_zero_and_one_fold():
    (w * 1 - 0).cpu()


# One program for every learning rate: after the first step, none compiles.
def sgd_step(lr):
    return (w - lr * w).cpu()


sgd_step(0.1)
compiled = lazycore.metrics.counters()["compiles"]
for lr in (0.2, 0.3):
    print(sgd_step(lr))
print("compiles for new learning rates:", lazycore.metrics.counters()["compiles"] - compiled)
# CHECK:      tensor([0.8000, 1.6000, 2.4000])
# CHECK-NEXT: tensor([0.7000, 1.4000, 2.1000])
# CHECK-NEXT: compiles for new learning rates: 0


# NumPy's rules for Python numbers: 7 times an int32 array stays int32 (one
# i32 parameter); adding 3.5 makes float64 (an f64 parameter, and a convert).
# CHECK-LABEL: TEST: numpy_python_numbers
# CHECK:      [10.5 17.5 24.5]
# CHECK:      func.func @main(%arg0: tensor<3xi32>, %arg1: tensor<1xi32>, %arg2: tensor<1xf64>) -> tensor<3xf64>
# CHECK:        %5 = "lazy.mul"(%arg0, %4) : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
# CHECK-NEXT:   %6 = "lazy.convert"(%5) : (tensor<3xi32>) -> tensor<3xf64>
# CHECK:        "lazy.add"(%6, %7) : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
a = lnp.asarray(np.array([1, 2, 3], np.int32))


@print_ir
def numpy_python_numbers():
    print(a * 7 + 3.5)
