"""Reads inside a detection model's step (issues 39/40): each value a library's
Python reads in the middle of a step cuts the step into one more program.

transformers' DETR checks its boxes before every generalized IoU
(``if not (boxes1[:, 2:] >= boxes1[:, :2]).all(): raise ValueError(...)``, twice
per call, in the Hungarian matcher and in the box loss): each check read the
predictions, a program of its own. Such a check is a step check now
(frontends/torch/step_checks.py): the step goes on as if it held and its
barrier raises eager's ValueError, with eager's message, where it did not.
"""

from __future__ import annotations

import pytest
import torch

import lazycore
from lazycore.observe import metrics

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def dev():
    import lazycore.torch as ltorch

    return ltorch.device()


def _programs() -> int:
    return metrics.counters()["executions"]


def _boxes(g, n):  # (center x, center y, width, height), as DETR's targets
    xy = torch.rand(n, 2, generator=g) * 0.5 + 0.25
    wh = torch.rand(n, 2, generator=g) * 0.3 + 0.1
    return torch.cat([xy, wh], 1)


def test_detr_matcher_reads_its_cost_in_one_program(dev):
    """The matcher's two box checks ride along: the cost matrix's ``.cpu()``
    for SciPy is the one program (3 before: a check of the predictions read
    them, then the check of the targets' corners, then the cost)."""
    from transformers.loss.loss_for_object_detection import HungarianMatcher

    g = torch.Generator().manual_seed(0)
    logits, pred = torch.randn(2, 5, 4, generator=g), torch.randn(2, 5, 4, generator=g)
    targets = [{"class_labels": torch.tensor([0, 2]), "boxes": _boxes(g, 2)},
               {"class_labels": torch.tensor([1, 1, 0]), "boxes": _boxes(g, 3)}]
    matcher = HungarianMatcher(class_cost=1, bbox_cost=5, giou_cost=2)
    want = matcher({"logits": logits, "pred_boxes": pred.sigmoid()}, targets)
    lazy_targets = [{k: v.to(dev) for k, v in t.items()} for t in targets]
    x, y = logits.to(dev), pred.to(dev)
    lazycore.mark_step(wait=True)
    before = _programs()
    got = matcher({"logits": x, "pred_boxes": y.sigmoid()}, lazy_targets)  # pending predictions, as a model's
    assert _programs() - before == 1
    for (gi, gj), (wi, wj) in zip(got, want):
        assert torch.equal(gi.cpu(), wi) and torch.equal(gj.cpu(), wj)


def test_a_failed_box_check_raises_eagers_error_at_the_barrier(dev):
    """Boxes whose corners are out of order (a negative width): eager raises
    ValueError at the check; the lazy step raises it, with eager's message and
    the boxes as they were, at its barrier."""
    from transformers.loss.loss_for_object_detection import center_to_corners_format, generalized_box_iou

    g = torch.Generator().manual_seed(1)
    a, b = _boxes(g, 4), _boxes(g, 3)
    a[2, 2] = -0.1  # width
    with pytest.raises(ValueError) as want:
        generalized_box_iou(center_to_corners_format(a), center_to_corners_format(b))
    la = a.to(dev)
    lazycore.mark_step(wait=True)
    before = _programs()
    out = generalized_box_iou(center_to_corners_format(la * 1.0), center_to_corners_format(b.to(dev)))
    assert _programs() == before  # the check did not cut the step
    with pytest.raises(ValueError) as got:
        out.cpu()
    assert str(got.value).replace(", device='lazy:0'", "") == str(want.value)


def test_other_uses_of_all_read_the_value(dev):
    """Only an ``if`` whose whole body is one ``raise`` is speculated: a branch
    with an ``else``, or a reduction kept, reads the value exactly."""
    x = torch.tensor([1.0, -1.0]).to(dev)
    lazycore.mark_step(wait=True)
    y = x * 3.0 + 1.0
    if (y > 0).all():
        branch = "all"
    else:
        branch = "not all"
    assert branch == "not all"
    z = x.exp()
    assert bool((z > 0).all()) is True


