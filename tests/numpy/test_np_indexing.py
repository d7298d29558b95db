"""lazycore.numpy advanced indexing against NumPy: integer-array reads (gather), their
assignment (scatter), boolean-mask assignment (select), take / take_along_axis /
put_along_axis, NumPy's errors, and nonzero (a read mask, its coordinates uploaded)."""

import numpy
import pytest

import lazycore.numpy as np
from lazycore.observe import metrics
from npcheck import sample, same


@pytest.fixture(autouse=True)
def _reset():
    metrics.reset()


def lazy_key(key, kind):
    """The key with its index arrays as lists, NumPy arrays or lazy arrays."""
    def conv(k):
        if isinstance(k, numpy.ndarray):
            return {"list": k.tolist(), "numpy": k, "lazy": np.asarray(k)}[kind]
        return k

    return tuple(conv(k) for k in key) if isinstance(key, tuple) else conv(key)


I = numpy.array
READ_KEYS = [
    I([0, 2]),
    (slice(None), I([1, -1])),
    (I([0, 1]), I([2, 3])),
    (I([[0], [3]]), I([1, 2, -1])),            # index arrays broadcast
    (0, slice(None), I([1, 2])),               # an int with an array: advanced, not adjacent: goes first
    (slice(None), I([0, 1]), 2),               # adjacent: stays in place
    (slice(None), I([0, 1]), None, I([0, 1])),  # None separates: goes first
    (Ellipsis, I([4, 0, 4])),
    (I([1, 3]), Ellipsis, I([1, 0])),          # ``...`` separates too
    (None, I([0, 1]), slice(1, 4)),
    (slice(None, None, -1), I([[0, -1], [1, 2]])),
    (I([2, 1]), slice(1, 5, 2), I([0, 5])),
    I([], dtype=numpy.intp),
]


@pytest.mark.parametrize("key", READ_KEYS, ids=lambda k: repr(k).replace(" ", "")[:40])
def test_integer_array_reads(rng, key):
    x = sample(rng, (4, 5, 6), "float32")
    a = np.asarray(x)
    want = x[key]
    for kind in ("numpy", "lazy"):
        same(a[lazy_key(key, kind)], want)
    assert metrics.fallbacks() == {}


@pytest.mark.parametrize("dtype", ["int32", "bool", "float64"])
def test_reads_are_copies_and_lists_work(rng, dtype):
    x = sample(rng, (5, 3), dtype)
    a = np.asarray(x)
    got = a[[4, 0, -2]]
    same(got, x[[4, 0, -2]])
    a[4] = x[0]  # the result is a copy: later writes to a do not show through
    same(got, x[[4, 0, -2]])
    same(a[[[1, 1], [2, 2]], [0, 2]], x[[[1, 1], [2, 2]], [0, 2]])
    assert metrics.fallbacks() == {}


def test_index_errors():
    x = numpy.zeros((3, 4))
    a = np.asarray(x)
    for key in ([0, 3], (slice(None), [-5]), (0, [4]), ([0, 1], [0, 1, 2]), (numpy.array([1.0]),), (0, 0, [0]),
                ([0], Ellipsis, Ellipsis)):
        with pytest.raises(IndexError) as want:
            x[key]
        with pytest.raises(IndexError) as got:
            a[key]
        assert str(got.value).strip() == str(want.value).strip()
    with pytest.raises(IndexError):
        a[np.asarray(numpy.array([0.5]))]
    with pytest.raises(IndexError):
        np.asarray(numpy.zeros((2, 0)))[:, [0]]


def test_lazy_indices_wrap_negative(rng):
    x = sample(rng, (6,), "int64")
    a = np.asarray(x)
    idx = numpy.array([-1, -6, 3])
    same(a[np.asarray(idx)], x[idx])
    assert metrics.fallbacks() == {}


@pytest.mark.parametrize("key,vshape", [
    (I([0, 2]), ()),
    (I([3, 1]), (5, 6)),
    ((slice(None), I([1, -1])), (4, 2, 6)),
    ((I([[0], [3]]), I([1, 2, 4])), (3, 6)),
    ((0, slice(None), I([1, 2])), (2, 5)),
    ((Ellipsis, I([5, 0])), (1, 2)),
    ((I([1, 2]), slice(None, None, 2), I([0, 5])), (1, 1, 2, 3)),  # extra leading 1s are dropped
])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_integer_array_assignment(rng, key, vshape, dtype):
    x = sample(rng, (4, 5, 6), dtype)
    v = sample(rng, vshape, "float64")  # cast on assignment, as NumPy does
    want = x.copy()
    want[key] = v
    for kind in ("list", "lazy"):
        a = np.asarray(x)
        view = a[1:]  # through a view: the base sees the update
        a[lazy_key(key, kind)] = np.asarray(v) if kind == "lazy" else v
        same(a, want)
        same(view, want[1:])
    assert metrics.fallbacks() == {}


