# lazycore.export: the program a function traces, as StableHLO for any
# consumer (its bytes are a portable artifact: exported.artifact). The
# function gets fresh parameters shaped like the examples, of the examples'
# frontend; what it returns comes first among the results, then the new value
# of each argument it updated in place. Values it reads from elsewhere (a
# layer's weights) are constants of the program.
# RUN: %PYTHON %s | FileCheck %s

import numpy as np
import torch

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch

dev = ltorch.device()
torch.manual_seed(0)
layer = torch.nn.Linear(3, 2).to(dev)


def forward(x, steps):
    steps.add_(1)  # an in-place update: result 1
    return torch.relu(layer(x))


exported = lazycore.export(forward, torch.ones(4, 3, device=dev), torch.zeros((), dtype=torch.int64, device=dev),
                           donate_argnums=1)
print(exported)
print(exported.mlir_text)
# CHECK:      lazycore.export of forward: StableHLO {{[0-9.]+}}, {{[0-9]+}} bytes
# CHECK-NEXT:   arg 0: tensor<4x3xf32>
# CHECK-NEXT:   arg 1: tensor<i64>, donated to result 1
# CHECK-NEXT:   result 0: tensor<4x2xf32>, returned by forward
# CHECK-NEXT:   result 1: tensor<i64>, the new value of arg 1
# CHECK:      func.func @main(%arg0: tensor<4x3xf32>, %arg1: tensor<i64> {tf.aliasing_output = 1 : i32}) -> (tensor<4x2xf32>, tensor<i64>)
# CHECK-DAG:    %[[W:.*]] = stablehlo.constant dense<{{.*}}> : tensor<2x3xf32>
# CHECK-DAG:    %[[B:.*]] = stablehlo.constant dense<{{.*}}> : tensor<2xf32>
# CHECK:        %[[BIAS:.*]] = stablehlo.broadcast_in_dim %[[B]], dims = [1] : (tensor<2xf32>) -> tensor<4x2xf32>
# CHECK:        %[[WT:.*]] = stablehlo.transpose %[[W]], dims = [1, 0]
# CHECK:        %[[XW:.*]] = stablehlo.dot_general %arg0, %[[WT]], contracting_dims = [1] x [0]
# CHECK:        %[[Y:.*]] = stablehlo.add %[[BIAS]], %[[XW]]
# CHECK:        %[[NEG:.*]] = stablehlo.compare LT, %[[Y]]
# CHECK:        %[[RELU:.*]] = stablehlo.select %[[NEG]], %{{.*}}, %[[Y]]
# CHECK:        %[[STEPS:.*]] = stablehlo.add %arg1
# CHECK:        return %[[RELU]], %[[STEPS]] : tensor<4x2xf32>, tensor<i64>


# NumPy: a normalization over rows, exported for float64 arrays of 2x5.
def normalize(a):
    return (a - a.mean(axis=1, keepdims=True)) / a.std(axis=1, keepdims=True)


exported = lazycore.export(normalize, lnp.zeros((2, 5)))
print(exported)
print(exported.lazy_text)
print(exported.call(np.array([[1.0, 2.0, 3.0, 4.0, 5.0], [0.0, 0.0, 0.0, 0.0, 10.0]]))[0].round(4))
# CHECK:      lazycore.export of normalize: StableHLO
# CHECK-NEXT:   arg 0: tensor<2x5xf64>
# CHECK-NEXT:   result 0: tensor<2x5xf64>, returned by normalize
# CHECK:      func.func @main(%arg0: tensor<2x5xf64>) -> tensor<2x5xf64>
# CHECK:        "lazy.reduce_sum"(%arg0) {dims = array<i64: 1>}
# CHECK:        "lazy.sqrt"
# CHECK:        "lazy.div"
# CHECK:      {{\[}}[-1.4142 -0.7071  0.      0.7071  1.4142]
# CHECK-NEXT:  [-0.5    -0.5    -0.5    -0.5     2.    ]]
