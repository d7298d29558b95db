"""lazycore.numpy shape manipulation against NumPy: values, dtypes, shapes, view/copy semantics, errors."""

import warnings

import numpy
import pytest
from numpy.exceptions import AxisError

import lazycore.numpy as np
from lazycore.observe import metrics
from npcheck import sample, same


@pytest.fixture(autouse=True)
def lowered(request):
    """Every lowered function stays lazy: no NumPy fallback recorded (tests that expect one opt out)."""
    metrics.reset()
    yield
    if "expects_fallback" not in request.fixturenames:
        assert metrics.fallbacks() == {}


@pytest.fixture
def expects_fallback():
    """Marks a test whose function runs NumPy itself (a counted fallback)."""


def check_view(rng, x, make, key=Ellipsis):
    """``make(module, array)`` is a view in NumPy: the lazy result matches it, and a
    write into it changes the source exactly as the same write does in NumPy."""
    a = np.asarray(x)
    host = x.copy()
    got, want = make(np, a), make(numpy, host)
    assert numpy.shares_memory(want, host)
    same(got, want)
    assert got.strides == want.strides
    same(make(numpy, a), want)  # NumPy's function on a lazy array stays lazy
    val = sample(rng, numpy.shape(want[key]), x.dtype)
    got[key] = val
    want[key] = val
    same(a, host)
    same(got, want)


