"""A padded count made up to a fixed length with copies of a filler (issue 40, UDOP).

transformers' UDOP keeps each image's patches that no word covers (a boolean
mask: a count per image), then pads them to the number of patches with
``torch.cat([seq, torch.stack([filler] * m)])``, ``m`` the length less the
count. The count is padded to its bucket (frontends/torch/counts.py), and the
copies were ``m`` concatenations: a graph, and a program, for every count. The
copies are now one broadcast (frontends/torch/ops/shape.py ``_copies``), and an
append of rows all alike selects the filler past the valid size
(runtime/padding.py ``_rows``), whatever ``m``: one program. ``torch.stack``
joins along its new dimension (PyTorch's reference joins along the old one
and splits it, which padding refuses for padded counts).
"""

from __future__ import annotations

import pytest
import torch

import lazycore.torch as ltorch
from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime")

LENGTH = 16


def _compiles() -> int:
    return metrics.counters().get("compiles", 0)


def _made_up(rows, filler):
    """``rows`` made up to LENGTH rows with copies of ``filler``."""
    m = LENGTH - rows.shape[0]
    return torch.cat([rows, torch.stack([filler] * m).to(rows)]) if m > 0 else rows


def _loss(x, w):
    filler = torch.zeros_like(x[0, :]) + 0.5
    y = _made_up(x * w, filler)
    return (y.softmax(0) * torch.arange(LENGTH, device=x.device)[:, None]).sum(), y


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_a_count_made_up_to_a_length_runs_one_program(dev, device_values, backward):
    compiles = []
    for n in (11, 9, 13, 12, 10):
        x = torch.randn(n, 4, generator=torch.Generator().manual_seed(n))
        w = torch.linspace(0.5, 2.0, 4)
        wl = w.to(dev).requires_grad_(backward)
        wc = w.clone().requires_grad_(backward)
        want, want_y = _loss(x, wc)
        before = _compiles()
        got, got_y = _loss(ltorch.dynamic(x.to(dev), 0), wl)
        if backward:
            got.backward()
            want.backward()
        ltorch.mark_step()
        torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(got_y.cpu(), want_y, rtol=0, atol=0)
        if backward:
            torch.testing.assert_close(wl.grad.cpu(), wc.grad, rtol=1e-5, atol=1e-6)
        compiles.append(_compiles() - before)
    assert compiles[1:] == [0] * 4, compiles


def test_copies_of_one_value_joined_are_eagers(dev):
    """``torch.cat`` and ``torch.stack`` of one tensor repeated, along every dimension."""
    t = torch.arange(24.0).reshape(2, 3, 4)
    for d in range(3):
        torch.testing.assert_close(torch.cat([t.to(dev)] * 3, d).cpu(), torch.cat([t] * 3, d), rtol=0, atol=0)
    for d in range(4):
        torch.testing.assert_close(torch.stack([t.to(dev)] * 2, d).cpu(), torch.stack([t] * 2, d), rtol=0, atol=0)


def test_two_counts_made_up_and_stacked_run_one_program(dev, device_values):
    """Two images' rows (two counts, never equal in a step), each made up to
    LENGTH and stacked, as UDOP stacks its images' patches: the stack joined
    along the old dimension and split it again, a split padding refuses, so
    every step compiled at its own sizes."""
    compiles = []
    for n, m in ((11, 9), (13, 10), (12, 9), (10, 13)):
        a = torch.randn(n, 4, generator=torch.Generator().manual_seed(n))
        b = torch.randn(m, 4, generator=torch.Generator().manual_seed(100 + m))
        filler = torch.full((4,), 0.25)
        want = torch.stack([_made_up(a, filler), _made_up(b, filler)]).softmax(1)
        before = _compiles()
        la, lb = ltorch.dynamic(a.to(dev), 0), ltorch.dynamic(b.to(dev), 0)
        got = torch.stack([_made_up(la, filler.to(dev)), _made_up(lb, filler.to(dev))]).softmax(1)
        ltorch.mark_step()
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
        compiles.append(_compiles() - before)
    assert compiles[1:] == [0, 0, 0], compiles
