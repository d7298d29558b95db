"""``lazycore.numpy.arange`` as NumPy's: the first two elements are ``start`` and
``start + step`` stored into the type, the rest the type's fill loop
``first + i * (second - first)`` in the type (float16's in float32, integers
wrapping). A fractional step of an integer type counts by the difference of
the two stored elements (``arange(-3, 3, 0.013, dtype=np.int32)`` counts -3,
-2, -1, ...: lazycore gave -3 everywhere), and a float range's elements are
NumPy's bits, not ``start + i * step`` rounded once."""

import warnings

import numpy as np
import pytest

import lazycore.numpy as lnp

ARGS = [(0, 5, 0.5), (-3, 3, 0.013), (1, 10, 2.5), (0.5, 4, 1), (2.5, -1, -0.25), (0.1, 1, 0.1), (0, 1e5, 0.37),
        (3,), (1, 2), (-1, 1, 0.6), (1e8, 1e8 + 100, 0.7), (250, 260, 1), (126.5, 135, 1.0), (0, 70000, 1.5)]
DTYPES = [np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint64, np.float16, np.float32, np.float64, None]


def _outcome(fn, args, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (NumPy's overflow warnings)
        try:
            return np.asarray(fn(*args, dtype=dtype))
        except Exception as e:  # noqa: BLE001 (compared with NumPy's)
            return type(e), str(e)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("args", ARGS, ids=str)
def test_arange_as_numpy(args, dtype):
    want, got = _outcome(np.arange, args, dtype), _outcome(lnp.arange, args, dtype)
    if isinstance(want, tuple):
        assert got == want
    else:
        assert isinstance(got, np.ndarray), got
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
