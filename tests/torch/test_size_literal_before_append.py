"""A number met before an append makes it a symbol stays a number (issue 40).

A padded walk reads an integer equal to a symbol's size as that size, unless
an earlier walk met it at that instruction while it was no symbol's
(:data:`lazycore.runtime.padding.LITERALS`). The walk learned those numbers
by the symbols at its end, so a number that an append later in the walk made
a symbol's (Mistral's sliding window of 8 at transformers' cache_utils.py:607,
the cache's ``index_copy_`` bound, met while the ids were 7 long, before the
token's ``cat`` made them 8) was never learned: the next step, 8 long from
the start, read the bound as the ids' size parameter and compiled a program
of its own (4 programs per ``generate()`` call where 3 do). The number is
learned where the walk meets it, as the walk took it.
"""

from __future__ import annotations

import pytest
import torch

from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime")


def _compiles() -> int:
    return metrics.counters().get("compiles", 0)


def _step(mask, x, table, j, tail):
    """A lookup into a table of 7 rows (its bound check holds the number 7),
    then a count's rows with one row appended (count + 1 rows: 7 at count 6)."""
    looked = table[j].sum(0)
    rows = torch.cat([x[torch.where(mask)[0]], tail])
    return looked + rows.sum(0) * 2  # (the walk meets the lookup first)


def _mask(n, seed):
    m = torch.zeros(24, dtype=torch.bool)
    m[torch.randperm(24, generator=torch.Generator().manual_seed(seed))[:n]] = True
    return m


def test_a_number_an_append_later_makes_a_size_stays_a_number(dev, device_values):
    """Counts 5, 6, 7, 6, 7 (bucket 8 from the second on; with the appended
    row 6, 7, 8 in bucket 8) beside a table of 7 rows: count 6's walk met the
    table's 7 before its append made 7 a symbol, so count 7's walk (7 a
    symbol from the start) read it as the count's size, a program of its own
    ([1, 1, 1, 0, 0] before); kept a number, it is 6's program ([1, 1, 0, 0, 0])."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(24, 3, generator=g)
    table = torch.randn(7, 3, generator=g)
    tail = torch.randn(1, 3, generator=g)
    j = torch.tensor([6, 0, 2])
    compiles = []
    for k, n in enumerate((5, 6, 7, 6, 7)):
        m = _mask(n, 40 + k)
        want = _step(m, x, table, j, tail)
        before = _compiles()
        got = _step(m.to(dev), x.to(dev), table.to(dev), j.to(dev), tail.to(dev)).cpu()
        compiles.append(_compiles() - before)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert compiles == [1, 1, 0, 0, 0], compiles


def test_the_kept_number_still_bounds_the_lookup(dev, device_values):
    """An index past the table at count 7 (the number kept a number) raises eager's error."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(24, 3, generator=g)
    table = torch.randn(7, 3, generator=g)
    tail = torch.randn(1, 3, generator=g)
    for k, n in enumerate((5, 6)):
        _step(_mask(n, 50 + k).to(dev), x.to(dev), table.to(dev), torch.tensor([1]).to(dev), tail.to(dev)).cpu()
    with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 7"):
        _step(_mask(7, 60).to(dev), x.to(dev), table.to(dev), torch.tensor([7]).to(dev), tail.to(dev)).cpu()
