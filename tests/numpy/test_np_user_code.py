"""NumPy users' own code run unchanged with ``import lazycore.numpy as np`` (issue 39's
hunt): calls that ran NumPy on the host (counted fallbacks) for work that needs no host,
now lazy with NumPy's values and dtypes."""

import numpy
import pytest

import lazycore.numpy as np
from lazycore.observe import metrics
from _bits import BY_HAND  # (tests/ is on the path)
from npcheck import same


def _lazy(x):
    return np.asarray(x) if isinstance(x, numpy.ndarray) else x


# --- count_nonzero: a Monte Carlo estimate's count -------------------------------------------------


@pytest.mark.parametrize("kw", [{}, {"axis": 0}, {"axis": -1, "keepdims": True}, {"axis": (0, 1), "keepdims": True}])
@pytest.mark.parametrize("kind", ["float64", "bool", "complex128", "int8"])
def test_count_nonzero_is_lazy(kind, kw, clean_runtime):
    x = numpy.array([[0, 1.5, numpy.nan], [0, 0, -2]])
    if kind == "complex128":
        x = x.astype(complex)
        x[0, 0] = 1j
    elif kind == "bool":
        x = x > 0
    elif kind == "int8":
        x = numpy.nan_to_num(x).astype(numpy.int8)
    got, want = np.count_nonzero(np.asarray(x), **kw), numpy.asarray(numpy.count_nonzero(x, **kw))
    assert numpy.asarray(got).dtype == want.dtype and numpy.array_equal(numpy.asarray(got), want)
    assert metrics.fallbacks() == {}


# --- einsum: diagonals and the sublist form ---------------------------------------------------------

_RNG = numpy.random.default_rng(0)
_M, _T, _B = _RNG.normal(size=(4, 4)), _RNG.normal(size=(3, 3, 3)), _RNG.normal(size=(2, 3, 3))
_A, _W = _RNG.normal(size=(3, 4, 5)), _RNG.normal(size=(5, 6))


@pytest.mark.parametrize("args", [
    ("ii", _M), ("ii->i", _M), ("ij,jj->i", _M, _M), ("iii->i", _T), ("iij->j", _T), ("bii->b", _B),
    ("...ii->...i", _B), ("ii,i->", _M, _M[0]),
    (_A, [0, 1, 2], _W, [2, 3], [0, 3]), (_A, [0, 1, 2], _W, [2, 3]), (_M, [0, 0]), (_B, [Ellipsis, 1, 1], [Ellipsis, 1]),
], ids=lambda a: a if isinstance(a, str) else None)
def test_einsum_diagonals_and_sublists_are_lazy(args, clean_runtime):
    same(np.einsum(*map(_lazy, args)), numpy.einsum(*args), rtol=1e-12, atol=1e-12)
    assert metrics.fallbacks() == {}


def test_einsum_diagonal_is_a_writeable_view_as_numpys(clean_runtime):
    host = _M.copy()
    lazy = np.asarray(host)
    numpy.einsum("ii->i", host)[1] = 100.0
    np.einsum("ii->i", lazy)[1] = 100.0
    same(lazy, host)
    with pytest.raises(ValueError, match="collapsing index 'i' don't match"):
        np.einsum("ii", np.asarray(_A[0]))  # NumPy's own error (NumPy runs it)


# --- NumPy masks on lazy arrays: their coordinates, taken at the call ----------------------------------

_X = numpy.random.default_rng(1).normal(size=(5, 4))
_KEYS = [_X > 0, (_X > 0)[:, 0], (slice(None), (_X > 0)[0]), ((_X[:, 0] > 0), slice(1, 3)),
         (_X[:, 0] > 0, numpy.array([2])), (Ellipsis, _X[0] > 0), (None, _X > 0), (slice(1, 4), (_X > 0)[1]),
         [True, False, True, True, False]]


@pytest.mark.parametrize("k", range(len(_KEYS)))
def test_numpy_mask_reads_and_writes_are_a_gather_and_a_scatter(k, clean_runtime):
    key = _KEYS[k]
    host, lazy = _X.copy(), np.asarray(_X)
    same(lazy[key], host[key])
    values = numpy.arange(host[key].size, dtype=float).reshape(host[key].shape) * 1.5
    host[key] = values
    lazy[key] = np.asarray(values)
    same(lazy, host)
    host[key] *= 3  # a read, then a write of one value per selected element
    lazy[key] *= 3
    same(lazy, host)
    assert metrics.fallbacks() == {}