VIEWS = {
    "transpose": (lambda m, a: m.transpose(a, (1, 2, 0)), (0, slice(1, None))),
    "transpose_default": (lambda m, a: m.transpose(a), Ellipsis),
    "permute_dims": (lambda m, a: m.permute_dims(a, (2, 0, 1)), (1,)),
    "matrix_transpose": (lambda m, a: m.matrix_transpose(a), (Ellipsis, 0)),
    "swapaxes": (lambda m, a: m.swapaxes(a, 0, -1), (slice(None, None, 2),)),
    "moveaxis": (lambda m, a: m.moveaxis(a, [0, 1], [-1, 0]), (Ellipsis, 1)),
    "rollaxis": (lambda m, a: m.rollaxis(a, 2, 0), (0,)),
    "expand_dims": (lambda m, a: m.expand_dims(a, (0, 3)), (0, 1)),
    "reshape": (lambda m, a: m.reshape(a, (4, -1)), (slice(1, 3),)),
    "ravel": (lambda m, a: m.ravel(a), (slice(3, 9),)),
    "flip": (lambda m, a: m.flip(a), (0, slice(None, 2))),
    "flip_axes": (lambda m, a: m.flip(a, (0, 2)), (1, 1)),
    "fliplr": (lambda m, a: m.fliplr(a), (slice(None), 0)),
    "flipud": (lambda m, a: m.flipud(a), (0,)),
    "rot90": (lambda m, a: m.rot90(a, 1, (1, 2)), (0,)),
    "rot90_k2": (lambda m, a: m.rot90(a, 2), (Ellipsis, 1)),
    "rot90_k3": (lambda m, a: m.rot90(a, -1, (2, 0)), (1,)),
    "view_of_view": (lambda m, a: m.flip(m.swapaxes(a[:, ::2], 0, 1), 2), (0,)),
    "unstack": (lambda m, a: m.unstack(a, axis=1)[2], (1,)),
    "split": (lambda m, a: m.split(a, 2, axis=2)[1], (0, 2)),
    "array_split": (lambda m, a: m.array_split(a, 2, axis=1)[0], (1,)),
    "array_split_points": (lambda m, a: m.array_split(a, [1, -1, 9], axis=-1)[1], (Ellipsis, 0)),
    "hsplit": (lambda m, a: m.hsplit(a, [1])[1], (0,)),
    "vsplit": (lambda m, a: m.vsplit(a, 2)[1], Ellipsis),
    "dsplit": (lambda m, a: m.dsplit(a, [3])[0], (0, 0)),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_views(rng, name, dtype):
    make, key = VIEWS[name]
    check_view(rng, sample(rng, (2, 3, 4), dtype), make, key)


def test_squeeze_and_atleast(rng):
    x = sample(rng, (1, 3, 1, 4), "float64")
    check_view(rng, x, lambda m, a: m.squeeze(a), (1,))
    check_view(rng, x, lambda m, a: m.squeeze(a, axis=(0, 2)), (slice(1, None),))
    check_view(rng, x, lambda m, a: a.squeeze(2), (0, 1))
    for fn in ["atleast_1d", "atleast_2d", "atleast_3d"]:
        for shape in [(), (3,), (2, 3)]:
            x = sample(rng, shape, "int32")
            a = np.asarray(x)
            got, want = getattr(np, fn)(a), getattr(numpy, fn)(x)
            same(got, want)
            if want.shape == x.shape:
                assert got is a
            else:
                check_view(rng, x, lambda m, v, fn=fn: getattr(m, fn)(v))
        a, b = np.asarray(numpy.float32(1)), np.asarray(numpy.ones((2, 2)))
        res = getattr(np, fn)(a, b)
        assert isinstance(res, tuple) and len(res) == 2
        same(res[0], getattr(numpy, fn)(numpy.float32(1)))


def test_ravel_copies_unless_contiguous(rng):
    x = sample(rng, (3, 4), "float32")
    a = np.asarray(x)
    r = np.ravel(a.T)
    same(r, numpy.ravel(x.T))
    r[...] = 0  # a copy: the source keeps its values
    same(a, x)
    r = a[::2].ravel()  # NumPy copies strided 1-d too
    same(r, x[::2].ravel())
    r[...] = 0
    same(a, x)
    same(np.ravel(a, order="K"), numpy.ravel(x, order="K"))
    same(np.ravel(numpy.float64(2.0)), numpy.ravel(numpy.float64(2.0)))


def test_broadcast_to(rng):
    x = sample(rng, (3, 1), "float32")
    a = np.asarray(x)
    b = np.broadcast_to(a, (2, 3, 4))
    want = numpy.broadcast_to(x, (2, 3, 4))
    same(b, want)
    assert b.strides == want.strides
    with pytest.raises(ValueError):
        b[0] = 1.0
    same(numpy.broadcast_to(a, (3, 5)), numpy.broadcast_to(x, (3, 5)))
    same(b.T[1], want.T[1])
    a[...] = 2.0  # the view follows its source
    same(b, numpy.full((2, 3, 4), 2.0, numpy.float32))
    with pytest.raises(ValueError):
        np.broadcast_to(a, (3, 2, 2))


def test_broadcast_arrays(rng):
    x, y = sample(rng, (3,), "int32"), sample(rng, (2, 1), "float64")
    a, b = np.asarray(x), np.asarray(y)
    got = np.broadcast_arrays(a, b)
    want = numpy.broadcast_arrays(x, y)
    assert isinstance(got, tuple)
    for g, w in zip(got, want):
        same(g, w)
        assert g.strides == w.strides
    same(numpy.broadcast_arrays(a, b)[1], want[1])
    c = np.asarray(sample(rng, (2, 3), "int32"))
    assert np.broadcast_arrays(c, c)[0] is c  # already the shape: returned as is
    # still writable (NumPy warns): each source element keeps the value written last
    val = numpy.arange(6).reshape(2, 3)
    hx = x.copy()
    hv = numpy.broadcast_arrays(hx, y)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hv[...] = val
        got[0][...] = val
    same(a, hx)


CONCAT_CASES = [
    ([(2, 3), (4, 3)], 0),
    ([(2, 3), (2, 1), (2, 0), (2, 5)], -1),
    ([(2, 3, 4), (2, 3, 4)], None),
    ([(3,), (5,)], 0),
]


@pytest.mark.parametrize("shapes,axis", CONCAT_CASES)
@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("int8", "float64"), ("bool", "uint8")])
def test_concatenate(rng, shapes, axis, dtypes):
    xs = [sample(rng, s, dtypes[i % 2]) for i, s in enumerate(shapes)]
    got = np.concatenate([np.asarray(x) for x in xs], axis=axis)
    want = numpy.concatenate(xs, axis=axis)
    same(got, want)
    same(numpy.concatenate([np.asarray(x) for x in xs], axis=axis), want)
    got[...] = 0  # a copy
    same(np.asarray(xs[0]), xs[0])


