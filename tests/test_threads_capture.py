"""Whole-step capture from several Python threads (docs/threads.md).

A captured function's traced call watches the whole op log and every live
handle between its start and its end: another thread's op in that window
would be taken for the step's (an in-place update of another thread's tensor
recorded as the step's update, and redone at every replay). The recording
holds :data:`lazycore.ir.context.LOCK`, so other threads' ops wait for it;
a replay holds it until its results are held by tensors.

Each test runs in a child process with faulthandler on (tests/_threads_child.py),
so a crash fails its test instead of killing pytest. Values are small
integers in float32: every lazy result must equal eager's exactly.
"""

from __future__ import annotations

import os
import sys
import threading

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _threads_child import in_child, run_threads  # noqa: E402

THREADS = 4
CALLS = 50
WINDOW = 0.2
"""Seconds a recorded step waits for the other thread's update to land inside it (the lock makes it wait in vain)."""


class _Torch:
    def __init__(self):
        import torch

        import lazycore.torch as ltorch

        self.torch, self.capture, self.dev = torch, ltorch.capture, ltorch.device()
        self.mark_step = ltorch.mark_step

    def lazy(self, values):
        return self.torch.tensor(np.asarray(values, np.float32), device=self.dev)

    def add_(self, a, c):
        a.add_(c)

    def host(self, a):
        return np.asarray(a.tolist(), np.float32)


class _Numpy:
    def __init__(self):
        import lazycore
        import lazycore.numpy as lnp

        self.capture, self.mark_step = lnp.capture, lazycore.mark_step
        self.lnp = lnp

    def lazy(self, values):
        return self.lnp.asarray(np.asarray(values, np.float32))

    def add_(self, a, c):
        a += c

    def host(self, a):
        return np.asarray(a).astype(np.float32)


def _side(name: str):
    return _Torch() if name == "torch" else _Numpy()


def _no_leak(name: str) -> None:
    """Another thread's in-place update during a step's recorded calls is not the
    step's: replays leave that thread's tensor alone."""
    side = _side(name)
    x, b = side.lazy([1.0, 2.0]), side.lazy([0.0, 0.0])
    side.host(x), side.host(b)  # (both device data before the recordings)
    started, landed, stop = threading.Event(), threading.Event(), threading.Event()
    adds = []

    def other():
        while not stop.is_set():  # once inside each traced call (unless the lock holds it off until after)
            if started.wait(0.05):
                started.clear()
                side.add_(b, 1.0)
                adds.append(1)
                landed.set()

    def step(x):
        y = x * 2.0
        started.set()
        landed.wait(WINDOW)
        landed.clear()
        return y + 1.0

    t = threading.Thread(target=other)
    t.start()
    step = side.capture(step)
    outs = [side.host(step(x)) for _ in range(6)]
    stop.set()
    t.join(30)
    assert step.replays >= 3 and step.traces + step.replays == 6, (step.traces, step.replays, step.why)
    for out in outs:
        np.testing.assert_array_equal(out, [3.0, 5.0])
    assert adds
    np.testing.assert_array_equal(side.host(b), [float(len(adds))] * 2)  # no replay redid an add


def _stress(name: str) -> None:
    """THREADS threads x CALLS calls: threads 0 and 1 call one captured step
    (private tensors updated in place), the others trace the same arithmetic
    plainly; every thread marks steps and reads values; all equal eager's."""
    side = _side(name)
    errors: list = []
    gate = threading.Barrier(THREADS)

    def body(x, c):
        side.add_(x, c)
        return x * 2.0 + 1.0

    step = side.capture(body)

    def work(k: int) -> None:
        h = np.arange(3, dtype=np.float32) + 10 * k
        x, ref = side.lazy(h), h.copy()
        call = step if k < 2 else body
        gate.wait(30)
        for i in range(CALLS):
            out = call(x, 1.0)
            ref += 1.0
            if i % 5 == k % 5:
                side.mark_step()
            if i % 3 == 0:
                got = side.host(out)
                if not np.array_equal(got, ref * 2.0 + 1.0):
                    errors.append((k, i, "result", got.tolist(), (ref * 2.0 + 1.0).tolist()))
        got = side.host(x)
        if not np.array_equal(got, ref):
            errors.append((k, "end", got.tolist(), ref.tolist()))

    run_threads(work, [(k,) for k in range(THREADS)], errors, timeout=300)
    assert not errors, errors[:5]
    assert step.traces + step.replays == 2 * CALLS
    assert step.replays > 0, (step.traces, step.why)


def _torch_no_leak():
    _no_leak("torch")


def _numpy_no_leak():
    _no_leak("numpy")


def _torch_stress():
    _stress("torch")


def _numpy_stress():
    _stress("numpy")


def test_torch_another_threads_update_does_not_leak_into_a_recording():
    in_child(__file__, "_torch_no_leak", timeout=300)


def test_numpy_another_threads_update_does_not_leak_into_a_recording():
    in_child(__file__, "_numpy_no_leak", timeout=300)


def test_torch_captured_and_plain_steps_from_four_threads_equal_eager():
    in_child(__file__, "_torch_stress", timeout=300)


def test_numpy_captured_and_plain_steps_from_four_threads_equal_eager():
    in_child(__file__, "_numpy_stress", timeout=300)