def test_integer_array_assignment_errors():
    a = np.asarray(numpy.zeros((3, 4)))
    with pytest.raises(ValueError, match="shape mismatch"):
        a[[0, 1]] = numpy.ones((3, 4))
    with pytest.raises(IndexError):
        a[[0, 3]] = 1
    ro = np.asarray(numpy.zeros(3))
    ro._writeable = False  # as a read-only view would be
    with pytest.raises(ValueError, match="read-only"):
        ro[[0]] = 1


@pytest.mark.parametrize("case", ["full", "scalar_rows", "row_value", "lazy_mask", "with_int", "int_adjacent",
                                  "after_slice"])
def test_mask_assignment_is_a_select(rng, case):
    x = sample(rng, (4, 5, 6), "float32")
    want = x.copy()
    a = np.asarray(x)
    if case == "full":
        m = x > 0
        want[m] = 0
        a[m] = 0
    elif case == "scalar_rows":
        m = x[:, :, 0] > 0
        want[m] = -1.5
        a[m] = -1.5
    elif case == "row_value":  # one value per remaining element, broadcast along the selection
        m = x[:, :, 0] > 0
        v = numpy.arange(6.0)
        want[m] = v
        a[m] = v
    elif case == "lazy_mask":
        want[x < 0] = 2
        a[a < 0] = 2
    elif case == "with_int":  # the int and the mask are not adjacent: the selection comes first
        m = x[0, 0] > 0
        v = numpy.arange(5.0)
        want[1, :, m] = v
        a[1, :, m] = v
    elif case == "int_adjacent":  # adjacent: the selection stays in place, after dim 0
        m = x[0, 0] > 0
        v = numpy.arange(4.0)[:, None]
        want[:, 1, m] = v
        a[:, 1, m] = v
    else:
        m = x[0, :, 0] > 0
        want[1:3, m] = 7
        a[1:3, m] = 7
    same(a, want)
    assert metrics.fallbacks() == {}


def test_lazy_mask_reads_and_per_element_values_are_a_gather_and_a_scatter(rng):
    x = sample(rng, (4, 5), "int32")
    m = x > 0
    a = np.asarray(x)
    same(a[np.asarray(m)], x[m])  # a lazy mask, read (a NumPy mask is a gather: test_np_user_code.py)
    want = x.copy()
    want[m] = numpy.arange(m.sum())
    a[np.asarray(m)] = numpy.arange(m.sum())
    same(a, want)
    assert metrics.fallbacks() == {}
    with pytest.raises(IndexError, match="boolean index did not match"):
        a[numpy.ones(3, bool)] = 1


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("mode", ["raise", "wrap", "clip"])
def test_take(rng, axis, mode):
    x = sample(rng, (3, 4, 5), "float64")
    n = x.size if axis is None else x.shape[axis]
    idx = numpy.array([[0, n - 1], [-1, 1]]) if mode == "raise" else numpy.array([[0, n + 2], [-7, 1]])
    want = numpy.take(x, idx, axis=axis, mode=mode)
    a = np.asarray(x)
    same(np.take(a, idx, axis=axis, mode=mode), want)
    same(numpy.take(a, np.asarray(idx), axis=axis, mode=mode), want)  # NumPy's own take stays lazy
    same(a.take(idx, axis=axis, mode=mode), want)
    assert metrics.fallbacks() == {}


def test_take_scalar_index_and_errors(rng):
    x = sample(rng, (3, 4), "int64")
    a = np.asarray(x)
    same(np.take(a, 2, axis=1), numpy.take(x, 2, axis=1))
    with pytest.raises(IndexError, match="out of bounds"):
        np.take(a, 20)
    with pytest.raises(numpy.exceptions.AxisError):
        np.take(a, 0, axis=2)


@pytest.mark.parametrize("shapes", [((3, 4, 5), (3, 2, 5), 1), ((3, 4), (3, 4), -1), ((1, 6), (4, 3), 1),
                                    ((4, 5), (2, 5), 0), ((7,), (4,), None)])
def test_take_along_axis(rng, shapes):
    xs, ishape, axis = shapes
    x = sample(rng, xs, "float32")
    n = x.size if axis is None else x.shape[axis]
    idx = rng.integers(-n, n, ishape)
    want = numpy.take_along_axis(x, idx, axis=axis)
    a = np.asarray(x)
    same(np.take_along_axis(a, idx, axis=axis), want)
    same(numpy.take_along_axis(a, np.asarray(idx), axis=axis), want)
    assert metrics.fallbacks() == {}
    with pytest.raises(IndexError):
        np.take_along_axis(a, numpy.full(ishape, n), axis=axis)


def test_take_along_axis_with_argsort_shapes(rng):
    x = sample(rng, (4, 6), "int64")
    idx = numpy.argsort(x, axis=1)
    same(np.take_along_axis(np.asarray(x), idx, axis=1), numpy.sort(x, axis=1))
    with pytest.raises(ValueError):
        np.take_along_axis(np.asarray(x), idx[0], axis=1)