def test_concatenate_options(rng):
    x, y = sample(rng, (2, 3), "int32"), sample(rng, (1, 3), "int32")
    a, b = np.asarray(x), np.asarray(y)
    same(np.concatenate([a, y], dtype="float32"), numpy.concatenate([x, y], dtype="float32"))
    same(np.concat((a, b)), numpy.concat((x, y)))
    out = np.zeros((3, 3), dtype="int64")
    assert np.concatenate([a, b], out=out) is out
    same(out, numpy.concatenate([x, y]).astype("int64"))
    with pytest.raises(TypeError):
        np.concatenate([a, np.asarray(numpy.ones((1, 3)))], dtype="int32")
    with pytest.raises(ValueError):
        np.concatenate([a, np.zeros((2, 2))])
    with pytest.raises(ValueError):
        np.concatenate([a, np.zeros(3)])
    with pytest.raises(ValueError):
        np.concatenate([])
    with pytest.raises(ValueError):
        np.concatenate([np.asarray(numpy.float64(1.0))])
    with pytest.raises(AxisError):
        np.concatenate([a, b], axis=2)


def test_stacking(rng):
    x, y = sample(rng, (2, 3), "float32"), sample(rng, (2, 3), "int16")
    a, b = np.asarray(x), np.asarray(y)
    for axis in [0, 1, 2, -1]:
        same(np.stack([a, b], axis=axis), numpy.stack([x, y], axis=axis))
    same(numpy.stack((a, b)), numpy.stack((x, y)))
    for fn in ["hstack", "vstack", "dstack", "column_stack"]:
        same(getattr(np, fn)([a, b]), getattr(numpy, fn)([x, y]))
        same(getattr(np, fn)([a[0], y[1]]), getattr(numpy, fn)([x[0], y[1]]))
    same(np.hstack([np.asarray(numpy.float32(1)), a[0]]), numpy.hstack([numpy.float32(1), x[0]]))
    same(np.append(a, y), numpy.append(x, y))
    same(np.append(a, b, axis=0), numpy.append(x, y, axis=0))
    out = np.zeros((2, 2, 3), dtype="float64")
    np.stack([a, b], out=out)
    same(out, numpy.stack([x, y]).astype("float64"))
    with pytest.raises(ValueError):
        np.stack([a, b[:1]])
    with pytest.raises(ValueError):
        np.stack([])
    with pytest.raises(AxisError):
        np.stack([a, b], axis=3)


@pytest.mark.parametrize("shift,axis", [(2, None), (-7, 0), (5, 1), ((1, -2), (0, 1)), ((3, 1), 1), (13, -1)])
def test_roll(rng, shift, axis):
    x = sample(rng, (3, 5), "int64")
    a = np.asarray(x)
    got = np.roll(a, shift, axis=axis)
    same(got, numpy.roll(x, shift, axis=axis))
    got[...] = 0
    same(a, x)


def test_roll_edges(rng):
    x = sample(rng, (4,), "float32")
    same(numpy.roll(np.asarray(x), 1), numpy.roll(x, 1))
    same(np.roll(np.zeros((0, 2)), 1, axis=0), numpy.roll(numpy.zeros((0, 2)), 1, axis=0))
    with pytest.raises(AxisError):
        np.roll(np.asarray(x), 1, axis=1)
    with pytest.raises(ValueError):
        np.roll(np.asarray(x), [[1, 2]], axis=0)


@pytest.mark.parametrize("reps", [2, (2, 1), (1, 3), (2, 1, 2), (1, 1), 0, (3, 0)])
def test_tile(rng, reps):
    x = sample(rng, (2, 3), "uint8")
    a = np.asarray(x)
    got = np.tile(a, reps)
    same(got, numpy.tile(x, reps))
    same(numpy.tile(a, reps), numpy.tile(x, reps))
    got[...] = 0
    same(a, x)


