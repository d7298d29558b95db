"""What Array API consumers (scikit-learn, SciPy, array-api-extra) tripped on: unsorted
unique values, dtype questions and constants counted as fallbacks, a missing lazy
diagonal, ufunc methods and ndarray methods NumPy documents but lazycore lacked."""

import inspect
import pickle

import numpy
import pytest

import lazycore.numpy as np
from lazycore.frontends.numpy.array import ndarray
from lazycore.observe import metrics
from npcheck import same

# NumPy 2.4's unique_values hashes: this comes back unsorted from NumPy itself
UNSORTED = numpy.array([5, 3, 3, 1, 9, 2, 2, 7] * 3 + [100, 50])


def _no_fallbacks():
    assert metrics.fallbacks() == {}


# --- unique ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int64", "int8", "uint16", "float32", "float64", "bool"])
def test_unique_functions_are_sorted_and_lazy(dtype, clean_runtime):
    x = (UNSORTED % 7 == 0) if dtype == "bool" else UNSORTED.astype(dtype)
    x = numpy.stack([x, x[::-1]])  # 2-d: inverse_indices keep the input's shape
    lx = np.asarray(x)
    v, first, inv, counts = numpy.unique(x, return_index=True, return_inverse=True, return_counts=True)
    same(np.unique_values(lx), v)
    got = np.unique_counts(lx)
    same(got.values, v), same(got.counts, counts)
    got = np.unique_inverse(lx)
    same(got.values, v), same(got.inverse_indices, inv)
    got = np.unique_all(lx)
    same(got.values, v), same(got.indices, first), same(got.inverse_indices, inv), same(got.counts, counts)
    assert type(got).__name__ == "UniqueAllResult"
    same(numpy.unique_values(lx), v)  # NumPy's function on a lazy array: the same, lazily
    _no_fallbacks()


def test_numpy_own_unique_values_is_unsorted_here():
    """The reason for the test above: the order is not NumPy's to promise."""
    assert not numpy.all(numpy.diff(numpy.unique_values(UNSORTED)) > 0)


def test_unique_keeps_each_nan_but_np_unique_joins_them(clean_runtime):
    x = numpy.array([[3.0, numpy.nan], [numpy.nan, 1.0], [3.0, -0.0]])
    lx = np.asarray(x)
    v, c = numpy.unique(x, return_counts=True, equal_nan=False)
    got = np.unique_counts(lx)
    same(got.values, v), same(got.counts, c)
    for eq in (True, False):
        want = numpy.unique(x, return_index=True, return_inverse=True, return_counts=True, equal_nan=eq)
        got = np.unique(lx, return_index=True, return_inverse=True, return_counts=True, equal_nan=eq)
        for g, w in zip(got, want):
            same(g, w)
    same(np.unique(lx), numpy.unique(x))
    _no_fallbacks()


def test_unique_of_empty_and_0d_arrays(clean_runtime):
    for x in (numpy.zeros((0, 3)), numpy.array(2.5)):
        got, want = np.unique_all(np.asarray(x)), numpy.unique_all(x)
        for g, w in zip(got, want):
            same(g, w)
    _no_fallbacks()


def test_unique_rows_and_complex_run_numpy_counted(clean_runtime):
    m = numpy.array([[1, 2], [0, 1], [1, 2]])
    same(np.unique(np.asarray(m), axis=0), numpy.unique(m, axis=0))
    c = numpy.array([1 + 2j, 1 - 1j, 1 + 2j])
    same(np.unique_values(np.asarray(c)), numpy.unique(c))
    assert set(metrics.fallbacks()) == {"numpy.unique", "numpy.unique_values"}


# --- type questions and constants ----------------------------------------------------------------------


