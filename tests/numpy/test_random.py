"""lazycore.numpy.random: a Generator with device state. Its numbers are not NumPy's
stream, so the tests check shapes, dtypes, ranges, distributions (moments within
tolerance) and reproducibility from the seed, and that draws never fall back."""

import math

import numpy
import pytest

import lazycore.numpy as np
from lazycore.observe import metrics

N = 200_000


@pytest.fixture(autouse=True)
def _reset():
    metrics.reset()


def host(x):
    assert isinstance(x, np.ndarray), type(x)
    return numpy.asarray(x)


def test_reproducible_from_the_seed():
    a, b, c = np.random.default_rng(7), np.random.default_rng(7), np.random.default_rng(8)
    first = host(a.random(10))
    assert numpy.array_equal(first, host(b.random(10)))
    assert not numpy.array_equal(first, host(c.random(10)))
    second = host(a.random(10))
    assert not numpy.array_equal(first, second)  # the state advances
    assert numpy.array_equal(second, host(b.random(10)))
    for g in (a, b):  # the same calls keep equal generators equal
        assert host(g.normal(size=5)).shape == (5,) and host(g.integers(0, 100, 5)).shape == (5,)
    assert numpy.array_equal(host(a.uniform(size=3)), host(b.uniform(size=3)))
    y = host(np.random.default_rng(7).random(10))
    assert numpy.array_equal(y, first)  # a fresh generator restarts the stream
    assert np.random.default_rng(a) is a
    seq = np.random.default_rng(numpy.random.SeedSequence(7))
    assert numpy.array_equal(host(seq.random(10)), first)
    assert metrics.fallbacks() == {}


