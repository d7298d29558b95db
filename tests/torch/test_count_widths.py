"""A varying count's width only grows at its line (issue 40, Faster R-CNN).

A data-dependent count (``torch.where(mask)[0]``) is uploaded padded once it
varies at its line (frontends/torch/counts.py). Padded to its own bucket, a
count wandering across a bucket's edge (Faster R-CNN's sampler: 2 to 11
positives, buckets 2 to 16; 124 to 131 negatives, 128 and 256) made a
program for every bucket it visited, and a step of several such counts one
for every combination: its ~8.4k-node training step compiled 3-5 times a
step after the warm-up. A program at the wider bucket serves the narrower
counts, so every bucket a line's counts have taken now pads to the widest
of them (:func:`counts.width`); the width is one per bucket, so two counts
that happen to be equal meet in one program at one width.
"""

from __future__ import annotations

import pytest
import torch

from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime")


def _compiles() -> int:
    return metrics.counters().get("compiles", 0)


def _picked(mask, x):
    """The rows of ``x`` where ``mask`` holds (a sampler's positives), summed."""
    idx = torch.where(mask)[0]  # (one line: the count's place)
    return (x[idx] * 2).sum(0)


def _masks(counts, seed):
    out = []
    for k, n in enumerate(counts):
        m = torch.zeros(24, dtype=torch.bool)
        m[torch.randperm(24, generator=torch.Generator().manual_seed(seed + k))[:n]] = True
        out.append(m)
    return out


def test_a_count_crossing_bucket_edges_compiles_only_while_it_widens(dev, device_values):
    """Counts 5, 9, 6, 12, 7, 3 at one line: the first compiles as it is,
    9 in the bucket of 16; 6, 7 and 3 (buckets 8 and 4) were a program each
    before ([1, 1, 1, 0, 0, 1]); now they pad to 16, the widest the line
    has needed: no compile."""
    x = torch.randn(24, 3, generator=torch.Generator().manual_seed(0))
    compiles = []
    for m in _masks((5, 9, 6, 12, 7, 3), 10):
        want = _picked(m, x)
        before = _compiles()
        got = _picked(m.to(dev), x.to(dev)).cpu()
        compiles.append(_compiles() - before)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert compiles == [1, 1, 0, 0, 0, 0], compiles


def _two(ma, mb, x):
    """Two counts at two lines in one program."""
    a = torch.where(ma)[0]
    b = torch.where(mb)[0]
    return x[a].sum(0) * 3 + x[b].pow(2).sum(0)


def test_equal_counts_at_two_lines_share_their_width(dev, device_values):
    """Line A's counts 9, 12, 5, 6, 7, 6 (it has needed 16), line B's 6, 5,
    6, 6, 7, 5 (bucket 8 alone): where they are equal (6 and 6, 7 and 7)
    they are one symbol of the padding, which a bucket of 16 for one and 8
    for the other would split; B's counts take the width of their bucket,
    16. Equal counts are one symbol, so a program of their own (step 4),
    once: steps 5 and 6 (equal, then not) compile nothing."""
    x = torch.randn(24, 3, generator=torch.Generator().manual_seed(1))
    compiles = []
    for ma, mb in zip(_masks((9, 12, 5, 6, 7, 6), 20), _masks((6, 5, 6, 6, 7, 5), 30)):
        want = _two(ma, mb, x)
        before = _compiles()
        got = _two(ma.to(dev), mb.to(dev), x.to(dev)).cpu()
        compiles.append(_compiles() - before)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert compiles[4:] == [0, 0], compiles


def _appended(mask, x, extra):
    """A count's rows with fixed rows appended (Faster R-CNN's proposals and
    then its ground-truth boxes, ``roi_heads.py:626``), scaled, summed."""
    idx = torch.where(mask)[0]
    return (torch.cat([x[idx], extra]) * torch.arange(1, 4, device=x.device)).sum(0)


def test_rows_appended_to_a_count_padded_wider_than_its_bucket(dev, device_values):
    """Counts 9, 12, 5, 6 with 2 rows appended: 5 and 6 pad to 16 (the
    line's widest), wider than the joined 7 and 8 rows' own bucket of 8;
    the join was refused ('joins into a smaller bucket') and compiled at its
    own sizes per count ([1, 1, 1, 1]); it now keeps the operand's width: one
    program from the second count on."""
    x = torch.randn(24, 3, generator=torch.Generator().manual_seed(2))
    extra = torch.randn(2, 3, generator=torch.Generator().manual_seed(3))
    compiles = []
    for m in _masks((9, 12, 5, 6), 40):
        want = _appended(m, x, extra)
        before = _compiles()
        got = _appended(m.to(dev), x.to(dev), extra.to(dev)).cpu()
        compiles.append(_compiles() - before)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert compiles == [1, 1, 0, 0], compiles
