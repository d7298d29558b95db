"""``lazy.fma`` is one fused multiply-add wherever eager's kernel fuses one
(passes/keep_roundings.py ``_tie``). XLA's CPU backend lowers it as a
multiply and an add and LLVM contracts the two only where the product has
that one use in the same block: untied, float64 ``addcmul`` was left unfused
where its product was also computed on its own (``addcmul(x, a, b) + a * b``:
110 of 1,000 off) or was a product of row values XLA hoisted before their
broadcast (64 x 1 factors onto 64 x 33: 529 of 2,112 off), and
``embedding_renorm``'s float64 rows of 5-7 (28-38 of 600 rows off). The
product's first operand is now tied to its addend, so no other product equals
it and it cannot be computed apart from its sum.

float32 ``addcmul`` on a platform with float64 is a float64 sum of the exact
product (frontends/torch/ops/nn.py), so float32's ``lazy.fma`` is reached as on
a platform without float64 (XLA on TPUs)."""

import pytest
import torch

import lazycore
import lazycore.frontends.torch.ops.nn as lazy_nn

SHAPES = [(3,), (7,), (24,), (1000,), (64, 4), (64, 7), (64, 33)]
"""Short rows (under one or two vectors: LLVM's SLP vectorizer packs them) and long ones."""


def _plain(x, a, b):
    return torch.addcmul(x, a, b)


def _shared(x, a, b):
    # the fused product is also an operand on its own: XLA and LLVM would compute it once
    return torch.addcmul(x, a, b) + a * b


def _twice(x, a, b):
    return torch.addcmul(x, a, a)


def _rows(x, a, b):
    # factors constant along a row: XLA multiplies them before broadcasting the product
    return torch.addcmul(x, a[..., :1], b[..., :1])


def _negated(x, a, b):
    # lerp's upper side, end - (1 - w) * (end - x) with w > 0.5: a product of a negated factor
    return torch.lerp(x, a, b.abs() + 0.5)


KINDS = {"plain": _plain, "shared": _shared, "twice": _twice, "rows": _rows, "negated": _negated}


@pytest.fixture(params=[torch.float32, torch.float64], ids=["float32", "float64"])
def dtype(request, monkeypatch):
    if request.param == torch.float32:
        monkeypatch.setattr(lazy_nn, "WIDE_PLATFORMS", frozenset())  # (float32's lazy.fma itself)
    return request.param


@pytest.mark.parametrize("kind", list(KINDS))
def test_fma_is_eagers_fused_multiply_add(dev, dtype, kind):
    g = torch.Generator().manual_seed(7)
    cases = [[torch.randn(s, generator=g, dtype=torch.float64).to(dtype) for _ in range(3)] for s in SHAPES]
    lazycore.cache.clear()  # (lowered with this test's WIDE_PLATFORMS)
    try:
        got = [KINDS[kind](*(t.to(dev) for t in c)) for c in cases]
        lazycore.mark_step()  # (one program for every shape)
        off = {s: int((u.cpu() != KINDS[kind](*c)).sum()) for s, u, c in zip(SHAPES, got, cases)}
    finally:
        lazycore.cache.clear()
    assert not any(off.values()), off


@pytest.mark.parametrize("width", [2, 3, 5, 6, 7])
def test_embedding_renorm_float64_short_rows_on_the_device(dev, no_fallback, width):
    """Rows of under two float64 vectors: their tail's fused multiply-adds were left
    unfused (28-38 of 600 rows off), so the op fell back to eager's kernel."""
    g = torch.Generator().manual_seed(width)
    w = torch.randn(600, width, generator=g, dtype=torch.float64)
    idx = torch.arange(600)
    want = w.clone()
    torch.embedding_renorm_(want, idx, 1.0, 2.0)
    got = w.to(dev)
    torch.embedding_renorm_(got, idx.to(dev), 1.0, 2.0)
    assert int((got.cpu() != want).any(1).sum()) == 0
