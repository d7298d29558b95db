"""NumPy users' own scripts, written as NumPy tutorials write them, run unchanged on
``lazycore.numpy`` (issue 39's hunt): NumPy's values, with no fallback. Each
script is a function of the module ``np``; the reference is the same function
given NumPy."""

import numpy
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import lazycore.numpy as lnp
from lazycore.observe import metrics


def heat(np):
    n = 16
    u = np.zeros((n, n))
    u[n // 2 - 2:n // 2 + 2, n // 2 - 2:n // 2 + 2] = 100.0
    for _ in range(20):
        un = u.copy()
        u[1:-1, 1:-1] = un[1:-1, 1:-1] + 0.1 * (un[2:, 1:-1] - 4 * un[1:-1, 1:-1] + un[:-2, 1:-1] + un[1:-1, 2:] + un[1:-1, :-2])
        u[0, :] = u[-1, :] = 0
        u[:, 0] = 0
        u[:, -1] = 0
    return u


def life(np):
    z = np.asarray((numpy.random.default_rng(4).random((16, 16)) < 0.3).astype(numpy.int64))
    for _ in range(8):
        n = sum(np.roll(np.roll(z, dy, 0), dx, 1) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if (dy, dx) != (0, 0))
        z = ((n == 3) | ((z == 1) & (n == 2))).astype(int)
    return z


def blur(np):
    img = np.asarray(numpy.random.default_rng(5).random((12, 10)).astype(numpy.float32))
    k = np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]], dtype=np.float32) / 16
    p = np.pad(img, 1, mode="edge")
    by_shifts = np.zeros_like(img)
    for i in range(3):
        for j in range(3):
            by_shifts += k[i, j] * p[i:i + img.shape[0], j:j + img.shape[1]]
    by_windows = np.einsum("ijkl,kl->ij", sliding_window_view(np.pad(img, 1, mode="reflect"), (3, 3)), k)
    xs, ys = np.meshgrid(np.linspace(-1, 1, 10), np.linspace(-1, 1, 12))
    return by_shifts, by_windows, np.where(xs ** 2 + ys ** 2 < 0.5, by_windows, 0)


def logistic(np):
    r = numpy.random.default_rng(3)
    x = np.asarray(r.normal(size=(64, 2)))
    y = (x[:, 0] + x[:, 1] > 0).astype(np.float64)
    w, b = np.zeros(2), 0.0
    for _ in range(20):
        p = 1 / (1 + np.exp(-(x @ w + b)))
        w = w - 0.5 * x.T @ (p - y) / len(y)
        b = b - 0.5 * np.sum(p - y) / len(y)
    return w, b, -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))


@pytest.mark.parametrize("script", [heat, life, blur, logistic], ids=lambda f: f.__name__)
def test_script_matches_numpy_without_fallbacks(script, clean_runtime):
    want = script(numpy)
    got = script(lnp)
    for g, w in zip(*(r if isinstance(r, tuple) else (r,) for r in (got, want))):
        g, w = numpy.asarray(g), numpy.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert numpy.allclose(g, w, rtol=1e-6 if w.dtype == numpy.float32 else 1e-12, atol=1e-6)
    assert metrics.fallbacks() == {}
