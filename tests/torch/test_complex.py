"""Complex tensors on the lazy device against eager torch on the same inputs:
arithmetic, parts and views of them, conj views, reductions, matmul, round trips,
every torch.fft function in every norm mode, and that none of it falls back."""

import math

import numpy as np
import pytest
import torch

import lazycore
from _bits import BY_HAND  # (tests/ is on the path)

F = torch.fft
CDTYPES = [torch.complex64, torch.complex128]


def tol(dtype):
    """float32 FFT sums round more than elementwise ops; float64 stays tight."""
    return dict(rtol=2e-5, atol=2e-5) if dtype in (torch.complex64, torch.float32) else dict(rtol=1e-11, atol=1e-11)


def same(got, want, exact=False):
    got = got.cpu()
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if exact:
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    else:
        torch.testing.assert_close(got, want, equal_nan=True, **tol(want.dtype))


def cx(shape, dtype=torch.complex64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, dtype=dtype, generator=g)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("fn", [
    lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / b,
    lambda a, b: a * 2.5j, lambda a, b: (1 - 2j) + a, lambda a, b: a ** 2, lambda a, b: a == b,
    lambda a, b: a != a, lambda a, b: torch.exp(a), lambda a, b: torch.log(b), lambda a, b: torch.sqrt(a),
    lambda a, b: torch.sin(a), lambda a, b: torch.cos(b), lambda a, b: torch.tanh(a), lambda a, b: -a,
    lambda a, b: a.abs(), lambda a, b: torch.angle(a), lambda a, b: a.real, lambda a, b: a.imag,
    lambda a, b: a.conj(), lambda a, b: torch.conj_physical(a), lambda a, b: a.conj().resolve_conj(),
    lambda a, b: torch.view_as_real(a), lambda a, b: torch.view_as_complex(torch.view_as_real(a)),
    lambda a, b: torch.polar(a.abs(), b.angle()), lambda a, b: torch.complex(a.real, b.imag),
    lambda a, b: a.sum(), lambda a, b: a.sum(0), lambda a, b: a.prod(1), lambda a, b: a.mean(1),
    lambda a, b: a @ b.mT, lambda a, b: torch.matmul(a[0], b.mT), lambda a, b: a.to(torch.float64),
    lambda a, b: a.real.to(a.dtype) + b, lambda a, b: (a != 0), lambda a, b: a.reshape(-1).flip(0),
    lambda a, b: torch.where(a.real > 0, a, b), lambda a, b: torch.lerp(a, b, a * 0.3),
    lambda a, b: torch.lerp(a, b, 0.75),
], ids=lambda f: None)
def test_ops_match_eager(dtype, fn, dev, no_fallback):
    a, b = cx((3, 4), dtype, 1), cx((3, 4), dtype, 2)
    with np.errstate(all="ignore"):
        want = fn(a, b)
    same(fn(a.to(dev), b.to(dev)), want)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_round_trips_and_scalars(dtype, dev):
    a = cx((2, 3), dtype)
    x = a.to(dev)
    assert x.dtype == dtype and x.is_complex()
    same(x, a, exact=True)
    np.testing.assert_array_equal(x.numpy(), a.numpy())
    assert x[1, 2].item() == a[1, 2].item() and isinstance(x[1, 2].item(), complex)
    assert x.tolist() == a.tolist()
    assert torch.zeros(2, dtype=dtype, device=dev).cpu().dtype == dtype
    same(torch.full((2,), 1 + 2j, dtype=dtype, device=dev), torch.full((2,), 1 + 2j, dtype=dtype), exact=True)


def test_writes_through_part_and_conj_views(dev, no_fallback):
    a = cx((3, 4))
    x = a.to(dev)
    for t in (a, x):
        t.real.mul_(2)
        t.imag[0].fill_(-1)
        t.conj()[1].add_(1j)  # lands conjugated in the base
        torch.view_as_real(t)[2, :, 1] = 5
    same(x, a, exact=True)
    r = torch.randn(4, 2)
    y = r.clone().to(dev)
    for t in (r, y):
        torch.view_as_complex(t).mul_(1j)
    same(y, r, exact=True)