def test_tile_errors():
    with pytest.raises(ValueError):
        np.tile(np.zeros(3), -1)
    same(np.tile(np.asarray(numpy.int32(4)), 3), numpy.tile(numpy.int32(4), 3))


@pytest.mark.parametrize("repeats,axis", [(2, None), (3, 0), (0, 1), ([1, 0, 2], 0), ([2, 2, 2, 2], 1),
                                          ([0, 3, 1, 0], -1), (1, None), ([0, 0, 0], 0)])
def test_repeat(rng, repeats, axis):
    x = sample(rng, (3, 4), "float32")
    a = np.asarray(x)
    got = np.repeat(a, repeats, axis=axis)
    same(got, numpy.repeat(x, repeats, axis=axis))
    same(a.repeat(repeats, axis=axis), x.repeat(repeats, axis=axis))
    got[...] = 0
    same(a, x)


def test_repeat_errors():
    a = np.zeros((3,))
    with pytest.raises(ValueError):
        np.repeat(a, [1, 2])
    with pytest.raises(ValueError):
        np.repeat(a, [1, -1, 1])
    with pytest.raises(ValueError):
        np.repeat(a, -1)
    with pytest.raises(AxisError):
        np.repeat(a, 2, axis=1)
    same(np.repeat(np.asarray(numpy.int8(3)), 2), numpy.repeat(numpy.int8(3), 2))


PAD_CASES = [
    ((1, 2), {}),
    (((0, 3), (2, 0)), {"constant_values": 7}),
    (((1, 2), (3, 1)), {"constant_values": ((1, 2), (3, 4))}),
    (3, {"mode": "edge"}),
    (((2, 1), (6, 11)), {"mode": "reflect"}),
    (((4, 9), (1, 0)), {"mode": "reflect", "reflect_type": "odd"}),
    (((2, 7), (5, 3)), {"mode": "symmetric"}),
    (((9, 1), (2, 3)), {"mode": "symmetric", "reflect_type": "odd"}),
    (((4, 9), (13, 2)), {"mode": "wrap"}),
    ({1: (2, 3)}, {"mode": "wrap"}),
    (2, {"mode": "empty"}),
]


@pytest.mark.parametrize("width,kwargs", PAD_CASES)
@pytest.mark.parametrize("dtype", ["float64", "int16"])
def test_pad(rng, width, kwargs, dtype):
    x = sample(rng, (3, 4), dtype)
    a = np.asarray(x)
    got = np.pad(a, width, **kwargs)
    want = numpy.pad(x, width, **kwargs)
    if kwargs.get("mode") == "empty":  # NumPy leaves the pad area undefined
        assert got.shape == want.shape and got.dtype == want.dtype
        same(got[2:-2, 2:-2], x)
        return
    same(got, want)
    same(numpy.pad(a, width, **kwargs), want)


def test_pad_edges(rng):
    x = sample(rng, (1, 5), "uint8")
    a = np.asarray(x)
    for mode in ["reflect", "symmetric", "edge", "wrap"]:
        same(np.pad(a, ((2, 3), (7, 1)), mode=mode), numpy.pad(x, ((2, 3), (7, 1)), mode=mode))
    b = sample(rng, (5,), "bool")
    same(np.pad(np.asarray(b), 3, mode="reflect", reflect_type="odd"),
         numpy.pad(b, 3, mode="reflect", reflect_type="odd"))
    same(np.pad(np.asarray(b), (1, 2), constant_values=True), numpy.pad(b, (1, 2), constant_values=True))
    same(np.pad(np.zeros((0, 3)), ((0, 0), (1, 1)), mode="edge"), numpy.pad(numpy.zeros((0, 3)), ((0, 0), (1, 1)),
                                                                             mode="edge"))
    with pytest.raises(ValueError):
        np.pad(np.zeros((0, 3)), 1, mode="wrap")
    with pytest.raises(ValueError):
        np.pad(a, -1)
    with pytest.raises(TypeError):
        np.pad(a, 1.5)
    with pytest.raises(ValueError):
        np.pad(a, 1, mode="nonsense")
    with pytest.raises(ValueError):
        np.pad(a, 1, mode="edge", constant_values=3)


