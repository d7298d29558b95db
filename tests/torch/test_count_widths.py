"""Data-dependent counts padded to a width that only grows (issue 39).

Faster R-CNN's counts (positives sampled per image, boxes kept by nms,
proposals per pooler level) wander across buckets' edges from step to step
(3 to 11 positives: buckets 4, 8 and 16); each count padded to its own
bucket made a program for every combination of a step's buckets, 5-8
compiles every warm step. A varying count is now padded to the widest
bucket a count on its device has needed (frontends/torch/counts.py
``width``), so programs change only while the largest count grows.
"""

from __future__ import annotations

import pytest
import torch

import lazycore.torch as ltorch
from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime")


@pytest.fixture
def device_values(monkeypatch):
    """No upload keeps a host copy: values are the device's, as a model's are."""
    from lazycore.runtime import hostreads

    monkeypatch.setattr(hostreads, "KEPT_BYTES", 0)


def _compiles() -> int:
    return metrics.counters().get("compiles", 0)


def _mask(n: int, size: int, seed: int) -> torch.Tensor:
    m = torch.zeros(size, dtype=torch.bool)
    m[torch.randperm(size, generator=torch.Generator().manual_seed(seed))[:n]] = True
    return m


def _two_counts(a, b, x):
    """Two masks' indices (two lines, two counts), each gathering rows of
    ``x``, the rows' sums joined: one graph over both counts."""
    ia = torch.where(a)[0]
    ib = torch.where(b)[0]
    return x[ia].sum(0) * 2 + x[ib].sum(0), ia.float().mean()


@pytest.mark.parametrize("rounds", [((5, 7), (3, 12), (12, 3), (6, 13), (3, 6), (6, 12), (11, 4), (4, 9))])
def test_two_counts_across_buckets_compile_while_the_widest_grows(dev, device_values, rounds):
    """Two counts at two lines in one graph, crossing the buckets 4, 8 and
    16 in every combination: eager's values; compiles stop once both are
    padded to 16 (round 2), where each new pair of buckets compiled before
    (7 compiles in rounds 1-7)."""
    compiles = []
    x = torch.randn(16, 3, generator=torch.Generator().manual_seed(0))
    for k, (na, nb) in enumerate(rounds):
        a, b = _mask(na, 16, k), _mask(nb, 16, 100 + k)
        want = _two_counts(a, b, x)
        before = _compiles()
        got = _two_counts(a.to(dev), b.to(dev), x.to(dev))
        ltorch.mark_step()
        for g, w in zip(got, want):
            torch.testing.assert_close(g.cpu(), w, rtol=1e-6, atol=1e-6)
        compiles.append(_compiles() - before)
    assert compiles[3:] == [0] * (len(rounds) - 3), compiles


def test_a_count_padded_once_stays_in_the_widest_bucket(dev, device_values):
    """One line's count 5, 9, 3, 6 (buckets 8, 16, 4, 8): from its second
    count on it is padded to 16, the widest it needed, so the smaller
    counts after compile nothing (each bucket compiled once before)."""
    compiles = []
    x = torch.randn(16, 3, generator=torch.Generator().manual_seed(1))
    for k, n in enumerate((5, 9, 3, 6)):
        m = _mask(n, 16, k)
        before = _compiles()
        idx = torch.where(m.to(dev))[0]
        got = (x.to(dev)[idx] * 3).sum(0)
        torch.testing.assert_close(got.cpu(), (x[torch.where(m)[0]] * 3).sum(0), rtol=1e-6, atol=1e-6)
        compiles.append(_compiles() - before)
    assert compiles[2:] == [0, 0], compiles


def test_rows_appended_to_a_count_padded_wider_than_its_bucket(dev, device_values):
    """Faster R-CNN's ``torch.cat((proposals, gt_boxes))``: a count padded to
    16 (the widest its device needed: 12 first) with 2 rows appended, 3, 5
    and 6 + 2 rows fitting smaller buckets: the result stays in the first
    operand's 16 rows, one program (the padding refused it before, "joins
    into a smaller bucket": each count compiled at its own sizes)."""
    compiles = []
    x = torch.randn(16, 4, generator=torch.Generator().manual_seed(2))
    gt = torch.randn(2, 4, generator=torch.Generator().manual_seed(3))
    for k, n in enumerate((7, 12, 3, 5, 6)):
        m = _mask(n, 16, 10 + k)
        before = _compiles()
        rows = torch.cat((x.to(dev)[torch.where(m.to(dev))[0]], gt.to(dev)))
        got = (rows * 2).sum(0)
        torch.testing.assert_close(got.cpu(), (torch.cat((x[torch.where(m)[0]], gt)) * 2).sum(0),
                                   rtol=1e-6, atol=1e-6)
        compiles.append(_compiles() - before)
    assert compiles[2:] == [0, 0, 0], compiles


def _pooled(feat, boxes, masks):
    """MultiScaleRoIAlign's rois from two images' selected boxes (two
    counts), roi_align over them, a loss."""
    import torchvision

    rois = []
    for i, m in enumerate(masks):
        b = boxes[i][torch.where(m)[0]]
        rois.append(torch.cat([torch.full_like(b[:, :1], i), b], 1))
    return torchvision.ops.roi_align(feat, torch.cat(rois), (3, 3), 1.0, 2, False).pow(2).sum()


def test_roi_align_backward_over_padded_counts_of_boxes(dev, device_values):
    """roi_align's gradient over a padded count of boxes: eager's values, and
    one program for the pairs of counts after the first padded one (the
    backward's expanded indices were checked by a slice of their first row
    along the boxes' dimension, which the padding refused: a program per
    pair of counts)."""
    pytest.importorskip("torchvision")
    g = torch.Generator().manual_seed(0)
    feat = torch.randn(2, 4, 8, 8, generator=g)
    boxes = torch.rand(2, 16, 4, generator=g) * 6
    boxes[..., 2:] += boxes[..., :2] + 1
    compiles = []
    for k, (na, nb) in enumerate(((7, 9), (9, 10), (10, 11), (11, 9), (12, 13))):
        masks = [_mask(na, 16, 20 + k), _mask(nb, 16, 40 + k)]
        f = feat.clone().requires_grad_()
        _pooled(f, boxes, masks).backward()
        lf = feat.to(dev).requires_grad_()
        before = _compiles()
        _pooled(lf, boxes.to(dev), [m.to(dev) for m in masks]).backward()
        ltorch.mark_step()
        torch.testing.assert_close(lf.grad.cpu(), f.grad, rtol=1e-5, atol=1e-5)
        compiles.append(_compiles() - before)
    assert compiles[2:] == [0, 0, 0], compiles