def test_dtype_questions_are_never_fallbacks(clean_runtime):
    f32 = np.asarray(numpy.ones(3, numpy.float32))
    i8 = np.asarray(numpy.ones((), numpy.int8))
    assert np.isdtype(f32.dtype, "real floating") and not np.isdtype(i8.dtype, ("bool", "real floating"))
    assert np.issubdtype(f32.dtype, np.floating)
    for args in ((f32, 1.0), (f32, i8), (i8, 1), (f32, numpy.float64), (i8, numpy.int16(3)), (i8, 300)):
        want = numpy.result_type(*(numpy.asarray(a) if isinstance(a, ndarray) else a for a in args))
        assert np.result_type(*args) == numpy.result_type(*args) == want
    assert np.can_cast(f32, numpy.float64) == numpy.can_cast(f32, numpy.float64) is True
    assert numpy.can_cast(f32, numpy.int32, "same_kind") is False
    assert numpy.common_type(f32, i8) is numpy.common_type(numpy.ones(3, numpy.float32), numpy.ones((), numpy.int8))
    assert np.finfo(f32).eps == numpy.finfo(numpy.float32).eps and np.iinfo(i8).max == 127
    assert np.promote_types(f32.dtype, i8.dtype) == numpy.float32
    _no_fallbacks()


def test_fft_frequencies_and_shifts_are_not_fallbacks(clean_runtime):
    same(np.fft.fftfreq(9, 0.25), numpy.fft.fftfreq(9, 0.25))
    same(np.fft.rfftfreq(8, 2.0), numpy.fft.rfftfreq(8, 2.0))
    d = numpy.float32(0.5)
    same(np.fft.fftfreq(6, np.asarray(d)), numpy.fft.fftfreq(6, d))  # a lazy spacing: scaled lazily
    same(np.fft.rfftfreq(7, np.asarray(d)), numpy.fft.rfftfreq(7, d))
    x = numpy.arange(30.0).reshape(5, 6)
    for axes in (None, 0, (1,), (0, 1)):
        same(np.fft.fftshift(np.asarray(x), axes), numpy.fft.fftshift(x, axes))
        same(np.fft.ifftshift(np.asarray(x), axes=axes), numpy.fft.ifftshift(x, axes=axes))
    same(numpy.fft.fftshift(np.asarray(x)), numpy.fft.fftshift(x))
    assert inspect.signature(np.fft.fftshift) == inspect.signature(numpy.fft.fftshift)
    _no_fallbacks()


# --- diagonal ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [-4, -1, 0, 2, 6])
@pytest.mark.parametrize("axes", [(0, 1), (1, 2), (2, 0), (-1, -2)])
def test_diagonal_is_numpys_read_only_view(offset, axes, clean_runtime):
    x = numpy.arange(60.0).reshape(3, 4, 5)
    a = np.asarray(x)
    same(np.diagonal(a, offset, *axes), numpy.diagonal(x, offset, *axes))
    same(a.diagonal(offset, *axes), x.diagonal(offset, *axes))
    same(numpy.diagonal(a, offset, *axes), numpy.diagonal(x, offset, *axes))
    _no_fallbacks()


def test_diagonal_sees_later_writes_and_refuses_its_own(clean_runtime):
    x = numpy.arange(12.0).reshape(3, 4)
    a = np.asarray(x)
    d, dx = a.diagonal(1), x.diagonal(1)
    a[1, 2] = -5.0
    x[1, 2] = -5.0
    same(d, dx)
    with pytest.raises(ValueError, match="read-only"):
        d[0] = 1.0
    assert not d.flags.writeable and not dx.flags.writeable
    with pytest.raises(ValueError):
        a.diagonal(0, 1, 1)
    with pytest.raises(numpy.exceptions.AxisError):
        a.diagonal(0, 0, 2)


def test_linalg_diagonal_is_lazy(clean_runtime):
    x = numpy.arange(24.0).reshape(2, 3, 4)
    same(np.linalg.diagonal(np.asarray(x)), numpy.linalg.diagonal(x))
    same(np.linalg.diagonal(np.asarray(x), offset=-1), numpy.linalg.diagonal(x, offset=-1))
    same(numpy.linalg.diagonal(np.asarray(x), offset=2), numpy.linalg.diagonal(x, offset=2))
    _no_fallbacks()