def test_pad_other_modes_fall_back(rng, expects_fallback):
    # the statistic modes (mean, ...) are NumPy's code run lazily (test_np_pycode.py);
    # linear_ramp's np.linspace of array ends asks ``if any_step_zero:``, a value
    x = sample(rng, (3, 4), "float64")
    same(np.pad(np.asarray(x), 2, mode="linear_ramp"), numpy.pad(x, 2, mode="linear_ramp"))
    assert "numpy.pad" in metrics.fallbacks()


@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("int8", "float64"), ("uint8", "int32"),
                                    ("bool", "int64")])
def test_where(rng, dtypes):
    c = sample(rng, (3, 4), "bool")
    x, y = sample(rng, (3, 4), dtypes[0]), sample(rng, (4,), dtypes[1])
    same(np.where(np.asarray(c), np.asarray(x), np.asarray(y)), numpy.where(c, x, y))
    same(numpy.where(np.asarray(c), np.asarray(x), y), numpy.where(c, x, y))
    same(np.where(np.asarray(c), np.asarray(x), 2), numpy.where(c, x, 2))  # weak Python scalar
    same(np.where(np.asarray(x) > 0, 1.5, np.asarray(y)), numpy.where(x > 0, 1.5, y))


def test_where_edges(rng):
    x = sample(rng, (4,), "int8")
    same(np.where(np.asarray(x) > 0, np.asarray(x), 300), numpy.where(x > 0, x, 300))  # wraps, as in NumPy
    same(np.where([True, False, True, False], np.asarray(x), -1), numpy.where([True, False, True, False], x, -1))
    f = numpy.array([0.0, numpy.nan, 2.0, -1.0])
    same(np.where(np.asarray(f), 1, 0), numpy.where(f, 1, 0))
    with pytest.raises(ValueError):
        np.where(np.asarray(x) > 0, np.asarray(x))
    with pytest.raises(ValueError):
        np.where(np.zeros(3, dtype=bool), np.zeros(4), 0)


def test_where_one_argument_is_nonzero(rng):  # lazy: the fixture checks no fallback
    x = sample(rng, (3, 4), "float32")
    got = np.where(np.asarray(x) > 0)
    for g, w in zip(got, numpy.where(x > 0)):
        same(g, w)


@pytest.mark.parametrize("dtype", ["float32", "int8", "uint8"])
def test_clip(rng, dtype):
    x = sample(rng, (3, 5), dtype)
    a = np.asarray(x)
    cases = [(-3, 7), (None, 4), (2, None), (-1000, 300), (5, 2), (2.5, 10), (None, None)]
    for lo, hi in cases:
        same(np.clip(a, lo, hi), numpy.clip(x, lo, hi))
    same(np.clip(a, min=1, max=9), numpy.clip(x, min=1, max=9))
    lo = sample(rng, (5,), dtype)
    same(np.clip(a, np.asarray(lo), 12), numpy.clip(x, lo, 12))
    same(numpy.clip(a, 1, 9), numpy.clip(x, 1, 9))
    same(a.clip(2, 8), x.clip(2, 8))
    same(a.clip(max=3), x.clip(max=3))
    out = np.zeros((3, 5), dtype=dtype)
    assert np.clip(a, 1, 9, out=out) is out
    same(out, numpy.clip(x, 1, 9))


def test_clip_nan_and_errors():
    f = numpy.array([numpy.nan, -2.0, 0.5, 3.0])
    same(np.clip(np.asarray(f), -1, 1), numpy.clip(f, -1, 1))
    # one bound is the Array API standard's clip(x, min) (lazycore.numpy is the arrays' namespace: SciPy's
    # array-API code passes it, xp.clip(p, 0.)), where NumPy's own clip raises TypeError
    same(np.clip(np.asarray(f), 1), numpy.clip(f, 1, None))
    with pytest.raises(TypeError):
        np.clip(np.asarray(f), a_max=1)
    with pytest.raises(ValueError):
        np.clip(np.asarray(f), 0, 1, min=0)


