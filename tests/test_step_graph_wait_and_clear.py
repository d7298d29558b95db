"""A step's program depends on the step, not on how the step before ended
(issue 40: a user's step compiles once).

Benchmark 7's pipelined row (``mark_step()``) compiled two programs more than
its waited row (``mark_step(wait=True)``), graphs one node apart. Waiting is
not why (the first two tests): the benchmark's cold start calls
``lazycore.cache.clear()`` after the waited row's model is on the device and
before its first step. The clear emptied the torch frontend's layout keys,
so that model's parameters kept layout keys made before it while every later
tensor of the same layout got a new key (hashed by identity): dispatch's
caches saw two signatures for one layout, recorded AdamW's lowerings twice,
and each recording kept its own constant 1.0 (``1 - lr * wd``, ``lerp``'s
``1 - w``): one node more, a program of its own, for that model's whole life
(the third test). The keys are an interning table now, which a clear leaves
(frontends/torch/tensor.py ``_KEYS``).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import lazycore  # noqa: E402
import lazycore.torch as ltorch  # noqa: E402
from lazycore.observe import metrics  # noqa: E402
from lazycore.observe.testing import capture  # noqa: E402


def _model(dev, x, y):
    """A step function of a small AdamW-trained model on ``dev`` (the same
    weights every call); its ``end`` ends each step."""
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 3).to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)

    def step(wait: bool):
        opt.zero_grad()
        torch.nn.functional.mse_loss(m(x), y).backward()
        opt.step()
        ltorch.mark_step(wait=wait)

    return step


def _data(dev):
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 4, generator=g).to(dev), torch.randn(8, 3, generator=g).to(dev)


def _compiles(fn) -> int:
    c0 = metrics.counters()["compiles"]
    fn()
    ltorch.mark_step(wait=True)
    return metrics.counters()["compiles"] - c0


def test_steps_after_a_waited_and_after_a_pipelined_step_are_one_program(clean_runtime):
    dev = ltorch.device()
    step = _model(dev, *_data(dev))
    step(True)  # the first step (optimizer state made) and the steady one
    step(True)
    with capture(fresh_cache=False) as cap:
        step(True)  # after a waited step
        step(False)
        step(False)  # after a pipelined step
        step(True)
        ltorch.mark_step(wait=True)
    assert cap.graphs == [], [g.lazy.count("\n") for g in cap.graphs]


def test_a_pipelined_model_finds_the_waited_models_programs(clean_runtime):
    dev = ltorch.device()
    x, y = _data(dev)
    waited, pipelined = _model(dev, x, y), _model(dev, x, y)
    assert _compiles(lambda: (waited(True), waited(True))) == 2
    assert _compiles(lambda: (pipelined(False), pipelined(False), pipelined(False))) == 0


def test_a_clear_between_a_models_upload_and_its_first_step_changes_no_program(clean_runtime):
    dev = ltorch.device()
    x, y = _data(dev)
    before = _model(dev, x, y)  # on the device before the clear, as benchmark 7's cold row
    ltorch.mark_step(wait=True)
    lazycore.cache.clear()
    with capture(fresh_cache=False) as cap:
        assert _compiles(lambda: (before(True), before(True))) == 2
        after = _model(dev, x, y)
        compiles = _compiles(lambda: (after(False), after(False)))
    sizes = [g.lazy.count("\n") for g in cap.graphs]
    assert compiles == 0, f"graphs of {sizes} lines: the model made after the clear compiled {compiles} more"
