"""Paper cuts users hit (issue 43), each with the program that reproduced it.

1. ``to_device`` of a lazycore.numpy array takes the device names lazycore
   prints (``"cpu:0"``) and the objects it gives back (``x.device``).
2. ``guard(compiles="error")`` around a plain training loop: the optimizer's
   state appearing at the second step is warm-up; a loop whose shapes keep
   changing still raises.
4. No native log noise: a long chain of ``x * 0.999 + 0.01`` prints nothing
   on stderr.
5. Device names of a mesh: per process, not jax's global ids.
"""

from __future__ import annotations

import numpy
import pytest

import lazycore.numpy as lnp


@pytest.fixture(scope="module")
def dev():
    import lazycore.torch as ltorch

    return ltorch.device()


# --- 1. to_device takes lazycore's own device names ----------------------------------------------


def test_to_device_takes_the_names_lazycore_prints(clean_runtime):
    a = lnp.asarray(numpy.arange(3.0))
    name = str(a.device)  # what lazycore prints: "cpu:0" (or "gpu:0")
    assert a.to_device(name) is a
    assert a.to_device(a.device) is a
    assert a.to_device(lnp.__array_namespace_info__().default_device()) is a
    platform = name.split(":")[0]
    assert a.to_device(platform) is a  # a platform alone is its device 0, as NumPy's "cpu"
    same = lnp.astype(a, "float32", device=name)
    numpy.testing.assert_array_equal(numpy.asarray(same), numpy.arange(3.0, dtype=numpy.float32))
    assert lnp.from_dlpack(a, device=name) is a
    assert list(lnp.__array_namespace_info__().dtypes(device=name)) == list(
        lnp.__array_namespace_info__().dtypes())
    for other in (f"{platform}:7", "nowhere", 0):
        with pytest.raises(ValueError, match="Unsupported device|Device not understood"):
            a.to_device(other)


# --- 2. guard(compiles="error") around a training loop --------------------------------------------


def _model_on(dev):
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).to(dev)
    import lazycore

    lazycore.mark_step()  # its parameters hold values before the region
    return model


def _train(model, opt, dev, steps, rows=lambda step: 4):
    import torch

    import lazycore

    g = torch.Generator().manual_seed(1)
    losses = []
    for step in range(steps):
        x, y = torch.randn(rows(step), 8, generator=g).to(dev), torch.randn(rows(step), 1, generator=g).to(dev)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        lazycore.mark_step()
    return [float(v) for v in losses]


def _eager(make_opt, steps):
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    return _train(model, make_opt(model), "cpu", steps)


@pytest.mark.parametrize("optimizer", ["sgd-momentum", "adam"])
def test_the_compile_guard_lets_the_optimizer_state_appear(dev, clean_runtime, optimizer):
    import torch

    from lazycore.observe import metrics
    from lazycore.observe.guards import guard

    def make_opt(model):
        if optimizer == "adam":
            return torch.optim.Adam(model.parameters(), lr=1e-2)
        return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    model = _model_on(dev)
    before = metrics.counters()["compiles"]
    with guard(compiles="error"):  # step 1 reads the state step 0 created: still warm-up
        losses = _train(model, make_opt(model), dev, 6)
    assert metrics.counters()["compiles"] - before == 2
    numpy.testing.assert_allclose(losses, _eager(make_opt, 6), rtol=1e-5)


def test_the_compile_guard_still_refuses_shapes_that_change_every_step(dev, clean_runtime):
    import torch

    from lazycore.observe.guards import GuardError, guard

    model = _model_on(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)  # no state: only step 0 may compile
    with guard(compiles="error"), pytest.raises(GuardError, match=r"compile after warm-up \(1 barriers"):
        _train(model, opt, dev, 4, rows=lambda step: 4 + step)
    model = _model_on(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)  # its state appears at step 1
    with guard(compiles="error"), pytest.raises(GuardError, match=r"compile after warm-up \(2 barriers"):
        _train(model, opt, dev, 4, rows=lambda step: 4 + step)


