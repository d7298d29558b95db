"""lazycore.numpy arrays against NumPy: ufuncs, promotion, creation, views, observation, errors."""

import ml_dtypes
import numpy
import pytest

import lazycore
import lazycore.numpy as np
from lazycore.observe import metrics
from isolated import run_isolated
from npcheck import sample, same

SHAPES = [(), (5,), (3, 4), (2, 3, 4)]
DTYPES = ["float32", "float64", "int32", "int64", "uint8", "bool"]


BINARY = ["add", "subtract", "multiply", "true_divide", "maximum", "minimum", "greater", "less_equal",
          "equal", "not_equal", "logical_and", "logical_xor", "fmax", "arctan2"]
UNARY = ["negative", "absolute", "sqrt", "exp", "log1p", "tanh", "sin", "cos", "floor", "ceil", "rint",
         "square", "isnan", "isfinite", "logical_not", "sign", "expm1", "log", "reciprocal", "trunc"]


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("int32", "float64"), ("uint8", "int64"),
                                    ("bool", "int32")])
def test_binary_ufuncs(rng, name, dtypes, clean_runtime):
    a, b = sample(rng, (3, 4), dtypes[0]), sample(rng, (4,), dtypes[1])
    uf = getattr(numpy, name)
    try:
        want = uf(a, b)
    except TypeError:
        with pytest.raises(TypeError):
            getattr(np, name)(np.asarray(a), np.asarray(b))
        return
    same(getattr(np, name)(np.asarray(a), np.asarray(b)), want)
    same(uf(np.asarray(a), b), want)  # NumPy's own ufunc on a lazy array stays lazy
    assert metrics.fallbacks() == {}


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_unary_ufuncs(rng, name, dtype):
    x = sample(rng, (2, 5), dtype)
    if name in ("sqrt", "log", "log1p", "reciprocal"):
        x = numpy.abs(x) + numpy.asarray(1, dtype)
    with numpy.errstate(all="ignore"):
        want = getattr(numpy, name)(x)
    same(getattr(np, name)(np.asarray(x)), want, rtol=2e-6)


INTEGER_TYPES = ["uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"]


@pytest.mark.parametrize("name", ["sign", "absolute", "negative"])
@pytest.mark.parametrize("dtype", INTEGER_TYPES)
def test_sign_and_absolute_of_every_integer_type(name, dtype):
    # the unsigned types have no stablehlo.sign / stablehlo.abs: lazy.sign and lazy.abs lower them apart
    info = numpy.iinfo(dtype)
    x = numpy.array([0, 1, 7, info.max, info.min, info.max // 3], dtype=dtype)
    same(getattr(np, name)(np.asarray(x)), getattr(numpy, name)(x))
    if name == "absolute":
        same(np.abs(np.asarray(x)), numpy.abs(x))


@pytest.mark.parametrize("dtype", INTEGER_TYPES)
def test_integer_power_wraps_for_every_exponent(rng, dtype):
    # XLA's integer power looks at six exponent bits only: 0 ** 64 was 1, (-3) ** 100 in int16 -14639
    info = numpy.iinfo(dtype)
    base = rng.integers(max(info.min, -3), 4, 40).astype(dtype)
    exponent = rng.integers(0, info.max, 40, dtype=dtype, endpoint=True)
    exponent[:5] = [0, 64, 100, 255 if info.bits == 8 and info.min == 0 else 127, info.max]
    base[:3] = 0
    same(np.power(np.asarray(base), np.asarray(exponent)), numpy.power(base, exponent))
    same(np.asarray(base) ** 200 if info.max >= 200 else np.asarray(base) ** 100,
         base ** 200 if info.max >= 200 else base ** 100)


# the core's composites (lazycore.trace.composites), shared with lazycore.torch: lazy, and NumPy's values
COMPOSITE_UFUNCS = {"arcsin": (-1, 1), "arccos": (-1, 1), "sinh": (-12, 12), "cosh": (-12, 12),
                    "arcsinh": (-1e3, 1e3), "arccosh": (1, 1e3), "arctanh": (-1, 1), "tan": (-3, 3),
                    "exp2": (-20, 20), "log2": (0, 1e3), "log10": (0, 1e3), "arctan": (-1e3, 1e3)}
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, numpy.inf, -numpy.inf, numpy.nan, 1e4, -1e4]


@pytest.mark.parametrize("name", COMPOSITE_UFUNCS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "int8", "int64", "bool"])
def test_composite_ufuncs_are_lazy_and_numpys(rng, name, dtype, clean_runtime):
    lo, hi = COMPOSITE_UFUNCS[name]
    dtype = numpy.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else numpy.dtype(dtype)
    with numpy.errstate(all="ignore"):
        if dtype.kind in "iub":
            x = numpy.concatenate([rng.integers(-3, 4, 20), [0, 1, -1]]).astype(dtype)
        else:
            x = numpy.concatenate([rng.uniform(lo, hi, 40), EDGES]).astype(dtype).reshape(5, 10)
        want = getattr(numpy, name)(x)
    ufunc = getattr(np, name)
    for got in (ufunc(np.asarray(x)), getattr(numpy, name)(np.asarray(x))):  # NumPy's own ufunc stays lazy too
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape
        # NumPy's half loops compute in float32 and round once, as lazycore does: an ulp of double rounding
        rtol = {"float16": 2e-3, "bfloat16": 1.6e-2}.get(want.dtype.name, 1e-6)
        numpy.testing.assert_allclose(numpy.asarray(got).astype(numpy.float64), want.astype(numpy.float64),
                                      rtol=rtol, atol=0, equal_nan=True)
    assert metrics.fallbacks() == {}


