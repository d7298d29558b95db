"""complex32 (torch.chalf) on the lazy device against eager CPU, bit for bit.

The device stores chalf as complex<f32> whose parts hold float16s; every
result must read back as eager's chalf values (the same float16 bits, NaNs
equal), with eager's dtype, and where eager's CPU kernel refuses chalf the
lazy device raises eager's error type. Inputs are random values at several
scales, float16's extremes, values that round to infinity, and (for copies
and reads) infinities and NaNs."""

import warnings

import pytest
import torch


pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")

CHALF = torch.complex32


def _finite(seed=0):
    g = torch.Generator().manual_seed(seed)

    def rnd(n, scale):
        return torch.complex(torch.randn(n, generator=g) * scale, torch.randn(n, generator=g) * scale)

    edge = torch.tensor([0.1 + 0.2j, 1 / 3 - 2.7j, 65504 + 1j, 1e-8 + 7000j, -0.0 + 3.3j, 6e-5 - 6e-8j, 0j, -0.0 - 0.0j])
    return torch.cat([rnd(300, 1.0), rnd(100, 200.0), rnd(60, 1e-3), edge]).to(CHALF)


with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "ComplexHalf support is experimental")
    X = _finite(0)
    Y = _finite(1)
    SPECIAL = torch.tensor([65520 + 1j, 70000 - 3j, float("inf") + 1j, -float("inf") - 0.0j, complex(float("nan"), 2.0),
                            complex(1.0, float("nan")), 2 ** -25 + 3 * 2 ** -26 * 1j]).to(CHALF)
H = torch.randn(X.numel(), generator=torch.Generator().manual_seed(2)).half()
I = torch.randint(-3000, 3000, (X.numel(),), generator=torch.Generator().manual_seed(3))


def bits(t: torch.Tensor) -> torch.Tensor:
    """float16 parts (of a chalf or float16 tensor) as their bit patterns, NaNs as one."""
    if t.dtype == CHALF:
        t = torch.view_as_real(t.to(torch.complex64)).half()
    b = t.contiguous().view(torch.int16)
    return torch.where(t.isnan(), torch.full_like(b, 0x7E00), b)


def same(got, want):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
        return
    if not isinstance(want, torch.Tensor):
        assert type(got) is type(want) and (got == want or (got != got and want != want)), (got, want)
        return
    assert got.device.type == "lazy", got.device
    got = got.cpu()
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    if want.dtype in (CHALF, torch.float16):
        mismatch = (bits(got) != bits(want)).nonzero()
        assert mismatch.numel() == 0, (mismatch[:5].tolist(), got.flatten()[:8], want.flatten()[:8])
    else:
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


def run_both(fn, dev, *inputs):
    want = fn(torch.device("cpu"), *inputs)
    got = fn(dev, *(x.to(dev) for x in inputs))
    same(got, want)


CASTS = {
    "from complex64": lambda d, x: (x.to(torch.complex64) * 1.37).to(CHALF),
    "from complex128": lambda d, x: (x.to(torch.complex128) / 3).chalf(),
    "from float64 (through float32, as c10)": lambda d, x: (x.real.double() / 3 + 2 ** -40).to(CHALF),
    "from float32": lambda d, x: (x.real.float() / 3).chalf(),
    "from float16": lambda d, x: x.imag.chalf(),
    "from int64": lambda d, x: (torch.arange(x.numel(), device=d) * 37 + 65000).chalf(),
    "from bool": lambda d, x: (x.real > 0).chalf(),
    "to float16 (real part)": lambda d, x: x.to(torch.float16),
    "to float32": lambda d, x: x.to(torch.float32),
    "to int32": lambda d, x: x.to(torch.int32),
    "to bool": lambda d, x: x.bool(),
    "to complex64": lambda d, x: x.to(torch.complex64),
    "to complex128": lambda d, x: x.to(torch.complex128),
    "copy_ into chalf": lambda d, x: torch.empty(x.shape, dtype=CHALF, device=d).copy_(x.to(torch.complex64) / 3),
    "copy_ into complex64": lambda d, x: torch.empty(x.shape, dtype=torch.complex64, device=d).copy_(x),
    "clone": lambda d, x: x.clone(),
}


@pytest.mark.parametrize("name", list(CASTS))
def test_casts_and_copies(dev, name, no_fallback):
    run_both(CASTS[name], dev, X)


@pytest.mark.parametrize("name", ["from complex64", "from float32", "to complex64", "to float16 (real part)", "clone"])
def test_casts_of_special_values(dev, name):
    run_both(CASTS[name], dev, SPECIAL)


