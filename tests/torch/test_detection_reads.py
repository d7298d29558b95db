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
