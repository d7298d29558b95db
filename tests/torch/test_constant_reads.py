"""Reading a value made of constants alone does not cut the pending step.

transformers reads such values in the middle of a training step: with
``use_cache=False`` or gradient checkpointing its packed-sequence check reads a
value computed from an ``arange``; BART's decoder reads an all-ones mask. A
barrier there ran the step's graph so far as one program and the rest as
another, and a captured step that read one never replayed. Such a value is
computed by a small program of its own; the step stays one program.
"""

from __future__ import annotations

import torch

import lazycore
import lazycore.torch as ltorch


def _step(model, x, opt):
    opt.zero_grad()
    h = model(x)
    m = torch.ones(2, 6, device=x.device).bool()  # as transformers' all-ones mask
    if bool(m.sum() == m.numel()):  # a read of constants alone
        h = h * 2
    loss = h.square().mean()
    loss.backward()
    opt.step()
    return loss.detach()


def _model():
    torch.manual_seed(0)
    return torch.nn.Linear(6, 3)


def test_a_read_of_constants_leaves_the_step_whole_with_eagers_values():
    dev = ltorch.device()
    x = torch.randn(4, 6)
    eager, lazy = _model(), _model().to(dev)
    eopt, lopt = torch.optim.SGD(eager.parameters(), lr=0.1), torch.optim.SGD(lazy.parameters(), lr=0.1)
    for _ in range(3):
        want = _step(eager, x, eopt)
        got = _step(lazy, x.to(dev), lopt)
        ltorch.mark_step(wait=True)
        torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-7)
    for a, b in zip(lazy.parameters(), eager.parameters()):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), rtol=1e-6, atol=1e-7)


def test_the_read_does_not_run_the_pending_work():
    dev = ltorch.device()
    w = torch.randn(4, 4).to(dev)
    ltorch.mark_step(wait=True)
    y = (w @ w).sum()  # pending work of the step
    m = torch.ones(2, 6, device=dev).bool()
    runs = lambda: lazycore.metrics.counters()["executions"]  # noqa: E731
    before = runs()
    assert bool(m.sum() == m.numel())
    assert runs() == before + 1  # the read's own program
    ltorch.mark_step(wait=True)
    assert runs() == before + 2  # y was still pending: the step's program computed it
    torch.testing.assert_close(y.cpu(), (w.cpu() @ w.cpu()).sum())


def test_a_captured_step_that_reads_constants_replays():
    dev = ltorch.device()
    x = torch.randn(4, 6)
    eager, lazy = _model(), _model().to(dev)
    eopt, lopt = torch.optim.SGD(eager.parameters(), lr=0.1), torch.optim.SGD(lazy.parameters(), lr=0.1)
    step = ltorch.capture(lambda x: _step(lazy, x, lopt))
    for _ in range(5):
        want = _step(eager, x, eopt)
        got = step(x.to(dev))
        ltorch.mark_step()
        torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-7)
    assert (step.traces, step.replays) == (2, 3), step.why
