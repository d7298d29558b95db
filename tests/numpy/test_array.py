"""lazycore.numpy arrays against NumPy: ufuncs, promotion, creation, views, observation, errors."""

import itertools

import ml_dtypes
import numpy
import pytest

import lazycore
import lazycore.numpy as np
from lazycore.observe import metrics
from _bits import BY_HAND  # (tests/ is on the path)
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


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_negative_integer_powers_raise_numpys_error(dtype):
    """NumPy raises ValueError: at the call for a Python exponent, at the barrier
    (a ValueError too, naming the line) for one in an array."""
    base, exponent = numpy.array([2, 3, 1], dtype), numpy.array([1, -1, 2], dtype)
    for f in (lambda m, b: b ** -1, lambda m, b: m.power(b, -2), lambda m, b: m.power(b, numpy.int64(-1))):
        with pytest.raises(ValueError) as eager:
            f(numpy, base)
        with pytest.raises(ValueError, match=f"^{eager.value}$"):
            f(np, np.asarray(base))
    with pytest.raises(ValueError):
        numpy.power(base, exponent)
    p = np.power(np.asarray(base), np.asarray(exponent))
    with pytest.raises(ValueError, match="recorded at .*: Integers to negative integer powers are not allowed."):
        numpy.asarray(p)
    # non-negative ones are values; floats and unsigned types have nothing to check
    same(np.power(np.asarray(base), np.asarray(abs(exponent))), numpy.power(base, abs(exponent)))
    same(np.asarray(base) ** -1.0, base ** -1.0)


# the core's composites (lazycore.trace.composites), shared with lazycore.torch: lazy, and NumPy's values
COMPOSITE_UFUNCS = {"arcsin": (-1, 1), "arccos": (-1, 1), "sinh": (-12, 12), "cosh": (-12, 12),
                    "arcsinh": (-1e3, 1e3), "arccosh": (1, 1e3), "arctanh": (-1, 1), "tan": (-3, 3),
                    "exp2": (-20, 20), "log2": (0, 1e3), "log10": (0, 1e3), "arctan": (-1e3, 1e3)}
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, numpy.inf, -numpy.inf, numpy.nan, 1e4, -1e4]


@pytest.mark.parametrize("name", COMPOSITE_UFUNCS)
# CI: float16 takes bfloat16's path (rounded_once: both half types computed in f32, rounded once) and int8 int64's
# (an integer converted to NumPy's float type first; float64's composite is the float64 variant's)
@pytest.mark.parametrize("dtype", ["float16", pytest.param("bfloat16", marks=BY_HAND), "float32", "float64", "int8",
                                   pytest.param("int64", marks=BY_HAND), "bool"])
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


def _answer(f, module):
    """``f(module)``: ("value", dtype, host values) or ("error", type, message)."""
    try:
        r = f(module)
    except Exception as e:  # noqa: BLE001 - the error is the answer to compare
        return ("error", type(e), str(e))
    rs = r if isinstance(r, tuple) else (r,)
    return ("value",) + tuple((x.dtype, numpy.asarray(x).tolist()) for x in rs)


UFUNC_OPERANDS = {
    "f8 f8": ("add", numpy.array([1.5, -2.5, 3.0]), numpy.array([1.5, -2.5, 3.0])),
    "i8 i8": ("add", numpy.array([1, 2, 3]), numpy.array([4, 5, -6])),
    "u1": ("negative", numpy.array([1, 2, 200], numpy.uint8)),
    "i8 2.5": ("multiply", numpy.array([1, 2, 3]), 2.5),
    "i8 / i8": ("true_divide", numpy.array([1, 2, 3]), numpy.array([2, 2, 2])),
    "u1 < 3": ("less", numpy.array([1, 2, 200], numpy.uint8), 3),
    "f4 f4": ("subtract", numpy.array([1.5, 2.5, 3.5], numpy.float32), numpy.array([0.5, 1.0, 1.5], numpy.float32)),
}


