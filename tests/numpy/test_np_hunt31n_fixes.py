"""What issue 39's hunt 31n (tests/consumers/test_hunt31n_numpy.py) found wrong in the NumPy
frontend, each against NumPy's own answer."""

import numpy
import pytest

import lazycore.numpy as lnp
from lazycore.observe import metrics


@pytest.mark.parametrize("args,kw", [
    ((0, 1, 7), {}), ((1, 0.5, 3), {}), ((0, 1, 5), {"dtype": int}), ((0, 1, 4), {"endpoint": False}),
    ((numpy.float32(0), numpy.float32(1), 5), {}), ((0, 1, 1), {}), ((0, 1, 0), {}),
], ids=["ints", "down", "int dtype", "no endpoint", "float32", "one", "none"])
def test_linspace_step_is_numpys_scalar(args, kw, clean_runtime):
    """``retstep=True`` gave a Python float where NumPy gives a scalar of the computation
    type (``np.float64``, ``np.float32``): ``step.dtype`` raised AttributeError."""
    want_v, want_s = numpy.linspace(*args, retstep=True, **kw)
    got_v, got_s = lnp.linspace(*args, retstep=True, **kw)
    assert type(got_s) is type(want_s)
    numpy.testing.assert_array_equal(got_s, want_s)
    got = numpy.asarray(got_v)
    assert got.dtype == want_v.dtype and got.shape == want_v.shape
    numpy.testing.assert_array_equal(got, want_v)
    assert metrics.fallbacks() == {}


_VIEWS = {
    "row": lambda m, a: (a, a[1]),
    "disjoint halves": lambda m, a: (a[:2], a[2:]),
    "interleaved columns": lambda m, a: (a[:, ::2], a[:, 1::2]),
    "copy": lambda m, a: (a, a.copy()),
    "transpose, reversed column": lambda m, a: (a.T, a[::-1, 3]),
    "reversed steps apart": lambda m, a: (a[::-1, ::-2], a[0, :1]),
    "scalar (a copy)": lambda m, a: (a, a[1, 1]),
    "0-d view": lambda m, a: (a, a[1, 1, ...]),
    "empty": lambda m, a: (a[:0], a),
    "reshaped view": lambda m, a: (a.reshape(6, 4)[5], a[3:, 4:]),
    "broadcast": lambda m, a: (m.broadcast_to(a[0], (3, 6)), a[0, 5:]),
    "complex parts": lambda m, a: (lambda c: (c.real, c.imag))(a + 1j),
    "complex part and element": lambda m, a: (lambda c: (c.real, c[1:2]))(a + 1j),
}


@pytest.mark.parametrize("question", ["shares_memory", "may_share_memory"])
@pytest.mark.parametrize("name", list(_VIEWS))
def test_memory_overlap_of_views_is_numpys(name, question, clean_runtime):
    """``np.shares_memory(a, a[1])`` was False: the fallback asked NumPy about two fresh
    host copies. Views of one storage are now answered on their layouts, without a read."""
    host = numpy.arange(24.0).reshape(4, 6)
    want = getattr(numpy, question)(*_VIEWS[name](numpy, host))
    got = getattr(lnp, question)(*_VIEWS[name](lnp, lnp.asarray(host.copy())))
    assert type(got) is type(want) and got == want
    assert metrics.fallbacks() == {}


_SHAPES = {
    "base 2-d": (lambda a: a, (6, 4)),
    "base -1": (lambda a: a, -1),
    "row view": (lambda a: a[0, :4], (2, 2)),
    "strided column": (lambda a: a[:, 2], (1, 4, 1)),
    "strided block": (lambda a: a[1:4:2, ::2], (3, 2)),
    "transposed: a copy": (lambda a: a.T, (24,)),
    "size does not fit": (lambda a: a, (5, 5)),
}


@pytest.mark.parametrize("name", list(_SHAPES))
def test_setting_shape_is_numpys_in_place_reshape(name, clean_runtime):
    """``a.shape = (6, 4)`` (old NumPy scripts) raised AttributeError: the property had no
    setter. Now the array becomes a view of the new shape over its memory (later writes
    reach its base), NumPy's AttributeError where that needs a copy, ValueError where the
    size does not fit."""
    pick, shape = _SHAPES[name]

    def run(np, base):
        v = pick(base)
        try:
            v.shape = shape
        except (AttributeError, ValueError) as e:
            return type(e)
        v[(0,) * v.ndim] = -1.0
        return v.shape, numpy.array(v), numpy.array(base)

    want = run(numpy, numpy.arange(24.0).reshape(4, 6))
    got = run(lnp, lnp.asarray(numpy.arange(24.0).reshape(4, 6)))
    if isinstance(want, type):
        assert got is want
        return
    assert got[0] == want[0]
    numpy.testing.assert_array_equal(got[1], want[1])
    numpy.testing.assert_array_equal(got[2], want[2])
    assert metrics.fallbacks() == {}