# --- ufunc methods -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["add", "multiply", "maximum", "minimum", "fmax", "logical_or", "bitwise_xor"])
@pytest.mark.parametrize("dtype", ["int8", "uint16", "int64", "float32", "bool"])
def test_accumulate_is_lazy_with_numpys_dtype(name, dtype, clean_runtime):
    x = (numpy.arange(24).reshape(4, 6) % 5 + 1).astype(dtype)
    uf = getattr(numpy, name)
    try:
        want = uf.accumulate(x, axis=1)
    except TypeError:
        with pytest.raises(TypeError):
            getattr(np, name).accumulate(np.asarray(x), axis=1)
        return
    same(getattr(np, name).accumulate(np.asarray(x), axis=1), want)
    same(uf.accumulate(np.asarray(x)), uf.accumulate(x))
    _no_fallbacks()


def test_accumulate_of_the_others_runs_numpy_counted(clean_runtime):
    x = numpy.arange(1.0, 7.0)
    same(np.subtract.accumulate(np.asarray(x)), numpy.subtract.accumulate(x))
    same(np.add.accumulate(np.asarray(x), dtype=numpy.float32), numpy.add.accumulate(x, dtype=numpy.float32))
    assert set(metrics.fallbacks()) == {"numpy.subtract.accumulate"}


def test_outer_is_lazy(clean_runtime):
    a, b = numpy.arange(3.0), numpy.arange(8).reshape(2, 4)
    for name in ("add", "subtract", "multiply", "greater", "power", "arctan2"):
        same(getattr(np, name).outer(np.asarray(a), np.asarray(b)), getattr(numpy, name).outer(a, b))
        same(getattr(numpy, name).outer(np.asarray(a), b), getattr(numpy, name).outer(a, b))
    same(np.multiply.outer(np.asarray(a), b, dtype=numpy.float32), numpy.multiply.outer(a, b, dtype=numpy.float32))
    _no_fallbacks()


def test_at_and_reduceat_run_numpy_counted_and_write_back(clean_runtime):
    a, idx = numpy.zeros(5), numpy.array([0, 0, 3, 4, 4, 4])
    la = np.asarray(a)
    assert np.add.at(la, np.asarray(idx), 1.5) is None
    numpy.add.at(a, idx, 1.5)
    same(la, a)
    numpy.maximum.at(la, [1, 2], numpy.array([7.0, -1.0]))
    numpy.maximum.at(a, [1, 2], numpy.array([7.0, -1.0]))
    same(la, a)
    np.negative.at(la, [0])
    numpy.negative.at(a, [0])
    same(la, a)
    x = numpy.arange(10.0)
    same(np.add.reduceat(np.asarray(x), [0, 4, 5, 9]), numpy.add.reduceat(x, [0, 4, 5, 9]))
    assert set(metrics.fallbacks()) == {"numpy.add.at", "numpy.maximum.at", "numpy.negative.at",
                                        "numpy.add.reduceat"}


def test_lazy_ufuncs_have_numpys_ufunc_methods_and_attributes():
    for name in ("add", "subtract", "logical_and", "exp"):
        ours, theirs = getattr(np, name), getattr(numpy, name)
        for attr in ("reduce", "accumulate", "outer", "at", "reduceat", "resolve_dtypes"):
            assert callable(getattr(ours, attr)), (name, attr)
        for attr in ("nin", "nout", "nargs", "identity", "ntypes", "types", "signature"):
            assert getattr(ours, attr) == getattr(theirs, attr), (name, attr)