# --- torchvision's nms on the device -------------------------------------------------------------

def _random_boxes(g, n, dtype=torch.float32):
    xy = torch.rand(n, 2, generator=g, dtype=torch.float64) * 50
    wh = torch.rand(n, 2, generator=g, dtype=torch.float64) * 20
    return torch.cat([xy, xy + wh], 1).to(dtype)


def test_nms_is_eagers_on_the_device(dev):
    """``torchvision.ops.nms`` and ``batched_nms`` (Faster R-CNN's RPN) give
    eager's kept indices, in eager's order, with no fallback (the kernel ran
    on the host before: a counted fallback per image); tied scores keep
    eager's stable order. A second set of as many boxes reuses the program
    that finds which are kept: their count is read, not compiled in."""
    torchvision = pytest.importorskip("torchvision")
    g = torch.Generator().manual_seed(0)
    lazycore.mark_step(wait=True)
    metrics.reset()
    for n, thr, ties, dtype in ((40, 0.5, False, torch.float32), (40, 0.3, True, torch.float32),
                                (1, 0.5, False, torch.float32), (40, 0.7, False, torch.float64)):
        b, s = _random_boxes(g, n, dtype), torch.rand(n, generator=g, dtype=torch.float64).to(dtype)
        if ties:
            s = (s * 4).round() / 4
        want = torchvision.ops.nms(b, s, thr)
        hits = metrics.counters().get("cache_hits", 0)
        got = torchvision.ops.nms(b.to(dev) * 1.0, s.to(dev), thr)  # pending boxes, as the RPN's
        if (n, dtype) == (40, torch.float32) and ties:
            assert metrics.counters().get("cache_hits", 0) == hits + 1  # the first 40 boxes' program
        assert torch.equal(got.cpu(), want), (n, thr, ties, dtype)
    lvl = torch.randint(0, 3, (30,), generator=g)
    b, s = _random_boxes(g, 30), torch.rand(30, generator=g)
    want = torchvision.ops.batched_nms(b, s, lvl, 0.5)
    assert torch.equal(torchvision.ops.batched_nms(b.to(dev), s.to(dev), lvl.to(dev), 0.5).cpu(), want)
    assert torchvision.ops.nms(b.to(dev)[:0], s.to(dev)[:0], 0.5).shape == (0,)
    assert metrics.counters().get("fallbacks", 0) == 0, metrics.fallbacks()


def test_nms_bad_input_is_eagers_error(dev):
    torchvision = pytest.importorskip("torchvision")
    b, s = torch.rand(4, 4), torch.rand(4, dtype=torch.float64)
    with pytest.raises(RuntimeError) as want:
        torchvision.ops.nms(b, s, 0.5)
    with pytest.raises(RuntimeError) as got:
        torchvision.ops.nms(b.to(dev), s.to(dev), 0.5)
    assert str(got.value) == str(want.value)


def test_nonzero_of_a_uint8_mask_is_lowered(dev):
    """torchvision's samplers call ``torch.where(mask)`` on uint8 masks
    (``torch.where(torch.cat(sampled_pos_inds))``, 4 counted fallbacks a
    Faster R-CNN step): the nonzero positions of ``mask != 0``, eager's, no
    fallback; floats too (NaN is nonzero, -0.0 is not)."""
    m = torch.tensor([0, 3, 0, 1, 255], dtype=torch.uint8)
    f = torch.tensor([[0.0, float("nan")], [-0.0, 2.0]])
    lazycore.mark_step(wait=True)
    metrics.reset()
    for x in (m, f):
        lazy = x.to(dev) + torch.zeros((), dtype=x.dtype).to(dev)  # pending, as the samplers' masks
        assert torch.equal(torch.where(lazy)[0].cpu(), torch.where(x)[0])
        assert torch.equal(lazy.nonzero().cpu(), x.nonzero())
    assert metrics.counters().get("fallbacks", 0) == 0, metrics.fallbacks()
