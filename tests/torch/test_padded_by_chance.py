"""Values made at a marked count's size by chance (issue 40, Faster R-CNN).

A symbol of the padding is a marked dimension's count: a value made without
inputs at that size was widened as the count's (runtime/padding.py
``fresh_dims``), which holds when the size is the count's (a mean's gradient
expanded to the batch) and not when it is another dimension's that happens
to be equal. Faster R-CNN's RPN samples 270 boxes of 2 x 135 anchors: the
gradient of the sampled deltas is a scatter into zeros of the 270 anchors,
viewed as (2, 135, 4); widened as the 270 boxes, the view split a padded
dimension and the whole training step compiled at its own sizes whenever
the count of boxes was 270. roi_align's backward broadcasts its channel
index to the boxes of a level: where all 103 proposals chose one level, the
index was widened as the 103 proposals and its concatenation with the
(unpadded) batch index did not fit. Where such a widening refuses an op, the
graph is padded again with those values made at their own size
(``_by_chance``).
"""

from __future__ import annotations

import pytest
import torch

import lazycore.torch as ltorch
from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime")


def _compiles() -> int:
    return metrics.counters().get("compiles", 0)


def _anchors_gradient(x, idx, rows):
    """``x``'s rows (a marked count) accumulated per row parity, beside 12 anchors' zeros with
    ``rows`` added at ``idx`` (a scatter at marked indices), viewed as 2
    images of 6 anchors."""
    z = torch.zeros(12, 4, device=x.device, dtype=x.dtype).index_put((idx,), rows, accumulate=True)
    # (and an accumulation at (row, channel) pairs of the count's rows: its
    # channel index is made at the count's size, and must be widened with it)
    pairs = (x[:, 0].to(torch.int64).remainder(2)[:, None], torch.arange(3, device=x.device)[None, :])
    out = torch.zeros(2, 3, device=x.device, dtype=x.dtype).index_put(pairs, x[:, 1:], accumulate=True)
    return (out * out).sum() + (z.reshape(2, 6, 4) * torch.arange(6, device=x.device, dtype=x.dtype)[:, None]).sum()


STEPS = ((11, 5), (13, 6), (12, 5), (12, 6), (12, 7), (14, 5))
"""(a marked count of 11 to 14: the bucket of 16, another of 5 to 7: the bucket of 8) per step."""


def test_scatter_into_a_value_made_at_a_counts_size_then_split(dev, device_values):
    """A count of 11 to 14 beside a scatter of 5 to 7 marked rows into 12
    anchors' zeros split as (2, 6, 4): where the count was 12 the zeros were
    widened as the count, the split refused, and the graph compiled at its
    own sizes, once per number of rows ([1, 0, 1, 1, 1, 0]); then the count
    of 12 padded too: one program at that count (its bounds check read the
    count's 12) for every number of rows ([1, 0, 1, 0, 0, 0]); now the
    bound of the 12 anchors, met as a number at the count of 11, stays one
    (runtime/padding.py's LITERALS): the first program serves every step."""
    g = torch.Generator().manual_seed(0)
    idx = torch.tensor([0, 3, 7, 8, 11, 3, 5])
    rows = torch.randn(7, 4, generator=g)
    compiles = []
    for n, k in STEPS:
        x = torch.randn(n, 4, generator=torch.Generator().manual_seed(n)).mul(3).round()
        want = _anchors_gradient(x, idx[:k], rows[:k])
        before = _compiles()
        got = _anchors_gradient(ltorch.dynamic(x.to(dev), 0), ltorch.dynamic(idx[:k].to(dev), 0),
                                ltorch.dynamic(rows[:k].to(dev), 0))
        ltorch.mark_step()
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
        compiles.append(_compiles() - before)
    assert compiles == [1, 0, 0, 0, 0, 0], compiles


def _level_gradient(x, picked, vals, y):
    """``x``'s rows (a marked count) summed, beside an accumulation at
    (row index, channel) pairs: the row index one per picked row of ``x``
    (a lookup of the padded rows, unpadded), the channel index an ``arange``
    broadcast against it (roi_align backward's batch and channel indices);
    and ``y``'s rows (another marked count)."""
    batch = x[picked, 0].to(torch.int64).remainder(2)[:, None]
    c = torch.arange(3, device=x.device)[None, :]
    out = torch.zeros(2, 3, device=x.device, dtype=x.dtype).index_put((batch, c), vals, accumulate=True)
    return x.sum(0).sum() + (out * out).sum() + y.exp().sum()


