"""``torch.cummax`` / ``torch.cummin`` in the program (frontends/torch/ops/indexing.py):
eager CPU's loop answers (a later equal element's index and value, NaN kept until the next
NaN), every real dtype, with their gradients; Grounding DINO's text masks fell back to eager
for them (8 fallbacks a training step, hunt 40)."""

import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from lazycore.observe import metrics
from _bits import BY_HAND  # (tests/ is on the path)

DEV = "lazy"
_BITS = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def _values(dtype, shape, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype is torch.bool:
        return torch.rand(shape, generator=g) > 0.6
    if not dtype.is_floating_point:
        return torch.randint(-4 if dtype is not torch.uint8 else 0, 5, shape, generator=g).to(dtype)
    x = torch.randint(-3, 4, shape, generator=g).to(dtype)  # many ties
    flat = x.view(-1)
    flat[::7] = -0.0
    flat[3::11] = float("nan")
    flat[5::13] = float("-inf")
    flat[6::17] = float("inf")
    return x


@pytest.mark.parametrize("op", [torch.cummax, torch.cummin])
# CI: float16 keeps bfloat16's path (the float branch: NaN kept, an infinite fill), int64 int32's, int16's and
# int8's (the integers' branch, the type's own extreme as the fill; uint8's, 0 for cummax, runs too); bool has its own
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16,
                                   pytest.param(torch.bfloat16, marks=BY_HAND), torch.int64,
                                   pytest.param(torch.int32, marks=BY_HAND), pytest.param(torch.int16, marks=BY_HAND),
                                   pytest.param(torch.int8, marks=BY_HAND), torch.uint8, torch.bool])
def test_values_and_indices_are_eagers(op, dtype):
    metrics.reset()
    pending = []
    for i, (shape, dim) in enumerate([((37,), 0), ((3, 20), 1), ((9, 4, 5), 0), ((2, 3, 6), -1), ((), 0),
                                      ((0, 4), 1), ((1,), 0)]):
        x = _values(dtype, shape, i)
        pending.append((op(x.to(DEV), dim), op(x, dim)))
    lazycore.mark_step()
    for (got_v, got_i), (want_v, want_i) in pending:
        assert got_v.dtype == want_v.dtype and got_i.dtype == want_i.dtype
        assert torch.equal(got_i.cpu(), want_i)
        got_v = got_v.cpu()
        if dtype.is_floating_point:  # bitwise: NaN where eager's, a signed zero's sign
            bits = _BITS[dtype.itemsize]
            assert torch.equal(got_v.view(bits), want_v.view(bits))
        else:
            assert torch.equal(got_v, want_v)
    assert metrics.fallbacks() == {}


@pytest.mark.parametrize("op", [torch.cummax, torch.cummin])
def test_gradient_is_eagers(op):
    g = torch.Generator().manual_seed(3)
    x = torch.randint(-3, 4, (4, 9), generator=g).float()
    w = torch.randn(4, 9, generator=g)
    want = x.clone().requires_grad_()
    (op(want, 1).values * w).sum().backward()
    lx = x.to(DEV).requires_grad_()
    metrics.reset()
    (op(lx, 1).values * w.to(DEV)).sum().backward()
    assert torch.equal(lx.grad.cpu(), want.grad)
    assert metrics.fallbacks() == {}


def test_grounding_dinos_text_mask_runs_in_the_step():
    """transformers' ``generate_masks_with_special_tokens_and_transfer_map``: the last and next
    delimiter of each token by cummax / cummin of positions, no fallback, one program."""
    ids = torch.tensor([[101, 5, 1012, 6, 1012, 7, 1012, 102], [101, 9, 9, 1012, 4, 102, 0, 0]])

    def masks(ids, dev):
        ids = ids.to(dev)
        special = torch.isin(ids, torch.tensor([101, 102, 1012], device=dev))
        pos = torch.arange(ids.shape[1], device=dev)[None].expand_as(ids)
        last = torch.cummax(torch.where(special, pos, torch.full_like(pos, -1)), dim=1).values
        nxt = torch.cummin(torch.where(special, pos, torch.full_like(pos, 99)).flip(1), dim=1).values.flip(1)
        return last, nxt

    want = masks(ids, "cpu")
    metrics.reset()
    before = metrics.counters()["executions"]
    got = masks(ids, DEV)
    ltorch.mark_step()
    assert metrics.counters()["executions"] - before == 1
    assert all(torch.equal(a.cpu(), b) for a, b in zip(got, want))
    assert metrics.fallbacks() == {}
