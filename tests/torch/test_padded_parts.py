"""Slices inside a padded count's valid part (issue 39, Faster R-CNN).

torchvision's detection heads join per-image values whose counts differ
(``torch.cat(labels)``, the proposals of two images) and split them again
(``box_coder.encode``'s split, ``torch.cat``'s gradient): where one image's
count varies (padded to its bucket, frontends/torch/counts.py) and the
other's does not, the split takes ``[0:k]`` and ``[k:n]`` of the padded
joined value with ``k`` a plain size. Padding refused both slices ("takes
part of a padded dimension"), so the whole training step compiled at its own
sizes for every count. A slice whose bounds lie inside the valid part
reads the same positions of the padded value as of the unpadded one
(runtime/padding.py ``_slice``): ``[0:k]`` is that slice, unpadded, and
``[k:n]`` a symbol's part at the static offset ``k``.
"""

from __future__ import annotations

import pytest
import torch

import lazycore.torch as ltorch
from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime")


def _compiles() -> int:
    return metrics.counters().get("compiles", 0)


def _split_loss(a, b, w):
    """Two images' rows joined (``a`` a fixed count, ``b`` a varying one), scaled,
    split back (the first at a plain size), a loss of both parts."""
    joined = torch.cat([a, b]) * w
    first, second = joined.split([a.shape[0], b.shape[0]])
    return first.pow(2).sum() + second.sum() * 3 + first[:2].sum()


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_split_of_a_fixed_and_a_padded_count_runs_one_program(dev, device_values, backward):
    """``[0:5]`` and ``[5:5+n]`` of 5 fixed rows joined with ``n`` = 9, 10,
    11, 12 marked rows (the bucket of 16): eager's values and gradients, one
    program for every ``n`` (each compiled its own before: the slices were
    refused)."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(5, 3, generator=g)
    w0 = torch.randn(3, generator=g)
    compiles = []
    for n in (9, 10, 11, 12):
        b = torch.randn(n, 3, generator=torch.Generator().manual_seed(n))
        w = w0.clone().requires_grad_(backward)
        want = _split_loss(a, b, w)
        if backward:
            want.backward()
        lw = w0.to(dev).requires_grad_(backward)
        before = _compiles()
        got = _split_loss(a.to(dev), ltorch.dynamic(b.to(dev), 0), lw)
        if backward:
            got.backward()
        ltorch.mark_step()
        torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-5, atol=1e-5)
        if backward:
            torch.testing.assert_close(lw.grad.cpu(), w.grad, rtol=1e-5, atol=1e-5)
        compiles.append(_compiles() - before)
    assert compiles[1:] == [0, 0, 0], compiles


def _sampled(labels, x):
    """A detection sampler's draw: the positives' indices (a count), a
    ``randperm`` of that count (eager's generator), the drawn rows' loss."""
    positive = torch.where(labels >= 1)[0]
    perm = torch.randperm(positive.numel(), device=positive.device)
    return x[positive[perm]].pow(2).sum(0)


def test_randperm_of_a_padded_count_is_uploaded_padded(dev, device_values):
    """``randperm(positive.numel())`` of a count that varies (9 to 12
    positives of 32 labels): eager's draws (the same seeded generator), one
    program for the counts after the first padded one (the draws were
    uploaded at the count's own size, so ``positive[perm]`` compiled per
    count)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 3, generator=g)
    compiles = []
    for k, n in enumerate((9, 10, 11, 12, 10)):
        labels = torch.zeros(32, dtype=torch.int64)
        labels[torch.randperm(32, generator=torch.Generator().manual_seed(k))[:n]] = 1
        torch.manual_seed(k)
        want = _sampled(labels, x)
        torch.manual_seed(k)
        before = _compiles()
        got = _sampled(labels.to(dev), x.to(dev))
        ltorch.mark_step()
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
        compiles.append(_compiles() - before)
    assert compiles[2:] == [0, 0, 0], compiles


def _with_made(x):
    """A marked count's rows summed, beside a value made without inputs whose
    first dimension is 12 (anchors from ``arange``), split by a reshape."""
    grid = torch.arange(12, device=x.device, dtype=x.dtype)[:, None] * torch.ones(4, device=x.device, dtype=x.dtype)
    # (and one made at the count's size, which must be widened with it)
    weights = torch.arange(x.shape[0], device=x.device, dtype=x.dtype).mul(0.1).exp()[:, None]
    return (x * weights).sum(0) + grid.reshape(2, 6, 4).sum((0, 1))


def test_a_made_value_at_a_counts_size_by_chance_is_not_refused(dev, device_values):
    """A count of 12 (11, 13, 12, 14: the bucket of 16) beside a value made
    at size 12 without any input: at the count of 12 that value was widened
    as the count's, its reshape into (2, 6, 4) split the padded dimension and
    was refused, and the step compiled at its own sizes; the reshape now
    takes the value as made (nothing marked reaches it): one program."""
    compiles = []
    for n in (11, 13, 12, 14):
        x = torch.randn(n, 4, generator=torch.Generator().manual_seed(n))
        want = _with_made(x)
        before = _compiles()
        got = _with_made(ltorch.dynamic(x.to(dev), 0))
        ltorch.mark_step()
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
        compiles.append(_compiles() - before)
    assert compiles[1:] == [0, 0, 0], compiles


def test_labels_shifted_by_a_pad_and_a_slice_stay_padded(dev):
    """transformers' causal-LM loss shifts its labels left with
    ``pad(labels, (0, 1), value=-100)[..., 1:]``: the slice of the padded
    value from 1 on is the padded labels shifted, -100 from the valid
    length - 1 on, so a marked sequence length runs one program (one per
    length before: the pad was made at its own size) with eager's values."""
    before = metrics.counters()["compiles"]
    for t in (30, 31, 29, 32):
        g = torch.Generator().manual_seed(t)
        labels, logits = torch.randint(0, 9, (2, t), generator=g), torch.randn(2, t, 9, generator=g)

        def loss(labels, logits):
            shifted = torch.nn.functional.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()
            return shifted, torch.nn.functional.cross_entropy(logits.reshape(-1, 9), shifted.view(-1))

        got = loss(ltorch.dynamic(labels.to(dev), 1), ltorch.dynamic(logits.to(dev), 1))
        want = loss(labels, logits)
        torch.testing.assert_close(got[0].cpu(), want[0], rtol=0, atol=0)
        torch.testing.assert_close(got[1].cpu(), want[1], rtol=0, atol=0)
    assert metrics.counters()["compiles"] - before == 1
