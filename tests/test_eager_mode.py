"""The eager debug mode (lazycore.runtime.eager): LAZYCORE_EAGER /
lazycore.config.eager() run every frontend op at once, as its own program,
with lazy mode's answers, and raise a value check's error at the op's call."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.observe import metrics
from markers import markers

HERE, line_of, at = markers(__file__)


@pytest.fixture(autouse=True)
def fresh():
    gc.collect()
    lazycore.mark_step(wait=True)
    yield
    gc.collect()
    lazycore.mark_step(wait=True)


def _step(device, steps=3):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(10, 6, generator=g).to(device), torch.randint(0, 2, (10,), generator=g).to(device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach().cpu())
    return torch.stack(losses), [p.detach().cpu() for p in model.parameters()]


def test_torch_training_step_same_values_as_lazy_and_eager_torch():
    dev = ltorch.device()
    want_losses, want_params = _step("cpu")
    lazy_losses, lazy_params = _step(dev)
    with lazycore.config.eager():
        metrics.reset()
        got_losses, got_params = _step(dev)
        executions = metrics.counters().get("executions", 0)
    torch.testing.assert_close(got_losses, want_losses, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_losses, lazy_losses, rtol=1e-6, atol=1e-7)
    for g, w, lz in zip(got_params, want_params, lazy_params):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(g, lz, rtol=1e-6, atol=1e-7)
    assert executions > 3 * 10  # many small programs, not one per step


def test_each_torch_op_is_its_own_program():
    dev = ltorch.device()
    a = torch.arange(6, dtype=torch.float32).to(dev)
    with lazycore.config.eager():
        metrics.reset()
        b = a * 2
        assert metrics.counters().get("executions", 0) == 1  # ran at its call
        c = b + 1
        d = c.sin()
        e = torch.mm(d.reshape(2, 3), d.reshape(3, 2))
        assert metrics.counters().get("executions", 0) == 4  # the views made no program
    lazycore.mark_step(wait=True)
    want = torch.arange(6, dtype=torch.float32) * 2 + 1
    torch.testing.assert_close(e.cpu(), torch.mm(want.sin().reshape(2, 3), want.sin().reshape(3, 2)))


def test_numpy_same_values_and_one_program_per_call():
    host = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)

    def compute(xp, x):
        y = xp.exp(x) * 2.0 - x
        z = xp.tanh(y).sum(axis=0)
        return z / (xp.abs(z).max() + 1.0)

    want = compute(np, host)
    lazy = np.asarray(compute(lnp, lnp.asarray(host)))
    x = lnp.asarray(host)
    with lazycore.config.eager():
        metrics.reset()
        y = lnp.exp(x) * 2.0
        assert metrics.counters().get("executions", 0) == 2  # exp, then the product
        got = np.asarray(compute(lnp, x))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got, lazy)
    del y


def test_value_check_raises_at_the_ops_line():
    dev = ltorch.device()
    i = torch.tensor([4, 5, 6]).to(dev)
    z = torch.tensor([1, 0, 2]).to(dev)
    reached = []
    with lazycore.config.eager():
        with pytest.raises(RuntimeError, match="ZeroDivisionError") as info:
            q = i // z  # integer division by zero
            reached.append(q)
    assert reached == []  # raised by the op itself, not a later barrier
    assert at("integer division by zero") in str(info.value)
    # lazy mode: the op returns; the read raises
    q = i // z
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        q.cpu()


def test_numpy_value_check_raises_at_the_call():
    a = lnp.asarray(np.array([2, 3], np.int64))
    e = lnp.asarray(np.array([1, -1], np.int64))
    with lazycore.config.eager():
        with pytest.raises(ValueError, match="negative") as info:
            a ** e  # integer power by a negative exponent
    assert at("integer power by a negative exponent") in str(info.value)


def test_off_puts_the_entry_points_back():
    plain = ltorch.Tensor.__dict__["__torch_dispatch__"]
    plain_add = lnp.ndarray.__dict__["__add__"]
    assert not lazycore.config.settings.eager
    with lazycore.config.eager():
        assert ltorch.Tensor.__dict__["__torch_dispatch__"] is not plain
        assert lnp.ndarray.__dict__["__add__"] is not plain_add
    assert ltorch.Tensor.__dict__["__torch_dispatch__"] is plain
    assert lnp.ndarray.__dict__["__add__"] is plain_add
    dev = ltorch.device()
    metrics.reset()
    a = torch.ones(3).to(dev)
    b = a * 2 + 1
    assert metrics.counters().get("executions", 0) == 0  # lazy again
    del b


def test_environment_variable():
    code = (
        "import numpy as np, lazycore, lazycore.numpy as lnp\n"
        "from lazycore.observe import metrics\n"
        "x = lnp.asarray(np.arange(3.0))\n"
        "y = x + 1\n"
        "z = y * 3\n"
        "print('EXEC', metrics.counters().get('executions', 0), np.asarray(z).tolist())\n"
    )
    env = dict(os.environ, LAZYCORE_EAGER="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert "EXEC 2 [3.0, 6.0, 9.0]" in out.stdout, out.stderr


def test_core_api_ops_run_at_their_call():
    x = lazycore.from_numpy(np.arange(4, dtype=np.float32))
    plain = lazycore.trace.core.apply
    with lazycore.config.eager():
        metrics.reset()
        y = lazycore.apply("add", x, x)
        assert metrics.counters().get("executions", 0) == 1
        z = lazycore.fori_loop(0, 3, lambda i, v: lazycore.apply("mul", v, v), y)
        assert metrics.counters().get("executions", 0) == 2  # the loop is one op: its body ran nothing alone
        bad = lazycore.from_numpy(np.array([True]))
        with pytest.raises(RuntimeError, match="checked here") as info:
            lazycore.check(x, bad, "checked here")  # a core check
        assert at("a core check") in str(info.value)
    assert lazycore.apply is plain and lazycore.trace.core.apply is plain
    np.testing.assert_array_equal(lazycore.to_numpy(z), (np.arange(4, dtype=np.float32) * 2) ** 8)