def ufunc_keywords_are_numpys():
    """dtype=, signature= and casting= against NumPy: the result dtype and values,
    or NumPy's error (type and message). One combination (a Python float under
    casting="equiv" with a fixed output dtype) crashes NumPy's resolve_dtypes."""
    for (name, *operands), dtype, casting in itertools.product(
            UFUNC_OPERANDS.values(), [None, "float32", "float64", "int32", "int8", "bool"],
            [None, "no", "equiv", "safe", "same_kind", "unsafe"]):
        kw = {k: v for k, v in (("dtype", dtype), ("casting", casting)) if v is not None}

        def f(m):
            return getattr(m, name)(*(m.asarray(o) if isinstance(o, numpy.ndarray) else o for o in operands), **kw)

        with numpy.errstate(all="ignore"):
            want, got = _answer(f, numpy), _answer(f, np)
        assert got == want, (name, kw, got, want)
    a, i = numpy.array([1.5, -2.5, 3.0]), numpy.array([1, 2, 3])
    for f in (lambda m: m.add(m.asarray(i), m.asarray(i), signature="ff->f"),
              lambda m: m.add(m.asarray(i), m.asarray(i), signature=("f8", "f8", "f8")),
              lambda m: m.add(m.asarray(i), m.asarray(i), signature="ff->f", dtype="f8"),
              lambda m: m.add(m.asarray(a), 1.0, bogus=True),
              lambda m: m.add(m.asarray(a), 1.0, order="X"),
              lambda m: numpy.add(m.asarray(a), m.asarray(a), dtype=numpy.float32),  # NumPy's own ufunc
              lambda m: numpy.sin(m.asarray(numpy.array([1, 2], numpy.uint8)), dtype=numpy.float64)):
        want, got = _answer(f, numpy), _answer(f, np)
        assert got[:2] == want[:2], (got, want)
        if want[0] == "value":
            assert numpy.allclose(got[1][1], want[1][1])


def test_ufunc_dtype_signature_and_casting_are_numpys():
    run_isolated(__file__, "ufunc_keywords_are_numpys")


def test_ufunc_out_and_where_are_numpys(clean_runtime):
    """out= of another dtype (cast by casting=), a tuple, broadcast into; where= with
    out= keeps out's values where False, lazily; NumPy's errors for the rest."""
    a, i, w = numpy.array([1.5, -2.5, 3.0]), numpy.array([1, 2, 3]), numpy.array([True, False, True])
    cases = [
        lambda m: m.add(m.asarray(a), m.asarray(a), out=m.asarray(numpy.zeros(3, numpy.int64))),
        lambda m: m.add(m.asarray(a), m.asarray(a), out=m.asarray(numpy.zeros(3, numpy.int64)), casting="unsafe"),
        lambda m: m.add(m.asarray(a), m.asarray(a), out=m.asarray(numpy.zeros(3, numpy.float32))),
        lambda m: m.add(m.asarray(a), 1.0, out=(m.asarray(numpy.zeros(3)),)),
        lambda m: m.add(m.asarray(a), 1.0, out=m.asarray(numpy.zeros((2, 3)))),
        lambda m: m.add(m.asarray(a), 1.0, out=m.asarray(numpy.zeros(2))),
        lambda m: m.add(m.asarray(i), m.asarray(i), dtype="float32", out=m.asarray(numpy.zeros(3))),
        lambda m: m.divide(m.asarray(a), m.asarray(numpy.array([0.0, 2.0, 0.0])), out=m.zeros(3),
                           where=m.asarray(numpy.array([0.0, 2.0, 0.0])) != 0),
        lambda m: m.add(m.asarray(a), 1.0, out=m.asarray(numpy.full(3, 9.0)), where=w),
        lambda m: m.add(m.asarray(a), 1.0, out=m.asarray(numpy.full(3, 9.0)), where=[True, False, False]),
        lambda m: m.multiply(m.asarray(a.reshape(1, 3) + numpy.zeros((2, 1))), 3, out=m.asarray(numpy.zeros((2, 3))),
                             where=w),
        lambda m: m.add(m.asarray(i), 1, out=m.asarray(numpy.zeros(3, numpy.float32)), where=w),
        lambda m: m.add(m.asarray(a), 1, out=m.asarray(numpy.zeros(3, numpy.int64)), where=w),
        lambda m: m.add(m.asarray(a), 1, out=m.asarray(numpy.full(3, 7.0)), where=False),
    ]
    for k, f in enumerate(cases):
        want, got = _answer(f, numpy), _answer(f, np)
        assert got[:2] == want[:2] and (want[0] == "error" or got == want), (k, got, want)
    assert metrics.fallbacks() == {}  # all lazy, where= with out= included
    # an int mask is NumPy's to refuse, F order NumPy's to lay out: counted fallbacks
    for f in (lambda m: m.add(m.asarray(a), 1.0, out=m.asarray(numpy.full(3, 9.0)), where=numpy.array([1, 0, 1])),
              lambda m: m.add(m.asarray(a), 1.0, order="F")):
        want, got = _answer(f, numpy), _answer(f, np)
        assert got[:2] == want[:2], (got, want)
    assert sum(metrics.fallbacks()["numpy.add"].values()) == 2


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