def test_masks_keep_numpys_errors_and_lazy_and_0d_masks_are_read(clean_runtime):
    lazy = np.asarray(_X)
    for bad in (numpy.ones(3, bool), numpy.ones((5, 5), bool)):
        with pytest.raises(IndexError) as want:
            _X[bad]
        with pytest.raises(IndexError) as got:
            lazy[bad]
        assert str(got.value) == str(want.value)
    assert metrics.fallbacks() == {}
    same(lazy[np.asarray(_X > 0)], _X[_X > 0])
    same(lazy[True], _X[True])
    same(lazy[np.asarray(False)], _X[False])
    assert metrics.fallbacks() == {}


# --- a NumPy array as a ufunc's out=: code written for NumPy (scikit-learn's LDA eigen solver) ------------


def test_numpy_array_as_out_is_written_as_numpy_writes_it(clean_runtime):
    total = numpy.ones((2, 3))
    before = total
    total += np.asarray(numpy.arange(6.0).reshape(2, 3))  # host += lazy: was a TypeError
    assert total is before and type(total) is numpy.ndarray
    numpy.testing.assert_array_equal(total, 1 + numpy.arange(6.0).reshape(2, 3))
    assert numpy.multiply(np.asarray([1.0, 2.0, 3.0]), 3, out=total[0]) is not None
    numpy.testing.assert_array_equal(before[0], [3.0, 6.0, 9.0])
    q, r = numpy.zeros(3), numpy.zeros(3)
    got = numpy.divmod(np.asarray([7.0, 8.0, 9.0]), 2, out=(q, r))
    assert got[0] is q and got[1] is r
    numpy.testing.assert_array_equal(q, [3.0, 4.0, 4.0]), numpy.testing.assert_array_equal(r, [1.0, 0.0, 1.0])
    assert set(metrics.fallbacks()) == {"numpy.add", "numpy.multiply", "numpy.divmod"}  # NumPy computes, counted
    with pytest.raises(numpy._core._exceptions._UFuncOutputCastingError):
        numpy.add(np.asarray([1.5]), 1, out=numpy.zeros(1, dtype=numpy.int64))  # NumPy's own error


# --- shape questions: metadata, not a download --------------------------------------------------------


@pytest.mark.parametrize("fn,args", [("shape", ()), ("ndim", ()), ("size", ()), ("size", (1,)), ("size", (-1,)),
                                     ("size", ((0, 2),))])
def test_shape_ndim_size_read_metadata(fn, args, clean_runtime):
    x = numpy.ones((2, 3, 4))
    lazy = np.asarray(x) * 2  # pending: answering from its value would be a barrier
    assert getattr(np, fn)(lazy, *args) == getattr(numpy, fn)(x, *args)
    assert getattr(numpy, fn)(lazy, *args) == getattr(numpy, fn)(x, *args)
    assert getattr(np, fn)([[1, 2, 3]]) == getattr(numpy, fn)([[1, 2, 3]])
    assert metrics.fallbacks() == {}
    assert metrics.counters()["executions"] == 0 and metrics.counters()["transfers_to_host"] == 0
    with pytest.raises(numpy.exceptions.AxisError, match="axis 3 is out of bounds for array of dimension 3"):
        np.size(lazy, 3)


# --- isclose and friends: NumPy's formulas, lazily (they read both arrays on the host) -------------------

_P = numpy.random.default_rng(3).normal(size=(3, 4))
_Q = _P + numpy.random.default_rng(4).normal(size=(3, 4)) * 1e-6
_P[0, 0] = _Q[0, 0] = numpy.nan
_P[1, 1] = _Q[1, 1] = numpy.inf
_P[2, 2], _Q[2, 2] = -numpy.inf, numpy.inf
_I = numpy.arange(12).reshape(3, 4)


# CI: (_P, _Q) takes (_P, _Q, 1e-3)'s path (rtol is only the value of a constant)
@pytest.mark.parametrize("args", [(_P, _Q), pytest.param((_P, _Q, 1e-3), marks=BY_HAND), (_P, _Q, 1e-5, 1e-8, True),
                                  (_I, _I + 1, 0, 1), (_I, 3),
                                  (_P.astype(numpy.float32), _Q), (_P[0], _Q), (2.0, _Q), (_P[0, 1], _Q[0, 1]),
                                  (_P.astype(complex), _Q)], ids=str)
def test_isclose_and_allclose_are_numpys(args, clean_runtime):
    lazy = [np.asarray(x) if isinstance(x, numpy.ndarray) else x for x in args]
    got, want = np.isclose(*lazy), numpy.isclose(*args)
    assert numpy.asarray(got).dtype == bool and numpy.array_equal(numpy.asarray(got), want)
    assert numpy.ndim(want) or type(got).__name__ == "scalar"
    assert np.allclose(*lazy) is numpy.allclose(*args)
    assert numpy.allclose(*lazy) is numpy.allclose(*args)
    assert metrics.fallbacks() == {}


