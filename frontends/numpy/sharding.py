"""Lazy arrays laid out over a mesh: ``lazycore.numpy.shard(array, mesh, spec)``.

A sharded array is one global array; ufuncs, reductions and the other
functions give NumPy's results on it, computed by one program that XLA's
SPMD partitioner splits over the mesh's devices (the reductions' cross-device
sums are collectives it inserts). Host data and Python numbers combined
with it go to its mesh (replicated).
"""

from __future__ import annotations

import numpy as np

from lazycore.runtime.device import Mesh
from lazycore.trace import sharding

from . import dtypes
from .array import ndarray, value, wrap

__all__ = ["shard", "sharding_of"]


def shard(a, mesh: Mesh, spec) -> ndarray:
    """``a`` (a lazy array or host data) laid out over ``mesh``, as a new
    array: dimension ``d`` split into equal blocks along the mesh axis
    ``spec[d]`` names (None: whole on every device). Bad specs raise
    ValueError at the call (:func:`lazycore.shard`)."""
    if isinstance(a, ndarray):
        return wrap(sharding.shard(value(a), mesh, spec), a.dtype)
    host = np.asarray(a)
    if not dtypes.supported(host.dtype):
        raise TypeError(f"lazycore.numpy has no element type for {host.dtype}")
    return wrap(sharding.shard(host, mesh, spec), host.dtype)


def sharding_of(a: ndarray):
    """``a``'s layout as a spec when known before its program runs (:func:`lazycore.sharding_of`)."""
    return sharding.sharding_of(value(a))