def test_conj_view_sees_later_writes(dev):
    a = cx((4,))
    x = a.to(dev)
    ya, yx = a.conj(), x.conj()
    a.add_(1)
    x.add_(1)
    same(yx, ya.resolve_conj(), exact=True)


def test_upload_of_a_conj_view(dev):
    a = cx((3,)).conj()
    assert a.is_conj()
    same(a.to(dev), a.resolve_conj(), exact=True)


def test_unsupported_orderings_raise_eagers_error(dev):
    x = cx((3,)).to(dev)
    for fn in (lambda t: t < t, lambda t: t.max(), lambda t: torch.maximum(t, t), lambda t: t.argmax()):
        with pytest.raises(RuntimeError):
            fn(cx((3,)))
        with pytest.raises(RuntimeError):
            fn(x)


# --- torch.fft ------------------------------------------------------------------------------

NORMS = [None, "backward", "ortho", "forward"]


@pytest.fixture(scope="module")
def every_norm():
    """The norms' tests of one function, arguments and dtype share one program: the first of them
    computes every norm's lazy results by one barrier (one compile, not four; None's is backward's)
    and each test compares its own norm's with eager's."""
    done = {}

    def results(key, lazy_results):
        if key not in done:
            pending = {norm: lazy_results(norm) for norm in NORMS}
            lazycore.mark_step()
            done[key] = pending  # (computed: reading one later runs nothing)
        return done[key]

    return results


def _same_over_dims(every_norm, key, fn, x, dims, norm, dev, **size):
    """``fn`` over each of ``dims`` on the lazy device (every norm in one
    program, :func:`every_norm`) is eager's, for ``norm``."""
    gots = every_norm(key, lambda nm: [fn(x.to(dev), dim=dim, norm=nm, **size) for dim in dims])[norm]
    wants = [fn(x, dim=dim, norm=norm, **size) for dim in dims]
    assert len(gots) == len(wants)
    for got, want in zip(gots, wants):
        same(got, want)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("norm", NORMS)
# CI: test_fft_1d[*-3-*] and [*-10-*] keep n's paths (ATen's crop and pad before the kernel; an odd and an even
# c2r length) and n=None the input's own: n=4 (a crop, even c2r length) and n=7 (a pad) repeat them
@pytest.mark.parametrize("n", [None, 3, pytest.param(4, marks=BY_HAND), pytest.param(7, marks=BY_HAND), 10])
@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
def test_fft_1d(name, n, norm, dtype, dev, no_fallback, every_norm):
    x = cx((4, 6, 5), dtype)
    if name in ("rfft", "ihfft"):
        x = x.real.contiguous()
    _same_over_dims(every_norm, ("1d", name, n, dtype), getattr(F, name), x, (-1, 0, 1), norm, dev, n=n)


def test_fft_of_real_input_gives_full_spectrum(dev, no_fallback):
    x = torch.randn(3, 5)
    same(F.fft(x.to(dev)), F.fft(x))
    same(F.ifft(x.to(dev), n=8), F.ifft(x, n=8))


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("norm", NORMS)
# CI: test_fft_2d[*-s2-*] ((5, 8): a crop and a pad, every dims pair) keeps the path of s=(3, 4) (crops) and of
# s=None (the same transforms of the input as it is; ATen resizes to s before the kernel the lowering takes, which
# does not branch on it; the input's own sizes stay in test_fft_1d[*-None-*] and test_fft_nd's dims given alone)
@pytest.mark.parametrize("s", [pytest.param(None, marks=BY_HAND), pytest.param((3, 4), marks=BY_HAND), (5, 8)])
@pytest.mark.parametrize("name", ["fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2"])
def test_fft_2d(name, s, norm, dtype, dev, no_fallback, every_norm):
    x = cx((4, 6, 5), dtype)
    if name in ("rfft2", "ihfft2"):
        x = x.real.contiguous()
    _same_over_dims(every_norm, ("2d", name, s, dtype), getattr(F, name), x, ((-2, -1), (2, 0), (0, 1)), norm, dev,
                    s=s)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("norm", NORMS)
