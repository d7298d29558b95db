"""roi_align's gradient over a padded count of boxes (issue 39).

Faster R-CNN's pooler runs roi_align over boxes whose count is data-dependent
(frontends/torch/counts.py pads it to its bucket once it varies). The
backward's ``index_put`` took its four indices expanded to the full
``[K, C, PH, PW, IY, IX]`` shape; each expanded index's bounds check slices
its first row out (frontends/torch/ops/indexing.py), and a slice of one row
of the padded box dimension is refused by the padding: the step compiled at
its own sizes for every count. The indices now broadcast together
(frontends/torch/vision_ops.py ``roi_align_backward``).
"""

from __future__ import annotations

import pytest
import torch

import lazycore.torch as ltorch
from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime")


def _compiles() -> int:
    return metrics.counters().get("compiles", 0)


def _mask(n: int, size: int, seed: int) -> torch.Tensor:
    m = torch.zeros(size, dtype=torch.bool)
    m[torch.randperm(size, generator=torch.Generator().manual_seed(seed))[:n]] = True
    return m


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
