# Fallback: an op with no lowering runs in the host library (eager torch,
# NumPy) on its materialized inputs, and the program is cut in two there.
# The first graph computes the op's inputs (an implicit barrier); the op runs
# on the host; its results come back as device data, parameters of the next
# graph. Each fallback is counted with the user's line
# (lazycore.metrics.fallbacks()).
# RUN: %PYTHON %s | FileCheck %s

import numpy as np
import torch

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.observe.testing import print_ir

dev = ltorch.device()
x = torch.tensor([3.0, -1.0, 2.0], device=dev)


# torch.unique along a dimension (sorted unique rows; plain torch.unique is
# lazy but for its length) has its result size depend on the values, so it has no lowering:
# graph 0 computes x * 2 for it, graph 1 adds 1 to the unique values, which
# arrive as %arg0. (The inverse indices are device data already: reading
# them compiles nothing.)
# CHECK-LABEL: TEST: torch_unique
# CHECK:      tensor([-1.,  5.,  7.]) tensor([2, 0, 1])
# CHECK:      ----- graph 0 -----
# CHECK:      func.func @main(%arg0: tensor<3xf32>, %arg1: tensor<1xf32>) -> tensor<3xf32>
# CHECK:        "lazy.mul"(%arg0,
# CHECK:      ----- graph 1 -----
# CHECK:      func.func @main(%arg0: tensor<3xf32>) -> tensor<3xf32>
# CHECK:        "lazy.add"(%arg0,
# CHECK-NOT:  ----- graph 2
@print_ir
def torch_unique():
    values, inverse = torch.unique(x * 2, dim=0, return_inverse=True)
    print((values + 1).cpu(), inverse.cpu())


a = lnp.asarray(np.array([3.0, 1.0, 3.0, 2.0]))  # (small integer uploads are read on the host: no graphs)


# np.unique along an axis (sorted unique rows; plain np.unique is lazy but for
# its length) has its result size depend on the values: NumPy computes it, and
# the next graph takes its three elements as %arg0.
# CHECK-LABEL: TEST: numpy_unique
# CHECK:      [20. 30. 40.]
# CHECK:      ----- graph 0 -----
# CHECK:      func.func @main(%arg0: tensor<4xf64>) -> tensor<4xf64>
# CHECK:        "lazy.add"(%arg0,
# CHECK:      ----- graph 1 -----
# CHECK:      func.func @main(%arg0: tensor<3xf64>, %arg1: tensor<1xf64>) -> tensor<3xf64>
# CHECK:        "lazy.mul"(%arg0,
@print_ir
def numpy_unique():
    print(np.unique(a + 1, axis=0) * 10)


# CHECK:      aten.unique_dim.default {{.*}}fallback.py:37': 1}
# CHECK-NEXT: numpy.unique {{.*}}fallback.py:57': 1}
for op, sites in lazycore.metrics.fallbacks().items():
    print(op, sites)
