"""lazycore.numpy products and norms against NumPy: matmul (and ``@``), dot, vdot, inner,
outer, tensordot, einsum, trace, linalg.norm and friends; result dtypes, NumPy's errors,
and the counted fallbacks for factorizations."""

import numpy
import pytest

import lazycore.numpy as np
from lazycore.frontends.numpy.scalars import scalar as lazy_scalar
from lazycore.observe import metrics
import npcheck


def sample(rng, shape, dtype):
    return npcheck.sample(rng, shape, dtype, -9, 9)


def same(got, want, rtol=1e-5):
    npcheck.same(got, want, rtol=rtol)


@pytest.fixture(autouse=True)
def _reset():
    metrics.reset()


MATMUL_SHAPES = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
                 ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4,)), ((4,), (2, 4, 3))]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("float64", "int32"), ("int64", "int64"),
                                    ("bool", "bool")], ids=str)
def test_matmul(rng, shapes, dtypes):
    x, y = sample(rng, shapes[0], dtypes[0]), sample(rng, shapes[1], dtypes[1])
    want = numpy.matmul(x, y)
    a, b = np.asarray(x), np.asarray(y)
    same(np.matmul(a, b), want)
    same(a @ b, want)
    same(x @ b, want)  # __rmatmul__ (a NumPy array on the left defers to the lazy one)
    assert metrics.fallbacks() == {}


def test_matmul_in_place_and_errors(rng):
    x, y = sample(rng, (3, 4), "float32"), sample(rng, (4, 4), "float32")
    a = np.asarray(x)
    view = a[1:]
    a @= np.asarray(y)
    same(a, x @ y)
    same(view, (x @ y)[1:])
    with pytest.raises(ValueError):
        a @= np.asarray(sample(rng, (4, 2), "float32"))  # would change a's shape
    ints = np.asarray(sample(rng, (2, 2), "int64"))
    with pytest.raises(TypeError):
        ints @= np.asarray(sample(rng, (2, 2), "float64"))
    with pytest.raises(ValueError, match="mismatch in its core dimension"):
        np.asarray(x) @ np.asarray(sample(rng, (5, 2), "float32"))
    with pytest.raises(ValueError):
        np.matmul(np.asarray(numpy.float32(2)), np.asarray(y))
    with pytest.raises(ValueError):
        np.matmul(np.asarray(numpy.ones((2, 3, 4))), np.asarray(numpy.ones((3, 4, 5))))


DOT_SHAPES = [((3, 4), (4, 5)), ((4,), (4,)), ((2, 3, 4), (4,)), ((2, 3, 4), (5, 4, 2)), ((), (3, 2)),
              ((4,), (2, 4, 3))]


@pytest.mark.parametrize("shapes", DOT_SHAPES, ids=str)
@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("int32", "float64"), ("int8", "int8")], ids=str)
def test_dot(rng, shapes, dtypes):
    x, y = sample(rng, shapes[0], dtypes[0]), sample(rng, shapes[1], dtypes[1])
    want = numpy.dot(x, y)
    a, b = np.asarray(x), np.asarray(y)
    same(np.dot(a, b), want)
    same(numpy.dot(a, b), want)  # NumPy's own dot on lazy arrays stays lazy
    same(a.dot(b), want)
    assert metrics.fallbacks() == {}


def test_dot_scalar_is_strong_and_errors(rng):
    x = sample(rng, (3,), "float32")
    same(np.dot(np.asarray(x), 2), numpy.dot(x, 2))  # float64, as NumPy (no weak scalars in dot)
    with pytest.raises(ValueError, match="not aligned"):
        np.dot(np.asarray(numpy.ones((2, 3))), np.asarray(numpy.ones((4, 5))))


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_vdot_inner_outer(rng, dtype):
    x, y = sample(rng, (3, 4), dtype), sample(rng, (2, 4), dtype)
    a, b = np.asarray(x), np.asarray(y)
    same(np.vdot(a, np.asarray(x.T.copy())), numpy.vdot(x, x.T.copy()))
    same(np.inner(a, b), numpy.inner(x, y))
    same(np.inner(a[0], b[1]), numpy.inner(x[0], y[1]))
    same(np.outer(a, b), numpy.outer(x, y))
    same(numpy.outer(a, y), numpy.outer(x, y))
    assert metrics.fallbacks() == {}
    with pytest.raises(ValueError):
        np.inner(a, np.asarray(numpy.ones((2, 3))))
    with pytest.raises(ValueError):
        np.vdot(a, b)