def test_an_index_naming_one_element_gives_a_copy_as_numpys_scalar():
    """``a[0]`` of a 1-d array is NumPy's scalar: a copy, so ``s += 1`` leaves ``a``
    alone. A key with ``...``, a slice or ``None`` still gives a view."""
    base = numpy.arange(6.0).reshape(2, 3)
    lazy, ref = np.asarray(base.copy()), base.copy()
    for key in (0, -1, (1, 2), (numpy.int64(1), -3)):
        one = lazy.reshape(-1) if not isinstance(key, tuple) else lazy
        rone = ref.reshape(-1) if not isinstance(key, tuple) else ref
        s, r = one[key], rone[key]
        assert s.shape == () and s.dtype == r.dtype and float(s) == float(r)
        s += 1
        r += 1
        same(lazy, ref)
        assert float(s) == float(r)
    # iterating a 1-d array gives elements (copies); a row of a 2-d array is a view
    for s in lazy[0]:
        s *= 10
    same(lazy, ref)
    row = lazy[1]
    row += 1
    ref[1] += 1
    same(lazy, ref)
    # a 0-d array: ``a[()]`` is the element, ``a[...]`` and ``a[0, ...]`` views
    zero = np.asarray(numpy.array(5.0))
    s = zero[()]
    s += 1
    assert float(zero) == 5.0 and float(s) == 6.0
    v = zero[...]
    v += 1
    w = lazy[0, ...]
    w -= 1
    ref[0, ...] -= 1
    assert float(zero) == 6.0
    same(lazy, ref)


def test_ascontiguousarray_copies_what_is_not_contiguous():
    """NumPy's: the array itself when C- (or F-) contiguous already, else a copy
    with that layout; at least 1-d."""
    base = numpy.arange(12.0).reshape(3, 4)
    for f in (numpy.ascontiguousarray, numpy.asfortranarray):
        lazy, ref = np.asarray(base.copy()), base.copy()
        g = getattr(np, f.__name__)
        for view in (lambda a: a[:, ::2], lambda a: a[1:], lambda a: a.T, lambda a: a[0], lambda a: a[:, 1]):
            got, want = g(view(lazy)), f(view(ref))
            assert got.shape == want.shape and got.strides == want.strides, (f.__name__, got.strides, want.strides)
            got += 100
            want += 100
            same(lazy, ref)
        assert g(np.asarray(numpy.array(2.0))).shape == (1,)
        same(g(lazy, dtype=np.float32), f(ref, dtype=numpy.float32))


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
    s = numpy.unique(a, axis=0)  # unique rows (axis=) have no lazy version: NumPy runs it
    line = test_fallback_is_counted_with_the_caller_line.__code__.co_firstlineno + 2
    assert isinstance(s, np.ndarray)
    same(s * 2, numpy.array([2.0, 4.0, 6.0]))
    (site,) = metrics.fallbacks()["numpy.unique"]
    assert site.endswith(f"test_array.py:{line}")


def test_fallback_writes_back_in_place_changes(clean_runtime):
    a = np.asarray(numpy.arange(5.0))
    view = a[1:4]
    numpy.putmask(view, numpy.ones(3, bool), 9.0)  # NumPy writes into the materialized view: written back through it
    same(a, numpy.array([0.0, 9.0, 9.0, 9.0, 4.0]))
    assert "numpy.putmask" in metrics.fallbacks()


def test_expressions_fuse_into_one_program(clean_runtime):
    x = np.asarray(numpy.linspace(-2, 2, 1000, dtype=numpy.float32))
    y = np.tanh(x * 1.5 + 0.5) * (1 / (1 + np.exp(-x))) - x * x / 3 + np.exp(-np.abs(x))
    lazycore.mark_step()
    c = metrics.counters()
    assert c["compiles"] == 1 and c["executions"] == 1
    ref = numpy.linspace(-2, 2, 1000, dtype=numpy.float32)
    want = numpy.tanh(ref * 1.5 + 0.5) * (1 / (1 + numpy.exp(-ref))) - ref * ref / 3 + numpy.exp(-numpy.abs(ref))
    same(y, want, rtol=1e-5)
