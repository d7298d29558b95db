"""A tie of signed zeros in ``np.max``/``np.min`` and ``np.maximum``/``minimum``/
``fmax``/``fmin`` gives NumPy's zero, bit for bit (``np.signbit``).

IEEE orders +0.0 above -0.0 and the lazy ops did too: ``np.max([0.0, -0.0])``
is -0.0 in NumPy (its scalar loop keeps the later of equal values) and was
0.0 lazily. NumPy's loops pick an operand instead; which one depends on the
loop (SIMD body, scalar tail, the horizontal reduction's lane order, float16's
loop), modelled in frontends/numpy/minmax_loops.py from a probe of NumPy
itself. Before: 11 of 20 reduction cases and 24 of 36 binary ones here had a
sign off NumPy's."""

import numpy as np

import lazycore
import lazycore.numpy as lnp

DTYPES = (np.float16, np.float32, np.float64)
REDUCTIONS = {  # (the scalar loop; one vector and no tail; the lane order and a tail; rows; columns)
    np.float16: [((2,), None), ((5, 20), 0)],
    np.float32: [((2,), None), ((17,), None), ((33,), None), ((4, 40), -1), ((5, 20), 0)],
    np.float64: [((9,), None), ((100,), None), ((6, 5), None)],
}
BINARY = [(2,), (5,), (20,), (3, 5)]


def _zeros(rng, shape, dt):
    """-0.0 and +0.0 at random."""
    return np.where(rng.integers(0, 2, shape).astype(bool), dt(-0.0), dt(0.0)).astype(dt)


def _off(cases):
    lazycore.mark_step()
    return [c[:-2] for c in cases if not np.array_equal(np.signbit(c[-2]), np.signbit(np.asarray(c[-1])))]


def test_max_min_of_signed_zeros_are_numpys():
    rng = np.random.default_rng(0)
    cases = []
    for dt in DTYPES:
        for shape, axis in REDUCTIONS[dt]:
            x = _zeros(rng, shape, dt)
            for f in (np.max, np.min):
                cases.append((dt.__name__, shape, axis, f.__name__, f(x, axis=axis), f(lnp.asarray(x), axis=axis)))
    assert _off(cases) == []
    # the case
    assert np.signbit(np.max(lnp.asarray(np.array([0.0, -0.0]))))


def test_binary_max_min_of_signed_zeros_are_numpys():
    rng = np.random.default_rng(1)
    cases = []
    for dt in DTYPES:
        for shape in BINARY:
            a, b = _zeros(rng, shape, dt), _zeros(rng, shape, dt)
            for f in (np.fmax, np.fmin, np.maximum):
                cases.append((dt.__name__, shape, f.__name__, f(a, b), f(lnp.asarray(a), lnp.asarray(b))))
    assert _off(cases) == []
    # two elements: C's fmax keeps the first of a tie where NumPy's float64 loop has no vector
    got = np.fmax(lnp.asarray(np.array([-0.0, 0.0])), lnp.asarray(np.array([0.0, -0.0])))
    assert np.signbit(np.asarray(got)).tolist() == np.signbit(np.fmax([-0.0, 0.0], [0.0, -0.0])).tolist()