# CI: the 3-, 4- and 5-dim variants keep the n-d paths (one pass, two passes, sizes given); test_fft_1d's and
# test_fft_2d's padded variants keep ((1, 2), (7, 3))'s and ((0,), (6,))'s (one or two dims padded, moved innermost);
# ((3, 1, 0, 2, 4), s) keeps (None, None)'s five dims in two passes, the 1-d and 2-d variants over the last dims its
# transforms in place (no permute), ((2, 0, 1), None) and ((4, 0, 2, 1), None) the input's own sizes
@pytest.mark.parametrize("dim, s", [pytest.param(None, None, marks=BY_HAND), ((2, 0, 1), None),
                                    pytest.param((1, 2), (7, 3), marks=BY_HAND),
                                    pytest.param((0,), (6,), marks=BY_HAND), ((4, 0, 2, 1), None),
                                    ((3, 1, 0, 2, 4), (2, 3, 2, 4, 5))])
@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn"])
def test_fft_nd(name, dim, s, norm, dtype, dev, no_fallback, every_norm):
    x = cx((2, 3, 2, 4, 3), dtype)
    if name in ("rfftn", "ihfftn"):
        x = x.real.contiguous()
    _same_over_dims(every_norm, ("nd", name, dim, s, dtype), getattr(F, name), x, (dim,), norm, dev, s=s)


def test_fft_errors_are_eagers(dev):
    x = cx((4,))
    for fn in (lambda t: F.fft(t, n=0), lambda t: F.fft(t, dim=3), lambda t: F.fft(t, norm="bad"),
               lambda t: F.irfft(t, n=-1)):
        with pytest.raises(Exception) as eager:
            fn(x)
        with pytest.raises(type(eager.value)):
            fn(x.to(dev))


def test_fft_round_trip_through_a_training_style_step(dev, no_fallback):
    """rfft, a complex filter, irfft: one program, eager's numbers."""
    x = torch.randn(8, 32)
    filt = torch.exp(-torch.arange(17.0) / 4) * (1 + 0.5j)
    want = F.irfft(F.rfft(x) * filt, n=32)
    same(F.irfft(F.rfft(x.to(dev)) * filt.to(dev), n=32), want)
    assert math.isclose(float((F.irfft(F.rfft(x.to(dev)), n=32) - x.to(dev)).abs().max()), 0.0, abs_tol=1e-5)


def test_cpu_fallbacks_see_conj_views(dev):
    """A fallback's CPU kernel (pinv: svd, then products of conj views) gets eager's numbers."""
    a = cx((4, 3))
    same(torch.linalg.pinv(a.to(dev)), torch.linalg.pinv(a))


@pytest.mark.parametrize("fn", [
    lambda a, b: torch.vdot(a[0], b[0]), lambda a, b: torch.linalg.vecdot(a, b),
    lambda a, b: torch.var(a), lambda a, b: torch.std(a, dim=1), lambda a, b: torch.var_mean(a, dim=0),
    lambda a, b: torch.sgn(a), lambda a, b: a ** -2, lambda a, b: torch.cosh(a), lambda a, b: torch.asin(b),
    lambda a, b: torch.linspace(1 + 2j, -3j, 7, dtype=a.dtype, device=a.device),
], ids=lambda f: None)
def test_complex_semantics_found_by_the_opinfo_sweep(fn, dev):
    a, b = cx((3, 4), seed=5), cx((3, 4), seed=6)
    got = fn(a.to(dev), b.to(dev))
    want = fn(a, b)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        same(g, w)

