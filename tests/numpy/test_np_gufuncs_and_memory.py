"""NumPy's generalized ufuncs and an array's memory interfaces in lazycore.numpy (issue 43).

``matmul``, ``vecdot``, ``matvec`` and ``vecmat`` are ufunc objects in NumPy 2
(``signature``, ``nin``, ``types``, ``identity``, methods that NumPy refuses
them); lazycore.numpy had ``matmul``/``vecdot`` as plain functions and
``matvec``/``vecmat`` as counted fallbacks. ``a.data`` (a memoryview) and
``a.ctypes`` were missing: they are the value in host memory (a barrier),
with NumPy's layout, read-only."""

import ctypes

import numpy
import pytest

import lazycore.numpy as np
from lazycore.observe import metrics
from npcheck import same

ATTRIBUTES = ("nin", "nout", "nargs", "identity", "ntypes", "types", "signature", "__name__", "__doc__")
EVERY_UFUNC = sorted(n for n, f in vars(numpy).items() if isinstance(f, numpy.ufunc))
GUFUNCS = sorted(n for n in EVERY_UFUNC if getattr(numpy, n).signature is not None)


def test_numpy_has_the_generalized_ufuncs_tested_here():
    assert {"matmul", "vecdot", "matvec", "vecmat"} <= set(GUFUNCS)


@pytest.mark.parametrize("name", EVERY_UFUNC)
def test_every_ufunc_object_has_numpys_attributes(name):
    ours, theirs = getattr(np, name), getattr(numpy, name)
    assert isinstance(ours, type(np.add)), type(ours)
    for attr in ATTRIBUTES:
        assert getattr(ours, attr) == getattr(theirs, attr), (name, attr)
    for method in ("reduce", "accumulate", "outer", "at", "reduceat", "resolve_dtypes"):
        assert callable(getattr(ours, method)), (name, method)


def _rng_arrays(dtype, *shapes):
    rng = numpy.random.default_rng(7)
    out = []
    for shape in shapes:
        if numpy.dtype(dtype).kind == "c":
            x = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
        elif numpy.dtype(dtype).kind == "b":
            x = rng.random(shape) > 0.5
        else:
            x = rng.integers(-9, 9, shape) if numpy.dtype(dtype).kind in "iu" else rng.standard_normal(shape)
        out.append(numpy.asarray(x).astype(dtype))
    return out


CALLS = {  # name -> operand shapes (loop dims broadcast against each other)
    "matvec": [((3, 4), (4,)), ((2, 1, 3, 4), (5, 4)), ((3, 0), (0,))],
    "vecmat": [((4,), (4, 3)), ((5, 4), (2, 1, 4, 3))],
    "vecdot": [((4,), (4,)), ((2, 1, 4), (3, 4)), ((0,), (0,))],
    "matmul": [((3, 4), (4,)), ((2, 3, 4), (4, 5))],
}


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8", "bool", "complex64"])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_gufunc_calls_are_lazy_with_numpys_values(name, dtype, clean_runtime):
    for shapes in CALLS[name]:
        x, y = _rng_arrays(dtype, *shapes)
        want = getattr(numpy, name)(x, y)
        rtol = 1e-5 if numpy.dtype(dtype) in (numpy.float32, numpy.complex64) else 1e-12
        got = getattr(np, name)(np.asarray(x), np.asarray(y))
        assert type(got) is not numpy.ndarray
        assert got.dtype == want.dtype and got.shape == numpy.shape(want), (shapes, got.dtype, got.shape)
        numpy.testing.assert_allclose(numpy.asarray(got), want, rtol=rtol, atol=rtol)
        # NumPy's own gufunc on a lazy operand comes here (__array_ufunc__), lazily
        got = getattr(numpy, name)(np.asarray(x), y)
        numpy.testing.assert_allclose(numpy.asarray(got), want, rtol=rtol, atol=rtol)
    assert metrics.fallbacks() == {}


def test_gufunc_keywords_dtype_out_axis(clean_runtime):
    a, v = _rng_arrays("int16", (3, 4), (4,))
    for name, b in (("matvec", v), ("matmul", a.T), ("vecdot", a), ("vecmat", a.T)):
        x = a if name != "vecmat" else v
        same(getattr(np, name)(np.asarray(x), np.asarray(b), dtype=numpy.float64),
             getattr(numpy, name)(x, b, dtype=numpy.float64))  # (the float64 loop, not a cast of int16's)
    out = np.asarray(numpy.zeros(3, numpy.int64))
    assert np.matvec(np.asarray(a), np.asarray(v), out=out) is out
    same(out, numpy.matvec(a, v, out=numpy.zeros(3, numpy.int64)))
    same(np.vecdot(np.asarray(a), np.asarray(a), axis=0), numpy.vecdot(a, a, axis=0))
    same(np.vecmat(np.asarray(v), np.asarray(a.T)), numpy.vecmat(v, a.T))
    with pytest.raises(TypeError) as theirs:
        numpy.matvec(a.astype(float), v, out=numpy.zeros(3, numpy.int64))
    with pytest.raises(TypeError) as ours:
        np.matvec(np.asarray(a.astype(float)), np.asarray(v), out=out)
    assert str(ours.value) == str(theirs.value)
    assert metrics.fallbacks() == {}


