# Loops and branches from the frontends: a fori_loop of 1000 iterations over
# lazycore.numpy arrays and a torch.cond on lazy tensors. Each body is traced
# once: the program holds one stablehlo.while (or stablehlo.case) with the
# body's ops once, not a thousand copies. What a body reads from outside
# (the array w, the trip count, the Python number 0.5) comes in as operands:
# the loop carries them unchanged, so a new trip count or a new number runs
# the same program.
# RUN: %PYTHON %s | FileCheck %s

import numpy as np
import torch

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.observe.testing import print_ir

x = lnp.asarray(np.ones(3, np.float32))
w = lnp.asarray(np.full(3, 2.0, np.float32))


# The carried values: the counter, the bound, x, then what the body reads (0.5, w).
# CHECK-LABEL: TEST: numpy_fori_loop
# CHECK:      stablehlo.while(%[[I:.*]] = %{{.*}}, %[[N:.*]] = %{{.*}}, %[[X:.*]] = %arg0, %[[H:.*]] = %{{.*}}, %[[W:.*]] = %arg1)
# CHECK-NEXT: cond {
# CHECK-NEXT:   "lazy.compare"(%[[I]], %[[N]]) {direction = "LT"}
# CHECK:      } do {
# CHECK:        "lazy.mul"(%[[X]], %[[W]])
# CHECK:        stablehlo.return {{.*}}, %[[N]], {{.*}}, %[[H]], %[[W]]
# CHECK:      ----- stablehlo -----
# CHECK:      stablehlo.while
# CHECK-COUNT-1: stablehlo.multiply
# CHECK-NOT:  stablehlo.multiply
@print_ir(stage="both")
def numpy_fori_loop():
    np.asarray(lazycore.fori_loop(0, 1000, lambda i, v: v * w + 0.5, x))


dev = ltorch.device()
t = torch.arange(4.0).to(dev)


# The predicate becomes the i32 index; branch 0 is the false one.
# CHECK-LABEL: TEST: torch_cond
# CHECK:      %[[P:.*]] = "lazy.compare"
# CHECK-NEXT: %[[IDX:.*]] = "lazy.convert"(%[[P]]) : (tensor<i1>) -> tensor<i32>
# CHECK-NEXT: "stablehlo.case"(%[[IDX]]) ({
# CHECK:        "lazy.sub"
# CHECK:      }, {
# CHECK:        "lazy.mul"
@print_ir(stage="lazy")
def torch_cond():
    torch.cond(t.sum() > 2, lambda a: a * 2, lambda a: a - 1, (t,)).cpu()


# A value check in a body (torch's integer division by zero) cannot raise
# from inside the loop. Its flag joins the carry, starting false and OR-ed
# each iteration; outside, the same check guards the loop's result on the
# carried flag, which the program returns after its outputs (the barrier
# reads it and fails the result with eager's error and the body's line).
# CHECK-LABEL: TEST: torch_check_in_a_loop_body
# CHECK:      %[[NO:.*]] = "lazy.constant"() {value = dense<false> : tensor<i1>}
# CHECK-NEXT: %[[LOOP:.*]]:5 = stablehlo.while({{.*}}, %[[V:.*]] = %arg0, %[[F:.*]] = %[[NO]], %[[D:.*]] = %arg1)
# CHECK:      } do {
# CHECK:        %[[ZERO:.*]] = "lazy.compare"(%[[D]], %{{.*}}) {direction = "EQ"}
# CHECK-NEXT:   %[[ANY:.*]] = "lazy.reduce_max"(%[[ZERO]])
# CHECK-NEXT:   %[[Q:.*]] = "lazy.check"(%{{.*}}, %[[ANY]]) {error = "RuntimeError", message = "ZeroDivisionError"}
# CHECK-NEXT:   %[[NEW:.*]] = "lazy.or"(%[[F]], %[[ANY]])
# CHECK-NEXT:   stablehlo.return {{.*}}, %[[Q]], %[[NEW]], %[[D]]
# CHECK:      %[[OUT:.*]] = "lazy.check"(%[[LOOP]]#2, %[[LOOP]]#3) {error = "RuntimeError", message = "ZeroDivisionError"}
# CHECK-NEXT: return %[[OUT]], %[[LOOP]]#3
@print_ir(stage="lazy")
def torch_check_in_a_loop_body():
    x = torch.tensor([7, 9], device=dev)
    d = torch.tensor([2, 3], device=dev)
    lazycore.fori_loop(0, 2, lambda i, v: v // d, x).cpu()