@pytest.mark.parametrize("x,y", [(_P, _P), (_P, _Q), (_I, _I), (_I, _I[:2]), (_I[0], _I), (_P[0], numpy.stack([_P[0]] * 2))])
def test_array_equal_and_equiv_are_numpys(x, y, clean_runtime):
    for equal_nan in (False, True):
        assert np.array_equal(np.asarray(x), np.asarray(y), equal_nan=equal_nan) is numpy.array_equal(x, y, equal_nan=equal_nan)
    assert np.array_equiv(np.asarray(x), np.asarray(y)) is numpy.array_equiv(x, y)
    assert metrics.fallbacks() == {}


# --- tril, triu, diag: selects on the device -------------------------------------------------------------

_R = numpy.random.default_rng(5)


@pytest.mark.parametrize("x", [_R.normal(size=(4, 5)), _R.normal(size=(2, 3, 3)), numpy.arange(4), _R.normal(size=(5, 2)) > 0,
                               numpy.arange(6, dtype=numpy.int8).reshape(2, 3), numpy.zeros((0, 3))],
                         ids=["2d", "batched", "1d", "bool", "int8", "empty"])
# CI: k = 0, 1 and -7 (below every row) take -1's and 3's path (k is only the value of the mask's constant)
@pytest.mark.parametrize("k", [0, 1, pytest.param(-1, marks=BY_HAND), pytest.param(3, marks=BY_HAND), -7])
def test_tril_triu_are_lazy(x, k, clean_runtime):
    for fn in ("tril", "triu"):
        same(getattr(np, fn)(np.asarray(x), k), getattr(numpy, fn)(x, k))
        same(getattr(numpy, fn)(np.asarray(x), k=k), getattr(numpy, fn)(x, k))
    assert metrics.fallbacks() == {}


@pytest.mark.parametrize("v", [numpy.arange(1, 4.0), numpy.array([True, False]), numpy.arange(3, dtype=numpy.int32),
                               _R.normal(size=(3, 4)), numpy.zeros(0)], ids=["f64", "bool", "i32", "2d", "empty"])
# CI: k = 0 and 5 take 1's branches (k >= 0: the 1-d input spread along rows, the 2-d diagonal's start at k; 5: none)
@pytest.mark.parametrize("k", [0, pytest.param(1, marks=BY_HAND), -2, 5])
def test_diag_is_lazy(v, k, clean_runtime):
    same(np.diag(np.asarray(v), k), numpy.diag(v, k))
    assert metrics.fallbacks() == {}
    with pytest.raises(ValueError, match="Input must be 1- or 2-d."):
        np.diag(np.asarray(numpy.zeros((2, 2, 2))))


# --- nextafter: scikit-learn's weighted percentile (d2_pinball_score, ...) -------------------------------

_EDGES = [0.0, -0.0, 1.0, -1.0, 1e-40, -1e-40, 5e-324, numpy.inf, -numpy.inf, numpy.nan, 3.5, -2.25, 1e38, 3.4e38, 1.2e-38]


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_nextafter_is_numpys_bit_for_bit(dtype, clean_runtime):
    with numpy.errstate(all="ignore"):
        x, y = numpy.meshgrid(*[numpy.array(_EDGES, dtype=dtype)] * 2)  # subnormals, zeros' signs, infinities, NaN
        want = numpy.nextafter(x, y)
    got = numpy.asarray(np.nextafter(np.asarray(x), np.asarray(y)))
    bits = numpy.dtype(f"u{numpy.dtype(dtype).itemsize}")
    assert got.dtype == want.dtype
    assert numpy.array_equal(got.view(bits), want.view(bits)) or numpy.array_equal(
        got.view(bits)[~numpy.isnan(want)], want.view(bits)[~numpy.isnan(want)]) and numpy.isnan(got[numpy.isnan(want)]).all()
    same(np.nextafter(np.asarray([1, 2]), 3), numpy.nextafter(numpy.array([1, 2]), 3))  # integers: float64's loop
    assert metrics.fallbacks() == {}


# --- float scans: NumPy's order (scikit-learn's roc_auc_score with sample weights raised) -----------------


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
# CI: ((5, 7), 1) takes ((3, 4, 6), 1)'s path (a scan along a dim other than 0: permuted there and back) and
# ((200,), None) takes ((3, 4), None)'s (axis None: flattened, scanned along dim 0)
@pytest.mark.parametrize("shape,axis", [((200,), None), ((5, 7), 0), ((5, 7), 1),
                                        pytest.param((3, 4, 6), 1, marks=BY_HAND),
                                        pytest.param((3, 4), None, marks=BY_HAND), ((0, 3), 0)])
