"""``torch.sum`` and ``torch.mean`` over consecutive dimensions are eager's CPU kernel's bits (issue 39).

Eager adds a float32 or float64 row in ATen's ``cascade_sum`` order
(``lazy.vector_sum``; frontends/torch/ops/sum_kernel.py), and sums leading
dimensions column by column in its outer-sum order (``lazy.column_sum``);
XLA's ``reduce`` adds in its own: 42 of 64 float32 row means of a 64 x 100
tensor, the whole tensor's sum, and 60 of its 100 column sums differed. Rows below one vector, of whole vectors and a
tail, long enough for the kernel's cascade to flush its levels (1,100; 4,133;
70,000; 3,000,001 elements), and whole tensors summed by several threads (32,768
elements or more: chunks of ``at::parallel_for``, then their sums) are eager's
bits."""

import pytest
import torch

from lazycore.frontends.torch.ops import sum_kernel
from _bits import BY_HAND  # (tests/ is on the path)

SHAPES = [
    ((64, 100), -1),
    ((5, 7), -1),
    ((4, 16), -1),
    ((3, 1100), -1),
    ((2, 3, 4133), (1, 2)),
    ((2, 5, 6), (-1, -2)),
    ((100,), None),
    ((64, 100), None),
    ((2, 70000), -1),
    ((300000,), None),
    ((3000001,), None),
]


def _data(shape, dtype):
    g = torch.Generator().manual_seed(0)
    return torch.randn(shape, generator=g, dtype=dtype) * torch.exp(3 * torch.randn(shape, generator=g, dtype=dtype))


def _sum_variant(shape, dim, dtype, threads):
    """CI leaves out: (100,) (its one row is (64, 100)'s rows of 100, its whole-tensor sum (64, 100)'s); (2, 3, 4133)
    over (1, 2) (rows of 12,399 whose cascade flushes into its second level: (2, 70000)'s; several trailing dims summed
    as one row: (2, 5, 6)'s); (64, 100)'s whole sum on two threads (under GRAIN: the one-thread sum, as threads=1);
    (300000,) (a whole tensor on one thread is (64, 100)-None's path, cut in two threads' chunks (3000001,)'s, whose
    chunks' cascades reach the top level too); (3000001,) on one thread (that cascade: (3000001,)-2's chunks; the
    one-thread whole sum: (64, 100)-None-1)."""
    moved = shape in ((100,), (2, 3, 4133), (300000,)) or (shape == (64, 100) and dim is None and threads == 2) or (
        shape == (3000001,) and threads == 1)
    return pytest.param(shape, dim, dtype, threads, id=f"{shape}-{dim}-{dtype}-{threads}",
                        marks=BY_HAND if moved else ())


# CI: test_sum_and_mean_are_eagers_bits[(64, 100)-None-*-1] and [(3000001,)-None-*-2] keep the moved variants' paths
# (_sum_variant says which)
@pytest.mark.parametrize("shape,dim,dtype,threads", [_sum_variant(shape, dim, dtype, threads) for threads in (1, 2)
                                                     for dtype in (torch.float32, torch.float64)
                                                     for shape, dim in SHAPES])
def test_sum_and_mean_are_eagers_bits(dev, no_fallback, dtype, shape, dim, threads):
    if sum_kernel.lanes(dtype) is None:
        pytest.skip("this build's sum kernel is not the one modelled")
    if threads == 2 and len(shape) > 1 and dim is not None:
        pytest.skip("rows are summed whole by one thread each")
    x = _data(shape, dtype)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for f in (lambda t: t.sum(dim) if dim is not None else t.sum(),
                  lambda t: t.mean(dim) if dim is not None else t.mean(),
                  lambda t: t.sum(dim, keepdim=True) if dim is not None else t.sum()):
            want = f(x)
            got = f(x.to(dev)).cpu()
            assert got.shape == want.shape
            off = (got != want).sum().item()
            assert off == 0, f"{off} of {want.numel()} differ from eager's"
    finally:
        torch.set_num_threads(before)


