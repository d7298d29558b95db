"""torch.histc on the lazy device: eager's counts for float32/float64, values
at the bins' edges included, with no fallback; integers binned as the meta
function (and CUDA) allows them, which transformers' mixture-of-experts layers
rely on off the CPU (issue 39: a Mixtral on the lazy device raised eager
CPU's NotImplementedError for ``histc`` of int32 expert ids)."""

import pytest
import torch

RANGES = [(4, 0, 3), (7, -1.5, 2.25), (9, -0.3, 0.6), (10, 0.1, 0.7), (100, 0, 0), (3, 3, 3)]


def _values(dtype, bins, lo, hi):
    g = torch.Generator().manual_seed(bins)
    x = torch.randn(4000, generator=g, dtype=dtype) * 1.2
    edges = torch.linspace(lo, hi, bins + 1, dtype=dtype)
    x = torch.cat([x, edges, torch.nextafter(edges, edges + 1), torch.nextafter(edges, edges - 1)])
    x = x[(x.abs() >= torch.finfo(dtype).tiny) | (x == 0)]  # (XLA's CPU code flushes subnormals to zero)
    if lo != hi:
        x = torch.cat([x, torch.tensor([float("nan"), float("inf"), -float("inf")], dtype=dtype)])
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bins,lo,hi", RANGES)
def test_float_counts_are_eagers(dev, no_fallback, dtype, bins, lo, hi):
    x = _values(dtype, bins, lo, hi)
    want = torch.histc(x, bins=bins, min=lo, max=hi)
    got = torch.histc(x.to(dev), bins=bins, min=lo, max=hi).cpu()
    assert got.dtype == want.dtype and torch.equal(got, want), (got, want)


def _cuda_bins(x, bins, lo, hi):
    """CUDA's integer histc: the range as int64 (the values' own when lo == hi),
    ``(v - lo) * bins // (hi - lo)``, the upper edge in the last bin."""
    v = x.long()
    lo, hi = (int(v.min()), int(v.max())) if lo == hi else (int(lo), int(hi))
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    v = v[(v >= lo) & (v <= hi)]
    return torch.bincount(((v - lo) * bins // (hi - lo)).clamp(max=bins - 1), minlength=bins).to(x.dtype)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8])
@pytest.mark.parametrize("bins,lo,hi", [(4, 0, 3), (8, 0, 7), (5, -3, 20), (6, 0, 0)])
def test_integer_counts_are_cudas(dev, no_fallback, dtype, bins, lo, hi):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0 if dtype is torch.uint8 else -5, 25, (3000,), generator=g).to(dtype)
    got = torch.histc(x.to(dev), bins=bins, min=lo, max=hi).cpu()
    want = _cuda_bins(x, bins, lo, hi)
    assert got.dtype == want.dtype and torch.equal(got, want), (got, want)


def test_expert_counts_as_transformers_takes_them(dev, no_fallback):
    ids = torch.sort(torch.tensor([[3, 0], [0, 2], [3, 1], [0, 3]]).reshape(-1))[0].int()
    got = torch.histc(ids.to(dev), bins=4, min=0, max=3)
    assert torch.cumsum(got, 0, dtype=torch.int32).cpu().tolist() == [3, 4, 5, 8]


def test_empty_and_constant_inputs(dev, no_fallback):
    for x in (torch.tensor([]), torch.tensor([2.0, 2.0]), torch.tensor([-1.5])):
        assert torch.equal(torch.histc(x.to(dev), bins=4).cpu(), torch.histc(x, bins=4))


@pytest.mark.parametrize("values", [[1.0, float("inf")], [1.0, float("nan")], [-float("inf"), 0.0]])
def test_a_range_read_from_values_that_is_not_finite_raises(dev, values):
    x = torch.tensor(values)
    with pytest.raises(RuntimeError, match="is not finite"):
        torch.histc(x, bins=4)
    with pytest.raises(RuntimeError, match="is not finite"):
        torch.histc(x.to(dev), bins=4).cpu()


def test_a_given_range_that_is_not_finite_raises_eagers_error(dev):
    x = torch.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError) as want:
        torch.histc(x, bins=4, min=0, max=float("inf"))
    with pytest.raises(RuntimeError) as got:
        torch.histc(x.to(dev), bins=4, min=0, max=float("inf"))
    assert str(got.value) == str(want.value)
