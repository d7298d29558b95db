"""NumPy over a mesh: ``lazycore.numpy.shard`` and NumPy's results on sharded arrays.

Ufuncs (with Python numbers, host arrays and other sharded arrays),
reductions (with axes, ``where=``, ``keepdims``), ``where``, assignment and
products run on 4 forced CPU devices in a child process (tests/isolated.py)
and must give NumPy's values and dtypes; bad specs raise at the call.
"""

from __future__ import annotations

import os
import sys

import numpy
import pytest

import lazycore as lc
import lazycore.numpy as np
from npcheck import sample, same

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from isolated import FOUR_DEVICES, run_isolated  # noqa: E402

LAYOUTS = [((4,), ("d",), ("d", None)), ((4,), ("d",), (None, "d")), ((2, 2), ("x", "y"), ("x", "y")),
           ((2, 2), ("x", "y"), ("y",)), ((2, 2), ("x", "y"), (None, None))]

CALLS = {
    "sin": lambda m, a, b: m.sin(a),
    "add_scalar": lambda m, a, b: a + 2.5,
    "radd_int": lambda m, a, b: 3 - a,
    "mul_host": lambda m, a, b: a * numpy.arange(8, dtype=numpy.float32),
    "two_arrays": lambda m, a, b: m.hypot(a, b),
    "numpy_ufunc": lambda m, a, b: numpy.add(a, 1),
    "compare": lambda m, a, b: a > b,
    "sum": lambda m, a, b: m.sum(a),
    "sum_axis0": lambda m, a, b: a.sum(axis=0),
    "mean_axis1_keepdims": lambda m, a, b: a.mean(axis=1, keepdims=True),
    "max": lambda m, a, b: m.max(a),
    "argmin_axis0": lambda m, a, b: m.argmin(a, axis=0),
    "std": lambda m, a, b: m.std(a, axis=1),
    "prod": lambda m, a, b: m.prod(a, axis=0),
    "sum_where": lambda m, a, b: m.sum(a, where=numpy.arange(8) % 2 == 0),
    "any": lambda m, a, b: m.any(a > 1.5, axis=1),
    "cumsum": lambda m, a, b: m.cumsum(a, axis=0),
    "where": lambda m, a, b: m.where(a > 0, a, 0.0),
    "matmul": lambda m, a, b: a @ b.T,
    "int_sum": lambda m, a, b: m.sum((a * 10).astype(numpy.int32), axis=0),
}


def _ufuncs_and_reductions():
    import jax

    assert len(jax.devices()) == 4
    rng = numpy.random.default_rng(0)
    ha = sample(rng, (8, 8), numpy.float32)
    hb = sample(rng, (8, 8), numpy.float32)
    for mesh_shape, names, spec in LAYOUTS:
        mesh = lc.Mesh(mesh_shape, names)
        a, b = np.shard(ha, mesh, spec), np.shard(np.asarray(hb), mesh, spec)
        assert a.shape == ha.shape and a.dtype == ha.dtype
        for name, call in CALLS.items():
            try:
                same(call(np, a, b), call(numpy, ha, hb), rtol=2e-5, atol=2e-5)
            except AssertionError as e:
                raise AssertionError(f"{name} on {mesh.name}, spec {spec}: {e}") from None
        # writes through views of a sharded array
        c = np.shard(ha, mesh, spec)
        hc = ha.copy()
        c[1:3] = 7.0
        hc[1:3] = 7.0
        c[:, 0] = numpy.arange(8, dtype=numpy.float32)
        hc[:, 0] = numpy.arange(8)
        same(c, hc)
    assert lc.metrics.fallbacks() == {}, lc.metrics.fallbacks()

    mesh = lc.Mesh((2, 2), ("x", "y"))
    with pytest.raises(ValueError, match="dimension 0 of size 3 cannot be split evenly along mesh axis 'x'"):
        np.shard(numpy.zeros((3, 4)), mesh, ("x", None))
    a = np.shard(ha, mesh, ("x", "y"))
    assert np.sharding_of(a) == ("x", "y")
    with pytest.raises(ValueError, match="never mix"):
        a + np.asarray(hb)  # a lazy array of a single device


def test_ufuncs_and_reductions_over_sharded_arrays_are_numpys():
    run_isolated(__file__, "_ufuncs_and_reductions", env=FOUR_DEVICES)


def test_shard_errors_at_the_call():
    mesh = lc.Mesh((1,), ("d",))
    with pytest.raises(ValueError, match="has 2 entries, more than the 1 dimensions"):
        np.shard(numpy.zeros(4), mesh, ("d", None))
    with pytest.raises(ValueError, match="'e' is not an axis of mesh"):
        np.shard(numpy.zeros(4), mesh, ("e",))
    with pytest.raises(TypeError, match="no element type"):
        np.shard(numpy.zeros(4, dtype=numpy.clongdouble), mesh, ("d",))
    same(np.shard(np.arange(4.0), mesh, ("d",)) * 2, numpy.arange(4.0) * 2)