def test_complex_first_vectors_are_conjugated_as_numpy_does(clean_runtime):
    a, m = _rng_arrays("complex128", (4,), (4, 3))
    for name, args in (("vecdot", (a, a)), ("vecmat", (a, m)), ("matvec", (m.T, a))):
        got = getattr(np, name)(*(np.asarray(x) for x in args))
        numpy.testing.assert_allclose(numpy.asarray(got), getattr(numpy, name)(*args), rtol=1e-12)
    assert metrics.fallbacks() == {}


BAD_SHAPES = {
    "core dim mismatch": ("matvec", (3, 4), (3,)),
    "too few dims": ("matvec", (4,), (4,)),
    "loop dims": ("vecmat", (2, 4), (3, 4, 5)),
    "vecdot sizes": ("vecdot", (3,), (1,)),
    "vecmat core": ("vecmat", (4,), (3, 5)),
}


@pytest.mark.parametrize("case", sorted(BAD_SHAPES))
def test_gufunc_shape_errors_are_numpys(case, clean_runtime):
    name, sa, sb = BAD_SHAPES[case]
    x, y = numpy.ones(sa), numpy.ones(sb)
    with pytest.raises(Exception) as theirs:
        getattr(numpy, name)(x, y)
    with pytest.raises(type(theirs.value)) as ours:
        getattr(np, name)(np.asarray(x), np.asarray(y))
    assert str(ours.value) == str(theirs.value)
    assert metrics.fallbacks() == {}


METHOD_ARGS = {"reduce": 1, "accumulate": 1, "reduceat": "indices", "outer": 2, "at": "indices"}


@pytest.mark.parametrize("method", sorted(METHOD_ARGS))
@pytest.mark.parametrize("name", ["matmul", "vecdot", "matvec", "vecmat"])
def test_gufunc_methods_raise_numpys_error_without_reading_values(name, method, clean_runtime):
    x = numpy.ones((3, 3))
    kind = METHOD_ARGS[method]
    args = (x,) if kind == 1 else (x, x) if kind == 2 else (x, [0])
    with pytest.raises(Exception) as theirs:
        getattr(getattr(numpy, name), method)(*args)
    lazy = [np.asarray(a) if isinstance(a, numpy.ndarray) else a for a in args]
    metrics.reset()
    for call in (getattr(getattr(np, name), method), getattr(getattr(numpy, name), method)):
        with pytest.raises(type(theirs.value)) as ours:
            call(*lazy)
        assert str(ours.value) == str(theirs.value)
    assert metrics.fallbacks() == {}
    assert metrics.counters().get("transfers_to_host", 0) == 0


def test_every_ufunc_has_numpys_call_signature():
    import inspect

    for name in EVERY_UFUNC:
        assert inspect.signature(getattr(np, name)) == inspect.signature(getattr(numpy, name)), name


# --- a.data and a.ctypes --------------------------------------------------------------------

BASE = numpy.arange(24, dtype=numpy.float32).reshape(4, 6)
LAYOUTS = {
    "contiguous": lambda a: a,
    "strided view": lambda a: a[1:, ::2],
    "transposed": lambda a: a.T,
    "reversed": lambda a: a[::-1, 1:4],
    "transposed slice": lambda a: a[1:3].T[::2],
    "0-d": lambda a: a[2, 3],
    "empty": lambda a: a[:0],
}


def _lazy_of(layout):
    return LAYOUTS[layout](np.asarray(BASE)), LAYOUTS[layout](BASE)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_data_is_a_memoryview_as_numpys(layout):
    lazy, host = _lazy_of(layout)
    got, want = lazy.data, host.data
    assert isinstance(got, memoryview)
    for attr in ("shape", "strides", "format", "itemsize", "ndim", "nbytes", "c_contiguous", "f_contiguous",
                 "contiguous"):
        assert getattr(got, attr) == getattr(want, attr), (layout, attr)
    assert got.tobytes() == want.tobytes()
    assert got.tolist() == want.tolist()


def test_data_is_read_only_so_a_write_is_never_lost():
    lazy = np.asarray(BASE.copy())
    view = lazy.data
    assert view.readonly
    with pytest.raises(TypeError):
        view[0, 0] = 5.0
    assert float(lazy[0, 0]) == 0.0


@pytest.mark.parametrize("layout", ["contiguous", "strided view", "transposed", "transposed slice", "reversed"])
def test_ctypes_gives_numpys_interface_to_the_values(layout):
    lazy, host = _lazy_of(layout)
    got, want = lazy.ctypes, host.ctypes
    assert list(got.shape) == list(want.shape) and list(got.strides) == list(want.strides)
    assert got.data != 0
    # read the values through the pointer as C code would: NumPy's layout, the lazy array's values
    n = (max((s - 1) * st for s, st in zip(host.shape, host.strides)) // host.itemsize + 1) if host.size else 0
    raw = numpy.ctypeslib.as_array(got.data_as(ctypes.POINTER(ctypes.c_float)), (max(n, 1),))
    read = numpy.lib.stride_tricks.as_strided(raw, host.shape, host.strides)
    numpy.testing.assert_array_equal(read, host)


def test_a_lazy_scalar_has_data_and_no_ctypes_as_numpys_scalars():
    s = np.asarray(BASE).sum()
    want = BASE.sum()
    assert hasattr(s, "ctypes") is hasattr(want, "ctypes") is False
    assert s.data.tobytes() == want.data.tobytes() and s.data.format == want.data.format
