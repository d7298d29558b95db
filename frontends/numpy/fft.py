"""``lazycore.numpy.fft``: NumPy's discrete Fourier transforms through ``lazy.fft``.

Each function pads or crops its axes to ``n``/``s``, converts to the dtype
NumPy's own function returns (NumPy 2 keeps single precision), and runs one
:func:`lazycore.trace.fft.transform`. What NumPy decides (the result dtype and
sizes, its errors and warnings for ``n``, ``axis``, ``s``/``axes`` and
``norm``) comes from NumPy itself, called once per signature on a zero array
whose untransformed axes have size 1. ``numpy.fft.fft(lazy_array)`` stays lazy
too. The frequencies (``fftfreq``, ``rfftfreq``) are host constants, uploaded;
the shifts are a lazy ``roll``.
"""

from __future__ import annotations

import math
import operator

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from lazycore.ir.memo import Memo
from lazycore.trace import composites, core
from lazycore.trace.fft import norm_scale, transform

from .array import from_host, ndarray, value, wrap
from .fallback import call_numpy, implements
from .manipulation import roll
from .ufuncs import asarray_like, cast

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "fftn", "ifftn", "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_PROBES = Memo("numpy.fft_probes", 1024)


def _probe(fn, shape, dtype, axes, kwargs):
    """NumPy's ``fn`` on zeros of ``shape`` with the untransformed axes at size 1:
    its result dtype and the sizes of the transformed axes (its errors raise here)."""
    # ``s`` and ``axes`` may come as lists (the Array API's spelling)
    key = (fn, shape, dtype, axes, tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in kwargs.items())))
    known = _PROBES.get(key)
    if known is None:
        keep = set(axes)
        small = tuple(n if i in keep else min(n, 1) for i, n in enumerate(shape))
        out = fn(np.zeros(small, dtype), **kwargs)
        known = _PROBES.put(key, (out.dtype, tuple(out.shape)))
    return known


def _resize(h, axis: int, n: int):
    """``h`` cropped or zero-padded to ``n`` along ``axis`` (NumPy's ``n``/``s``)."""
    size = h.shape[axis]
    if n == size:
        return h
    rank = len(h.shape)
    if n < size:
        limit = list(h.shape)
        limit[axis] = n
        return core.apply("slice", h, start=(0,) * rank, limit=tuple(limit), strides=(1,) * rank)
    high = [0] * rank
    high[axis] = n - size
    zero = composites.constant(0, h.dtype, h.device)
    return core.apply("pad", h, zero, low=(0,) * rank, high=tuple(high), interior=(0,) * rank)


def _checked(np_fn, a, kwargs, find_axes):
    """NumPy's verdict on the call: (axes, sizes, result dtype, result sizes).
    ``find_axes()`` reads the axes and lengths as NumPy would; when it cannot,
    NumPy's own call on the whole shape raises NumPy's error."""
    try:
        axes, sizes = find_axes()
    except Exception:  # noqa: BLE001 - NumPy says what is wrong, just below
        _probe(np_fn, a.shape, a.dtype, tuple(range(a.ndim)), kwargs)
        raise
    dtype, out_shape = _probe(np_fn, a.shape, a.dtype, tuple(axes), kwargs)
    return axes, sizes, dtype, out_shape


