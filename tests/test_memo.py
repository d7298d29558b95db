"""Bounded tracing memos (lazycore.ir.memo): one kind, named, bounded, cleared by lazycore.cache.clear()."""

import numpy as np
import pytest

import lazycore as lc
from lazycore.ir import memo
from lazycore.ir.memo import MEMOS, Memo


def test_a_memo_is_emptied_when_full_and_names_are_unique():
    m = Memo("test.small", 3)
    try:
        for i in range(3):
            m.put(i, i * 10)
        assert dict(m) == {0: 0, 1: 10, 2: 20}
        assert m.put(3, 30) == 30
        assert dict(m) == {3: 30}  # emptied whole, then the new entry
        with pytest.raises(ValueError, match="test.small"):
            Memo("test.small", 3)
    finally:
        del MEMOS["test.small"]


def test_tracing_fills_memos_cache_clear_empties_them_and_the_report_lists_them():
    import lazycore.torch as ltorch
    import torch

    x = torch.ones(4, 4, device=ltorch.device())
    (x.t() * 2 + 1).cpu()
    sizes = memo.sizes()
    assert sizes["torch.meta"][0] > 0 and sizes["ir.source_lines"][0] > 0
    assert all(n <= bound for n, bound in sizes.values())
    assert "torch.meta" in lc.metrics.report()
    lc.cache.clear()
    assert all(n == 0 for n, _ in memo.sizes().values())
    np.testing.assert_array_equal((x.t() * 2 + 1).cpu().numpy(), np.full((4, 4), 3, np.float32))