def test_float_scans_are_numpys_bit_for_bit(dtype, shape, axis, clean_runtime):
    rng = numpy.random.default_rng(6)
    x = (rng.uniform(size=shape) * (rng.uniform(size=shape) > 0.5)).astype(dtype)  # zeros among the terms
    if x.size > 2:
        x.flat[0], x.flat[2] = -0.0, numpy.nan
    bits = f"u{numpy.dtype(dtype).itemsize}"
    for fn in ("cumsum", "cumprod", "nancumsum", "nancumprod"):
        want = getattr(numpy, fn)(x, axis=axis)
        got = numpy.asarray(getattr(np, fn)(np.asarray(x), axis=axis))
        assert got.dtype == want.dtype and got.shape == want.shape
        assert numpy.array_equal(got.view(bits), want.view(bits)), fn
    assert metrics.fallbacks() == {}


def test_a_cumulative_sum_of_non_negative_terms_never_decreases(clean_runtime):
    rng = numpy.random.default_rng(7)
    w = rng.uniform(size=5000) * (rng.uniform(size=5000) > 0.5)
    got = numpy.asarray(np.cumsum(np.asarray(w)))
    assert (numpy.diff(got) >= 0).all()
    numpy.testing.assert_array_equal(got, numpy.cumsum(w))


def test_a_float_scan_exports_with_a_symbolic_length():
    import lazycore

    exported = lazycore.export(lambda x: numpy.cumsum(x), np.zeros(4, numpy.float32), dynamic={0: ("n",)})
    for n in (1, 3, 9, 40):
        x = numpy.random.default_rng(n).normal(size=n).astype(numpy.float32)
        (got,) = exported.call(x)
        numpy.testing.assert_array_equal(got, numpy.cumsum(x))


# --- nan_to_num ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
# CI: {} (nan=0.0) takes {"nan": -1.0}'s and {"nan": 3}'s path (the fill is only the value of a constant)
@pytest.mark.parametrize("kw", [{}, pytest.param({"nan": -1.0}, marks=BY_HAND), {"posinf": 9.0, "neginf": -9.0},
                                pytest.param({"nan": 3}, marks=BY_HAND)], ids=str)
def test_nan_to_num_is_lazy(dtype, kw, clean_runtime):
    x = numpy.array([1.0, numpy.nan, numpy.inf, -numpy.inf, -2.5, 0.0], dtype=dtype)
    same(np.nan_to_num(np.asarray(x), **kw), numpy.nan_to_num(x, **kw))
    lazy, host = np.asarray(x), x.copy()
    assert np.nan_to_num(lazy, copy=False, **kw) is lazy  # in place, as NumPy's
    numpy.nan_to_num(host, copy=False, **kw)
    same(lazy, host)
    for y in (numpy.arange(3), numpy.array(numpy.nan)):
        got, want = np.nan_to_num(np.asarray(y)), numpy.nan_to_num(y)
        assert numpy.asarray(got).dtype == numpy.asarray(want).dtype
        numpy.testing.assert_array_equal(numpy.asarray(got), want)
    assert metrics.fallbacks() == {}


# --- logaddexp, logaddexp2: NumPy's formula (scipy.special.softplus ran them on the host) ------------------


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("fn", ["logaddexp", "logaddexp2"])
def test_logaddexp_is_numpys_formula(fn, dtype, clean_runtime):
    rng = numpy.random.default_rng(8)
    edges = [0, -0.0, numpy.inf, -numpy.inf, numpy.nan, 700, -700, 1e-20]
    x, y = numpy.meshgrid(*(numpy.concatenate([rng.normal(scale=5, size=40), edges]).astype(dtype),) * 2)
    with numpy.errstate(all="ignore"):
        want = getattr(numpy, fn)(x, y)
    got = numpy.asarray(getattr(np, fn)(np.asarray(x), np.asarray(y)))
    assert got.dtype == want.dtype
    finite = numpy.isfinite(want)
    numpy.testing.assert_array_equal(got[~finite], want[~finite])  # infinities of one sign, NaN
    # within 2 ulps of the operands' scale (XLA's log1p and exp are not libm's)
    finite_operands = numpy.nan_to_num(numpy.maximum(numpy.abs(x), numpy.abs(y)), posinf=0.0)
    scale = numpy.maximum(numpy.abs(want), finite_operands)[finite]
    err = numpy.abs(got[finite].astype(float) - want[finite]) / numpy.spacing(scale).astype(float)
    assert err.max() <= 2, err.max()
    assert metrics.fallbacks() == {}
