"""A captured step's recording does not depend on how old its constants are
(issue 41): a recorded lowering replayed hands back the constants it
recorded, so a traced call made them or found them made by an earlier one,
depending on whether ``lazycore.cache.clear()`` or a recipe's bound of 64
float values had dropped them since. Keyed by their age, two traced calls on
either side of such a drop differed, and the step paid a refused recording
(a third traced call) before replaying; keyed by what they are, it replays
from its third call as it does from a fresh start, with eager's values."""

import numpy as np
import torch
import torch.nn.functional as F

import lazycore
import lazycore.torch as ltorch
from _bits import BY_HAND  # (tests/ is on the path)


def _fn(x):
    return (x * 0.5 + 1.0).tanh() * 3.0


def _inputs(n):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(4, 6, generator=g) for _ in range(n)]


def _pattern(step, xs, dev, between=lambda i: None):
    """Each call's kind ("T" traced, "R" replayed) and its result's distance from eager's."""
    kinds, worst = [], 0.0
    for i, x in enumerate(xs):
        between(i)
        x = x.to(dev)
        ltorch.mark_step()  # (an uploaded argument, as a loader's: device data)
        traces = step.traces
        out = step(x)
        ltorch.mark_step()
        kinds.append("T" if step.traces > traces else "R")
        worst = max(worst, float((out.cpu() - _fn(xs[i])).abs().max()))
    return "".join(kinds), worst


def test_a_cleared_cache_costs_no_refused_recording(dev):
    step = ltorch.capture(_fn)
    _fn(torch.ones(4, 6, device=dev))  # (the lowerings' constants recorded before the first call)
    ltorch.mark_step()

    def clear(i):
        if i == 4:
            lazycore.cache.clear()  # every recording goes (the step's too): the next two calls trace

    kinds, worst = _pattern(step, _inputs(8), dev, clear)
    assert kinds == "TTRRTTRR", (kinds, step.why)
    assert worst <= 1e-6


def test_a_recipe_bound_filled_between_two_traced_calls_costs_no_refused_recording(dev):
    step = ltorch.capture(_fn)
    _fn(torch.ones(4, 6, device=dev))
    ltorch.mark_step()
    y = torch.ones(4, 6, device=dev)

    def fill(i):
        if i == 1:
            # 65 new float values for each of the step's float-taking lowerings on
            # its argument's kind: each recipe drops the values (and constants) it kept
            for k in range(65):
                f = 1.0 + (k + 1) / 1024
                ((y * f + f).tanh() * f).sum()
            ltorch.mark_step()

    kinds, worst = _pattern(step, _inputs(6), dev, fill)
    assert kinds == "TTRRRR", (kinds, step.why)
    assert worst <= 1e-6


def _train(dev, captured, clear_at=None, steps=10):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.Linear(16, 3)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.detach()

    fn = ltorch.capture(step) if captured else step
    g = torch.Generator().manual_seed(1)
    losses = []
    for i in range(steps):
        if i == clear_at:
            lazycore.cache.clear()
        x, y = torch.randn(5, 6, generator=g), torch.randint(0, 3, (5,), generator=g)
        losses.append(float(fn(x.to(dev), y.to(dev)).cpu()))
        if dev.type == "lazy":
            ltorch.mark_step()
    return losses, [p.detach().cpu().numpy() for p in model.parameters()], fn


# CI: test_a_cleared_cache_costs_no_refused_recording takes the same path (two traced calls after a clear, then replays)
@BY_HAND
def test_a_training_step_after_a_cleared_cache_records_in_two_calls_with_eagers_values(dev):
    eager = _train(torch.device("cpu"), False)
    got = _train(dev, True, clear_at=5)
    np.testing.assert_allclose(got[0], eager[0], rtol=1e-5)
    for u, v in zip(got[1], eager[1]):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)
    # 2 traced calls before the clear (the first finds the parameters), 2 after it
    assert (got[2].traces, got[2].replays) == (4, 6), got[2].why
