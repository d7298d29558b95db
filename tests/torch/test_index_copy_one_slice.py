"""``index_copy_`` of one slice (a static key-value cache's token: transformers'
``StaticCache.update``) is a ``dynamic_update_slice``, which XLA writes into a
donated buffer in place, where a scatter became a copy of the whole cache
every token; eager's values, and eager's IndexError for an index out of range."""

import pytest
import torch

import lazycore.torch as ltorch
from lazycore.observe.testing import capture


def test_one_slice_index_copy_is_a_dynamic_update_slice_with_eagers_values():
    dev = ltorch.device()
    gen = torch.Generator().manual_seed(0)
    cache, new = torch.randn(2, 3, 8, 4, generator=gen), torch.randn(2, 3, 1, 4, generator=gen)
    for pos in (0, 5, 7):
        with capture() as cap:
            got = cache.to(dev).index_copy_(2, torch.tensor([pos]).to(dev), new.to(dev)).cpu()
        assert torch.equal(got, cache.clone().index_copy_(2, torch.tensor([pos]), new))
        text = cap.text("stablehlo")
        assert "stablehlo.dynamic_update_slice" in text and "stablehlo.scatter" not in text
    # two slices stay a scatter
    two = torch.randn(2, 3, 2, 4, generator=gen)
    got = cache.to(dev).index_copy_(2, torch.tensor([6, 1]).to(dev), two.to(dev)).cpu()
    assert torch.equal(got, cache.clone().index_copy_(2, torch.tensor([6, 1]), two))


@pytest.mark.parametrize("pos", [8, -1])
def test_one_slice_index_copy_out_of_range_raises_eagers_error(pos):
    dev = ltorch.device()
    cache, new = torch.zeros(2, 8, 4), torch.ones(2, 1, 4)
    with pytest.raises(IndexError):
        cache.clone().index_copy_(1, torch.tensor([pos]), new)
    with pytest.raises(IndexError, match="index_copy_"):
        cache.to(dev).index_copy_(1, torch.tensor([pos]).to(dev), new.to(dev)).cpu()
