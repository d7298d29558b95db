"""NumPy's own Python code, run on lazy arrays.

Many NumPy functions are Python over other NumPy functions (``gradient``,
``kron``, ``trapezoid``, ``isin``, ``logspace``, ``polyval``, ...). Rather
than a lazy copy of each, lazycore runs NumPy's code itself (the function's
``_implementation``, under ``__array_function__``) on the lazy arguments,
so each inner call reaches lazycore again: a ufunc through
``__array_ufunc__``, a NumPy function through ``__array_function__`` (a lazy
version, or this same mechanism one level down). Two things would take the
arrays to the host on the way: NumPy's converters (``asarray``, ``array``,
``asanyarray``: C functions that do not dispatch) and NumPy's private Python
helpers (``_in1d``, ``_unique1d``: plain functions, which read their module's
real names). So the code runs with *lazy globals*: a copy of its module's
namespace where each converter keeps a lazy argument lazy (a host one stays
NumPy's), each NumPy module is a view of it that answers the same way, and
each plain NumPy function is the same code over the lazy globals. Besides:
NumPy's ``_array_converter`` answers on host stand-ins of the lazy inputs
and hands the lazy arrays back; a dispatching function reaches lazycore for a
lazy array anywhere in its arguments (NumPy's dispatch looks at the top level
only: ``histogramdd([x, y])``), and the raw C functions behind dispatching
ones (``shape_base._concatenate``) are the dispatching ones; the
constructors of new memory (``empty``, ``zeros``, so ``ones``, ``full``) make
lazy arrays, or NumPy's in a second try (:data:`MODES`).

The run is all or nothing (:mod:`.hostguard`): where NumPy's code needs a
value, a host-only function or a write into an argument, it stops before
that and the call is the counted fallback, as without this module; so is a
call whose run raises (NumPy's own call then raises NumPy's error for bad
input). What is covered is a rule, not a list: every NumPy function whose
``_implementation`` is a Python function of NumPy's, except those that act
outside their arrays (files, user callbacks: a stopped run must not have
done anything), :data:`OUTSIDE`. A warning NumPy's code gives before a run
stops is given again by the fallback.
"""

from __future__ import annotations

import types

import numpy as np

from lazycore.ir.memo import Memo

from . import creation
from .array import asarray as _lazy_asarray
from .array import ndarray
from .fallback import HANDLED, call_numpy, uploaded
from .hostguard import RUN, NeedsHost
from .scalars import as_scalar

OUTSIDE = frozenset({
    # files: a run stopped after opening one would leave it written
    "save", "savez", "savez_compressed", "savetxt",
    # callbacks of the user's: a stopped run would have called them once more
    "piecewise", "apply_over_axes", "apply_along_axis", "vectorize",
})
"""Names of NumPy functions never run here: their work is not only on arrays."""

_FUNCTIONS = Memo("numpy.pycode_functions", 2048)
"""(A NumPy Python function, mode) -> the same code over its module's lazy globals."""
_GLOBALS = Memo("numpy.pycode_globals", 256)
"""(id of a NumPy module's namespace, mode) -> (the namespace, its lazy copy)."""
_MODULES = Memo("numpy.pycode_modules", 256)
"""(id of a NumPy module, mode) -> (the module, its lazy view)."""


def covered(func) -> bool:
    """Whether NumPy's ``func`` is Python of NumPy's that may run lazily here."""
    impl = getattr(func, "_implementation", None)
    return (isinstance(impl, types.FunctionType) and _numpys(impl)
            and getattr(func, "__name__", None) not in OUTSIDE)


MODES = (True, False)
"""The ways a run makes new memory, in the order an outermost call tries them: lazy
arrays (NumPy's code fills what it makes with lazy values: ``pad`` writes the array
into ``np.empty``, ``diagflat`` into ``zeros``), then NumPy's (what it makes is a host
mask or index: ``insert`` and ``delete`` index with a ``np.ones`` they mark)."""


