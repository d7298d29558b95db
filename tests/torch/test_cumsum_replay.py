"""A float cumsum, cumprod or logcumsumexp on the lazy CPU device is a loop
(lazycore.trace.scans.one_by_one); its recorded lowering holds the loop as one
entry with its bodies (lazycore.trace.recipes), so a later call of the same
signature on a new input replays it without tracing the scan's body again
(three traces a call before: 1.6-2.6 ms of host time), with eager's bits."""

import os
import sys

import numpy
import pytest
import torch

from lazycore.trace import control

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _bits import bits_equal  # noqa: E402


@pytest.fixture
def traces(monkeypatch):
    """How many loop bodies were traced (lazycore.trace.control's one entry for it)."""
    count = [0]
    inner = control._trace

    def counting(*args, **kwargs):
        count[0] += 1
        return inner(*args, **kwargs)

    monkeypatch.setattr(control, "_trace", counting)
    return count


def _data(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float32) * 3


@pytest.mark.parametrize("op", [
    lambda x: x.cumsum(0),
    lambda x: torch.cumsum(x, 1, dtype=torch.float64),
    lambda x: x.cumprod(1),
    lambda x: torch.logcumsumexp(x, 0),
], ids=["cumsum", "cumsum_f64", "cumprod", "logcumsumexp"])
def test_a_second_call_replays_without_tracing_the_scan(dev, no_fallback, traces, op):
    shape = (31, 7)
    x = _data(shape, 100)  # a first call of the signature, which may record (or find a recording)
    bits_equal(op(x.to(dev)).cpu().numpy(), op(x).numpy())
    assert traces[0] <= 3
    before = traces[0]
    for seed in range(3):
        x = _data(shape, seed)
        bits_equal(op(x.to(dev)).cpu().numpy(), op(x).numpy())
    assert traces[0] == before


def test_a_running_sum_replayed_never_goes_down(dev, no_fallback, traces):
    for seed in range(4):
        g = torch.Generator().manual_seed(seed)
        u = torch.rand(200, generator=g, dtype=torch.float64)
        x = u * (torch.rand(200, generator=g, dtype=torch.float64) > 0.5)
        out = x.to(dev).cumsum(0).cpu().numpy()
        assert (numpy.diff(out) >= 0).all()
        bits_equal(out, x.cumsum(0).numpy())
    assert traces[0] <= 3
