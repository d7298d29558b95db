"""``torch.linalg.vector_norm``'s 2-norm is eager's CPU kernel's bits (issue 39).

``clip_grad_norm_`` (every transformers training loop) takes the 2-norm of each
gradient, then of the norms, and scales every gradient by the result: a norm's
last bit is every update's. Eager squares a contiguous float32 or float64 row
in vector lanes, adds the lanes in order, then the tail in groups of four and
fused multiply-adds (frontends/torch/ops/norm_kernel.py); torch._decomp's
``sqrt(sum(x * x))`` as XLA adds it differed in 18 of 36 cases below. Other
orders, dimensions, layouts and types keep that decomposition, within float
tolerance."""

import numpy as np
import pytest
import torch

from lazycore.frontends.torch.ops import norm_kernel
from _bits import BY_HAND  # (tests/ is on the path)

CASES = [
    ((64, 100), None),
    ((3, 7), -1),
    ((5, 13), None),
    ((2, 3, 31), (-2, -1)),
    ((4, 1100), -1),
    ((600000,), None),  # one row of 75,000 vectors: the loop form
    ((1,), None),
    ((6, 9), (1,)),
    ((2, 3, 4), [2, 1]),
]


def _data(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=dtype) * torch.exp(2 * torch.randn(shape, generator=g, dtype=dtype))


# CI: every case with keepdim=False, and keepdim=True over (64, 100) (every dim) and (2, 3, 31) (two of three): the
# lowering keeps dims by a reshape of its result alone (norm_kernel's ``norm``), which the other cases repeat
@pytest.mark.parametrize("shape,dim,dtype,keepdim", [
    pytest.param(shape, dim, dtype, keepdim, id=f"{shape}-{dim}-{dtype}-{keepdim}",
                 marks=BY_HAND if keepdim and shape not in ((64, 100), (2, 3, 31)) else ())
    for keepdim in (False, True) for dtype in (torch.float32, torch.float64) for shape, dim in CASES])
def test_two_norm_is_eagers_bits(dev, no_fallback, dtype, shape, dim, keepdim):
    x = _data(shape, dtype)
    want = torch.linalg.vector_norm(x, dim=dim, keepdim=keepdim)
    got = torch.linalg.vector_norm(x.to(dev), dim=dim, keepdim=keepdim).cpu()
    assert got.shape == want.shape
    assert torch.equal(got, want), (got - want).abs().max()


# CI: test_every_tail[torch.float32] takes the same lowering (float64 rows: test_two_norm_is_eagers_bits)
@pytest.mark.parametrize("dtype", [torch.float32, pytest.param(torch.float64, marks=BY_HAND)], ids=str)
def test_every_tail(dev, no_fallback, dtype):
    """Rows of 1 to 40 elements: every tail (0 to 7 float32s past 0 to 5 vectors),
    64 rows each, so that a fused square where eager rounds one shows."""
    for n in range(1, 41):
        x = _data((64, n), dtype, seed=n)
        got = torch.linalg.vector_norm(x.to(dev), dim=-1).cpu()
        assert torch.equal(got, torch.linalg.vector_norm(x, dim=-1)), n


def test_clip_grad_norm_scales_as_eager(dev, no_fallback):
    """``clip_grad_norm_`` over gradients of a small transformer's shapes: the total
    norm and every clipped gradient are eager's bits."""
    shapes = [(512, 64), (64,), (64, 192), (192,), (64, 64), (64, 256), (256, 64), (256,), (3, 5)]
    grads = [_data(s, torch.float32, seed=i) for i, s in enumerate(shapes)]
    eager = [torch.zeros(s, requires_grad=True) for s in shapes]
    lazy = [torch.zeros(s, device=dev, requires_grad=True) for s in shapes]
    for e, l, g in zip(eager, lazy, grads):
        e.grad, l.grad = g.clone(), g.to(dev)
    want = torch.nn.utils.clip_grad_norm_(eager, 1.0)
    got = torch.nn.utils.clip_grad_norm_(lazy, 1.0)
    assert torch.equal(got.cpu(), want)
    for e, l in zip(eager, lazy):
        assert torch.equal(l.grad.cpu(), e.grad)


def test_the_norm_is_one_node(dev):
    """The 2-norm is one ``lazy.norm_squares`` and its root, no ``lazy.reduce_sum``."""
    import lazycore

    x = _data((64, 100), torch.float32).to(dev)
    lazycore.mark_step(wait=True)
    with lazycore.testing.capture() as cap:
        norm = torch.linalg.vector_norm(x)
        lazycore.mark_step()
    text = cap.text("lazy")
    assert text.count('"lazy.norm_squares"') == 1 and '"lazy.reduce_sum"' not in text
    assert torch.equal(norm.cpu(), torch.linalg.vector_norm(x.cpu()))


@pytest.mark.parametrize("case", ["dim0", "transposed", "ord3", "inf", "float64_of_float32", "bfloat16"])
def test_other_norms_keep_the_decomposition(dev, no_fallback, case):
    x = _data((6, 9), torch.float32)
    call = {"dim0": lambda t: torch.linalg.vector_norm(t, dim=0),
            "transposed": lambda t: torch.linalg.vector_norm(t.t(), dim=-1),
            "ord3": lambda t: torch.linalg.vector_norm(t, 3),
            "inf": lambda t: torch.linalg.vector_norm(t, float("inf")),
            "float64_of_float32": lambda t: torch.linalg.vector_norm(t, dtype=torch.float64),
            "bfloat16": lambda t: torch.linalg.vector_norm(t.bfloat16(), dim=-1)}[case]
    want = call(x)
    got = call(x.to(dev)).cpu()
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=1e-2 if case == "bfloat16" else 1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_the_reference_is_eagers_kernel(dtype):
    """Where eager's kernel is modelled, :func:`norm_kernel.reference` gives its
    bits on rows it was not asked with."""
    count = norm_kernel.lanes(dtype)
    if count is None:
        pytest.skip("eager's 2-norm kernel is not the modelled one on this build")
    rows = _data((32, 517), dtype, seed=7).numpy()
    want = torch.linalg.vector_norm(torch.from_numpy(rows), dim=-1).numpy()
    assert np.array_equal(norm_kernel.reference(rows, count), want)


def test_a_bucketed_row_compiles_once(dev, no_fallback):
    """A row whose length varies (``lazycore.torch.dynamic``) is one ``lazy.norm_squares``
    padded to its bucket: one program for the bucket (summed at the bucket's length, so
    within float tolerance, not the valid length's bits), as ``torch.sum``'s rows."""
    import lazycore.torch as ltorch
    from lazycore.observe import metrics

    ltorch.mark_step(wait=True)
    before = metrics.counters()["compiles"]
    for n in (40, 45, 50):
        x = _data((3, n), torch.float32, seed=n)
        rows = torch.linalg.vector_norm(ltorch.dynamic(x.to(dev), 1), dim=-1)
        whole = torch.linalg.vector_norm(ltorch.dynamic(x.to(dev), 1))
        ltorch.mark_step()
        torch.testing.assert_close(rows.cpu(), torch.linalg.vector_norm(x, dim=-1), rtol=1e-6, atol=0)
        torch.testing.assert_close(whole.cpu(), torch.linalg.vector_norm(x), rtol=1e-6, atol=0)
    assert metrics.counters()["compiles"] - before == 1