def _run(np_fn, a, axes, sizes, dtype, out_shape, kind, inverse, norm, out, kwargs, conj_in=False, conj_out=False):
    """The shared body: ``axes`` (normalized) transformed to lengths ``sizes``
    (for c2r, the output lengths), giving NumPy's ``dtype``."""
    if out is not None:
        return call_numpy(np_fn, (a,), dict(kwargs, out=out))
    h = value(a)
    if kind == "r2c":
        h = cast(h, np.finfo(dtype).dtype)
        inputs = sizes
    elif kind == "c2r":
        h = cast(h, np.result_type(dtype, np.complex64))
        inputs = list(sizes[:-1]) + [sizes[-1] // 2 + 1]
    else:
        h = cast(h, dtype)
        inputs = sizes
    for ax, n in zip(axes, inputs):
        h = _resize(h, ax, n)
    if conj_in:
        h = composites.conj(h)
    n_total = math.prod(sizes)
    h = transform(h, axes, kind, norm_scale(norm or "backward", n_total, inverse), inverse=inverse,
                  last_size=sizes[-1] if kind == "c2r" else None)
    if conj_out:
        h = composites.conj(h)
    assert tuple(h.shape[ax] for ax in axes) == tuple(out_shape[ax] for ax in axes), (h.shape, out_shape)
    return wrap(cast(h, dtype), dtype)  # NumPy 2.4's hfft of float16 is float16, computed wider


def _one(np_fn, kind, inverse, hermitian=False):
    def f(a, n=None, axis=-1, norm=None, out=None):
        a = asarray_like(a)
        kwargs = dict(n=n, axis=axis, norm=norm)

        def find_axes():
            ax = normalize_axis_index(axis, a.ndim)
            length = n
            if length is None:
                length = 2 * (a.shape[ax] - 1) if kind == "c2r" else a.shape[ax]
            return [ax], [length]

        axes, sizes, dtype, out_shape = _checked(np_fn, a, kwargs, find_axes)
        # hfft is irfft of the conjugate, ihfft the conjugate of rfft, with the norm's direction swapped
        run_norm = {"backward": "forward", "forward": "backward"}.get(norm or "backward", norm) if hermitian else norm
        return _run(np_fn, a, axes, sizes, dtype, out_shape, kind, inverse != hermitian, run_norm, out, kwargs,
                    conj_in=hermitian and kind == "c2r", conj_out=hermitian and kind == "r2c")

    f.__name__ = np_fn.__name__
    f.__doc__ = f"NumPy's ``numpy.fft.{np_fn.__name__}`` on lazy arrays."
    return implements(np_fn)(f)


def _axes_and_sizes(a, s, axes, c2r):
    """NumPy's ``_cook_nd_args``: the axes and their transform lengths."""
    if s is None:
        axes = list(range(a.ndim)) if axes is None else list(axes)
        sizes = [a.shape[ax] for ax in axes]
        if c2r and axes:
            sizes[-1] = (a.shape[axes[-1]] - 1) * 2
    else:
        sizes = list(s)
        axes = list(range(-len(sizes), 0)) if axes is None else list(axes)
        sizes = [a.shape[ax] if n is None else n for n, ax in zip(sizes, axes)]  # NumPy 2: None is the axis' size
    return [normalize_axis_index(ax, a.ndim) for ax in axes], sizes


def _many(np_fn, kind, inverse, default_axes=None):
    def f(a, s=None, axes=default_axes, norm=None, out=None):
        a = asarray_like(a)
        kwargs = dict(s=s, axes=axes, norm=norm)
        ax, sizes, dtype, out_shape = _checked(np_fn, a, kwargs, lambda: _axes_and_sizes(a, s, axes, kind == "c2r"))
        if len(set(ax)) != len(ax) or not ax:  # a repeated axis transforms twice: NumPy's own loop
            return call_numpy(np_fn, (a,), dict(kwargs, out=out))
        return _run(np_fn, a, ax, sizes, dtype, out_shape, kind, inverse, norm, out, kwargs)

    f.__name__ = np_fn.__name__
    f.__doc__ = f"NumPy's ``numpy.fft.{np_fn.__name__}`` on lazy arrays."
    return implements(np_fn)(f)


F = np.fft
fft = _one(F.fft, "c2c", False)
ifft = _one(F.ifft, "c2c", True)
rfft = _one(F.rfft, "r2c", False)
irfft = _one(F.irfft, "c2r", True)
hfft = _one(F.hfft, "c2r", False, hermitian=True)
ihfft = _one(F.ihfft, "r2c", True, hermitian=True)
fftn = _many(F.fftn, "c2c", False)
ifftn = _many(F.ifftn, "c2c", True)
rfftn = _many(F.rfftn, "r2c", False)
irfftn = _many(F.irfftn, "c2r", True)
fft2 = _many(F.fft2, "c2c", False, (-2, -1))
ifft2 = _many(F.ifft2, "c2c", True, (-2, -1))
rfft2 = _many(F.rfft2, "r2c", False, (-2, -1))
irfft2 = _many(F.irfft2, "c2r", True, (-2, -1))


# The helpers with NumPy's arguments and the Array API's (2024.12 adds ``dtype`` to the
# frequencies, which NumPy's own functions lack). The frequencies are constants of ``n``
# and ``d``: NumPy computes them on the host and they are uploaded, as ``arange`` is
# (no fallback); a lazy ``d`` scales them lazily, as NumPy's ``results * val`` does.
# The shifts are a lazy ``roll``.
def _frequencies(fn, n, d, dtype, device):
    from .array_api import _check_device  # (array_api binds ndarray methods: loaded last, by the package)

    _check_device(device)
    if isinstance(d, ndarray):
        n = operator.index(n)
        if fn is F.fftfreq:  # the integers NumPy scales: 0, 1, ..., -2, -1
            ints = np.concatenate([np.arange(0, (n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
        else:
            ints = np.arange(0, n // 2 + 1)
        out = from_host(ints) * (1.0 / (n * d))
    else:
        out = from_host(fn(n, d))
    return out if dtype is None else out.astype(dtype)


def fftfreq(n, d=1.0, *, dtype=None, device=None):
    return _frequencies(F.fftfreq, n, d, dtype, device)


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    return _frequencies(F.rfftfreq, n, d, dtype, device)


def _shift(x, axes, sign):
    x = asarray_like(x)
    if axes is None:
        axes = tuple(range(x.ndim))
        shift = [sign * (dim // 2) for dim in x.shape]
    elif isinstance(axes, (int, np.integer)):
        shift = sign * (x.shape[axes] // 2)
    else:
        shift = [sign * (x.shape[ax] // 2) for ax in axes]
    return roll(x, shift, axes)


@implements(F.fftshift)
def fftshift(x, axes=None):
    return _shift(x, axes, 1)


@implements(F.ifftshift)
def ifftshift(x, axes=None):
    return _shift(x, axes, -1)


def __getattr__(name):
    """Any other ``numpy.fft`` function: NumPy itself, counted."""
    target = getattr(F, name, None)
    if callable(target):
        def call(*args, **kwargs):
            return call_numpy(target, args, kwargs, name=f"numpy.fft.{name}")

        call.__name__ = name
        return call
    raise AttributeError(f"module 'lazycore.numpy.fft' has no attribute '{name}'")
