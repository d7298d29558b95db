"""``np.linalg.vecdot`` is NumPy's gufunc ``(n),(n)->()``: the vectors' dim never
broadcasts (issue 39). It summed ``ones(3) * ones(1)`` to 3.0 where NumPy raises."""

import numpy
import pytest

import lazycore.numpy as np


@pytest.mark.parametrize("a, b, axis", [((3,), (1,), -1), ((2, 3), (2, 1), -1), ((), (3,), -1), ((3,), (), -1),
                                        ((2, 3), (2, 3), 2), ((4, 2), (1, 2), 0)])
def test_vecdot_raises_numpys_error_where_the_vectors_differ(a, b, axis):
    with pytest.raises(Exception) as want:
        numpy.linalg.vecdot(numpy.ones(a), numpy.ones(b), axis=axis)
    with pytest.raises(want.type) as got:
        np.linalg.vecdot(np.ones(a), np.ones(b), axis=axis)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("a, b, axis", [((2, 3), (1, 3), -1), ((2, 3), (3,), -1), ((2, 3), (2, 3), 0), ((1, 3), (4, 3), 1)])
def test_vecdot_broadcasts_the_other_dims(a, b, axis):
    x = numpy.arange(numpy.prod(a), dtype=float).reshape(a)
    y = numpy.arange(numpy.prod(b), dtype=float).reshape(b) - 2
    assert numpy.array_equal(numpy.asarray(np.linalg.vecdot(np.asarray(x), np.asarray(y), axis=axis)),
                             numpy.linalg.vecdot(x, y, axis=axis))
