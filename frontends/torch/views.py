"""Torch view ops as view steps (:mod:`lazycore.views`).

Each maker gets the input tensor, the meta result(s) and the op's arguments,
and returns the steps to append (a list of them for multi-output views).
View ops not listed here become one :class:`~lazycore.views.Strided` step
from eager's sizes, strides and offset, so every torch view op is covered.
"""

from __future__ import annotations

import numpy as np
import torch

from lazycore.dialect.types import to_numpy_dtype
from lazycore.trace.views import (PART_STEPS, AsComplex, AsReal, Bitcast, Conj, Convert, Expand, Permute, Reshape,
                                  Slice, Strided, extent, memory)

from .dtypes import lazy_dtype

aten = torch.ops.aten


def _dim(d, rank):
    return d + rank if d < 0 else d


def _reshape(t, out, *args, **kwargs):
    return () if tuple(out.shape) == tuple(t.shape) else (Reshape(out.shape),)


def _permute(t, out, dims, **kwargs):
    dims = tuple(_dim(d, t.dim()) for d in dims)
    return () if dims == tuple(range(t.dim())) else (Permute(dims),)


def _transpose(t, out, d0, d1):
    rank = t.dim()
    if rank == 0:  # eager wraps dims 0 and -1 of a 0-d tensor as of a 1-d one: nothing moves
        return ()
    dims = list(range(rank))
    d0, d1 = _dim(d0, rank), _dim(d1, rank)
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return _permute(t, out, dims)


def _t(t, out):
    return _transpose(t, out, 0, 1) if t.dim() == 2 else ()


def _expand(t, out, *args, **kwargs):
    return () if tuple(out.shape) == tuple(t.shape) else (Expand(out.shape),)


def _norm_start(start, size):
    if start is None:
        return 0
    start = start + size if start < 0 else start
    return min(max(start, 0), size)


def picked_start(start, step, size):
    """``(picked, start)``: whether a slice's ``start`` is a number of the
    scalar policy (:attr:`Slice.picked <lazycore.trace.views.Slice.picked>`),
    and the start clamped as eager clamps it. A start the user gave (a
    crop's corner, a window's ``x[:, i:i + k]``) is one, a program parameter
    once it has varied; 0 too (``x[:, :k]`` cannot be told from a crop at the
    corner 0, which would be one program more per place). One counted from
    the end follows the size, as a padded length does."""
    return start is not None and start >= 0 and step == 1, _norm_start(start, size)


def _slice(t, out, dim=0, start=None, end=None, step=1):
    dim = _dim(dim, t.dim())
    picked, start = picked_start(start, step, t.shape[dim])
    count = out.shape[dim]
    if start == 0 and count == t.shape[dim] and step == 1:
        return ()
    return (Slice(dim, start, count, step, picked and count < t.shape[dim]),)


def _select(t, out, dim, index):
    dim = _dim(dim, t.dim())
    # (an index counted from the end follows the size, as a padded length does: kept a shape)
    picked = index >= 0
    index = index + t.shape[dim] if index < 0 else index
    return (Slice(dim, index, 1, 1, picked), Reshape(out.shape))


def _split(t, outs, split_size, dim=0):
    dim = _dim(dim, t.dim())
    steps, start = [], 0
    for o in outs:
        n = o.shape[dim]
        steps.append(() if n == t.shape[dim] else (Slice(dim, start, n, 1),))
        start += n
    return steps


def _split_with_sizes(t, outs, sizes, dim=0):
    return _split(t, outs, None, dim)


def _unbind(t, outs, dim=0):
    dim = _dim(dim, t.dim())
    return [(Slice(dim, i, 1, 1), Reshape(o.shape)) for i, o in enumerate(outs)]


def _view_dtype(t, out, dtype):
    if dtype == t.dtype:
        return ()
    if torch.bool in (dtype, t.dtype):
        # lazycore's booleans are i1, with no byte to reinterpret
        raise NotImplementedError(f"lazycore: view({dtype}) of a {t.dtype} tensor: bool reinterpretation is not supported")
    if dtype.is_complex or t.dtype.is_complex:
        return _view_complex_dtype(t, out, dtype)
    if dtype.itemsize != t.dtype.itemsize:
        raise NotImplementedError(
            f"lazycore: view({dtype}) of a {t.dtype} tensor changes the element size; only same-size views are supported"
        )
    return (Bitcast(lazy_dtype(dtype)),)