def array_function(func, args, kwargs):
    """``ndarray.__array_function__``: the lazy version of ``func``, else NumPy's code run
    lazily where it is Python (:func:`covered`), else the fallback."""
    impl = HANDLED.get(func)
    if impl is not None:
        return impl(*args, **kwargs)
    if covered(func):
        return run_numpy_code(func, args, kwargs)
    return call_numpy(func, args, kwargs)


def run_numpy_code(func, args, kwargs, name=None):
    """NumPy's own Python code for ``func`` on the lazy arguments; the counted fallback
    (``name``) where it needs host work or raises, in every mode."""
    if RUN.depth:  # an inner call of a run: the outermost one decides
        return run(func, args, kwargs)
    for lazy_new in MODES:
        try:
            return uploaded(run(func, args, kwargs, lazy_new))
        except (NeedsHost, Exception):
            pass
    # NumPy's call on the host decides: its answer, or its exception for bad input
    return call_numpy(func, args, kwargs, name)


def run(func, args, kwargs, lazy_new=None):
    """NumPy's code for ``func`` on ``args`` with the lazy globals; its constructors make
    lazy arrays if ``lazy_new`` (None: as the run this call is inside). Raises
    :class:`~.hostguard.NeedsHost` where it needs host work (the caller falls back)."""
    state = RUN
    call = (func, id(args[0]) if args else None)
    if call in state.running:
        # NumPy's code for func reached func again on the same array (np.choose calls
        # a.choose(): a lazy method that were np.choose again would never end); a
        # recursion of NumPy's own (polyder's) calls it on another array
        raise NeedsHost(func.__name__)
    outer = not state.depth
    if outer:
        state.inputs = frozenset(id(a._storage) for a in _lazies((args, kwargs)))
        state.lazy_new = lazy_new
    impl = lazy_function(func._implementation, state.lazy_new)
    state.depth += 1
    state.running += (call,)
    try:
        return impl(*args, **kwargs)
    finally:
        state.depth -= 1
        state.running = state.running[:-1]
        if outer:
            state.inputs = frozenset()


