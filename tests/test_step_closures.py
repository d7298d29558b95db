"""Step closures (lazycore.runtime.closures): Python run after a step's
program at the next mark_step, reading that program's results, at no extra
program; order kept; a closure's error raised by mark_step with the line
that added it."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
import torch
from torch import nn

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.observe import metrics
from lazycore.runtime import cache
from markers import markers

HERE, line_of, at = markers(__file__)


@pytest.fixture(autouse=True)
def fresh():
    gc.collect()
    lazycore.mark_step(wait=True)
    lazycore.wait_step_closures()
    yield
    lazycore.wait_step_closures()


def _train(device, steps, log=None, run_async=False):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(12, 8, generator=g).to(device), torch.randint(0, 3, (12,), generator=g).to(device)
    losses = []
    for i in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if device == "cpu":
            losses.append(loss.item())
            continue
        if log is not None:
            ltorch.add_step_closure(lambda step, value: log.append((step, value.item())), (i, loss),
                                    run_async=run_async)
        ltorch.mark_step()
    return losses


def _counted(fn):
    cache.clear()
    metrics.reset()
    fn()
    lazycore.mark_step(wait=True)
    lazycore.wait_step_closures()
    c = metrics.counters()
    return c.get("executions", 0), c.get("compiles", 0) + c.get("disk_cache_hits", 0)


@pytest.mark.parametrize("run_async", [False, True])
def test_logging_closure_adds_no_program(run_async):
    dev = ltorch.device()
    eager = _train("cpu", 6)
    log: list = []
    without = _counted(lambda: _train(dev, 6))
    with_closure = _counted(lambda: _train(dev, 6, log, run_async))
    assert with_closure == without  # executions, compiles
    assert without[0] >= 6
    assert [s for s, _ in log] == list(range(6))  # every step, in order
    np.testing.assert_allclose([v for _, v in log], eager, rtol=1e-5, atol=1e-6)


def test_closure_runs_after_the_step_program_and_sees_its_values():
    a = lnp.asarray(np.arange(6, dtype=np.float32))
    b = a * 2 + 1
    seen = []
    lazycore.add_step_closure(lambda v: seen.append(np.asarray(v)), (b,))
    assert seen == []  # not before the step ends
    metrics.reset()
    lazycore.mark_step()
    np.testing.assert_array_equal(seen[0], np.arange(6, dtype=np.float32) * 2 + 1)
    c = metrics.counters()
    assert c.get("executions", 0) == 1  # the step's program; the closure's read ran none


def test_order_and_one_run_per_closure():
    order = []
    for k in range(5):
        lazycore.add_step_closure(order.append, (k,))
    lazycore.mark_step()
    lazycore.mark_step()
    assert order == [0, 1, 2, 3, 4]


def test_error_names_the_line_that_added_it_and_drops_the_rest():
    ran = []

    def bad(x):
        raise ValueError(f"bad value {x}")

    lazycore.add_step_closure(ran.append, ("first",))
    lazycore.add_step_closure(bad, (7,))  # added here
    lazycore.add_step_closure(ran.append, ("third",))
    with pytest.raises(lazycore.StepClosureError, match="bad value 7") as info:
        lazycore.mark_step()
    assert at("added here") in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)
    assert ran == ["first"]
    lazycore.mark_step()  # the step's closures are gone
    assert ran == ["first"]


def test_async_error_raised_by_the_next_mark_step():
    def bad():
        raise KeyError("async")

    lazycore.add_step_closure(bad, run_async=True)  # async added here
    lazycore.mark_step()
    with pytest.raises(lazycore.StepClosureError, match="KeyError") as info:
        lazycore.wait_step_closures()
        lazycore.mark_step()
    assert at("async added here") in str(info.value)


def test_closures_from_threads_run_once_each():
    got = []
    lock = threading.Lock()

    def add(k):
        with lock:
            got.append(k)

    def work(t):
        for i in range(20):
            lazycore.add_step_closure(add, ((t, i),))
            if i % 7 == 0:
                lazycore.mark_step()

    threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    lazycore.mark_step()
    assert sorted(got) == [(t, i) for t in range(3) for i in range(20)]
    for t in range(3):  # each thread's closures in the order it added them
        assert [i for tt, i in got if tt == t] == list(range(20))


def test_waiting_for_async_closures_inside_a_closure_is_refused():
    lazycore.add_step_closure(lambda: None, run_async=True)
    lazycore.mark_step()
    lazycore.add_step_closure(lazycore.wait_step_closures)
    with pytest.raises(lazycore.StepClosureError, match="would never return"):
        lazycore.mark_step()