@pytest.mark.parametrize("shapes", [((3, 4, 5), (3, 2, 5), 1), ((4, 5), (1, 5), 0), ((6,), (3,), None)])
def test_put_along_axis(rng, shapes):
    xs, ishape, axis = shapes
    x = sample(rng, xs, "float64")
    n = x.size if axis is None else x.shape[axis]
    # distinct positions along the axis (duplicates store an unspecified one of the values)
    ax = 0 if axis is None else axis
    perm = numpy.argsort(rng.random((n,) if axis is None else xs), axis=ax)
    idx = numpy.take(perm, range(ishape[ax]), axis=ax)
    idx = idx - n * (rng.random(idx.shape) > 0.5)  # some negative
    v = sample(rng, ishape, "float64")
    want = x.copy()
    numpy.put_along_axis(want, idx, v, axis=axis)
    a = np.asarray(x)
    np.put_along_axis(a, idx, v, axis=axis)
    same(a, want)
    b = np.asarray(x)
    numpy.put_along_axis(b, np.asarray(idx), 3.0, axis=axis)
    want2 = x.copy()
    numpy.put_along_axis(want2, idx, 3.0, axis=axis)
    same(b, want2)
    assert metrics.fallbacks() == {}


@pytest.mark.parametrize("dtype", ["float64", "int32", "bool", "complex64"])
def test_nonzero_reads_the_mask_and_uploads_the_coordinates(rng, dtype):
    x = sample(rng, (3, 4), dtype)
    x.flat[::3] = 0
    a = np.asarray(x) * 1  # computed on the device
    metrics.reset()
    for got, want in [(np.nonzero(a), numpy.nonzero(x)), (a.nonzero(), x.nonzero()),
                      (np.where(a), numpy.where(x))]:
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert isinstance(g, np.ndarray)
            same(g, w)
    same(np.argwhere(a), numpy.argwhere(x))
    assert np.argwhere(a).flags.f_contiguous == numpy.argwhere(x).flags.f_contiguous
    same(np.flatnonzero(a), numpy.flatnonzero(x))
    assert metrics.fallbacks() == {}


def test_nonzero_reads_the_mask_not_the_values(rng):
    x = sample(rng, (3, 4), "float64")
    x.flat[::3] = 0
    a = np.sin(np.asarray(x))  # on the device (exact work of an upload is read on the host)
    metrics.reset()
    got = np.nonzero(a)
    assert metrics.counters()["bytes_to_host"] == x.size  # one byte an element (NumPy's run: 8)
    for g, w in zip(got, numpy.nonzero(numpy.sin(x))):
        same(g, w)


def test_nonzero_indexes_on_the_device_and_keeps_numpys_edges(rng):
    x = sample(rng, (5, 4), "float32")
    a = np.asarray(x)
    score = np.asarray(numpy.array([0.9, 0.9, 0.5, 0.5, 0.1]))
    idx = np.nonzero(np.diff(score))[0]  # roc_curve's distinct thresholds
    same(a[idx], x[numpy.nonzero(numpy.diff([0.9, 0.9, 0.5, 0.5, 0.1]))[0]])
    same(np.argwhere(np.asarray(3.0) * 1), numpy.argwhere(numpy.float64(3.0)))
    same(np.flatnonzero(np.asarray(0.0) * 1), numpy.flatnonzero(numpy.float64(0.0)))
    for z in [numpy.zeros((0, 3)), numpy.zeros((2, 0), bool)]:
        for g, w in zip(np.nonzero(np.asarray(z)), numpy.nonzero(z)):
            same(g, w)
        same(np.argwhere(np.asarray(z)), numpy.argwhere(z))
    for f in (np.nonzero, np.where):
        with pytest.raises(ValueError, match="Calling nonzero on 0d arrays is not allowed"):
            f(np.asarray(1.0) * 2)
    assert metrics.fallbacks() == {}


def _programs():
    c = metrics.counters()
    return c["compiles"] + c["disk_cache_hits"]


def test_mask_reads_of_changing_counts_share_a_bucket(rng):
    """A read mask's coordinates are marked dynamic along their count: ``X[labels == k]``
    with 5, 6 and 7 rows selected runs one program (bucket 8), as a k-means loop's
    changing cluster sizes do; NumPy's answers, a per-element assignment too (a
    scatter that the padding cannot prove exact compiles as it is)."""
    x = sample(rng, (16, 3), "float64")
    a = np.asarray(x)
    built = []
    for count in (5, 6, 7):
        labels = numpy.arange(16) % 3
        labels[:count] = 7
        before = _programs()
        m = np.asarray(labels) == 7
        got = a[m].mean(0) * 2
        same(got, x[labels == 7].mean(0) * 2)
        built.append(_programs() - before)
        same(a[m], x[labels == 7])
        b = a.copy()
        b[m] = numpy.arange(count, dtype=numpy.float64)[:, None]
        want = x.copy()
        want[labels == 7] = numpy.arange(count)[:, None]
        same(b, want)
    assert built[1:] == [0, 0], built  # the first builds the mean's program; the others reuse it
    assert metrics.fallbacks() == {}