def test_index_broadcast_to_a_lookups_count_equal_to_a_counts(dev, device_values):
    """A count of 11 to 14 of marked rows, 12 of them looked up (unpadded),
    and another count of 5 to 7: where the first count was 12 the channel
    index broadcast to the 12 lookups was widened as the count, did not fit
    beside the row index, and the graph compiled at its own sizes, once per
    other count ([1, 0, 1, 1, 1, 0]); now it pads as the others do: one
    program for all."""
    g = torch.Generator().manual_seed(1)
    picked = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 3])
    vals = torch.randn(12, 3, generator=g)
    compiles = []
    for n, m in STEPS:
        x = torch.randn(n, 4, generator=torch.Generator().manual_seed(n)).mul(3).round()
        y = torch.randn(m, generator=torch.Generator().manual_seed(m))
        want = _level_gradient(x, picked, vals, y)
        before = _compiles()
        got = _level_gradient(ltorch.dynamic(x.to(dev), 0), picked.to(dev), vals.to(dev),
                              ltorch.dynamic(y.to(dev), 0))
        ltorch.mark_step()
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
        compiles.append(_compiles() - before)
    assert compiles == [1, 0, 0, 0, 0, 0], compiles


def _box_gradient(x, pos, labels, upd):
    """Boxes' regression (a marked count of boxes, 3 classes' 4 coordinates)
    times an accumulation of ``upd`` at the positives' (box, class) pairs (a
    marked count of positives: fastrcnn_loss's gradient), and the boxes'
    rows accumulated per row parity (an index made at the boxes' count)."""
    z = torch.zeros(x.shape[0], 3, 4, device=x.device, dtype=x.dtype).index_put((pos, labels), upd, accumulate=True)
    pairs = (x[:, 0].round().to(torch.int64).remainder(2)[:, None], torch.arange(3, device=x.device)[None, :])
    out = torch.zeros(2, 3, device=x.device, dtype=x.dtype).index_put(pairs, x[:, 1:4], accumulate=True)
    return (z * x.reshape(-1, 3, 4)).sum() + (out * out).sum()


def test_scatter_at_positives_whose_count_is_a_coordinates_size(dev, device_values):
    """10 to 13 boxes (the bucket of 16) and 3 or 4 positives (the bucket of
    4) scattered into the boxes' zeros of shape (boxes, 3, 4): with 4
    positives the zeros were widened along their 4 coordinates too, the
    scatter took "part of a padded dimension" and was refused, and the
    graph compiled at its own sizes at every count of boxes; the zeros are
    now made again without that widening: one program per count of
    positives' padding."""
    g = torch.Generator().manual_seed(2)
    compiles = []
    for m, k in ((10, 3), (11, 3), (12, 4), (13, 4), (10, 4), (11, 3)):
        x = torch.randn(m, 12, generator=g)
        pos = torch.randperm(m, generator=g)[:k]
        labels = torch.randint(0, 3, (k,), generator=g)
        upd = torch.randn(k, 4, generator=g)
        want = _box_gradient(x, pos, labels, upd)
        before = _compiles()
        got = _box_gradient(ltorch.dynamic(x.to(dev), 0), ltorch.dynamic(pos.to(dev), 0),
                            ltorch.dynamic(labels.to(dev), 0), ltorch.dynamic(upd.to(dev), 0))
        ltorch.mark_step()
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
        compiles.append(_compiles() - before)
    assert compiles == [1, 0, 1, 0, 0, 0], compiles


def _beside_eight(x, idx):
    """A marked count's rows beside 8 rows made without inputs (FLAVA's 8 text
    positions beside its masked patches), each looked up at ``idx`` (a bounds
    check and wrap with an integer constant of their size) and beside ones
    of their size summed, by one instruction each."""
    out = x.sum(0)
    eight = torch.ones(8, 4, device=x.device, dtype=x.dtype).mul(0.5).exp()
    for rows, cols, index in ((x, 3, idx), (eight, 5, idx.int())):  # (values that differ at a count of 8 too)
        out = out + rows[index].sum(0) + torch.ones(rows.shape[0], cols, device=x.device, dtype=x.dtype).sum(0).mean()
    return out


def test_a_count_at_its_buckets_size_equal_to_a_fixed_size(dev, device_values):
    """A count of 7, 6, 8, then 5 (the bucket of 8) beside values made at
    fixed sizes of 8 and 5: at the count of 8 (or 5) that size was the
    symbol's too, so those values were widened and their sums masked, and
    the bound 8 read as the count's: a program of its own for each
    ([1, 0, 1, 1]). Both readings are exact; the walks of 7 and 6 recorded
    which values were the count's, and the walks of 8 and 5 read them so
    (runtime/padding.py ``as_read``): one program."""
    idx = torch.tensor([0, 2, -1, 3])
    compiles = []
    for n in (7, 6, 8, 5):
        x = torch.randn(n, 4, generator=torch.Generator().manual_seed(n))
        want = _beside_eight(x, idx)
        before = _compiles()
        got = _beside_eight(ltorch.dynamic(x.to(dev), 0), idx.to(dev))
        ltorch.mark_step()
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
        compiles.append(_compiles() - before)
    assert compiles == [1, 0, 0, 0], compiles