_EDGES = numpy.array([-numpy.inf, -1e308, -400.0, -2.5, -0.0, 0.0, 1e-300, 0.75, 3.0, 180.0, 1e308, numpy.inf, numpy.nan])


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "int64", "uint8", "bool"])
@pytest.mark.parametrize("name", ["heaviside", "deg2rad", "radians", "rad2deg", "degrees"])
def test_heaviside_and_angle_conversions_are_lazy_and_numpys_bit_for_bit(name, dtype, clean_runtime):
    """``np.heaviside`` (a step function in users' scripts), ``np.radians``/``np.degrees`` and
    their other names ran NumPy (counted fallbacks); lazy now, NumPy's bits (float32's
    constant is ``NPY_PIf / 180.0f``, halves compute in float32; subnormal results aside:
    XLA's CPU flushes them, docs/status.md)."""
    rng = numpy.random.default_rng(3)
    with numpy.errstate(all="ignore"):
        x = numpy.concatenate([_EDGES, rng.normal(scale=300, size=400)])
        x = (x > 0) if dtype == "bool" else x.astype(dtype)
        args = (x, numpy.array(0.5, x.dtype if x.dtype.kind == "f" else "float64")) if name == "heaviside" else (x,)
        want = getattr(numpy, name)(*args)
    got = numpy.asarray(getattr(lnp, name)(*(lnp.asarray(a) for a in args)))
    assert got.dtype == want.dtype
    numpy.testing.assert_array_equal(got, want)
    numpy.testing.assert_array_equal(numpy.signbit(got), numpy.signbit(want))
    assert metrics.fallbacks() == {}


def test_heaviside_takes_numpys_h0_forms(clean_runtime):
    x = numpy.array([-1.0, 0.0, -0.0, 2.0, numpy.nan])
    for h0 in (numpy.nan, numpy.array([1.0, 2.0, 3.0, 4.0, 5.0]), 1, numpy.float32(0.25)):
        want = numpy.heaviside(x, h0)
        got = numpy.asarray(lnp.heaviside(lnp.asarray(x), lnp.asarray(h0) if isinstance(h0, numpy.ndarray) else h0))
        assert got.dtype == want.dtype
        numpy.testing.assert_array_equal(got, want)
    assert metrics.fallbacks() == {}


@pytest.mark.parametrize("other", [None, "abc", b"x"], ids=["None", "str", "bytes"])
@pytest.mark.parametrize("op", ["__eq__", "__ne__"])
@pytest.mark.parametrize("shape", [(4, 6), (), (0, 3)])
def test_equality_with_none_or_a_string_is_numpys_elementwise_answer(op, other, shape, clean_runtime):
    """``a != None`` raised TypeError and ``a == "abc"`` NumPy's no-loop error: NumPy's
    operators answer every element unequal, in the array's shape."""
    host = numpy.arange(float(numpy.prod(shape))).reshape(shape)
    want = getattr(host, op)(other)
    got = getattr(lnp.asarray(host), op)(other)
    got = numpy.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    numpy.testing.assert_array_equal(got, want)
    assert metrics.fallbacks() == {}


@pytest.mark.parametrize("convert", [float, int, complex])
@pytest.mark.parametrize("shape", [(1,), (1, 1), (2,), ()])
def test_python_scalar_conversion_takes_only_what_numpy_takes(convert, shape, clean_runtime):
    """``float(a[:1])`` gave a number where NumPy 2.4 raises TypeError ("only 0-dimensional
    arrays can be converted to Python scalars"): the check was older NumPy's length-1 rule."""
    host = numpy.full(shape, 2.5)

    def run(a):
        try:
            return convert(a)
        except TypeError as e:
            return TypeError, str(e)

    want = run(host)
    got = run(lnp.asarray(host))
    assert got == want and type(got) is type(want)


@pytest.mark.parametrize("shape,wrap,val", [
    ((4, 4), False, -1), ((7, 3), True, 2.5), ((7, 3), False, 0), ((3, 7), False, numpy.inf),
    ((3, 3, 3), False, -1), ((2, 2, 2, 2), False, numpy.float32(7)),
])
@pytest.mark.parametrize("through", ["lnp", "numpy"])
def test_fill_diagonal_is_a_lazy_write(shape, wrap, val, through, clean_runtime):
    """``np.fill_diagonal`` ran NumPy (counted): a read and a write back, a barrier in each
    step of a loop. It is NumPy's strided ``flat`` write on the lazy array."""
    host = numpy.arange(float(numpy.prod(shape))).reshape(shape)
    lazy = lnp.asarray(host.copy())
    numpy.fill_diagonal(host, val, wrap=wrap)
    (lnp if through == "lnp" else numpy).fill_diagonal(lazy, val, wrap=wrap)
    numpy.testing.assert_array_equal(numpy.asarray(lazy), host)
    assert metrics.fallbacks() == {}


def test_fill_diagonal_keeps_numpys_errors():
    for shape in ((4,), (2, 3, 3)):
        with pytest.raises(ValueError):
            numpy.fill_diagonal(numpy.zeros(shape), 1)
        with pytest.raises(ValueError):
            lnp.fill_diagonal(lnp.zeros(shape), 1)


@pytest.mark.parametrize("bits", ["PCG64", "Philox", "MT19937", "SFC64"])
def test_generator_takes_a_bit_generator_as_numpys_does(bits, clean_runtime):
    """``np.random.Generator(np.random.PCG64(seed))`` raised TypeError (the constructor took
    only the lazy state's words). The lazy stream is seeded by the bit generator: the same
    seed draws the same numbers, of NumPy's dtypes and shapes (lazycore's own stream,
    docs/status.md)."""
    draws = []
    for _ in range(2):
        g = lnp.random.Generator(getattr(numpy.random, bits)(7))
        draws.append((numpy.asarray(g.random((2, 3))), numpy.asarray(g.integers(0, 5, size=4, dtype=numpy.int32))))
    want = numpy.random.Generator(getattr(numpy.random, bits)(7))
    for got, ref in zip(draws[0], (want.random((2, 3)), want.integers(0, 5, size=4, dtype=numpy.int32))):
        assert got.dtype == ref.dtype and got.shape == ref.shape
    for a, b in zip(*draws):
        numpy.testing.assert_array_equal(a, b)
    assert 0 <= draws[0][0].min() and draws[0][0].max() < 1
    assert metrics.fallbacks() == {}
