# Recorded replay. The first call of a frontend op with a new signature
# (shapes, dtypes, devices, Python arguments) runs its lowering's Python and
# records the lazy ops it made; later calls with that signature replay the
# recording instead, making the very nodes tracing would (same IR, same
# digests, so the same compiled program). A float argument the lowering only
# handed to lazycore.scalar replays for other values too: it is a parameter.
# RUN: %PYTHON %s | FileCheck %s

import numpy as np
import torch

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.observe.testing import print_ir

dev = ltorch.device()


# A user lowering of torch.addcmul that says when its Python runs.
def addcmul(ctx, x, t1, t2, *, value=1):
    print("(addcmul's lowering runs)")
    scale = lazycore.broadcast_to(lazycore.scalar(value, x.dtype), x.shape)
    return lazycore.apply("add", x, lazycore.apply("mul", lazycore.apply("mul", t1, t2), scale))


ltorch.register_lowering(torch.ops.aten.addcmul.default, addcmul)
x = torch.tensor([1.0, 2.0], device=dev)
y = torch.tensor([3.0, 4.0], device=dev)


# CHECK-LABEL: TEST: recorded
# CHECK-NEXT:  (addcmul's lowering runs)
# CHECK-NEXT:  tensor([ 5.5000, 10.0000])
# CHECK:       func.func @main(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>, %arg2: tensor<1xf32>) -> tensor<2xf32>
# CHECK:         %[[P:.*]] = "lazy.reshape"
# CHECK-NEXT:    %[[SQ:.*]] = "lazy.mul"(%arg1, %arg1)
# CHECK-NEXT:    %[[S:.*]] = "lazy.broadcast_in_dim"(%[[P]])
# CHECK-NEXT:    %[[M:.*]] = "lazy.mul"(%[[SQ]], %[[S]])
# CHECK-NEXT:    "lazy.add"(%arg0, %[[M]])
@print_ir
def recorded():
    print(torch.addcmul(x, y, y, value=0.5).cpu())


# Other tensors, another value: the recording is replayed (no line from the
# lowering) and the graph is the same, 0.25 being its parameter.
# CHECK-LABEL: TEST: replayed
# CHECK-NOT:   lowering runs
# CHECK:       tensor([3.2500, 5.0000])
# CHECK:       func.func @main(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>, %arg2: tensor<1xf32>) -> tensor<2xf32>
# CHECK:         %[[P:.*]] = "lazy.reshape"
# CHECK-NEXT:    %[[SQ:.*]] = "lazy.mul"(%arg1, %arg1)
# CHECK-NEXT:    %[[S:.*]] = "lazy.broadcast_in_dim"(%[[P]])
# CHECK-NEXT:    %[[M:.*]] = "lazy.mul"(%[[SQ]], %[[S]])
# CHECK-NEXT:    "lazy.add"(%arg0, %[[M]])
@print_ir
def replayed():
    print(torch.addcmul(y, x, x, value=0.25).cpu())


# LAZYCORE_REPLAY=0 (the replay setting) runs the lowering every time.
# CHECK-LABEL: TEST: traced_again
# CHECK-NEXT:  (addcmul's lowering runs)
@print_ir
def traced_again():
    with lazycore.config.override(replay=False):
        torch.addcmul(y, x, x, value=0.25).cpu()


# NumPy ufuncs replay the same way: the IR of a replayed call is the IR of a
# traced one.
a = lnp.asarray(np.array([1.0, 4.0]))


def program():
    return np.sqrt(np.abs(a - 2.5)) * 3.0


first = lazycore.debug.ir_text(program())  # recorded
replay = lazycore.debug.ir_text(program())  # replayed
with lazycore.config.override(replay=False):
    traced = lazycore.debug.ir_text(program())
print("replayed IR == traced IR:", first == replay == traced)
print(replay)
# CHECK:      replayed IR == traced IR: True
# CHECK:      func.func @main(%arg0: tensor<2xf64>, %arg1: tensor<2xf64>) -> tensor<2xf64>
# CHECK:        "lazy.sub"(%arg0,
# CHECK-NEXT:   "lazy.abs"
# CHECK-NEXT:   "lazy.sqrt"
# CHECK:        "lazy.mul"