def _view_complex_dtype(t, out, dtype):
    """A complex tensor's (real, imaginary) pairs read as the last dimension's elements
    of a type of a part's width, or such elements read two at a time as complex ones
    (eager's layout: the parts side by side)."""
    real = (t.dtype if t.dtype.is_complex else dtype).to_real()  # the parts' type
    other = dtype if t.dtype.is_complex else t.dtype
    if (t.dtype.is_complex and dtype.is_complex) or other.itemsize != real.itemsize:
        raise NotImplementedError(f"lazycore: view({dtype}) of a {t.dtype} tensor: only views of a complex type's "
                                  f"parts as a type of their width ({real.itemsize} bytes) are supported")
    cast = () if other == real else (Bitcast(lazy_dtype(other if t.dtype.is_complex else real)),)
    if t.dtype.is_complex:
        return _view_as_real(t, out) + (Reshape(out.shape),) + cast
    pairs = Reshape(tuple(t.shape[:-1]) + (t.shape[-1] // 2, 2))
    return cast + (pairs,) + ((Convert("f32"),) if real == torch.float16 else ()) + (AsComplex(),)


def _view_as_real(t, out):
    # complex32's parts are float16s held in complex<f32> (lazycore.frontends.torch.dtypes)
    return (AsReal(), Convert("f16")) if t.dtype == torch.complex32 else (AsReal(),)


def _view_as_complex(t, out):
    return (Convert("f32"), AsComplex()) if t.dtype == torch.float16 else (AsComplex(),)


def _identity(t, out, *args, **kwargs):
    return ()


VIEW_STEPS = {
    aten.view.default: _reshape,
    aten.view.dtype: _view_dtype,
    aten._reshape_alias.default: _reshape,
    aten.unsqueeze.default: _reshape,
    aten.squeeze.default: _reshape,
    aten.squeeze.dim: _reshape,
    aten.squeeze.dims: _reshape,
    aten.permute.default: _permute,
    aten.transpose.int: _transpose,
    aten.t.default: _t,
    aten.expand.default: _expand,
    aten.slice.Tensor: _slice,
    aten.select.int: _select,
    aten.split.Tensor: _split,
    aten.split_with_sizes.default: _split_with_sizes,
    aten.unsafe_split.Tensor: _split,
    aten.unsafe_split_with_sizes.default: _split_with_sizes,
    aten.unbind.int: _unbind,
    aten.view_as_real.default: _view_as_real,
    aten.view_as_complex.default: _view_as_complex,
    aten._conj.default: lambda t, out: (Conj(),),
    aten.alias.default: _identity,
    aten.detach.default: _identity,
    aten.lift_fresh.default: _identity,
}


def view_steps(func, t, out, args, kwargs):
    """``(relative, steps)``: the steps ``func`` adds to ``t``'s own (relative),
    or the steps that replace them (an ``as_strided``-like view indexes the
    storage directly). They depend only on ``t``'s metadata and the arguments,
    so dispatch keeps them per call signature."""
    maker = VIEW_STEPS.get(func)
    if maker is not None:
        return True, maker(t, out, *args, **kwargs)
    if any(isinstance(step, PART_STEPS) for step in t._steps):
        # its strides count real parts of complex elements, or complex elements of real pairs
        raise NotImplementedError(f"lazycore: {func} of a view_as_real/view_as_complex view is not supported")
    multi = isinstance(out, (list, tuple))
    outs = out if multi else [out]
    stored = t._storage.handle.dtype  # the storage's element type (a bitcast view's base differs)
    _in_bounds(outs, memory(t._storage) * np.dtype(to_numpy_dtype(stored)).itemsize)
    made = [(Strided(o.shape, o.stride(), o.storage_offset()),)
            + (() if lazy_dtype(o.dtype) == stored else (Bitcast(lazy_dtype(o.dtype)),)) for o in outs]
    return False, made if multi else made[0]


def _in_bounds(outs, have: int) -> None:
    """Eager's check of a view that indexes its storage directly
    (``as_strided``): every element within the storage's ``have`` bytes (its
    meta twin's storage is the view's own extent, and checks nothing)."""
    for o in outs:
        if o.numel() == 0:
            continue
        need = extent(o.shape, o.stride(), o.storage_offset()) * o.element_size()
        if need > have:
            raise RuntimeError(f"setStorage: sizes {list(o.shape)}, strides {list(o.stride())}, storage offset "
                               f"{o.storage_offset()}, and itemsize {o.element_size()} requiring a storage size of "
                               f"{need} are out of bounds for storage of size {have}")


def on_base(t, out, made):
    """The full steps of each result (a list for multi-result ops) from
    :func:`view_steps`'s answer."""
    relative, steps = made
    if not relative:
        return steps
    if isinstance(out, (list, tuple)):
        return [t._steps + s for s in steps]
    return t._steps + steps