def test_moved_and_read_back(dev):
    lazy = X.to(dev)
    assert lazy.dtype == CHALF and lazy.element_size() == 2 * 2
    same(lazy, X)
    same(SPECIAL.to(dev), SPECIAL)
    assert lazy[:5].tolist() == X[:5].tolist()
    assert lazy[3].item() == X[3].item()
    assert repr(lazy[:3]).replace(f", device='{dev}'", "") == repr(X[:3])
    with pytest.raises(TypeError):  # NumPy has no complex32, as eager says
        lazy.numpy()
    with pytest.raises(TypeError):
        X.numpy()


ARITHMETIC = {
    "add": lambda d, x, y: x + y,
    "sub": lambda d, x, y: x - y,
    "mul": lambda d, x, y: x * y,
    "neg": lambda d, x, y: -x,
    "chain": lambda d, x, y: (x * y + x) * y - x,
    "add alpha (rounded product)": lambda d, x, y: torch.add(x, y, alpha=0.3),
    "sub complex alpha": lambda d, x, y: torch.sub(x, y, alpha=0.3 + 0.1j),
    "mul by a number (rounded to chalf first)": lambda d, x, y: x * (0.1 + 0.7j),
    "add a number": lambda d, x, y: x + (1.1 + 1j),
    "rsub": lambda d, x, y: 1.7 - x,
    "mul float16": lambda d, x, y: x * y.real,
    "add float16": lambda d, x, y: x + y.imag,
    "mul complex64 (promotes)": lambda d, x, y: x * (y.to(torch.complex64) * 2),
    "mul int64 beyond float16's integers": lambda d, x, y: x * (torch.arange(x.numel(), device=d) * 7 + 2001),
    "mul a 0-dim float64 tensor": lambda d, x, y: x * torch.tensor(1 / 3, dtype=torch.float64),
    "add a 0-dim float32 tensor": lambda d, x, y: torch.tensor(1.7) + x,
    "mul int64": lambda d, x, y: x * torch.arange(x.numel(), device=d),
    "mul bool": lambda d, x, y: x * (y.real > 0),
    "addcmul": lambda d, x, y: torch.addcmul(x, x, y),
    "addcmul value (each step rounded)": lambda d, x, y: torch.addcmul(x, y, x, value=0.3),
    "conj": lambda d, x, y: x.conj() * y,
    "conj_physical": lambda d, x, y: x.conj_physical(),
    "sgn": lambda d, x, y: x.sgn(),
    "where": lambda d, x, y: torch.where(x.real > 0, x, y),
    "masked_fill": lambda d, x, y: x.masked_fill(y.real > 0, 0.3j),
    "cat, stack": lambda d, x, y: (torch.cat([x, y]), torch.stack([x, y], 1)),
    "in place": lambda d, x, y: x.clone().mul_(y).add_(x, alpha=0.7).sub_(0.3 - 1j),
    "in place from complex64": lambda d, x, y: x.clone().mul_(y.to(torch.complex64) * 1.5),
    "fill_": lambda d, x, y: x.clone().fill_(1.1 + 2.3j),
    "index_put_": lambda d, x, y: x.clone().index_put_((torch.tensor([1, 7], device=d),), y[:2] * 3),
    "setitem": lambda d, x, y: _setitem(x.clone(), y),
    "factories": lambda d, x, y: (torch.zeros(3, dtype=CHALF, device=d) + x[:3], torch.ones(2, 2, dtype=CHALF, device=d),
                                  torch.full((3,), 0.1 + 1.3j, dtype=CHALF, device=d), torch.zeros_like(x)),
    "layouts": lambda d, x, y: (x[:16].reshape(4, 4).t() * 2, x[:16].reshape(4, 4)[:, 1:3].contiguous(),
                                x.as_strided((2, 2), (1, 2)).clone(), x[:5].repeat(2), x[:16].reshape(4, 4).tril(),
                                torch.nn.functional.pad(x[:4], (1, 1)), x.roll(3)),
    "indexing": lambda d, x, y: (x[torch.tensor([3, 0, 3], device=d)], x.index_select(0, torch.tensor([1, 0], device=d))),
    "comparisons": lambda d, x, y: (x == y, x != x, x == x[0].item(), x.isnan(), x.isfinite(), x.isinf()),
    "comparison with a number (as a chalf)": lambda d, x, y: x == (1 / 3 - 2.7j),
}


def _setitem(x, y):
    x[1] = 3.1 + 3.3j
    x[4:6] = y[:2]
    return x


@pytest.mark.parametrize("name", list(ARITHMETIC))
def test_arithmetic(dev, name, no_fallback):
    run_both(ARITHMETIC[name], dev, X, Y)


