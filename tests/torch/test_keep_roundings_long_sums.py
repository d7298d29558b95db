"""lazy-keep-roundings leaves a product that a reduce sums over long
dimensions unfenced (benchmark 7's GPT step: 54 of its 131 fences, 9% of
its program's CPU time). The guard below holds the reason: XLA's CPU
backend contracts a product into a sum only where it unrolls a dimension
of 2 (or of 3 inside another summed dimension); over dimensions of 4 or more
each, fenced and unfenced products sum to the same bits. Should a jaxlib
contract those too, this fails, and ``keep_roundings._SHORT`` must grow.
(The sums are lazycore.numpy's, one ``stablehlo.reduce`` each: torch's float
sums are eager's kernel's slices and adds, ``lazy.vector_sum``.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import lazycore
import lazycore.numpy as lnp
from lazycore.ir import config
from lazycore.passes import keep_roundings
from lazycore.passes.pipeline import CHANNELS_LAST_PIPELINE

UNFENCED = CHANNELS_LAST_PIPELINE.replace(",lazy-keep-roundings", "")


def _sum(shape, dim, pipeline, short=None, dtype=torch.float32):
    g = torch.Generator().manual_seed(sum(shape))
    x, y = torch.randn(*shape, generator=g, dtype=dtype), torch.randn(*shape, generator=g, dtype=dtype)
    saved = keep_roundings._SHORT
    if short is not None:
        keep_roundings._SHORT = short
    lazycore.cache.clear()  # (the compile cache's key is the pipeline's name, not _SHORT)
    try:
        with config.override(pipeline=pipeline):
            a, b = lnp.asarray(x.numpy()), lnp.asarray(y.numpy())
            return torch.from_numpy(np.asarray((a * b).sum(axis=dim)).copy())
    finally:
        keep_roundings._SHORT = saved


@pytest.mark.parametrize("n", [4, 9, 64])
@pytest.mark.parametrize("layout", ["last", "first", "middle_and_first"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_long_sum_rounds_alike_fenced_or_not(n, layout, dtype):
    shape, dim = {"last": ((2000, n), -1), "first": ((n, 2000), 0),
                  "middle_and_first": ((16, n, 64), (0, 1))}[layout]
    fenced = _sum(shape, dim, CHANNELS_LAST_PIPELINE, short=n + 1, dtype=dtype)  # fenced, as before
    unfenced = _sum(shape, dim, UNFENCED, dtype=dtype)
    assert torch.equal(fenced, unfenced), int((fenced != unfenced).sum())
    assert torch.equal(_sum(shape, dim, CHANNELS_LAST_PIPELINE, dtype=dtype), unfenced)


def test_a_short_sum_still_differs_unfenced():
    """The other side of the rule (so the test above shows XLA, not a pass
    that does nothing): rows of 2, and 3 inside another summed dimension,
    still contract without the fence."""
    for shape, dim in (((2000, 2), -1), ((16, 3, 64), (0, 1))):
        kept = _sum(shape, dim, CHANNELS_LAST_PIPELINE)
        assert torch.equal(kept, _sum(shape, dim, CHANNELS_LAST_PIPELINE, short=1 << 30))  # fenced
        assert not torch.equal(kept, _sum(shape, dim, UNFENCED))