@pytest.mark.parametrize("shapes,axes", [
    (((3, 4, 5), (4, 5, 2)), 2),
    (((3, 4), (4, 5)), 1),
    (((3, 4), (2,)), 0),
    (((3, 4, 5), (5, 3, 2)), ([0, 2], [1, 0])),
    (((3, 4, 5), (4, 6)), (1, 0)),
], ids=str)
def test_tensordot(rng, shapes, axes):
    x, y = sample(rng, shapes[0], "float64"), sample(rng, shapes[1], "float64")
    want = numpy.tensordot(x, y, axes)
    same(np.tensordot(np.asarray(x), np.asarray(y), axes), want)
    same(numpy.tensordot(np.asarray(x), y, axes), want)
    assert metrics.fallbacks() == {}
    with pytest.raises(ValueError, match="shape-mismatch"):
        np.tensordot(np.asarray(x), np.asarray(y), ([0], [0, 1]))


EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("i,i->", [(6,), (6,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ijk->", [(2, 3, 4)]),
    ("ijk->kj", [(2, 3, 4)]),
    ("ijk,ijk->i", [(2, 3, 4), (2, 3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ij,kj->ki", [(3, 4), (5, 4)]),
    ("...k,kl->...l", [(2, 3, 4), (4, 5)]),
    ("i...,...j", [(2, 3), (3, 4)]),
    ("ij,jk->ik", [(2, 1), (3, 4)]),  # size-1 dims broadcast, as in NumPy
    ("Ba,aB", [(2, 3), (3, 2)]),
    ("abc,cd,a->bd", [(2, 3, 4), (4, 5), (2,)]),
    ("ij,kl,jk->il", [(2, 3), (4, 5), (3, 4)]),  # the first two share nothing: contracted later
    ("i,i,i->i", [(5,), (5,), (5,)]),
]


@pytest.mark.parametrize("subscripts,shapes", EINSUM, ids=[e[0] for e in EINSUM])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_einsum(rng, subscripts, shapes, dtype):
    xs = [sample(rng, s, dtype) for s in shapes]
    want = numpy.einsum(subscripts, *xs)
    same(np.einsum(subscripts, *[np.asarray(x) for x in xs]), want, rtol=1e-4)
    same(numpy.einsum(subscripts, np.asarray(xs[0]), *xs[1:]), want, rtol=1e-4)
    assert metrics.fallbacks() == {}


def test_einsum_dtypes_view_and_fallbacks(rng):
    x, y = sample(rng, (3, 4), "int8"), sample(rng, (4, 2), "float32")
    same(np.einsum("ij,jk", np.asarray(x), np.asarray(y)), numpy.einsum("ij,jk", x, y))
    m = sample(rng, (3, 3), "bool")
    same(np.einsum("ij,jk->ik", np.asarray(m), np.asarray(m)), numpy.einsum("ij,jk->ik", m, m))
    a = np.asarray(numpy.arange(6.0).reshape(2, 3))
    t = np.einsum("ij->ji", a)  # NumPy returns a view here
    a[0, 0] = 9
    assert t[0, 0].item() == 9
    assert metrics.fallbacks() == {}
    sq = sample(rng, (3, 3), "float64")
    same(np.einsum("ii->i", np.asarray(sq)), numpy.einsum("ii->i", sq))  # a diagonal: lazy too
    assert metrics.fallbacks() == {}
    same(np.einsum("ij->ji", np.asarray(sq), order="F"), numpy.einsum("ij->ji", sq, order="F"))  # NumPy's layout
    assert "numpy.einsum" in metrics.fallbacks()


@pytest.mark.parametrize("shape,offset,axes", [((4, 4), 0, (0, 1)), ((3, 5), 1, (0, 1)), ((3, 5), -2, (0, 1)),
                                               ((2, 3, 4), 1, (2, 0)), ((3, 3), 5, (0, 1))])
@pytest.mark.parametrize("dtype", ["float32", "int8", "bool"])
def test_trace(rng, shape, offset, axes, dtype):
    x = sample(rng, shape, dtype)
    want = numpy.trace(x, offset, *axes)
    same(np.trace(np.asarray(x), offset, *axes), want)
    same(numpy.trace(np.asarray(x), offset, *axes), want)
    same(np.asarray(x).trace(offset, *axes), want)
    assert metrics.fallbacks() == {}


VECTOR_ORDS = [None, 1, 2, numpy.inf, -numpy.inf, 0, 3, 0.5]
MATRIX_ORDS = [None, "fro", 1, -1, numpy.inf, -numpy.inf]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_norm(rng, dtype):
    x = sample(rng, (3, 4, 5), dtype)
    a = np.asarray(x)
    for ord in VECTOR_ORDS:
        for axis, keepdims in ((1, False), (-1, True)):
            same(np.linalg.norm(a, ord=ord, axis=axis, keepdims=keepdims),
                 numpy.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims), rtol=1e-4)
    for ord in MATRIX_ORDS:
        for axis, keepdims in (((0, 2), False), ((2, 1), True)):
            same(np.linalg.norm(a, ord=ord, axis=axis, keepdims=keepdims),
                 numpy.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims), rtol=1e-4)
    same(np.linalg.norm(a), numpy.linalg.norm(x), rtol=1e-4)
    same(np.linalg.norm(a, keepdims=True), numpy.linalg.norm(x, keepdims=True), rtol=1e-4)
    same(np.linalg.norm(a[0], 1), numpy.linalg.norm(x[0], 1), rtol=1e-4)
    same(np.linalg.norm(a[0, 0], numpy.inf), numpy.linalg.norm(x[0, 0], numpy.inf), rtol=1e-4)
    same(numpy.linalg.norm(a, axis=0), numpy.linalg.norm(x, axis=0), rtol=1e-4)  # NumPy's norm stays lazy
    assert metrics.fallbacks() == {}


def test_norm_errors_and_svd_fallback(rng):
    x = sample(rng, (3, 4), "float64")
    a = np.asarray(x)
    with pytest.raises(ValueError):
        np.linalg.norm(a, ord="fro", axis=1)
    with pytest.raises(ValueError):
        np.linalg.norm(a, ord=3, axis=(0, 1))
    with pytest.raises(ValueError, match="Duplicate"):
        np.linalg.norm(a, axis=(1, -1))
    with pytest.raises(ValueError, match="Improper"):
        np.linalg.norm(np.asarray(numpy.ones((2, 2, 2))), ord=1)
    with pytest.raises(numpy.exceptions.AxisError):
        np.linalg.norm(a, axis=2)
    numpy.testing.assert_allclose(numpy.asarray(np.linalg.norm(a, 2)), numpy.linalg.norm(x, 2))
    assert metrics.fallbacks() == {}  # the singular values of lazy.svd (tests/numpy/test_linalg_lapack.py)


def test_array_api_linalg(rng):
    x, y = sample(rng, (2, 3, 4), "float64"), sample(rng, (2, 4, 3), "float64")
    a, b = np.asarray(x), np.asarray(y)
    same(np.linalg.matmul(a, b), numpy.linalg.matmul(x, y))
    same(np.linalg.vecdot(a, np.asarray(x)), numpy.linalg.vecdot(x, x))
    same(np.linalg.vector_norm(a, ord=1), numpy.linalg.vector_norm(x, ord=1))
    same(np.linalg.vector_norm(a, axis=(0, 2)), numpy.linalg.vector_norm(x, axis=(0, 2)))
    same(np.linalg.matrix_norm(a, ord=numpy.inf), numpy.linalg.matrix_norm(x, ord=numpy.inf))
    same(np.linalg.matrix_transpose(a), numpy.linalg.matrix_transpose(x))
    same(np.linalg.trace(np.asarray(x[:, :3])), numpy.linalg.trace(x[:, :3]))
    same(np.linalg.outer(a[0, 0], b[0, 0]), numpy.linalg.outer(x[0, 0], y[0, 0]))
    same(np.linalg.tensordot(a, b[0], axes=1), numpy.linalg.tensordot(x, y[0], axes=1))
    assert metrics.fallbacks() == {}
    with pytest.raises(ValueError):
        np.linalg.outer(a, b)


def test_factorizations_are_lowered(rng):
    x = sample(rng, (4, 4), "float64") + 4 * numpy.eye(4)
    a = np.asarray(x)
    same(np.linalg.inv(a), numpy.linalg.inv(x))
    same(np.linalg.solve(a, np.asarray(x[:, 0])), numpy.linalg.solve(x, x[:, 0]))
    numpy.testing.assert_allclose(numpy.asarray(np.linalg.det(a)), numpy.linalg.det(x))
    assert metrics.fallbacks() == {}  # lazy.lu and triangular solves (tests/numpy/test_linalg_lapack.py)
    assert np.linalg.LinAlgError is numpy.linalg.LinAlgError


def test_factorizations_return_numpys_named_tuples(rng):
    x = sample(rng, (4, 4), "float64") + 4 * numpy.eye(4)
    sym = x + x.T
    a, s = np.asarray(x), np.asarray(sym)
    for got, want in ((np.linalg.eigh(s), numpy.linalg.eigh(sym)), (np.linalg.svd(a), numpy.linalg.svd(x)),
                      (np.linalg.slogdet(a), numpy.linalg.slogdet(x)), (np.linalg.qr(a), numpy.linalg.qr(x))):
        assert type(got) is type(want) and got._fields == want._fields
        for g, w in zip(got, want):
            if isinstance(w, numpy.ndarray):
                same(g, w)
            else:  # slogdet's sign and logarithm: scalars, lazy ones as every 0-d result here
                assert type(g) is lazy_scalar and g.dtype == w.dtype and numpy.isclose(g, w)
    assert metrics.fallbacks() == {}  # the factorization ops (tests/numpy/test_linalg_lapack.py)