@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("float16", "float16"), ("int32", "float64"),
                                    ("int8", "uint8"), ("bool", "float32")])
def test_hypot_is_lazy_and_numpys(rng, dtypes, clean_runtime):
    with numpy.errstate(all="ignore"):
        a, b = sample(rng, (30,), dtypes[0]), sample(rng, (30,), dtypes[1])
        if a.dtype.kind == "f" and b.dtype.kind == "f":  # an infinite side wins over a NaN one
            a[:4], b[:4] = [numpy.inf, numpy.nan, 0.0, -numpy.inf], [numpy.nan, -numpy.inf, -0.0, 3.0]
        want = numpy.hypot(a, b)
    rtol = 2e-3 if want.dtype == numpy.float16 else 1e-6
    same(np.hypot(np.asarray(a), np.asarray(b)), want, rtol=rtol, atol=0)
    same(numpy.hypot(np.asarray(a), b), want, rtol=rtol, atol=0)
    assert metrics.fallbacks() == {}


def test_array_api_spellings_of_the_inverse_functions(rng):
    x = rng.uniform(-0.9, 0.9, 8)
    xp = np.asarray(x).__array_namespace__()
    for name, ref in (("asin", numpy.arcsin), ("acos", numpy.arccos), ("atan", numpy.arctan),
                      ("asinh", numpy.arcsinh), ("atanh", numpy.arctanh)):
        same(getattr(xp, name)(np.asarray(x)), ref(x))
    same(xp.acosh(np.asarray(x + 2)), numpy.arccosh(x + 2))


def test_floor_division_and_remainder_zeros_are_signed_as_numpys():
    a = numpy.array([-0.0, 0.0, -4.0, 4.0, 0.3, -0.3, 5.0, -5.0])
    b = numpy.array([5.0, -5.0, 2.0, -2.0, -5.0, 5.0, numpy.inf, numpy.inf])
    for f in (numpy.floor_divide, numpy.remainder):
        got, want = numpy.asarray(f(np.asarray(a), np.asarray(b))), f(a, b)
        numpy.testing.assert_array_equal(got, want)
        numpy.testing.assert_array_equal(numpy.signbit(got), numpy.signbit(want))


