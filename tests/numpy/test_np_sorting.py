"""np.sort, np.argsort and ndarray.sort/argsort on lazy arrays: one lazy.sort,
NumPy's values (NaN last) and the positions of a stable sort; the Array API's
descending= too; complex arrays and order= run NumPy (counted)."""

import numpy as np
import pytest

import lazycore.numpy as lnp
from lazycore.observe import metrics

ARRAYS = {
    "f64": np.array([[3.0, np.nan, 1.0, 1.0, -0.0, 0.0], [2.0, 5.0, np.nan, -1.0, 7.0, 2.0]]),
    "f32": np.array([[3.0, np.nan, 1.0], [np.inf, -np.inf, 0.0]], np.float32),
    "i32": np.array([[3, 1, 1, 2], [0, -5, 7, 7]], np.int32),
    "u16": np.array([[3, 1, 1, 65535], [0, 5, 7, 7]], np.uint16),
    "bool": np.array([True, False, True, False]),
}


def _host(a):
    return np.asarray(a.tolist(), dtype=a.dtype)


@pytest.mark.parametrize("name", sorted(ARRAYS))
@pytest.mark.parametrize("axis", [-1, 0, None])
def test_sort_and_argsort_match_numpy(name, axis):
    a = ARRAYS[name]
    if axis == 0 and a.ndim == 1:
        axis = -1
    metrics.reset()
    got = lnp.sort(lnp.asarray(a), axis=axis)
    np.testing.assert_array_equal(_host(got), np.sort(a, axis=axis))
    assert got.dtype == a.dtype
    idx = lnp.argsort(lnp.asarray(a), axis=axis, kind="stable")
    np.testing.assert_array_equal(_host(idx), np.argsort(a, axis=axis, kind="stable"))
    assert metrics.counters()["fallbacks"] == 0


def test_methods_sort_in_place_through_views():
    a = ARRAYS["f64"].copy()
    la = lnp.asarray(a)
    row = la[1]
    row.sort()
    a[1].sort()
    np.testing.assert_array_equal(_host(la), a)
    np.testing.assert_array_equal(_host(la.argsort(axis=0, kind="stable")), a.argsort(axis=0, kind="stable"))


def test_zero_d_arrays_as_numpy():
    with pytest.raises(np.exceptions.AxisError):
        lnp.sort(lnp.asarray(np.array(2.0)))
    np.testing.assert_array_equal(_host(lnp.argsort(lnp.asarray(np.array(2.0)))), np.argsort(np.array(2.0)))
    np.testing.assert_array_equal(_host(lnp.sort(lnp.asarray(np.array(2.0)), axis=None)), [2.0])


def test_the_array_api_descending_keeps_equal_elements_in_order():
    a = ARRAYS["i32"]
    got = lnp.argsort(lnp.asarray(a), descending=True)
    # a stable descending order: equal elements keep their positions' order
    want = np.array([sorted(range(a.shape[1]), key=lambda j: -a[i, j]) for i in range(a.shape[0])])
    np.testing.assert_array_equal(_host(got), want)
    # the values: NumPy's ascending order reversed (NaN first, as torch's descending sort)
    np.testing.assert_array_equal(_host(lnp.sort(lnp.asarray(ARRAYS["f64"]), descending=True)),
                                  np.flip(np.sort(ARRAYS["f64"]), axis=-1))


def test_complex_and_structured_arrays_run_numpy():
    metrics.reset()
    c = np.array([2 + 1j, 1 - 1j, 1 - 2j])
    np.testing.assert_array_equal(np.asarray(lnp.sort(lnp.asarray(c)).tolist()), np.sort(c))
    assert metrics.counters()["fallbacks"] == 1
    with pytest.raises(TypeError, match="descending"):
        lnp.sort(lnp.asarray(c), descending=True)
