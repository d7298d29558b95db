"""A count is never padded wider than its mask's bucket (issue 40, Faster R-CNN).

A varying count pads to the widest bucket any line whose counts took its
bucket has needed (frontends/torch/counts.py ``width``). Faster R-CNN's RPN
loss counts the sampled negatives of 270 anchors (``rpn.py:316``): 200-odd,
bucket 256, and once 265, bucket 512; from then on the sampler's negatives of
each image's 135 anchors (``_utils.py:45``, 129 of them, bucket 256) padded
to 512 too, and the two programs over them compiled again at step 4 of 8
(barriers 45 and 46). A count of a mask of ``size`` elements is at most
``size``: its width is now capped at ``size``'s bucket, and the ``randperm``
of that count (the sampler's draws) takes its count's width.
"""

from __future__ import annotations

import pytest
import torch

import lazycore.torch as ltorch
from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime")


def _compiles() -> int:
    return metrics.counters().get("compiles", 0)


def _mask(size, n, seed):
    m = torch.zeros(size, dtype=torch.int64)
    m[torch.randperm(size, generator=torch.Generator().manual_seed(seed))[:n]] = 1
    return m


def _sampled(labels, x):
    """A sampler's draw over a 24-element mask (one image's anchors): its
    count, a ``randperm`` of it (eager's generator), the drawn rows' loss."""
    negative = torch.where(labels == 1)[0]
    perm = torch.randperm(negative.numel(), device=negative.device)
    return x[negative[perm]].pow(2).sum(0)


def _joined(labels, y):
    """Another line's count over a 40-element mask (both images' anchors)."""
    idx = torch.where(labels == 1)[0]
    return (y[idx] * 3).sum(0)


def test_a_count_stays_in_its_masks_bucket_when_another_line_widens_past_it(dev, device_values):
    """The 24-element mask's counts 17, 20, 18, 19 (bucket 32, 24's bucket)
    take one program from the first padded one on; between its steps, the
    40-element mask's line takes 30, 40 and 20 (as it is, then buckets 64
    and 32) and widens 32 to 64. Before, the count of 19 then padded to 64 and compiled its step
    again ([2, 1, 0, 1]); now it stays at 32, with its draws, and compiles
    nothing."""
    x = torch.randn(24, 3, generator=torch.Generator().manual_seed(0))
    y = torch.randn(40, 3, generator=torch.Generator().manual_seed(1))
    compiles = []
    for k, n in enumerate((17, 20, 18, 19)):
        if k == 3:  # the other line crosses 32 and widens the bucket
            for j, m in enumerate((30, 40, 20)):
                labels = _mask(40, m, 100 + j)
                got = _joined(labels.to(dev), y.to(dev))
                ltorch.mark_step()
                torch.testing.assert_close(got.cpu(), _joined(labels, y), rtol=1e-5, atol=1e-5)
        labels = _mask(24, n, k)
        torch.manual_seed(k)
        want = _sampled(labels, x)
        torch.manual_seed(k)
        before = _compiles()
        got = _sampled(labels.to(dev), x.to(dev))
        ltorch.mark_step()
        compiles.append(_compiles() - before)
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    assert compiles[2:] == [0, 0], compiles