@pytest.mark.parametrize("dtype", ["float64", "int32", "uint8", "bool"])
def test_diff(rng, dtype):
    x = sample(rng, (3, 6), dtype)
    a = np.asarray(x)
    for n, axis in [(1, -1), (2, 1), (1, 0), (3, -1)]:
        same(np.diff(a, n=n, axis=axis), numpy.diff(x, n=n, axis=axis))
    same(numpy.diff(a), numpy.diff(x))
    pre = sample(rng, (3, 2), dtype)
    same(np.diff(a, prepend=np.asarray(pre), append=x[:, 0].dtype.type(1)),
         numpy.diff(x, prepend=pre, append=x[:, 0].dtype.type(1)))
    assert np.diff(a, n=0) is a


def test_diff_errors():
    with pytest.raises(ValueError):
        np.diff(np.asarray(numpy.float64(1.0)))
    with pytest.raises(ValueError):
        np.diff(np.zeros(3), n=-1)
    with pytest.raises(AxisError):
        np.diff(np.zeros(3), axis=1)


def test_view_errors(rng):
    a = np.asarray(sample(rng, (2, 3, 4), "float32"))
    with pytest.raises(ValueError):
        np.transpose(a, (0, 1))
    with pytest.raises(AxisError):
        np.transpose(a, (0, 1, 3))
    with pytest.raises(AxisError):
        np.swapaxes(a, 0, 3)
    with pytest.raises(AxisError):
        np.moveaxis(a, 3, 0)
    with pytest.raises(ValueError):
        np.moveaxis(a, [0, 1], [0])
    with pytest.raises(AxisError):
        np.expand_dims(a, 4)
    with pytest.raises(ValueError):
        np.squeeze(a, axis=1)
    with pytest.raises(AxisError):
        np.squeeze(a, axis=5)
    with pytest.raises(AxisError):
        np.flip(a, 3)
    with pytest.raises(ValueError):
        np.fliplr(a[0, 0])
    with pytest.raises(ValueError):
        np.rot90(a, axes=(0, 0))
    with pytest.raises(ValueError):
        np.split(a, 3, axis=2)
    with pytest.raises(ValueError):
        np.array_split(a, 0)
    with pytest.raises(ValueError):
        np.hsplit(np.asarray(numpy.float32(1)), 1)
    with pytest.raises(ValueError):
        np.reshape(a, (5, -1))
    with pytest.raises(ValueError):
        np.unstack(np.asarray(numpy.float32(1)))
    with pytest.raises(AxisError):
        np.unstack(a, axis=3)


def test_apply_along_axis_traces_each_slice(rng):  # lazy: the fixture checks no fallback
    x = sample(rng, (3, 4, 2), "float64")
    a = np.asarray(x)
    same(np.apply_along_axis(lambda v: v.sum(), 1, a), numpy.apply_along_axis(lambda v: v.sum(), 1, x))
    outer = lambda v: numpy.outer(v, v[:2])  # noqa: E731  (result dims go where the axis was)
    same(np.apply_along_axis(outer, 0, a), numpy.apply_along_axis(outer, 0, x))
    # later results are cast to the first one's dtype and broadcast to its shape, as NumPy's buffer takes them
    count = iter(range(100))
    mixed = lambda v: numpy.full(1, 1.5) * v[:1] if next(count) else (v > 0).astype(numpy.int64)  # noqa: E731
    want = numpy.apply_along_axis(mixed, -1, x)
    count = iter(range(100))
    same(np.apply_along_axis(mixed, -1, a), want)
    with pytest.raises(ValueError, match="Cannot apply_along_axis when any iteration dimensions are 0"):
        np.apply_along_axis(numpy.sum, 0, np.zeros((3, 0)))
    grow = iter(range(100))
    with pytest.raises(ValueError, match=r"could not broadcast input array from shape \(2,\) into shape \(1,\)"):
        np.apply_along_axis(lambda v: v[: next(grow) + 1], 1, a)
