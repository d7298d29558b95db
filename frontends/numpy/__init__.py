"""``import lazycore.numpy as np``: NumPy's API on lazy arrays.

Array expressions are recorded, fused and compiled by XLA at a barrier
(``np.asarray(a)``, ``print(a)``, ``a.item()``, ``lazycore.mark_step()``).
NumPy's own functions called on lazy arrays (``numpy.sum(a)``) stay lazy
through ``__array_function__``/``__array_ufunc__``; functions with no lazy
version run NumPy on materialized inputs, counted in
``lazycore.metrics.fallbacks()`` with the caller's line.
"""

from __future__ import annotations

import numpy as _np

from lazycore.ir import heap as _heap
import lazycore.observe  # noqa: F401  (metrics, guards, debug lines and dumps hear the runtime)

from . import creation, fallback, methods, reductions, ufuncs  # noqa: F401  (methods binds operators)
from . import indexing, linalg, random  # noqa: F401  (np.linalg, np.random)
from . import complexes, fft  # noqa: F401  (.real/.imag, np.angle; np.fft)
from . import special  # noqa: F401  (xp.special: SciPy's special functions, lazy or counted)
from . import gufuncs, pycode
from .sorting import argsort, digitize, lexsort, searchsorted, sort  # noqa: F401  (also ndarray.sort/.argsort)
from .statistics import *  # noqa: F401,F403  (median, percentile, quantile and the nan variants)
from .indexing import *  # noqa: F401,F403  (take, take_along_axis, put_along_axis)
from .array import asarray, ndarray
from .sharding import shard, sharding_of
from .capture import capture  # noqa: F401  (whole-step capture)
from .creation import *  # noqa: F401,F403
from .reductions import *  # noqa: F401,F403
from .manipulation import *  # noqa: F401,F403

# NumPy's scalar types and constants are the same objects here
from numpy import (  # noqa: F401
    bool_, dtype, e, euler_gamma, finfo, float16, float32, float64, iinfo, inf, int8, int16, int32, int64,
    integer, floating, nan, newaxis, number, pi, uint8, uint16, uint32, uint64, generic, result_type,
    complex64, complex128, complexfloating, inexact,
    promote_types, can_cast, broadcast_shapes,
    ndindex,  # (tuples of a shape's indices, no arrays: not a fallback)
    # NumPy's state, not its arrays: errstate (which the lazy ufuncs honour), print options
    errstate, seterr, geterr, seterrcall, geterrcall, printoptions, set_printoptions, get_printoptions,
)

from .sets import *  # noqa: F401,F403,E402  (unique_values & co.: sorted)
from .dtypeinfo import *  # noqa: F401,F403,E402  (isdtype, result_type, can_cast: never a fallback)
from .methods import round_ as round, round_ as around  # noqa: E402,A001

globals().update(ufuncs.UFUNCS)
globals().update(ufuncs.OTHER_UFUNCS)
from . import array_api  # noqa: E402
from .array_api import (  # noqa: E402,F401
    __array_api_version__, __array_namespace_info__, astype, from_dlpack, matrix_transpose, permute_dims,
)

globals().update(array_api.ALIASES)
globals().update(linalg.TOP)  # matmul, dot, einsum, ... live at the top level in NumPy
globals().update(gufuncs.GUFUNCS)  # matmul, vecdot, matvec, vecmat: ufunc objects, as NumPy's
abs = ufuncs.UFUNCS["absolute"]  # noqa: A001
conj = ufuncs.UFUNCS["conjugate"]
real, imag, angle, iscomplexobj = complexes.np_real, complexes.np_imag, complexes.angle, complexes.iscomplexobj
bool = bool_  # noqa: A001


def dynamic(a, axis: int):
    """Mark ``axis`` of the lazy array ``a`` (an input, not a view) as one whose
    size varies from step to step: it is padded to a bucket size and what the
    padding would change is masked, so sizes in one bucket
    (``LAZYCORE_BUCKETS``, powers of two by default) share one program
    (:func:`lazycore.dynamic`). Returns ``a``."""
    from lazycore.trace import core
    from .array import value

    if not isinstance(a, ndarray):
        raise TypeError(f"dynamic expects a lazy array, got {type(a).__name__}")
    if a._steps:
        raise ValueError("dynamic: the array is a view of another; mark the array it views")
    core.dynamic(value(a), axis)
    return a


def __getattr__(name):
    """Any other NumPy function: its own Python code run lazily where it is Python
    (:mod:`.pycode`), else NumPy itself on materialized inputs (a counted fallback)."""
    target = getattr(_np, name, None)
    if callable(target):
        if pycode.covered(target):  # NumPy's own Python code, run lazily where it can be
            def call(*args, **kwargs):
                return pycode.run_numpy_code(target, args, kwargs, name=f"numpy.{name}")
        else:
            def call(*args, **kwargs):
                return fallback.call_numpy(target, args, kwargs, name=f"numpy.{name}")

        call.__name__ = name
        call.__doc__ = target.__doc__
        call.__wrapped__ = target  # inspect.signature(call): NumPy's signature
        return call
    if target is not None:
        return target
    raise AttributeError(f"module 'lazycore.numpy' has no attribute '{name}'")

from . import eager as _eager  # noqa: E402,F401  (LAZYCORE_EAGER: each call runs at once)

_heap.freeze_imports()  # last: what the imports made is kept for the process

from lazycore.runtime import programs as _programs  # noqa: E402

_programs.load_compiler_ahead()  # the compiler's imports, on a thread, where the first program must be compiled
