"""Lazy NumPy scalars against NumPy's: where NumPy returns a scalar, what it allows, what it refuses."""

import warnings

import numpy
import pytest

import lazycore.numpy as np
from lazycore.frontends.numpy.scalars import scalar
from npcheck import same


def _outcome(fn, xp, *arrays):
    """(kind, dtype, shape) of ``fn``'s result, or the exception type it raised."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = fn(xp, *arrays)
    except Exception as e:  # noqa: BLE001  (the type is what is compared)
        return type(e)
    lazy = xp is np
    kind = ("scalar" if isinstance(r, scalar) else "array") if lazy else (
        "scalar" if isinstance(r, numpy.generic) else "array")
    return kind, numpy.dtype(r.dtype), r.shape


VECTOR = numpy.array([3.0, -1.0, 2.5], numpy.float32)
MATRIX = numpy.arange(6, dtype=numpy.int64).reshape(2, 3)
ZERO_D = numpy.array(4.0)

PRODUCERS = {
    "a[0]": lambda xp, v, m, z: v[0],
    "a[-1]": lambda xp, v, m, z: v[-1],
    "m[1, 2]": lambda xp, v, m, z: m[1, 2],
    "m[0]": lambda xp, v, m, z: m[0],
    "z[()]": lambda xp, v, m, z: z[()],
    "z[...]": lambda xp, v, m, z: z[...],
    "a[0, ...]": lambda xp, v, m, z: m[0, 1, ...],
    "a[[0]]": lambda xp, v, m, z: v[xp.asarray([0])],
    "a.sum()": lambda xp, v, m, z: v.sum(),
    "sum(m, axis=1)": lambda xp, v, m, z: xp.sum(m, axis=1),
    "sum(m, keepdims)": lambda xp, v, m, z: xp.sum(m, keepdims=True),
    "mean(a)": lambda xp, v, m, z: xp.mean(v),
    "max(m)": lambda xp, v, m, z: xp.max(m),
    "argmax(a)": lambda xp, v, m, z: xp.argmax(v),
    "argmax(m, axis=0)": lambda xp, v, m, z: xp.argmax(m, axis=0),
    "cumsum(z)": lambda xp, v, m, z: xp.cumsum(z),
    "std(a)": lambda xp, v, m, z: xp.std(v),
    "any(m)": lambda xp, v, m, z: xp.any(m),
    "z + z": lambda xp, v, m, z: z + z,
    "z + 1": lambda xp, v, m, z: z + 1,
    "-z": lambda xp, v, m, z: -z,
    "exp(z)": lambda xp, v, m, z: xp.exp(z),
    "a[0] * a[1]": lambda xp, v, m, z: v[0] * v[1],
    "z + a": lambda xp, v, m, z: z + v,
    "add(z, z, out=z)": lambda xp, v, m, z: xp.add(z, z, out=z),
    "a @ a": lambda xp, v, m, z: v @ v,
    "dot(a, a)": lambda xp, v, m, z: xp.dot(v, v),
    "asarray(a[0])": lambda xp, v, m, z: xp.asarray(v[0]),
    "z.astype": lambda xp, v, m, z: z.astype(numpy.int32),
    "a[0].astype": lambda xp, v, m, z: v[0].astype(numpy.int32),
    "a[0].copy()": lambda xp, v, m, z: v[0].copy(),
    "a[0].reshape(1)": lambda xp, v, m, z: v[0].reshape(1),
    "a[0].T": lambda xp, v, m, z: v[0].T,
    "a[0][...]": lambda xp, v, m, z: v[0][...],
    "a[0][()]": lambda xp, v, m, z: v[0][()],
    "a[0][None]": lambda xp, v, m, z: v[0][None],
    "a[0][0]": lambda xp, v, m, z: v[0][0],
    "where(z > 0, z, z)": lambda xp, v, m, z: xp.where(z > 0, z, z),
    "take(a, 1)": lambda xp, v, m, z: xp.take(v, 1),
}


@pytest.mark.parametrize("name", list(PRODUCERS))
def test_scalars_come_where_numpy_gives_them(name):
    fn = PRODUCERS[name]
    want = _outcome(fn, numpy, VECTOR.copy(), MATRIX.copy(), ZERO_D.copy())
    got = _outcome(fn, np, np.asarray(VECTOR), np.asarray(MATRIX), np.asarray(ZERO_D))
    assert got == want


def _assign(key):
    def fn(s, a):
        s[key] = 1

    return fn


REFUSED = {
    "add(s, 1, out=s)": lambda s, a: np_or_numpy(a).add(s, 1, out=s),
    "a.sum(out=s)": lambda s, a: a.sum(out=s),
}


def np_or_numpy(a):
    return np if isinstance(a, np.ndarray) else numpy


@pytest.mark.parametrize("name", list(REFUSED))
def test_scalars_refuse_out_as_numpys(name):
    ref, lazy = VECTOR.copy(), np.asarray(VECTOR)
    with pytest.raises(Exception) as want:
        REFUSED[name](ref[1], ref)
    with pytest.raises(want.type) as got:
        REFUSED[name](lazy[1], lazy)
    if want.type is TypeError:
        assert str(got.value) == str(want.value)
    same(lazy, ref)


ITEM_WRITES = {"s[...] = 1": Ellipsis, "s[..., :1] = 1": (Ellipsis, slice(None, 1)), "s[0] = 1": 0, "s[()] = 1": (),
               "s[True] = 1": True, "s[False] = 1": False}


@pytest.mark.parametrize("name", list(ITEM_WRITES))
def test_item_assignment_writes_a_scalar_as_a_0d_array(name):
    """NumPy's scalars refuse item assignment; lazycore.numpy is also the Array API
    namespace, where a 0-d result is an array that takes it (array-api-extra's
    ``at(r, mask).set(v)`` writes a reduction's result in place: array-api-compat
    recognizes only numpy.generic as read-only). So a lazy scalar is written as NumPy
    writes a 0-d array, with its errors, and the array it came from is unchanged."""
    key = ITEM_WRITES[name]
    ref, lazy = VECTOR.copy(), np.asarray(VECTOR)
    with pytest.raises(TypeError):
        _assign(key)(ref[1], ref)  # NumPy's scalar: refused
    zero_d = numpy.array(ref[1])
    try:
        _assign(key)(zero_d, None)
    except Exception as e:  # noqa: BLE001  (the type is what is compared)
        want = type(e)
    else:
        want = None
    s = lazy[1]
    assert isinstance(s, scalar)
    if want is None:
        _assign(key)(s, lazy)
        assert isinstance(s, scalar)
        same(s, zero_d[()])
    else:
        with pytest.raises(want):
            _assign(key)(s, lazy)
        same(s, VECTOR[1])
    same(lazy, ref)  # the array the scalar came from is unchanged


@pytest.mark.parametrize("other", [numpy.arange(3), numpy.float64(2.0), numpy.array([True, False])])
def test_inplace_operators_on_scalars_rebind(other):
    ref, lazy = VECTOR.copy(), np.asarray(VECTOR)
    r, s = ref[0], lazy[0]
    first = s
    r += other
    s += other if isinstance(other, numpy.generic) else np.asarray(other)
    assert s is not first and isinstance(first, scalar)
    same(s, r)
    assert isinstance(s, scalar) == isinstance(r, numpy.generic)
    same(lazy, ref)  # the array the scalar came from is unchanged
    assert float(first) == float(VECTOR[0])


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "any", "all", "nansum", "nanmax", "ptp",
                                  "argmax", "mean", "std", "var", "cumsum"])
@pytest.mark.parametrize("axis", [0, -1, 1, (0,)])
@pytest.mark.parametrize("source", ["scalar", "0-d array"])
def test_axis_of_a_scalar_or_0d_array_is_numpys(name, axis, source):
    def fn(xp, v, m, z):
        x = v[1] if source == "scalar" else z
        return getattr(xp, name)(x, axis=axis)

    want = _outcome(fn, numpy, VECTOR.copy(), MATRIX.copy(), ZERO_D.copy())
    got = _outcome(fn, np, np.asarray(VECTOR), np.asarray(MATRIX), np.asarray(ZERO_D))
    assert got == want


def test_scalar_values_repr_and_hash_are_numpys():
    ref, lazy = VECTOR.copy(), np.asarray(VECTOR)
    assert repr(lazy[0]) == repr(ref[0])
    assert hash(lazy[2]) == hash(ref[2])
    assert float(lazy[1]) == float(ref[1]) and lazy.sum().item() == ref.sum().item()
    assert not isinstance(lazy[0], numpy.generic)  # a lazy scalar is not NumPy's type
    same(lazy[0] + lazy[1], ref[0] + ref[1])
    s = lazy[0]
    s.fill(7.0)  # NumPy fills a temporary copy
    assert float(s) == float(VECTOR[0])


def test_read_only_outputs_are_refused_before_casts_and_broadcasting():
    """NumPy's in-place ufunc checks the output's writeability, then its cast,
    then the broadcast (``a += b`` with int ``a`` and float ``b`` of another shape)."""
    cases = [
        (numpy.zeros((2, 3), numpy.int64), numpy.ones((3, 3))),  # cast refused before broadcasting
        (numpy.zeros((3,), numpy.int64), numpy.ones((2, 3))),  # cast refused (and shape)
        (numpy.zeros((2, 3)), numpy.ones((3, 3))),  # broadcasting
    ]
    for a, b in cases:
        with pytest.raises(Exception) as want:
            a += b
        la, lb = np.asarray(a), np.asarray(b)
        with pytest.raises(want.type):
            la += lb
    r = numpy.broadcast_to(numpy.zeros(3, numpy.int64), (2, 3))
    lr = np.broadcast_to(np.asarray(numpy.zeros(3, numpy.int64)), (2, 3))
    for rhs in (numpy.ones((3, 3)), 1.5):
        with pytest.raises(ValueError, match="read-only"):
            r += rhs
        with pytest.raises(ValueError, match="read-only"):
            lr += rhs if isinstance(rhs, float) else np.asarray(rhs)


@pytest.mark.parametrize("src", ["float64", "float32", "float16"])
@pytest.mark.parametrize("dst", ["int32", "int64"])
def test_nan_inf_and_out_of_range_floats_convert_to_signed_ints_as_numpys(src, dst):
    """x86's conversion, which NumPy's is: INT_MIN for NaN and values out of range."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumPy's overflow and invalid-value warnings
        x = numpy.array([numpy.nan, numpy.inf, -numpy.inf, 3e9, -3e9, 2.7, -2.7, 1e19, -1e19, 65504.0, 0.0], src)
        want = x.astype(dst)
    same(np.asarray(x).astype(dst), want)