PARTS = {
    "view_as_real": lambda d, x: torch.view_as_real(x),
    "real, imag": lambda d, x: (x.real, x.imag, x.real + 1, x.imag * x.real),
    "abs (float16, from float32)": lambda d, x: x.abs(),
    "write through real": lambda d, x: _through(x.clone(), lambda z: z.real.mul_(3)),
    "write through imag": lambda d, x: _through(x.clone(), lambda z: z.imag.copy_(z.real * 7)),
    "write through view_as_real": lambda d, x: _through(x.clone(), lambda z: torch.view_as_real(z)[:, 1].add_(1)),
    "view_as_complex": lambda d, x: torch.view_as_complex(torch.view_as_real(x).clone()) * 3,
    "view_as_complex of float16": lambda d, x: torch.view_as_complex(x.real.reshape(-1, 2).clone()) + 1,
    "write through view_as_complex": lambda d, x: _through(x.imag.reshape(-1, 2).clone(),
                                                            lambda h: torch.view_as_complex(h).mul_(1.3 - 0.2j)),
    "complex of float16 parts": lambda d, x: torch.complex(x.real, x.imag * 3),
}


def _through(t, update):
    update(t)
    return t


@pytest.mark.parametrize("name", list(PARTS))
def test_parts_and_views(dev, name, no_fallback):
    run_both(PARTS[name], dev, X)


def test_boolean_mask(dev):
    run_both(lambda d, x, y: x[y.real > 0], dev, X, Y)


def test_accumulating_duplicate_indices(dev):
    # eager adds each duplicate's value in turn, rounding every sum (a counted fallback here)
    index = torch.tensor([3, 1, 3, 3, 0, 1])
    run_both(lambda d, x, y: x[:5].clone().index_put_((index.to(d),), y[:6] * 0.37, accumulate=True), dev, X, Y)


def test_parts_of_special_values(dev):
    run_both(lambda d, x: (torch.view_as_real(x), x.abs(), x.isnan()), dev, SPECIAL)


def test_scalar_arguments_are_checked_as_eager(dev):
    x = X.to(dev)
    for fn in (lambda t: torch.add(t, t, alpha=1e6), lambda t: torch.addcmul(t, t, t, value=70000.0)):
        with pytest.raises(RuntimeError, match="without overflow"):
            fn(X)
        with pytest.raises(RuntimeError, match="without overflow"):
            fn(x)
    same(x * 3000.5, X * 3000.5)  # an operand converts unchecked (beyond float16's range: infinity)


def test_numbers_rounded_at_every_call(dev):
    # a float argument is a parameter of the op's recording, replayed with the next
    # call's value: the rounding to float16 parts must be the graph's, not the first call's
    x, y = X.to(dev), Y.to(dev)
    for s in (3000.5, 0.1, 1 / 3, 2049.0, 0.7 - 0.3j):
        same(x * s, X * s)
        same(s - x, s - X)
        same(torch.add(x, y, alpha=s), torch.add(X, Y, alpha=s))
        same(torch.addcmul(x, y, x, value=s), torch.addcmul(X, Y, X, value=s))
        same(x == s, X == s)
        same(x.clone().mul_(s), X.clone().mul_(s))


# Eager's CPU kernels refuse chalf for most math and reductions; so does the lazy device.
REFUSED = {
    "div": lambda x: x / x, "exp": torch.exp, "sqrt": torch.sqrt, "tanh": torch.tanh, "pow": lambda x: x ** 3,
    "reciprocal": torch.reciprocal, "angle": torch.angle, "sum": torch.sum, "mean": torch.mean, "prod": torch.prod,
    "sum dim": lambda x: x.reshape(-1, 2).sum(0), "matmul": lambda x: x[:4].reshape(2, 2) @ x[:4].reshape(2, 2),
    "dot": lambda x: torch.dot(x, x), "equal": lambda x: torch.equal(x, x), "fft": lambda x: torch.fft.fft(x[:8]),
    "lerp": lambda x: torch.lerp(x, x, 0.5),
    "put_ accumulating": lambda x: x.clone().put_(torch.tensor([1, 1], device=x.device), x[:2], accumulate=True),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_where_eager_refuses(dev, name):
    fn = REFUSED[name]
    with pytest.raises(Exception) as eager:
        fn(X)
    with pytest.raises(type(eager.value)):
        fn(X.to(dev)).cpu()


def test_decomposed_op_of_a_chalf_view_sees_chalf(dev):
    # a decomposition's pieces get each view argument as a tensor of its own:
    # eager's dtype (chalf), not its handle's storage type (complex64)
    run_both(lambda d, x: torch.linalg.vector_norm(x[:10]), dev, X)
