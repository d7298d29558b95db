"""The Python Array API standard (2024.12) on top of the NumPy-style namespace.

NumPy 2 already uses most standard names; this module adds the ones whose
standard spelling differs (``concat``, ``permute_dims``, ``pow``, ``acos``,
...), ``astype`` as a function, ``__array_namespace_info__``, the DLPack
exchange (``from_dlpack``, ``x.__dlpack__``) and ``x.to_device``, so
array-API-generic code (``x.__array_namespace__()``) runs on lazy arrays.
"""

from __future__ import annotations

import numpy as np

from lazycore.runtime import device as _lc_device

from . import dtypes
from .array import device as _device
from .array import from_host, ndarray, to_host
from .ufuncs import UFUNCS

__array_api_version__ = "2024.12"

_UFUNC_ALIASES = {
    "pow": "power", "acos": "arccos", "asin": "arcsin", "atan": "arctan", "atan2": "arctan2",
    "acosh": "arccosh", "asinh": "arcsinh", "atanh": "arctanh", "bitwise_invert": "invert",
    "divide": "true_divide", "bitwise_left_shift": "left_shift", "bitwise_right_shift": "right_shift",
}
ALIASES = {k: UFUNCS[v] for k, v in _UFUNC_ALIASES.items() if v in UFUNCS}


def astype(x: ndarray, dtype, /, *, copy: bool = True, device=None) -> ndarray:
    _check_device(device)
    return x.astype(dtype, copy=copy)


def permute_dims(x: ndarray, /, axes) -> ndarray:
    return x.transpose(axes)


def matrix_transpose(x: ndarray, /) -> ndarray:
    return x.mT


# --- the array object's standard methods NumPy's ndarray also has -----------------------

# DLPack's device codes (dlpack.h DLDeviceType)
_DL_CPU = 1


def _named(device):
    """The lazycore device ``device`` names: a device object (what ``x.device`` and
    ``__array_namespace_info__().devices()`` give), a name lazycore prints (``"cpu:0"``,
    ``"gpu:1"``), or a platform alone (``"cpu"``: its device 0, as NumPy's ``"cpu"``);
    None for anything else."""
    if isinstance(device, _lc_device.Device):
        return device
    if isinstance(device, str):
        name = device if ":" in device else f"{device}:0"
        return next((d for d in _lc_device.devices() if d.name == name), None)
    return None


def _to_device(self, device, /, *, stream=None):
    """The array on ``device``: lazy arrays live on the one device
    :func:`__array_namespace_info__` lists, so that is the only target (as NumPy's
    ``to_device`` takes only ``"cpu"``); it may be named as :func:`_named` reads."""
    if stream is not None:
        raise ValueError("The stream argument in to_device() is not supported")
    target = _named(device)
    if target is self.device or target is _device():
        return self
    raise ValueError(f"Unsupported device {device!r}: lazycore.numpy arrays live on {_device()}")


def _dlpack(self, /, *, stream=None, max_version=None, dl_device=None, copy=None):
    """A DLPack capsule of the value: exporting is a barrier, and what is shared is the
    host copy it reads (NumPy's own ``__dlpack__`` makes the capsule), so the lazy
    array never aliases a consumer's memory."""
    if copy is False:
        raise BufferError("lazycore.numpy arrays export a host copy: copy=False cannot be honoured")
    host = to_host(self)
    if not host.flags.writeable:
        host = host.copy()
    return host.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)


def _dlpack_device(self, /):
    return (_DL_CPU, 0)


ndarray.to_device = _to_device
ndarray.__dlpack__ = _dlpack
ndarray.__dlpack_device__ = _dlpack_device


def from_dlpack(x, /, *, device=None, copy=None) -> ndarray:
    """A lazy array from any DLPack producer. A lazy ``x`` is returned as it is
    (``copy=True``: a copy); anything else is read by NumPy and uploaded, which is a
    copy, so ``copy=False`` refuses it."""
    if device is not None and _named(device) is not _device():
        raise ValueError(f"Unsupported device {device!r}: lazycore.numpy arrays live on {_device()}")
    if isinstance(x, ndarray):
        return x.copy() if copy else x
    if copy is False:
        raise BufferError("from_dlpack: uploading to a lazy array copies; copy=False cannot be honoured")
    return from_host(np.from_dlpack(x))


class _Info:
    """What ``__array_namespace_info__()`` answers."""

    def capabilities(self):
        # boolean-mask reads and nonzero have data-dependent shapes: the mask is
        # read and its coordinates taken on the host, so both capabilities are present
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self):
        return _device()

    def devices(self):
        return [_device()]

    def default_dtypes(self, *, device=None):
        _check_device(device)
        return {"real floating": np.dtype(np.float64), "complex floating": np.dtype(np.complex128),
                "integral": np.dtype(np.int64), "indexing": np.dtype(np.int64)}

    def dtypes(self, *, device=None, kind=None):
        _check_device(device)
        # NumPy's order (bool, signed, unsigned, floating, complex), of the types lazycore has
        chosen = [dt for dt in _STANDARD_DTYPES if dt in dtypes.TO_LAZY]
        if kind is None:
            return {dt.name: dt for dt in chosen}
        wanted = "".join(_kind_letters(k) for k in ((kind,) if isinstance(kind, str) else kind))
        return {dt.name: dt for dt in chosen if dt.kind in wanted}


_STANDARD_DTYPES = [np.dtype(n) for n in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                          "uint64", "float32", "float64", "complex64", "complex128")]
_KINDS = {"bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu",
          "real floating": "f", "complex floating": "c", "numeric": "iufc"}


def _kind_letters(kind) -> str:
    try:
        return _KINDS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"unsupported kind: {kind!r}") from None


def _check_device(device):
    if device is not None and _named(device) is not _device():
        raise ValueError(f"Device not understood: lazycore.numpy has {_device()!r}, not {device!r}")


def __array_namespace_info__():
    return _Info()