# --- searchsorted and round ---------------------------------------------------------------------------


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_is_lazy_in_sort_order(side, clean_runtime):
    a = numpy.array([-1.0, 0.0, 0.0, 2.5, numpy.inf, numpy.nan, numpy.nan])
    v = numpy.array([[0.0, numpy.nan], [-numpy.inf, 3.0], [numpy.inf, 2.5]])
    same(np.searchsorted(np.asarray(a), np.asarray(v), side), numpy.searchsorted(a, v, side))
    same(np.asarray(a).searchsorted(0.0, side=side), numpy.searchsorted(a, 0.0, side=side))
    ints = numpy.array([9, 1, 4, 4, 7])
    order = numpy.argsort(ints, kind="stable")
    same(np.searchsorted(np.asarray(ints), np.asarray([4, 0, 10, 7]), side, sorter=np.asarray(order)),
         numpy.searchsorted(ints, [4, 0, 10, 7], side, sorter=order))
    same(numpy.searchsorted(np.asarray(ints[order]), 5.5, side), numpy.searchsorted(ints[order], 5.5, side))
    _no_fallbacks()


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("decimals", [-1, 0, 1, 3])
def test_round_is_lazy(dtype, decimals, clean_runtime):
    x = (numpy.random.default_rng(0).normal(size=20) * 100).astype(dtype)
    x[:4] = [0.5, 1.5, -2.5, 25]
    # float64 to decimals > 0 ends in a division by 10**decimals, which XLA makes a
    # multiplication by the reciprocal: one unit in the last place from NumPy's at times
    # (float32 divides in float64: exact)
    ulp = 2.0**-52 if dtype == "float64" and decimals > 0 else 0
    for got in (np.round(np.asarray(x), decimals), np.asarray(x).round(decimals),
                numpy.round(np.asarray(x), decimals), np.around(np.asarray(x), decimals)):
        same(got, numpy.round(x, decimals), rtol=ulp, atol=0)
    if dtype == "int32" and decimals < 0:
        assert set(metrics.fallbacks()) == {"numpy.round"}
    else:
        _no_fallbacks()


# --- the rest of numpy.ndarray -----------------------------------------------------------------------

# Memory interfaces NumPy reads on its own: a lazy array has no host memory of its own to
# point at (NumPy would prefer __array_interface__ to __array__ and read memory nobody
# keeps; ``data`` and ``ctypes``, asked for by the user, are a host copy: a barrier);
# subclass hooks NumPy calls on its own subclasses only.
NOT_LAZY = {"__array_interface__", "__array_struct__", "__array_finalize__", "__array_wrap__"}


def test_every_documented_ndarray_method_exists():
    missing = {n for n in dir(numpy.ndarray) if not hasattr(ndarray, n)}
    assert missing == NOT_LAZY


def test_methods_that_read_or_compute(clean_runtime):
    x = numpy.array([[3.0, -1.0, 0.0], [2.5, 0.0, 7.0]])
    a = np.asarray(x)
    same(a.conj(), x.conj()), same(a.conjugate(), x.conjugate())
    for got, want in zip(divmod(a, 2.0), divmod(x, 2.0)):
        same(got, want)
    for got, want in zip(divmod(5.0, a[:, :1]), divmod(5.0, x[:, :1])):
        same(got, want)
    assert (2.5 in a) and (4.0 not in a)
    assert a.tobytes() == x.tobytes() and pickle.loads(a.dumps()).tolist() == x.tolist()
    for got, want in zip(a.nonzero(), x.nonzero()):
        same(got, want)
    same(a.compress([True, False], axis=0), x.compress([True, False], axis=0))
    same(a[0].argpartition(1), x[0].argpartition(1))
    with pytest.raises(ValueError, match="cannot delete array elements"):
        del a[0]
    with pytest.raises(ValueError, match="cannot delete array elements"):
        del x[0]
    assert ndarray[numpy.float64] is not None and numpy.ndarray[numpy.float64] is not None


def test_methods_that_write_in_place(clean_runtime):
    x = numpy.array([4.0, 1.0, 3.0, 0.0, 2.0])
    a = np.asarray(x)
    a.put([0, 2], [9.0, 8.0])
    x.put([0, 2], [9.0, 8.0])
    same(a, x)
    a.partition(2)
    x.partition(2)
    same(a[2], x[2])
    assert a.sort() is None
    same(a, numpy.sort(x))
    b, y = np.asarray(numpy.arange(4.0)), numpy.arange(4.0)
    b.resize((2, 3))
    y.resize((2, 3))
    same(b, y)
    with pytest.raises(ValueError):
        b[0].resize(5)


