"""``unsafe_split`` and ``unsafe_chunk`` parts share their input's memory on
the lazy device, as eager's do (their schema says nothing of it; they were
copies, and writes through them were lost), and a view that indexes its
storage directly (``as_strided``) past that memory raises eager's error
(it read garbage: zeros, and dropped writes)."""

from __future__ import annotations

import pytest
import torch


def _written(device):
    a = torch.arange(24.0).reshape(4, 6).to(device)
    a.unsafe_chunk(3, 1)[0].zero_()
    a.unsafe_split(3, 0)[1].fill_(-1.0)
    a.unsafe_split_with_sizes([1, 5], 1)[1][0].mul_(10)
    parts = a.unsafe_chunk(2, 0)
    parts[0].add_(parts[1])
    return a.cpu(), [p.cpu() for p in parts]


def test_writes_through_unsafe_parts_reach_their_input(dev):
    got, want = _written(dev), _written("cpu")
    assert torch.equal(got[0], want[0])
    for g, w in zip(got[1], want[1]):
        assert torch.equal(g, w) and g.stride() == w.stride()


def test_unsafe_parts_have_eagers_layout(dev):
    a = torch.randn(3, 12)
    for g, w in zip(a.to(dev).unsafe_chunk(3, 1), a.unsafe_chunk(3, 1)):
        assert (g.shape, g.stride(), g.storage_offset()) == (w.shape, w.stride(), w.storage_offset())
        assert torch.equal(g.cpu(), w)


def test_as_strided_past_the_storage_raises_eagers_error(dev):
    with pytest.raises(RuntimeError) as cpu:
        torch.zeros(12).as_strided((3, 4), (12, 1), 0)
    with pytest.raises(RuntimeError) as lazy:
        torch.zeros(12, device=dev).as_strided((3, 4), (12, 1), 0)
    assert str(lazy.value) == str(cpu.value)
    # (within it: the base's memory, read through a view of its first row)
    base = torch.arange(12.0).reshape(3, 4)
    want = base[0].as_strided((2, 2), (4, 1), 1)
    assert torch.equal(base.to(dev)[0].as_strided((2, 2), (4, 1), 1).cpu(), want)


def test_a_zero_tangent_laid_out_as_an_unsafe_part(dev):
    # forward-mode AD's tangent for a part of a split, made the part's layout
    # over a storage as large as its input's
    a = torch.zeros(3, 12, device=dev)
    part = a.unsafe_chunk(3, 1)[2]
    zero = torch.ops.aten._new_zeros_with_same_feature_meta(part, part)
    assert (zero.stride(), zero.storage_offset()) == (part.stride(), part.storage_offset())
    rows = torch.arange(12.0).reshape(3, 4)
    assert torch.equal(zero.add_(rows.to(dev)).cpu(), rows)
