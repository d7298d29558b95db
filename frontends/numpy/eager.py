"""The eager debug mode for NumPy (lazycore.runtime.eager): while it is on,
the frontend's entry points (``ndarray``'s methods and operators, its
``__array_ufunc__``/``__array_function__``, the ufuncs' calls and methods,
and the functions of ``lazycore.numpy`` and its ``linalg``, ``fft`` and
``random``) are wrapped so each call runs its results as a program of its
own before it returns."""

from __future__ import annotations

import sys
import types

from lazycore.ir import config
from lazycore.runtime import eager

from .array import ndarray
from .ufuncs import ufunc

_NOT_OPS = frozenset({
    "__init__", "__new__", "__hash__", "__repr__", "__str__", "__format__", "__reduce__", "__len__",
    "__copy__", "__deepcopy__", "__lazycore_value__", "__array_namespace__",
})


def _methods(cls, names=None):
    for name, raw in list(vars(cls).items()):
        fn = raw.__func__ if isinstance(raw, (classmethod, staticmethod)) else raw
        if not isinstance(fn, types.FunctionType) or name in _NOT_OPS:
            continue
        if name.startswith("_") and not name.startswith("__"):
            continue
        if names is None or name in names:
            yield cls, name


def _functions(module):
    for name, fn in list(vars(module).items()):
        if (isinstance(fn, types.FunctionType) and not name.startswith("_")
                and (fn.__module__ or "").startswith("lazycore.")):
            yield module, name


def _targets():
    lnp = sys.modules["lazycore.frontends.numpy"]
    out = list(_methods(ndarray))
    out += _methods(ufunc, {"__call__", "reduce", "accumulate", "outer", "at", "reduceat"})
    for module in (lnp, lnp.linalg, lnp.fft, lnp.random):
        out += _functions(module)
    return out


SWAPS = eager.Swaps(_targets)
config.watch("eager", SWAPS)
