"""Reading a value that only moves a computed buffer's elements runs no program.

After a barrier a gradient is often a pending transpose of the product that
made it (linear's weight gradient); every ``.cpu()`` of it was a program of
its own (a compile, then one execution per read). runtime/reads.py `_moved`
copies the buffer and moves it on the host."""

import copy

import torch

import lazycore
import lazycore.torch  # noqa: F401
from lazycore import metrics


def _delta(before):
    now = dict(metrics.counters())
    return {k: now[k] - before.get(k, 0) for k in now if now[k] != before.get(k, 0)}


def _trained():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    lazy = copy.deepcopy(model).to("lazy")
    x = torch.randn(5, 8)
    model(x).sum().backward()
    lazy(x.to("lazy")).sum().backward()
    lazycore.mark_step(wait=True)
    return model, lazy


def test_reading_a_gradient_after_the_barrier_runs_no_program():
    model, lazy = _trained()
    before = dict(metrics.counters())
    got = [p.grad.cpu() for p in lazy.parameters()] + [p.grad.cpu() for p in lazy.parameters()]
    delta = _delta(before)
    assert delta.get("executions", 0) == 0 and delta.get("compiles", 0) == 0, delta
    want = [p.grad for p in model.parameters()] * 2
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)


def test_views_of_a_computed_value_read_without_a_program():
    x = torch.randn(6, 4)
    y = (x.to("lazy") * 3).t()
    lazycore.mark_step(wait=True)
    before = dict(metrics.counters())
    parts = [y.cpu(), y[1:3].cpu(), y.reshape(-1).cpu(), y.flip(0).cpu(), y[:, ::2].cpu()]
    delta = _delta(before)
    assert delta.get("executions", 0) == 0, delta
    e = (x * 3).t()
    for got, want in zip(parts, [e, e[1:3], e.reshape(-1), e.flip(0), e[:, ::2]]):
        assert torch.equal(got, want)


def test_arithmetic_on_a_computed_value_still_runs_its_program():
    x = torch.randn(6, 4)
    y = x.to("lazy") * 3
    lazycore.mark_step(wait=True)
    before = dict(metrics.counters())
    got = (y + 1).t().cpu()
    assert _delta(before).get("executions", 0) == 1
    assert torch.equal(got, (x * 3 + 1).t())