def test_the_compile_guard_with_a_read_inside_the_step(dev, clean_runtime):
    import torch

    import lazycore
    from lazycore.observe.guards import guard

    model = _model_on(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = torch.randn(4, 8).to(dev), torch.randn(4, 1).to(dev)
    with guard(compiles="error"):  # two programs a step; the second one's state appears at step 1
        for _ in range(4):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            assert loss.item() > 0  # a barrier before the update
            opt.step()
            lazycore.mark_step()


def test_a_value_read_again_is_not_new_state(clean_runtime):
    import lazycore
    from lazycore.observe.guards import GuardError, guard

    a = lnp.asarray(numpy.ones(3, numpy.float32))
    lazycore.mark_step()
    with guard(compiles="error"):
        total = a * 0  # a running sum rebound each step: state the graph carries on
        b = a + 1
        lazycore.mark_step()  # warm-up
        total = total + b  # total's last value is state: the program reads more of it
        lazycore.mark_step()
        total = total + b
        lazycore.mark_step()  # the same program
        c = (a * b).sum()  # b is still held: reading it is no new state
        with pytest.raises(GuardError, match="compile after warm-up"):
            lazycore.mark_step()
    lazycore.mark_step()
    assert numpy.asarray(total).tolist() == [4.0, 4.0, 4.0] and float(numpy.asarray(c)) == 6.0


# --- 4. no native log noise ----------------------------------------------------------------------

CHAIN = r"""
import numpy as np
import torch
import lazycore.numpy as lnp
import lazycore.torch as ltorch

z = lnp.ones(1000)  # float64, as NumPy
for _ in range(100):
    z = z * 0.999 + 0.01
x = torch.ones(1000).to(ltorch.device())
for _ in range(100):
    x = x * 0.999 + 0.01
want = 1.0
for _ in range(100):
    want = want * 0.999 + 0.01
assert abs(float(np.asarray(z)[0]) - want) < 1e-12, np.asarray(z)[0]
assert abs(float(x[0].item()) - want) < 1e-5, x[0].item()
print("ok")
"""


def test_a_long_chain_of_numbers_compiles_without_native_log_lines():
    import os
    import subprocess
    import sys

    # XLA's algebraic simplifier cycled on the one broadcast of each number shared by every op of
    # the chain ("likely stuck in a circular simplification loop" on stderr); jax.jit's lowering,
    # a broadcast per use, prints nothing (lazycore.runtime.compiler._scalar_broadcasts_per_use)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAZYCORE_DEBUG")}
    env["LAZYCORE_CACHE_DIR"] = "off"
    run = subprocess.run([sys.executable, "-c", CHAIN], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr[-3000:]
    assert run.stderr == "", run.stderr[-3000:]


# --- 5. device names per process ------------------------------------------------------------------


class _FakeDevice:
    """A PJRT device of some process, as jax lists them (ids 0, 1 and 2048, 2049: jax's global ids)."""

    platform = "cpu"

    def __init__(self, id, process_index):
        self.id, self.process_index = id, process_index


def test_mesh_names_say_which_process_a_device_belongs_to(monkeypatch):
    from lazycore.runtime import device as lc_device
    from lazycore.runtime import pjrt

    every = [_FakeDevice(i, 0) for i in (0, 1)] + [_FakeDevice(i, 1) for i in (2048, 2049)]
    monkeypatch.setattr(pjrt, "global_devices", lambda platform=None: list(every))
    monkeypatch.setattr(pjrt, "process_count", lambda: 2)
    assert lc_device._device_names(every) == "process 0 cpu:0-1, process 1 cpu:0-1"
    assert lc_device._device_names([every[1], every[3]]) == "process 0 cpu:1, process 1 cpu:1"
    assert lc_device._device_names([every[2], every[0]]) == "process 1 cpu:0, process 0 cpu:0"
    monkeypatch.setattr(pjrt, "process_count", lambda: 1)  # one process: the names it always had
    assert lc_device._device_names(every[:2]) == "cpu:0-1"
