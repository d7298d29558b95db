"""A number equal to a padded count by chance stays a number (issue 40, Faster R-CNN).

Padding reads an integer constant equal to a symbol's size as that size (its
valid-size parameter, :meth:`lazycore.runtime.padding.Padded.size_constant`):
an index's bound check and wrap into a padded count. A symbol is a number, so
a bound of a tensor whose size is fixed (Faster R-CNN's 270 anchors, its 2
ground-truth boxes) was read as the count's parameter in the steps where a
count happened to equal it (270 anchors sampled, 2 positives), and as a
number in the others: two programs of one graph, compiled once each for every
such coincidence (3 of the 8.4k-node and small RPN/ROI programs of its 8 steps).
A padded walk that meets the number at that instruction while it is no
symbol's size learns that it is a number there, and later walks keep it one.
"""

from __future__ import annotations

import pytest
import torch

from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime")


def _compiles() -> int:
    return metrics.counters().get("compiles", 0)


def _step(mask, x, table, j):
    """A count's rows (padded once it varies) beside a lookup into a table
    of 5 rows (its bound check holds the number 5)."""
    idx = torch.where(mask)[0]
    return (x[idx] * 2).sum(0) + table[j].sum(0)


def _mask(n, seed):
    m = torch.zeros(24, dtype=torch.bool)
    m[torch.randperm(24, generator=torch.Generator().manual_seed(seed))[:n]] = True
    return m


def test_a_count_equal_to_a_fixed_size_by_chance_compiles_nothing(dev, device_values):
    """Counts 6, 7, 6, 5, 7, 5 (bucket 8 from the second on) beside a table
    of 5 rows: the count 5 made the table's bound the count's parameter, a
    program of its own ([1, 1, 0, 1, 0, 0] before); 7's walk met the 5 as a
    number, so 5's keeps it one: the same program ([1, 1, 0, 0, 0, 0])."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(24, 3, generator=g)
    table = torch.randn(5, 3, generator=g)
    j = torch.tensor([4, 0, 2])
    compiles = []
    for k, n in enumerate((6, 7, 6, 5, 7, 5)):
        m = _mask(n, 10 + k)
        want = _step(m, x, table, j)
        before = _compiles()
        got = _step(m.to(dev), x.to(dev), table.to(dev), j.to(dev)).cpu()
        compiles.append(_compiles() - before)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert compiles == [1, 1, 0, 0, 0, 0], compiles


def test_an_out_of_bounds_index_still_raises_eagers_error(dev, device_values):
    """The number kept as a number still bounds the lookup: an index past
    the table at a step where the count equals its size raises as eager."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(24, 3, generator=g)
    table = torch.randn(5, 3, generator=g)
    for k, n in enumerate((6, 7)):
        _step(_mask(n, 20 + k).to(dev), x.to(dev), table.to(dev), torch.tensor([1]).to(dev)).cpu()
    with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 5"):
        _step(_mask(5, 30).to(dev), x.to(dev), table.to(dev), torch.tensor([5]).to(dev)).cpu()