def integer_division_by_zero_gives_numpys_zeros():
    """NumPy's integer //, %, fmod and divmod by zero give 0 (and a RuntimeWarning);
    a zero divisor that is a constant (``z % z`` of zeros) killed the process."""
    for dtype in INTEGER_TYPES:
        z = np.zeros(2, dtype=dtype)
        a, b = numpy.array([7, 0, 5, 9], dtype=dtype), numpy.array([0, 0, 2, 3], dtype=dtype)
        la, lb = np.asarray(a), np.asarray(b)
        with numpy.errstate(all="ignore"):
            same(z % z, numpy.zeros(2, dtype) % numpy.zeros(2, dtype))
            same(z // z, numpy.zeros(2, dtype) // numpy.zeros(2, dtype))
            for name in ("floor_divide", "remainder", "fmod"):
                same(getattr(np, name)(la, lb), getattr(numpy, name)(a, b))
                same(getattr(np, name)(la, 0), getattr(numpy, name)(a, 0))
            for got, want in zip(np.divmod(la, lb), numpy.divmod(a, b)):
                same(got, want)


def test_integer_division_by_zero_gives_numpys_zeros():
    run_isolated(__file__, "integer_division_by_zero_gives_numpys_zeros")


def test_sign_of_zero_and_nan_is_numpys():
    x = numpy.array([-0.0, 0.0, numpy.nan, -2.5, 3.0])
    for dtype in ("float16", "float32", "float64"):
        got, want = numpy.asarray(np.sign(np.asarray(x.astype(dtype)))), numpy.sign(x.astype(dtype))
        numpy.testing.assert_array_equal(got, want)
        numpy.testing.assert_array_equal(numpy.signbit(got), numpy.signbit(want))
    # a -0.0 computed in the program, and one folded from constants
    got = numpy.asarray(np.sign(np.zeros(3) * -1.0))
    assert not numpy.signbit(got).any()


@pytest.mark.parametrize("scalar", [2, 2.5, True, -3])
@pytest.mark.parametrize("dtype", ["float32", "int8", "uint8", "int64", "float64"])
def test_python_scalars_are_weak(rng, scalar, dtype):
    x = sample(rng, (4,), dtype)
    for f in (lambda a: a + scalar, lambda a: scalar * a, lambda a: a / scalar, lambda a: a > scalar,
              lambda a: a // (scalar or 1), lambda a: a % 3):
        try:
            want = f(x)
        except (TypeError, OverflowError) as e:
            with pytest.raises(type(e)):
                f(np.asarray(x))
            continue
        same(f(np.asarray(x)), want)


def test_numpy_scalars_are_strong():
    x = numpy.arange(4, dtype=numpy.float32)
    same(np.asarray(x) + numpy.float64(1.5), x + numpy.float64(1.5))
    same(np.asarray(x.astype(numpy.int8)) * numpy.int16(3), x.astype(numpy.int8) * numpy.int16(3))


def test_creation():
    same(np.zeros((2, 3)), numpy.zeros((2, 3)))
    same(np.ones(4, dtype=np.int32), numpy.ones(4, dtype=numpy.int32))
    same(np.full((2, 2), 7.5, dtype=np.float32), numpy.full((2, 2), 7.5, dtype=numpy.float32))
    same(np.full((3,), 4), numpy.full((3,), 4))
    same(np.arange(10), numpy.arange(10))
    same(np.arange(1.0, 2.0, 0.25), numpy.arange(1.0, 2.0, 0.25))
    same(np.arange(5, 1, -2), numpy.arange(5, 1, -2))
    same(np.linspace(-1, 1, 7), numpy.linspace(-1, 1, 7))
    same(np.linspace(0, 10, 4, endpoint=False), numpy.linspace(0, 10, 4, endpoint=False))
    same(np.eye(3, 4, k=1), numpy.eye(3, 4, k=1))
    same(np.identity(3, dtype=np.int64), numpy.identity(3, dtype=numpy.int64))
    a = np.asarray(numpy.arange(6.0).reshape(2, 3))
    same(np.zeros_like(a), numpy.zeros((2, 3)))
    same(np.full_like(a, 2, dtype=np.int32), numpy.full((2, 3), 2, dtype=numpy.int32))
    same(np.array([[1, 2], [3, 4]]), numpy.array([[1, 2], [3, 4]]))
    with pytest.raises(ValueError):
        np.zeros((-1, 2))


def test_views_follow_numpys_rules():
    base = numpy.arange(24.0).reshape(4, 6)
    lazy = np.asarray(base.copy())
    ref = base.copy()
    for f in (lambda a: a[1:3, ::2], lambda a: a[::-1, 2], lambda a: a.T[1:, 0:4:3], lambda a: a[..., None, 1:],
              lambda a: a.reshape(6, 4)[2], lambda a: a[:, ::-2].T):
        view, rview = f(lazy), f(ref)
        assert view.shape == rview.shape and view.strides == rview.strides
        view *= 10
        rview *= 10
        same(lazy, ref)


def test_reshape_copies_when_numpy_copies():
    lazy, ref = np.asarray(numpy.arange(6.0).reshape(2, 3)), numpy.arange(6.0).reshape(2, 3)
    flat, rflat = lazy.T.reshape(-1), ref.T.reshape(-1)  # not expressible as a view: a copy
    flat[0] = 100
    rflat[0] = 100
    same(lazy, ref)
    same(flat, rflat)
    with pytest.raises(ValueError, match="cannot reshape array of size 6 into shape"):
        lazy.reshape(4, 2)


def test_setitem_and_inplace_operators():
    lazy, ref = np.asarray(numpy.zeros((3, 4), numpy.int32)), numpy.zeros((3, 4), numpy.int32)
    for f in (lambda a: a.__setitem__((1, slice(None)), 7), lambda a: a.__setitem__((slice(None), 0), [1, 2, 3]),
              lambda a: a.__setitem__(Ellipsis, 2.9)):
        f(lazy)
        f(ref)
        same(lazy, ref)
    lazy[0] += 5
    ref[0] += 5
    same(lazy, ref)
    with pytest.raises(TypeError):  # same_kind casting of float into int, as NumPy
        lazy += 1.5
    with pytest.raises(ValueError, match="could not broadcast"):
        lazy[0] = numpy.ones(3)


def test_observation_and_repr():
    x = numpy.arange(6, dtype=numpy.float32).reshape(2, 3) / 4
    a = np.asarray(x)
    assert repr(a) == repr(x) and str(a) == str(x)
    assert a.tolist() == x.tolist() and a[1, 2].item() == x[1, 2].item()
    assert float(a[0, 1]) == 0.25 and int(a[1, 2] * 4) == 5 and bool(a[1, 0])
    assert len(a) == 2 and [r.shape for r in a] == [(3,), (3,)]
    numpy.testing.assert_array_equal(numpy.asarray(a), x)
    with pytest.raises(ValueError, match="truth value"):
        bool(a)
    assert a.shape == (2, 3) and a.ndim == 2 and a.size == 6 and a.dtype == numpy.float32
    assert a.nbytes == 24 and a.strides == x.strides


def test_errors_are_numpys():
    a = np.ones((2, 3))
    with pytest.raises(ValueError):
        a + np.ones(4)
    with pytest.raises(numpy.exceptions.AxisError):
        np.sum(a, axis=2)
    with pytest.raises(IndexError):
        a[5]
    with pytest.raises(IndexError):
        a[0, 0, 0]
    with pytest.raises(TypeError):
        np.add(a, "x")


def test_fallback_is_counted_with_the_caller_line(clean_runtime):
    a = np.asarray(numpy.array([3.0, 1.0, 2.0]))
    s = numpy.sort(a)  # no lazy sort: NumPy runs it
    line = test_fallback_is_counted_with_the_caller_line.__code__.co_firstlineno + 2
    assert isinstance(s, np.ndarray)
    same(s * 2, numpy.array([2.0, 4.0, 6.0]))
    (site,) = metrics.fallbacks()["numpy.sort"]
    assert site.endswith(f"test_array.py:{line}")


def test_fallback_writes_back_in_place_changes(clean_runtime):
    a = np.asarray(numpy.arange(5.0))
    view = a[1:4]
    numpy.copyto(view, 9.0)  # NumPy writes into the materialized view: written back through it
    same(a, numpy.array([0.0, 9.0, 9.0, 9.0, 4.0]))
    assert "numpy.copyto" in metrics.fallbacks()


def test_expressions_fuse_into_one_program(clean_runtime):
    x = np.asarray(numpy.linspace(-2, 2, 1000, dtype=numpy.float32))
    y = np.tanh(x * 1.5 + 0.5) * (1 / (1 + np.exp(-x))) - x * x / 3 + np.exp(-np.abs(x))
    lazycore.mark_step()
    c = metrics.counters()
    assert c["compiles"] == 1 and c["executions"] == 1
    ref = numpy.linspace(-2, 2, 1000, dtype=numpy.float32)
    want = numpy.tanh(ref * 1.5 + 0.5) * (1 / (1 + numpy.exp(-ref))) - ref * ref / 3 + numpy.exp(-numpy.abs(ref))
    same(y, want, rtol=1e-5)