def test_flags_flat_base_and_setstate(clean_runtime):
    x = numpy.arange(12.0).reshape(3, 4).copy()  # owning its data, as an upload does
    a = np.asarray(x)
    for name in ("C_CONTIGUOUS", "F_CONTIGUOUS", "WRITEABLE", "OWNDATA"):
        assert a.flags[name] == x.flags[name], name
        assert a.T.flags[name] == x.T.flags[name], name
        assert a[:, 1].flags[name] == x[:, 1].flags[name], name
    assert a.base is None and x.base is None and a[1:].base is not None
    same(a[1:].base, x)
    same(a.flat[5], x.flat[5])
    same(a.flat[[1, 7]], x.flat[[1, 7]])
    assert len(a.flat) == 12 and [float(v) for v in a.flat][:3] == [0.0, 1.0, 2.0]
    a.flat[[0, 11]] = -1.0  # contiguous: through a reshaped view, lazily
    x.flat[[0, 11]] = -1.0
    same(a, x)
    _no_fallbacks()
    a.T.flat[1] = 50.0  # not contiguous: NumPy on the value, counted, written back
    x.T.flat[1] = 50.0
    same(a, x)
    assert set(metrics.fallbacks()) == {"numpy.ndarray.flat.__setitem__"}
    a.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        a[0, 0] = 1.0
    a.setflags(write=True)
    a[0, 0] = 1.0
    b = np.asarray(numpy.zeros(2))
    b.__setstate__(numpy.arange(5.0).__reduce__()[2])
    same(b, numpy.arange(5.0))


# --- what the consumers' remaining fallbacks were: sign bits, 0-d masks -----------------------------------


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_signbit_and_copysign_are_lazy_on_the_sign_bit(dtype, clean_runtime):
    x = numpy.array([-0.0, 0.0, -1.5, 2.0, numpy.inf, -numpy.inf, numpy.nan, -numpy.nan], dtype)
    same(np.signbit(np.asarray(x)), numpy.signbit(x))
    for y in (x, x[::-1]):
        got = numpy.asarray(np.copysign(np.asarray(x), np.asarray(y)))
        want = numpy.copysign(x, y)
        assert got.dtype == want.dtype
        assert numpy.array_equal(numpy.signbit(got), numpy.signbit(want))  # -0.0 and -nan too
        assert numpy.array_equal(got, want, equal_nan=True)
    same(numpy.copysign(np.asarray(numpy.array([1, 2])), -1.0), numpy.copysign(numpy.array([1, 2]), -1.0))
    _no_fallbacks()


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize("key", ["m", "(m,)", "(Ellipsis, m)", "(m, Ellipsis)", "(slice(None), m)"])
def test_assignment_through_a_0d_mask_is_a_select(shape, flag, key, clean_runtime):
    """``r[mask0d] = v``: all or nothing, lazily (SciPy's pearsonr, entropy and
    array-api-extra's at/apply_where/isclose do it to reductions' 0-d results)."""
    x = numpy.arange(float(numpy.prod(shape))).reshape(shape)
    a = np.asarray(x)
    m, lm = numpy.array(flag), np.asarray(numpy.array(flag))
    for val in (7.0, numpy.array(-1.0), numpy.ones(shape[-1:]) * 5):
        metrics.reset()
        try:
            x[eval(key)] = val
        except Exception as e:  # noqa: BLE001  (the type is what is compared)
            with pytest.raises(type(e)):
                a[eval(key.replace("m", "lm"))] = val
            continue
        a[eval(key.replace("m", "lm"))] = val
        same(a, x)
        if numpy.ndim(val) == 0:  # a value per selected element may still go to NumPy
            assert "ndarray.__setitem__" not in metrics.fallbacks()


def test_a_0d_mask_with_a_2d_value_keeps_numpys_error():
    a = np.asarray(numpy.array(1.0))
    with pytest.raises(TypeError):
        numpy.array(1.0)[numpy.array(True)] = numpy.ones((1, 1))
    with pytest.raises(TypeError):
        a[np.asarray(numpy.array(True))] = numpy.ones((1, 1))
