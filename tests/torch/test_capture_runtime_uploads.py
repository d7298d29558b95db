"""A captured step refuses host data it puts in the graph, not the uploads
the runtime makes for programs of its own.

A value made of constants alone that a step reads (transformers' all-ones
mask, ``fast_all``: ``mask.sum() == mask.numel()``) is computed by a small
program apart from the step (lazycore.runtime.reads). The first such read in
a process uploads that program's scalar pack (``numel`` is a Python number,
a program parameter), and capture took it for the step's own upload: BART's
first call was refused as "the step copied host data to the device", so
its step replayed from its fifth call, not its third (4 traces and 1 replay
in 5, in a fresh process; with other models run first the pack was on the
device already and it replayed from its third).
"""

from __future__ import annotations

import torch

import lazycore.torch as ltorch
from lazycore.ir import events


def _model():
    torch.manual_seed(0)
    return torch.nn.Linear(6, 3)


def _step(model, x, opt, extra=None):
    opt.zero_grad()
    h = model(x)
    mask = torch.ones(2, 7, device=x.device).bool()  # transformers' all-ones mask
    if bool(mask.sum() == mask.numel()):  # a read of constants alone, with a Python number in it
        h = h * 2
    if extra is not None:
        h = h + extra()
    loss = h.square().mean()
    loss.backward()
    opt.step()
    return loss.detach()


def _run(step, eager_step, calls=5):
    x = torch.randn(4, 6)
    for _ in range(calls):
        want = eager_step(x)
        got = step(x.to(ltorch.device()))
        ltorch.mark_step(wait=True)
        torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-7)


def test_a_step_whose_first_read_of_constants_runs_a_program_replays_from_its_third_call(clean_runtime):
    dev = ltorch.device()
    eager, lazy = _model(), _model().to(dev)
    eopt, lopt = torch.optim.SGD(eager.parameters(), lr=0.1), torch.optim.SGD(lazy.parameters(), lr=0.1)
    step = ltorch.capture(lambda x: _step(lazy, x, lopt))
    before = events.EVENTS.counters["transfers_to_device"]
    _run(step, lambda x: _step(eager, x, eopt), calls=1)
    # (the read's program took a scalar pack, counted as a transfer: what the recording used to refuse)
    assert events.EVENTS.counters["transfers_to_device"] > before + 1
    _run(step, lambda x: _step(eager, x, eopt), calls=4)
    assert (step.traces, step.replays, step.why) == (2, 3, None)
    for a, b in zip(lazy.parameters(), eager.parameters()):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), rtol=1e-6, atol=1e-7)


def test_host_data_the_step_puts_in_the_graph_is_still_refused(clean_runtime):
    dev = ltorch.device()
    lazy = _model().to(dev)
    lopt = torch.optim.SGD(lazy.parameters(), lr=0.1)
    # a CPU tensor's values copied in at every call: a replay would keep the first call's
    step = ltorch.capture(lambda x: _step(lazy, x, lopt, extra=lambda: torch.randn(3).to(dev)))
    for _ in range(4):
        step(torch.randn(4, 6).to(dev))
        ltorch.mark_step(wait=True)
    assert step.replays == 0
    assert step.why == "the step copied host data to the device (a tensor made from Python data or a CPU tensor)"