COLUMNS = [
    ((64, 16), 0),
    ((64, 100), 0),
    ((5, 3), 0),
    ((7, 37), 0),
    ((300, 70), 0),
    ((33, 1000), 0),
    ((4096, 96), 0),
    ((50000, 3), 0),
    ((20, 3000), 0),
    ((4, 30, 50), 1),
    ((4, 30, 50), (0, 1)),
    ((6, 5, 4, 3), (1, 2)),
    ((3, 1, 7), 0),
    ((64, 1), 0),
]


# CI: (7, 37) (whole blocks and the rest, rows under one run) and (300, 70) (both, runs flushed a level up) keep the
# paths of (64, 100), (33, 1000) and (20, 3000) (both forms, rows of 64, 33 and 20: one level's runs at most) and of
# (4, 30, 50) over (0, 1) (its leading dims are one dim of 120 rows of 50: both forms, a level's runs)
_COLUMNS_BY_HAND = [((64, 100), 0), ((33, 1000), 0), ((20, 3000), 0), ((4, 30, 50), (0, 1))]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("shape,dim", [pytest.param(*c, marks=BY_HAND) if c in _COLUMNS_BY_HAND else c
                                       for c in COLUMNS], ids=str)
def test_sums_over_leading_and_middle_dims_are_eagers_bits(dev, no_fallback, dtype, shape, dim, threads):
    """Columns in blocks of four vectors each one cascade down the rows, the rest four rows at a
    time; eager's threads cut the columns at whole blocks, so 1 and 2 threads agree."""
    count = sum_kernel.lanes(dtype)
    if count is None or not sum_kernel.columns_alike(dtype, count):
        pytest.skip("this build's sum kernel is not the one modelled")
    x = _data(shape, dtype)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for f in (lambda t: t.sum(dim), lambda t: t.mean(dim, keepdim=True)):
            want = f(x)
            got = f(x.to(dev)).cpu()
            off = (got != want).sum().item()
            assert off == 0, f"{off} of {want.numel()} differ from eager's"
    finally:
        torch.set_num_threads(before)


def test_a_bias_gradient_is_eagers_bits(dev, no_fallback):
    """``Linear``'s bias gradient is its output gradient summed over the batch (``sum_to_size``)."""
    count = sum_kernel.lanes(torch.float32)
    if count is None or not sum_kernel.columns_alike(torch.float32, count):
        pytest.skip("this build's sum kernel is not the one modelled")
    torch.manual_seed(0)
    lin = torch.nn.Linear(20, 30)
    lazy = torch.nn.Linear(20, 30).to(dev)
    lazy.load_state_dict(lin.state_dict())
    scale = _data((64, 30), torch.float32)
    x = _data((64, 20), torch.float32)
    (lin(x) * scale).sum().backward()
    (lazy(x.to(dev)) * scale.to(dev)).sum().backward()
    assert torch.equal(lazy.bias.grad.cpu(), lin.bias.grad)


@pytest.mark.parametrize("row", [20, 5])
def test_signed_zeros_infinities_and_nan(dev, no_fallback, row):
    """A row of -0.0 sums to +0.0 (eager adds into a zero), inf - inf is NaN, NaN stays."""
    x = torch.stack([torch.full((row,), -0.0), torch.tensor([float("inf"), -float("inf")] + [1.0] * (row - 2)),
                     torch.tensor([float("nan")] + [1.0] * (row - 1)), torch.full((row,), 3e38)])
    want = x.sum(-1)
    got = x.to(dev).sum(-1).cpu()
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.nan_to_num(), want.nan_to_num())
    assert torch.equal(torch.signbit(got[~got.isnan()]), torch.signbit(want[~want.isnan()]))


def test_a_padded_row_is_summed_at_its_bucket_size(dev):
    """Shape buckets padding the summed dimension: one program for the bucket; the
    padded row's sum is its sum (in the cascade of the bucket's length)."""
    import lazycore.torch as ltorch
    from lazycore.observe import metrics

    before = metrics.counters()["compiles"]
    for n in (40, 45, 50):
        x = _data((3, n), torch.float32)
        got = ltorch.dynamic(x.to(dev), 1).mean(-1)
        ltorch.mark_step()
        torch.testing.assert_close(got.cpu(), x.mean(-1), rtol=1e-6, atol=1e-6)
    assert metrics.counters()["compiles"] - before == 1
