# Float scans take the order of the platform their program is for
# (lazycore.trace.scans.in_order). On the CPU, torch's float32 cumsum is
# eager CPU's loop: the input converted to float64 (eager's accumulator), one
# stablehlo.while adding one element to the carry per step, each output
# rounded back to float32 after. NumPy's float64 cumsum is the same loop in
# float64, starting from -0.0 (NumPy copies the first element). For a
# platform outside the in-order set (a GPU, a TPU) the scan is the tree:
# log2(n) shifted copies (lazy.pad) added in float32, no loop, no float64.
# RUN: %PYTHON %s | FileCheck %s

import numpy as np
import torch

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.observe.testing import print_ir
from lazycore.trace import scans

dev = ltorch.device()
t = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], device=dev)


# CHECK-LABEL: TEST: torch_cumsum_on_cpu
# CHECK:      tensor([ 1.,  3.,  6., 10., 15.])
# CHECK:      %[[ZERO:.*]] = "lazy.constant"() {value = dense<0.000000e+00> : tensor<f64>}
# CHECK:      %[[WIDE:.*]] = "lazy.convert"(%arg0) : (tensor<5xf32>) -> tensor<5xf64>
# CHECK:      %[[LOOP:.*]]:5 = stablehlo.while({{.*}}, %[[C:[[:alnum:]_]+]] = %[[ZERO]], %[[Y:[[:alnum:]_]+]] = %{{.*}}, %[[X:[[:alnum:]_]+]] = %[[WIDE]])
# CHECK:      } do {
# CHECK:        "lazy.dynamic_slice"(%[[X]], {{.*}} : (tensor<5xf64>, tensor<i64>) -> tensor<1xf64>
# CHECK:        "lazy.add"(%[[C]], %{{.*}}) : (tensor<f64>, tensor<f64>) -> tensor<f64>
# CHECK:        "lazy.dynamic_update_slice"(%[[Y]], {{.*}} : (tensor<5xf64>, tensor<1xf64>, tensor<i64>)
# CHECK:      "lazy.convert"(%[[LOOP]]#3) : (tensor<5xf64>) -> tensor<5xf32>
# CHECK-NOT:  lazy.pad
@print_ir
def torch_cumsum_on_cpu():
    print(t.cumsum(0).cpu())


# CHECK-LABEL: TEST: numpy_cumsum_on_cpu
# CHECK:      [ 1.  3.  6. 10. 15.]
# CHECK:      "lazy.constant"() {value = dense<-0.000000e+00> : tensor<f64>}
# CHECK:      stablehlo.while
# CHECK:        "lazy.add"(%{{.*}}, %{{.*}}) : (tensor<f64>, tensor<f64>) -> tensor<f64>
# CHECK-NOT:  lazy.pad
@print_ir
def numpy_cumsum_on_cpu():
    print(np.asarray(lnp.cumsum(lnp.asarray(np.arange(1.0, 6.0)))))


# CHECK-LABEL: TEST: torch_cumsum_elsewhere
# CHECK:      tensor([ 1.,  3.,  6., 10., 15.])
# CHECK-NOT:  stablehlo.while
# CHECK:      %[[P1:.*]] = "lazy.pad"(%[[IN:arg0]], %{{.*}}) {high = array<i64: -1>, interior = array<i64: 0>, low = array<i64: 1>} : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
# CHECK-NEXT: %[[A1:.*]] = "lazy.add"(%[[IN]], %[[P1]]) : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
# CHECK-NEXT: %[[P2:.*]] = "lazy.pad"(%[[A1]], %{{.*}}) {high = array<i64: -2>, interior = array<i64: 0>, low = array<i64: 2>}
# CHECK-NEXT: %[[A2:.*]] = "lazy.add"(%[[A1]], %[[P2]])
# CHECK-NEXT: %[[P4:.*]] = "lazy.pad"(%[[A2]], %{{.*}}) {high = array<i64: -4>, interior = array<i64: 0>, low = array<i64: 4>}
# CHECK-NEXT: "lazy.add"(%[[A2]], %[[P4]])
# CHECK-NOT:  f64
# CHECK-NOT:  stablehlo.while
@print_ir
def torch_cumsum_elsewhere():
    saved = scans.IN_ORDER_PLATFORMS
    scans.IN_ORDER_PLATFORMS = frozenset()  # as for a GPU's or a TPU's program
    try:
        # a program for another platform is another device, so the CPU call's
        # recorded lowering is not replayed there: forget it to lower anew
        lazycore.cache.clear()
        print(t.cumsum(0).cpu())
    finally:
        scans.IN_ORDER_PLATFORMS = saved
