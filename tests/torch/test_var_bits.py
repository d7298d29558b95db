"""``torch.var``, ``torch.std``, ``torch.var_mean`` and ``torch.std_mean`` are eager's
CPU kernels' bits for float32, bfloat16 and float16 inputs (issue 39).

Eager computes them in double (Welford per row; over every dimension of a
float32 input, ``std_var_all_cpu``: the deviations from its float32 mean, summed
in double), takes the square root there, and rounds once. The decomposition
summed float32 in float32 and rooted the rounded variance: 18 of 64 float32 row
variances of 64 x 300 and 11 of their standard deviations were off, and the
halves fell back to eager's kernel. Float64 inputs keep two passes (eager's
sequential Welford is not modelled): within a few ulps."""

import pytest
import torch

from _bits import BY_HAND  # (tests/ is on the path)

CASES = [((64, 300), -1), ((64, 300), None), ((64, 300), 0), ((5, 7, 9), (1, 2)), ((1000,), None), ((3, 1), -1),
         ((), None), ((4, 5), [])]


def _data(shape, dtype, offset=1.0):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * 3 + offset).to(dtype)


def _var_variant(shape, dim, dtype):
    """CI keeps every case in float32, float16 over the last dim and in the edge cases, bfloat16 in two edge cases:
    the half types take one path whatever the dims (summed in float64, rounded once; the float32 mean over every dim
    is float32's and float64's alone), which test_var_mean_and_std_mean_are_eagers_bits also takes in bfloat16 over
    (64, 300) by dims -1, None and 0. (1000,) over every dim is (64, 300)-None's whole-tensor path (and, 1-d in
    float32, test_whole_tensor_deviations_are_from_the_float32_mean's)."""
    moved = shape == (1000,) or (dtype == torch.bfloat16 and shape not in ((4, 5), ())) or (
        dtype == torch.float16 and shape not in ((4, 5), ()) and dim != -1)
    return pytest.param(shape, dim, dtype, id=f"{shape}-{dim}-{dtype}", marks=BY_HAND if moved else ())


# CI: test_var_and_std_are_eagers_bits[(64, 300)--1-torch.float16-*] and [(64, 300)-None-torch.float32-*] keep the
# moved variants' paths (_var_variant says which)
@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("shape,dim,dtype", [_var_variant(shape, dim, dtype) for dtype in
                                             [torch.float32, torch.bfloat16, torch.float16] for shape, dim in CASES])
def test_var_and_std_are_eagers_bits(dev, no_fallback, op, dtype, shape, dim):
    x = _data(shape, dtype)
    for correction in (0, 1):
        for keepdim in (False, True):
            want = getattr(torch, op)(x, dim=dim, correction=correction, keepdim=keepdim)
            got = getattr(torch, op)(x.to(dev), dim=dim, correction=correction, keepdim=keepdim).cpu()
            assert got.shape == want.shape and got.dtype == want.dtype
            assert torch.equal(got.nan_to_num(), want.nan_to_num()) and torch.equal(got.isnan(), want.isnan()), (
                correction, keepdim)


@pytest.mark.parametrize("op", ["var_mean", "std_mean"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("dim", [-1, None, 0], ids=str)
def test_var_mean_and_std_mean_are_eagers_bits(dev, no_fallback, op, dtype, dim):
    x = _data((64, 300), dtype)
    want = getattr(torch, op)(x, dim=dim)
    got = getattr(torch, op)(x.to(dev), dim=dim)
    for g, w in zip(got, want):
        assert torch.equal(g.cpu(), w)


def test_whole_tensor_deviations_are_from_the_float32_mean(dev, no_fallback):
    """A float32 tensor's variance over every dimension: the deviations from its float32
    mean (a mean far from zero, where the float64 mean's deviations round otherwise)."""
    for seed in range(20):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(777, generator=g) * 1e-3 + 1000.0
        assert torch.equal(x.to(dev).var().cpu(), x.var()), seed
        assert torch.equal(x.to(dev).std(correction=0).cpu(), x.std(correction=0)), seed


@pytest.mark.parametrize("op", ["var", "std"])
def test_float64_within_ulps(dev, no_fallback, op):
    x = _data((64, 300), torch.float64)
    for dim in (-1, None, 0):
        torch.testing.assert_close(getattr(torch, op)(x.to(dev), dim=dim).cpu(), getattr(torch, op)(x, dim=dim),
                                   rtol=1e-14, atol=0)


def test_integer_input_raises_as_eager(dev):
    with pytest.raises(RuntimeError, match="floating point"):
        torch.var(torch.arange(6).to(dev))
    with pytest.raises(RuntimeError):
        torch.var(torch.arange(6))