def test_unseeded_generators_differ():
    assert not numpy.array_equal(host(np.random.default_rng().random(4)), host(np.random.default_rng().random(4)))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_random(dtype):
    g = np.random.default_rng(0)
    x = g.random(N, dtype=dtype)
    assert x.dtype == numpy.dtype(dtype) and x.shape == (N,)
    h = host(x)
    assert h.min() >= 0 and h.max() < 1
    assert abs(h.mean() - 0.5) < 0.005 and abs(h.var() - 1 / 12) < 0.002
    assert len(numpy.unique(h)) > N * 0.99
    assert g.random((2, 3)).shape == (2, 3)
    s = g.random()
    assert s.shape == () and 0 <= float(s) < 1
    out = np.zeros((4, 5), dtype=dtype)
    r = g.random(dtype=dtype, out=out)
    assert r is out and 0 < host(out).mean() < 1
    assert metrics.fallbacks() == {}
    with pytest.raises(TypeError):
        g.random(3, dtype=numpy.int64)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_standard_normal(dtype):
    g = np.random.default_rng(1)
    z = g.standard_normal((N // 4, 4), dtype=dtype)
    assert z.dtype == numpy.dtype(dtype) and z.shape == (N // 4, 4)
    h = host(z).astype(numpy.float64)
    assert numpy.isfinite(h).all()
    assert abs(h.mean()) < 0.01 and abs(h.var() - 1) < 0.015
    assert abs(numpy.mean(numpy.abs(h) < 1) - 0.6827) < 0.006  # the shape, not only the moments
    assert abs(numpy.mean(h ** 3)) < 0.03 and abs(numpy.mean(h ** 4) - 3) < 0.1
    assert metrics.fallbacks() == {}


def test_normal():
    g = np.random.default_rng(2)
    x = g.normal(3.0, 2.0, size=N)
    assert x.dtype == numpy.float64 and x.shape == (N,)
    h = host(x)
    assert abs(h.mean() - 3) < 0.03 and abs(h.std() - 2) < 0.02
    loc = numpy.array([-10.0, 0.0, 10.0], dtype=numpy.float32)
    y = g.normal(loc, numpy.array([1.0, 0.1, 5.0]), size=(N // 10, 3))
    assert y.dtype == numpy.float64
    hy = host(y)
    numpy.testing.assert_allclose(hy.mean(0), loc, atol=0.2)
    numpy.testing.assert_allclose(hy.std(0), [1.0, 0.1, 5.0], rtol=0.03)
    assert g.normal(np.asarray(loc)).shape == (3,)  # lazy parameters; shape from them
    assert g.normal().shape == ()
    assert metrics.fallbacks() == {}
    with pytest.raises(ValueError, match="scale < 0"):
        g.normal(0, -1.0)
    with pytest.raises(ValueError):
        g.normal(numpy.zeros(3), 1.0, size=(4,))


def test_uniform():
    g = np.random.default_rng(3)
    x = g.uniform(-2.0, 5.0, N)
    h = host(x)
    assert x.dtype == numpy.float64
    assert h.min() >= -2 and h.max() < 5
    assert abs(h.mean() - 1.5) < 0.03 and abs(h.var() - 49 / 12) < 0.05
    lo, hi = numpy.array([0.0, 10.0]), np.asarray(numpy.array([1.0, 20.0], dtype=numpy.float32))
    y = host(g.uniform(lo, hi, size=(1000, 2)))
    assert (y >= lo).all() and (y < [1.0, 20.0]).all()
    assert g.uniform().shape == ()
    assert metrics.fallbacks() == {}


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8", "uint64", "bool"])
def test_integers_dtypes_and_ranges(dtype):
    g = np.random.default_rng(4)
    dt = numpy.dtype(dtype)
    lo, hi = (0, 2) if dt.kind == "b" else ((0, 7) if dt.kind == "u" else (-3, 4))
    x = g.integers(lo, hi, size=(N // 20, 2), dtype=dtype)
    assert x.dtype == dt and x.shape == (N // 20, 2)
    h = host(x).astype(numpy.int64)
    assert h.min() == lo and h.max() == hi - 1
    counts = numpy.bincount(h.ravel() - lo)
    expected = h.size / (hi - lo)
    assert numpy.all(numpy.abs(counts - expected) < 6 * math.sqrt(expected))
    e = host(g.integers(lo, hi - 1, size=1000, dtype=dtype, endpoint=True)).astype(numpy.int64)
    assert e.min() == lo and e.max() == hi - 1
    assert metrics.fallbacks() == {}


def test_integers_forms_and_errors():
    g = np.random.default_rng(5)
    h = host(g.integers(10, size=1000))
    assert h.dtype == numpy.int64 and h.min() == 0 and h.max() == 9
    info = numpy.iinfo(numpy.int64)
    wide = host(g.integers(info.min, info.max, size=1000, endpoint=True))
    assert (wide < 0).any() and (wide > 0).any()
    assert abs(numpy.mean(wide < 0) - 0.5) < 0.1
    big = host(g.integers(2**63, 2**64, size=100, dtype=numpy.uint64))
    assert (big >= 2**63).all()
    arr = host(g.integers(numpy.array([0, 100]), np.asarray(numpy.array([5, 110])), size=(500, 2)))
    assert arr[:, 0].min() == 0 and arr[:, 0].max() == 4 and arr[:, 1].min() == 100 and arr[:, 1].max() == 109
    assert g.integers(5).shape == ()
    assert metrics.fallbacks() == {}
    with pytest.raises(ValueError, match="low >= high"):
        g.integers(5, 5)
    with pytest.raises(ValueError, match="high <= 0"):
        g.integers(0)
    with pytest.raises(ValueError, match="out of bounds"):
        g.integers(0, 300, dtype=numpy.uint8)
    with pytest.raises(ValueError, match="out of bounds"):
        g.integers(-1, 3, dtype=numpy.uint8)
    with pytest.raises(ValueError, match="low >= high"):
        g.integers(numpy.array([0, 5]), numpy.array([1, 5]))
    with pytest.raises(TypeError):
        g.integers(0, 3, dtype=numpy.float32)
    with pytest.raises(ValueError):
        g.integers(0, 3, size=-1)


def test_choice_with_replacement():
    g = np.random.default_rng(6)
    c = host(g.choice(5, size=N // 4))
    assert c.dtype == numpy.int64 and c.min() == 0 and c.max() == 4
    numpy.testing.assert_allclose(numpy.bincount(c) / c.size, 0.2, atol=0.01)
    p = [0.1, 0.0, 0.3, 0.6]
    w = host(g.choice(4, size=(N // 8, 2), p=p))
    assert w.shape == (N // 8, 2)
    numpy.testing.assert_allclose(numpy.bincount(w.ravel(), minlength=4) / w.size, p, atol=0.01)
    pop = numpy.array([[1.5, 2.5], [3.5, 4.5], [5.5, 6.5]])
    rows = host(g.choice(np.asarray(pop), size=300))
    assert rows.shape == (300, 2)
    assert {tuple(r) for r in rows} == {tuple(r) for r in pop}
    assert metrics.fallbacks() == {}
    with pytest.raises(ValueError, match="sum to 1"):
        g.choice(3, p=[0.5, 0.2, 0.2])
    with pytest.raises(ValueError, match="same size"):
        g.choice(3, p=[0.5, 0.5])


def test_other_methods_run_numpy_seeded_from_the_stream():
    a, b = np.random.default_rng(9), np.random.default_rng(9)
    pa, pb = host(a.permutation(10)), host(b.permutation(10))
    assert numpy.array_equal(pa, pb) and sorted(pa) == list(range(10))
    u = host(a.choice(10, size=10, replace=False))
    assert sorted(u) == list(range(10))
    assert {"numpy.random.Generator.permutation", "numpy.random.Generator.choice"} <= set(metrics.fallbacks())
    assert host(a.exponential(size=4)).shape == (4,)
    with pytest.raises(AttributeError):
        a.no_such_method


def test_legacy_module_functions_fall_back():
    np.random.seed(0)
    x = np.random.rand(3)
    assert isinstance(x, np.ndarray) and x.shape == (3,)
    assert "numpy.random.rand" in metrics.fallbacks()
    assert np.random.SeedSequence is numpy.random.SeedSequence
