"""relu, clamp, maximum/minimum and fmax/fmin keep eager's signed zeros and NaNs, bit for bit.

The lazy ``maximum``/``minimum`` order signed zeros as IEEE does (+0.0 above
-0.0); eager picks an operand on a tie instead: torch's vector loops and every
NumPy loop give the second operand (``maximum(+0.0, -0.0)`` is -0.0), relu and
clamp with number bounds leave x (``relu(-0.0)`` is -0.0), torch's fmax/fmin
give the first. The frontends write these as selects that make the same
choices. Operands hold 64 elements, every pair of the special values, so
eager runs its vector loop on all of them (torch takes a scalar loop, which
keeps the first operand on a tie, for the last elements of a length that is
not a multiple of the vector block: no lowering can follow that).
"""

import itertools

import numpy as np
import pytest
import torch

import lazycore.numpy as lnp
import lazycore.torch as ltorch

VALUES = [0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0, 2.0]
N = 64  # len(VALUES) ** 2: a multiple of every vector block eager's loops use
PAIRS = np.array(list(itertools.product(VALUES, VALUES))).T
assert PAIRS.shape[1] == N


def assert_same_bits(got, want):
    """NaN at the same places, every other element the same bits (so the sign of zero counts)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg="NaN positions")
    u = f"u{want.dtype.itemsize}"
    bad = got[~nan].view(u) != want[~nan].view(u)
    assert not bad.any(), (f"inputs {PAIRS[:, ~nan][:, bad].T.tolist()}: got {got[~nan][bad]} "
                           f"(signbit {np.signbit(got[~nan][bad])}), eager {want[~nan][bad]}")


@pytest.fixture(scope="module")
def dev():
    return ltorch.device()


F = torch.nn.functional
TORCH_UNARY = {
    "relu": torch.relu,
    "F.relu": F.relu,
    "relu_": lambda x: x.clone().relu_(),
    "relu6": F.relu6,
    "hardtanh": F.hardtanh,
    "hardtanh(-0, 0)": lambda x: F.hardtanh(x, -0.0, 0.0),
    "clamp_min(0)": lambda x: torch.clamp_min(x, 0.0),
    "clamp_min(-0)": lambda x: torch.clamp_min(x, -0.0),
    "clamp_max(0)": lambda x: torch.clamp_max(x, 0.0),
    "clamp_max(-0)": lambda x: torch.clamp_max(x, -0.0),
    "clamp(-0, 0)": lambda x: torch.clamp(x, -0.0, 0.0),
    "clamp(0, -0)": lambda x: torch.clamp(x, 0.0, -0.0),
    "clamp(1, -1)": lambda x: torch.clamp(x, 1.0, -1.0),
    "clamp(min=nan)": lambda x: torch.clamp(x, min=float("nan")),
    "clamp(max=nan)": lambda x: torch.clamp(x, max=float("nan")),
}
TORCH_BINARY = {
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "fmax": torch.fmax,
    "fmin": torch.fmin,
    "clamp(min=t)": lambda a, b: torch.clamp(a, min=b),
    "clamp(max=t)": lambda a, b: torch.clamp(a, max=b),
    "clamp_min(t)": torch.clamp_min,
    "clamp_max(t)": torch.clamp_max,
    "clamp(t, t)": lambda a, b: torch.clamp(a, b, -b),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("name", list(TORCH_UNARY))
def test_torch_unary_as_eager(dev, name, dtype):
    fn = TORCH_UNARY[name]
    for x in (torch.tensor(PAIRS[0], dtype=dtype), torch.tensor(PAIRS[1], dtype=dtype)):
        assert_same_bits(fn(x.to(dev)).cpu().float().numpy(), fn(x).float().numpy())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", list(TORCH_BINARY))
def test_torch_binary_as_eager(dev, name, dtype):
    fn = TORCH_BINARY[name]
    a, b = (torch.tensor(p, dtype=dtype) for p in PAIRS)
    assert_same_bits(fn(a.to(dev), b.to(dev)).cpu().numpy(), fn(a, b).numpy())


def test_torch_ties_pinned(dev):
    """The choices themselves, so a change in eager's kernels shows here and not as a riddle."""
    pos, neg = torch.zeros(N), -torch.zeros(N)
    lazy = [t.to(dev) for t in (pos, neg)]
    assert torch.relu(lazy[1]).cpu().signbit().all()  # relu(-0.0) is -0.0
    assert torch.clamp_min(lazy[1], 0.0).cpu().signbit().all()  # x stays on a tie with a number bound
    assert torch.maximum(*lazy).cpu().signbit().all()  # maximum(+0.0, -0.0): the second
    assert not torch.minimum(lazy[1], lazy[0]).cpu().signbit().any()  # minimum(-0.0, +0.0): the second
    assert not torch.fmax(*lazy).cpu().signbit().any()  # fmax(+0.0, -0.0): the first
    assert torch.maximum(torch.full((N,), float("nan")).to(dev), lazy[0]).cpu().isnan().all()
    assert torch.fmin(torch.full((N,), float("nan")).to(dev), lazy[1]).cpu().signbit().all()


def test_torch_integers_unchanged(dev):
    a = torch.arange(-32, 32)
    b = torch.arange(32, -32, -1)
    for fn in (torch.maximum, torch.minimum, torch.fmax, torch.fmin, lambda a, b: torch.clamp(a, min=b)):
        assert torch.equal(fn(a.to(dev), b.to(dev)).cpu(), fn(a, b))
    assert torch.equal(torch.relu(a.to(dev)).cpu(), torch.relu(a))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["maximum", "minimum", "fmax", "fmin"])
def test_numpy_extrema_as_numpy(name, dtype):
    a, b = (p.astype(dtype) for p in PAIRS)
    got = getattr(lnp, name)(lnp.asarray(a), lnp.asarray(b))
    assert_same_bits(np.asarray(got), getattr(np, name)(a, b))
    # a Python number on either side
    assert_same_bits(np.asarray(getattr(lnp, name)(lnp.asarray(a), 0.0)), getattr(np, name)(a, 0.0))
    assert_same_bits(np.asarray(getattr(lnp, name)(-0.0, lnp.asarray(b))), getattr(np, name)(-0.0, b))


_BOUNDS = [0.0, -0.0, None, np.nan, 1.0, -1.0]


@pytest.mark.parametrize("lo,hi", [(lo, hi) for lo in _BOUNDS for hi in _BOUNDS if (lo, hi) != (None, None)])
def test_numpy_clip_as_numpy(lo, hi):
    """np.clip keeps x on a tie of zeros, then the bound: min(max(x, lo), hi) in NumPy's own loop."""
    a = np.array([0.0, -0.0, np.nan, 1.0, -1.0, 2.0, -2.0] * 8, np.float32)
    assert_same_bits(np.asarray(lnp.clip(lnp.asarray(a), lo, hi)), np.clip(a, lo, hi))
