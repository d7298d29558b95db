"""``torch.compile(backend="lazycore")`` from several Python threads (docs/threads.md).

A compiled graph's first call with a kind of arguments runs it op by op
while :mod:`lazycore.trace.capture` watches the whole op log and every live
handle (frontends/torch/dynamo.py): another thread's op in that window would
be taken for the graph's (an in-place update of another thread's tensor
recorded as the graph's update, and redone at every replay). That call holds
:data:`lazycore.ir.context.LOCK` from its start to its end, as a captured
step's recorded call does (tests/test_threads_capture.py), and a replay holds
it until tensors hold its results.

Each test runs in a child process under faulthandler (tests/_threads_child.py).
Values are small integers in float32: every result must equal eager's exactly.
"""

from __future__ import annotations

import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _threads_child import in_child, run_threads  # noqa: E402

THREADS = 4
CALLS = 12
WINDOW = 0.2
"""Seconds a first call waits for the other thread's update to land inside it (the lock makes it wait in vain)."""


def _pausing_first_calls(started: threading.Event, landed: threading.Event, held: list) -> None:
    """Every Program's graph, when it runs op by op (a first call), waits after
    its last op for another thread's update, still inside the watched call;
    ``held`` gets whether that thread held the graph lock meanwhile."""
    from lazycore.frontends.torch import dynamo
    from lazycore.ir.context import LOCK

    compile_ = dynamo._compile

    def pausing(gm, example_inputs, kind):
        program = compile_(gm, example_inputs, kind)
        graph = program.gm

        def graph_then_wait(*args):
            out = graph(*args)
            held.append(LOCK._is_owned())
            started.set()
            landed.wait(WINDOW)
            landed.clear()
            return out

        program.gm = graph_then_wait
        return program

    dynamo._compile = pausing  # (before the first compile: _aot() binds it then)


def _no_leak() -> None:
    """Another thread's in-place update of a lazy tensor during a compiled
    function's first call is not the graph's: replays leave it alone."""
    import torch

    import lazycore.torch as ltorch

    dev = ltorch.device()
    started, landed, stop = threading.Event(), threading.Event(), threading.Event()
    held: list = []
    _pausing_first_calls(started, landed, held)
    b = torch.zeros(2, device=dev)
    b.tolist()  # (device data before the first call)
    adds = []

    def other():
        while not stop.is_set():  # once inside the first call (unless the lock holds it off until after)
            if started.wait(0.05):
                started.clear()
                b.add_(1.0)
                adds.append(1)
                landed.set()

    def f(x):
        return x * 2.0 + 1.0

    cf = torch.compile(f, backend="lazycore")
    t = threading.Thread(target=other)
    t.start()
    x = torch.tensor([1.0, 2.0])
    outs = [cf(x) for _ in range(6)]
    stop.set()
    t.join(30)
    for out in outs:
        assert out.tolist() == [3.0, 5.0], out
    assert adds
    assert b.tolist() == [float(len(adds))] * 2, (b.tolist(), len(adds))  # no replay redid an add
    assert held == [True], held  # one first call, under the graph lock


def _first_calls_at_once() -> None:
    """THREADS threads call one compiled function for the first time at once
    (each its own inputs, CALLS calls), while another thread updates a lazy
    tensor in place as fast as it can; every result is eager's and the lazy
    tensor holds exactly its own updates."""
    import torch

    import lazycore.torch as ltorch

    sys.setswitchinterval(1e-5)  # threads switch between the graph's ops
    dev = ltorch.device()
    b = torch.zeros(3, device=dev)
    b.tolist()
    stop = threading.Event()
    adds = []

    def other():
        while not stop.is_set():
            b.add_(1.0)
            adds.append(1)
            if len(adds) % 200 == 0:
                b.tolist()  # (a barrier now and then: its graph stays small)

    def f(x, y):
        for _ in range(8):  # a graph of a few dozen ops: the first call's window is wide
            x = (x * 3.0 + y) % 101.0
        return x, (x - y).sum()

    cf = torch.compile(f, backend="lazycore")
    gate = threading.Barrier(THREADS)
    errors: list = []

    def work(k: int) -> None:
        x = torch.arange(3, dtype=torch.float32) + 10 * k
        y = torch.full((3,), float(k + 1))
        gate.wait(60)
        for i in range(CALLS):
            got = cf(x, y)
            want = f(x, y)
            for g, w in zip(got, want):
                if not torch.equal(g, w):
                    errors.append((k, i, g.tolist(), w.tolist()))
            x = want[0]

    t = threading.Thread(target=other)
    t.start()
    run_threads(work, [(k,) for k in range(THREADS)], errors, timeout=300)
    stop.set()
    t.join(30)
    assert not errors, errors[:5]
    assert adds
    assert b.tolist() == [float(len(adds))] * 3, (b.tolist()[:1], len(adds))


def test_another_threads_update_does_not_leak_into_a_first_call():
    in_child(__file__, "_no_leak", timeout=300)


def test_first_calls_from_four_threads_at_once_equal_eager():
    in_child(__file__, "_first_calls_at_once", timeout=300)
