"""A count of none at a line whose counts are padded runs their program (issue 40, Faster R-CNN).

torchvision's ``MultiScaleRoIAlign`` (``poolers.py:201``) takes each level's
boxes with ``torch.where(levels == level)[0]``, pools them and scatters them
back (``result[idx_in_level] = ...``). Once a level's count varies it is
uploaded padded to its bucket (frontends/torch/counts.py). A step where no box
falls in a level had a program of its own: the count of 0 was uploaded as it
is, and the level's gather and scatter of no rows were left out of the graph
(a gather of nothing is zeros, a scatter of nothing the operand). Now the 0 is
padded to the line's width, those ops are recorded on the padded index, and
the padding reads a dimension of 0 as the count's (its reshapes): the step
runs the program of the other counts, with a valid size of 0.
"""

from __future__ import annotations

import pytest
import torch

import lazycore.torch as ltorch
from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime")


def _pool(levels, feats, w):
    """The pooler's loop: each level's rows, scaled, scattered back."""
    result = torch.zeros(levels.shape[0], feats.shape[1], device=feats.device)
    for level in range(3):
        idx = torch.where(levels == level)[0]
        result[idx] = feats[idx] * w[level]
    return result


def _levels(n, m, seed):
    """24 boxes: ``n`` at level 0, ``m`` at level 1, the rest at level 2."""
    levels = torch.full((24,), 2, dtype=torch.int64)
    p = torch.randperm(24, generator=torch.Generator().manual_seed(seed))
    levels[p[:n]] = 0
    levels[p[n:n + m]] = 1
    return levels


def test_a_level_with_no_boxes_runs_the_levels_program(dev, device_values):
    """Counts (level 0, 1, 2): (9, 5, 10), (10, 6, 8), (11, 4, 9), then
    (13, 11, 0) and (8, 7, 9), no two equal in a step. From the second step
    on every count is padded to 16; the step with no box at level 2 compiled
    a program of its own before ([1, 1, 0, 1, 0]); now it compiles nothing,
    and every step's values are eager's."""
    feats = torch.randn(24, 3, generator=torch.Generator().manual_seed(0))
    w = torch.tensor([2.0, 3.0, 5.0])
    compiles = []
    for k, (n, m) in enumerate(((9, 5), (10, 6), (11, 4), (13, 11), (8, 7))):
        levels = _levels(n, m, k)
        before = metrics.counters().get("compiles", 0)
        got = _pool(levels.to(dev), feats.to(dev), w.to(dev))
        ltorch.mark_step()
        compiles.append(metrics.counters().get("compiles", 0) - before)
        assert torch.equal(got.cpu(), _pool(levels, feats, w))
    assert compiles[2:] == [0, 0, 0], compiles


def test_a_count_of_none_before_any_padding_stays_as_it_is(dev, device_values):
    """A line whose counts have not varied yet pads nothing, 0 included:
    the empty index gives eager's empty rows."""
    x = torch.randn(6, 2, generator=torch.Generator().manual_seed(1))
    mask = torch.zeros(6, dtype=torch.bool)
    got = x.to(dev)[torch.where(mask.to(dev))[0]]
    assert tuple(got.shape) == (0, 2)
    assert torch.equal(got.cpu(), x[torch.where(mask)[0]])
