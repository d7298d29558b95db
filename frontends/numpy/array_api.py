"""The Python Array API standard (2023.12) on top of the NumPy-style namespace.

NumPy 2 already uses most standard names; this module adds the ones whose
standard spelling differs (``concat``, ``permute_dims``, ``pow``, ``acos``,
...), ``astype`` as a function, and ``__array_namespace_info__``, so
array-API-generic code (``x.__array_namespace__()``) runs on lazy arrays.
"""

from __future__ import annotations

import numpy as np

from . import dtypes
from .array import device as _device
from .array import ndarray
from .ufuncs import UFUNCS

__array_api_version__ = "2023.12"

_UFUNC_ALIASES = {
    "pow": "power", "acos": "arccos", "asin": "arcsin", "atan": "arctan", "atan2": "arctan2",
    "acosh": "arccosh", "asinh": "arcsinh", "atanh": "arctanh", "bitwise_invert": "invert",
    "divide": "true_divide",
}
ALIASES = {k: UFUNCS[v] for k, v in _UFUNC_ALIASES.items() if v in UFUNCS}


def astype(x: ndarray, dtype, /, *, copy: bool = True, device=None) -> ndarray:
    return x.astype(dtype, copy=copy)


def permute_dims(x: ndarray, /, axes) -> ndarray:
    return x.transpose(axes)


def matrix_transpose(x: ndarray, /) -> ndarray:
    return x.mT


class _Info:
    """What ``__array_namespace_info__()`` answers."""

    def capabilities(self):
        # boolean-mask reads and nonzero have data-dependent shapes: they run
        # (through NumPy), so both capabilities are present
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self):
        return _device()

    def devices(self):
        return [_device()]

    def default_dtypes(self, *, device=None):
        return {"real floating": np.dtype(np.float64), "complex floating": np.dtype(np.complex128),
                "integral": np.dtype(np.int64), "indexing": np.dtype(np.int64)}

    def dtypes(self, *, device=None, kind=None):
        kinds = {"bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu",
                 "real floating": "f", "complex floating": "c", "numeric": "iufc"}
        chosen = [dt for dt in dtypes.TO_LAZY if dt.name != "bfloat16"]
        if kind is None:
            return {dt.name: dt for dt in chosen}
        wanted = "".join(kinds.get(k, "") for k in ((kind,) if isinstance(kind, str) else kind))
        return {dt.name: dt for dt in chosen if dt.kind in wanted}


def __array_namespace_info__():
    return _Info()