def _lazies(obj):
    if isinstance(obj, ndarray):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _lazies(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _lazies(o)


def _has_lazy(obj) -> bool:
    return next(_lazies(obj), None) is not None


def _numpys(obj) -> bool:
    name = getattr(obj, "__module__", None) or ""
    return name == "numpy" or name.startswith("numpy.")


# --- the lazy globals ----------------------------------------------------------------------


def lazy_function(f: types.FunctionType, lazy_new: bool) -> types.FunctionType:
    """``f``'s code over its module's lazy globals (made once per function and mode)."""
    known = _FUNCTIONS.get((f, lazy_new))
    if known is None:
        g = _lazy_globals(f.__globals__, lazy_new)
        known = types.FunctionType(f.__code__, g, f.__name__, f.__defaults__, f.__closure__)
        known.__kwdefaults__ = f.__kwdefaults__
        known.__qualname__ = f.__qualname__
        known.__dict__.update(f.__dict__)
        _FUNCTIONS.put((f, lazy_new), known)
    return known


def _lazy_globals(namespace: dict, lazy_new: bool) -> dict:
    known = _GLOBALS.get((id(namespace), lazy_new))
    if known is not None and known[0] is namespace:
        return known[1]
    lazy = dict(namespace)
    _GLOBALS.put((id(namespace), lazy_new), (namespace, lazy))  # before filling it: its functions refer to it
    for name, v in namespace.items():
        lazy[name] = _lazy_value(v, lazy_new)
    return lazy


def _lazy_value(v, lazy_new: bool):
    """What a NumPy module's name ``v`` is in the lazy globals."""
    if v is np.ndarray:
        return AnyArray
    if isinstance(v, types.ModuleType):
        return _lazy_module(v, lazy_new) if v.__name__ == "numpy" or v.__name__.startswith("numpy.") else v
    try:
        converter = CONVERTERS.get(v) or (CONSTRUCTORS.get(v) if lazy_new else None)
    except TypeError:  # unhashable
        return v
    if converter is not None:
        return converter
    dispatched = _RAW.get(v)
    if dispatched is not None or type(v) is _DISPATCHER:
        return _Dispatching(dispatched or v)
    if isinstance(v, types.FunctionType) and _numpys(v) and not v.__name__.startswith("__"):
        # a plain helper: its names must be the lazy ones too (dispatched functions are
        # not Python functions: they reach lazycore by __array_function__)
        return _LazyHelper(v, lazy_new)
    return v


class _Dispatching:
    """A NumPy function that dispatches, as the lazy globals see it: it reaches
    lazycore for a lazy argument anywhere in its arguments, also inside a list
    (``histogramdd([x, y])``, which NumPy's dispatch would give NumPy's own code, on
    the host). Raw C functions NumPy's modules call to skip dispatching
    (``shape_base._concatenate``) are their dispatching functions here."""

    __slots__ = ("f",)

    def __init__(self, f):
        self.f = f

    def __call__(self, *args, **kwargs):
        for a in _lazies((args, kwargs)):
            return type(a).__array_function__(a, self.f, (type(a),), args, kwargs)
        return self.f(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.f, name)


class _LazyHelper:
    """A plain NumPy function in the lazy globals, made lazy at its first call (a
    module's helpers are many, few are called)."""

    __slots__ = ("f", "lazy_new")

    def __init__(self, f, lazy_new):
        self.f, self.lazy_new = f, lazy_new

    def __call__(self, *args, **kwargs):
        return lazy_function(self.f, self.lazy_new)(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.f, name)


class _LazyModule(types.ModuleType):
    """A NumPy module as the lazy globals see it: its names answered as they are."""

    def __init__(self, module, lazy_new):
        super().__init__(module.__name__, module.__doc__)
        self.__dict__["_lazycore_module"] = (module, lazy_new)

    def __getattr__(self, name):
        module, lazy_new = self.__dict__["_lazycore_module"]
        v = _lazy_value(getattr(module, name), lazy_new)
        self.__dict__[name] = v
        return v


def _lazy_module(m: types.ModuleType, lazy_new: bool) -> _LazyModule:
    known = _MODULES.get((id(m), lazy_new))
    if known is None or known[0] is not m:
        known = _MODULES.put((id(m), lazy_new), (m, _LazyModule(m, lazy_new)))
    return known[1]


class _AnyArrayType(type):
    def __instancecheck__(cls, x):
        return isinstance(x, (np.ndarray, ndarray))

    def __subclasscheck__(cls, c):
        return issubclass(c, (np.ndarray, ndarray))

    def __call__(cls, *args, **kwargs):
        return np.ndarray(*args, **kwargs)


class AnyArray(metaclass=_AnyArrayType):
    """``np.ndarray`` as the lazy globals see it: a lazy array is one too
    (``insert`` and ``delete`` take another path for an index that is not an
    array), and calling it makes NumPy's."""


# --- NumPy's converters, lazy for a lazy argument -------------------------------------------


def _array(obj, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    if like is not None or not _has_lazy(obj):
        return np.array(obj, dtype=dtype, copy=copy, order=order, subok=subok, ndmin=ndmin, like=like)
    a = creation.array(obj, dtype=dtype, copy=copy, order=order)
    if a.ndim < ndmin:
        a = a.reshape((1,) * (ndmin - a.ndim) + a.shape)
    return a


def _converter(host):
    def convert(a, dtype=None, order=None, *, device=None, copy=None, like=None):
        if like is not None or not _has_lazy(a):
            return host(a, dtype=dtype, order=order, device=device, copy=copy, like=like)
        return _lazy_asarray(a, dtype=dtype, order=order, copy=copy)

    convert.__name__ = host.__name__
    return convert


def _contiguous(host, lazy_name):
    def convert(a, dtype=None, *, like=None):
        if like is not None or not _has_lazy(a):
            return host(a, dtype=dtype, like=like)
        return getattr(creation, lazy_name)(a, dtype=dtype)

    convert.__name__ = host.__name__
    return convert


def _created(host, lazy_name):
    """A NumPy constructor of new memory (no array argument to dispatch on) as the
    lazy one (:data:`MODES` says when)."""
    def make(*args, **kwargs):
        if kwargs.get("like") is not None:
            return host(*args, **kwargs)
        return getattr(creation, lazy_name)(*args, **kwargs)

    make.__name__ = host.__name__
    return make


CONSTRUCTORS = {np.empty: _created(np.empty, "empty"), np.zeros: _created(np.zeros, "zeros")}
"""NumPy's constructors of new memory -> the lazy ones (``ones``, ``full`` are Python
over ``empty``)."""

CONVERTERS = {
    np.array: _array,
    np.asarray: _converter(np.asarray),
    np.asanyarray: _converter(np.asanyarray),
    np.ascontiguousarray: _contiguous(np.ascontiguousarray, "ascontiguousarray"),
    np.asfortranarray: _contiguous(np.asfortranarray, "asfortranarray"),
}
"""NumPy's converters that do not dispatch -> ones that keep a lazy argument lazy."""


class _LazyConverter:
    """NumPy's ``_array_converter`` (the inputs as arrays, and results wrapped back
    as the inputs were: scalars for scalars) over lazy inputs: NumPy's own converter
    answers on host stand-ins of the lazy ones (their dtype and shape, no memory),
    and hands back the lazy arrays in their places."""

    def __init__(self, objs):
        self._lazy = {}
        standins = []
        for o in objs:
            if _has_lazy(o):
                a = _lazy_asarray(o)
                s = np.broadcast_to(np.zeros((), a.dtype), a.shape)
                self._lazy[id(s)] = a
                standins.append(s)
            else:
                standins.append(o)
        self._standins = standins  # (kept: the ids above are theirs)
        self._host = _HOST_CONVERTER(*standins)

    def _back(self, x):
        return self._lazy.get(id(x), x)

    def __getitem__(self, i):
        return self._back(self._host[i])

    def __len__(self):
        return len(self._host)

    def as_arrays(self, subok=True, pyscalars="convert_if_no_array"):
        return tuple(map(self._back, self._host.as_arrays(subok=subok, pyscalars=pyscalars)))

    def result_type(self, extra_dtype=None, ensure_inexact=False):
        return self._host.result_type(extra_dtype=extra_dtype, ensure_inexact=ensure_inexact)

    @property
    def scalar_input(self):
        return self._host.scalar_input

    def wrap(self, arr, to_scalar=None):
        if not isinstance(arr, ndarray):
            return self._host.wrap(arr, to_scalar=to_scalar)
        if to_scalar is None:
            to_scalar = all(self._host.scalar_input)
        if to_scalar and not arr.ndim and type(arr) is ndarray:
            return as_scalar(arr)
        return arr


def _array_converter(*objs):
    if any(map(_has_lazy, objs)):
        return _LazyConverter(objs)
    return _HOST_CONVERTER(*objs)


_HOST_CONVERTER = np._core._multiarray_umath._array_converter
CONVERTERS[_HOST_CONVERTER] = _array_converter
_DISPATCHER = type(np.concatenate)


def _raw_functions():
    """NumPy's C functions behind its dispatching ones -> the dispatching ones."""
    out = {}
    for module in (np, np.linalg, np.fft, np.lib.stride_tricks, np._core.multiarray, np._core.numeric,
                   np._core.fromnumeric, np._core.shape_base):
        for v in vars(module).values():
            impl = getattr(v, "_implementation", None) if type(v) is _DISPATCHER else None
            if impl is not None and not isinstance(impl, types.FunctionType):
                out.setdefault(impl, v)
    return out


_RAW = _raw_functions()
