"""Shape manipulation: views where NumPy makes views, copies where it copies.

View functions (transpose, moveaxis, expand_dims, squeeze, ravel, flip,
broadcast_to, split, atleast_*d, ...) first run NumPy's own function on the
array's memory-less stand-in (:meth:`ndarray._standin`): that raises NumPy's
errors at the call and gives the result's shape, strides and offset; the
view then gets the matching steps (permute, reshape, reverse, expand, slice),
so writes through it reach the source as in NumPy. Joins, tiles, pads,
rolls and repeats are copies built from slices, ``concatenate``, ``pad``,
``broadcast_in_dim`` and (for per-element repeat counts) a gather.
"""

from __future__ import annotations

import builtins
import math
import operator
import warnings

import numpy as np
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from lazycore.trace import composites, core
from lazycore.trace.views import Expand, Permute, Reshape, Reverse, Slice, Strided

from . import dtypes
from .array import _new, from_host, ndarray, to_host, value, wrap, write
from .fallback import call_numpy, implements
from .pycode import run_numpy_code
from .indexing import nonzero
from .reductions import scan
from .ufuncs import UFUNCS, apply, asarray_like, broadcast_to_shape, cast, device_of, shape_of, to_handle

__all__ = ["reshape", "transpose", "permute_dims", "matrix_transpose", "swapaxes", "moveaxis", "rollaxis",
           "expand_dims", "squeeze", "ravel", "concatenate", "concat", "stack", "hstack", "vstack", "dstack",
           "column_stack", "append", "split", "array_split", "hsplit", "vsplit", "dsplit", "unstack",
           "broadcast_to", "broadcast_arrays", "flip", "fliplr", "flipud", "rot90", "roll", "tile", "repeat",
           "pad", "where", "clip", "atleast_1d", "atleast_2d", "atleast_3d", "diff", "meshgrid", "select",
           "apply_along_axis"]

_NoValue = np._NoValue


def _implements(*funcs):
    """``implements`` for the NumPy functions this NumPy has, each once (``np.concat is np.concatenate``)."""
    unique = []
    for f in funcs:
        if f is not None and all(f is not g for g in unique):
            unique.append(f)
    return implements(*unique)


# --- handle helpers -----------------------------------------------------------------------------


def _slice(h, axis: int, start: int, stop: int):
    rank = len(h.shape)
    begin, limit = [0] * rank, list(h.shape)
    begin[axis], limit[axis] = start, stop
    return apply("slice", h, start=begin, limit=limit, strides=[1] * rank)


def _concat(handles, axis: int):
    handles = [h for h in handles if h is not None]
    nonempty = [h for h in handles if h.shape[axis]] or handles[:1]
    out = nonempty[0]
    for h in nonempty[1:]:
        out = apply("concatenate", out, h, dim=axis)
    return out


def _reverse(h, axis: int):
    return apply("reverse", h, dims=(axis,))


def _widen(h, axis: int, n: int):
    """A size-1 ``axis`` of ``h`` repeated ``n`` times."""
    shape = list(h.shape)
    shape[axis] = n
    return broadcast_to_shape(h, tuple(shape))


def _scalar(v, dt: np.dtype):
    """A rank-0 handle of ``v`` in ``dt`` with NumPy's assignment casting: Python
    numbers must fit (OverflowError), NumPy scalars convert unsafely."""
    host = np.asarray(v, dtype=dt) if type(v) in (bool, int, float) else np.asarray(v).astype(dt)
    return core.scalar(host.item(), dtypes.lazy_dtype(dt))


def _permute(a: ndarray, perm, out, origin) -> ndarray:
    perm = tuple(int(p) for p in perm)
    steps = (Permute(perm),) if perm != tuple(range(a.ndim)) else ()
    return a._view(steps, out, origin)


def _reshaped(a: ndarray, out, origin) -> ndarray:
    steps = (Reshape(out.shape),) if out.shape != a.shape else ()
    return a._view(steps, out, origin)


# --- axes and shapes (views) --------------------------------------------------------------------


@implements(np.reshape)
def reshape(a, /, shape=None, order="C", *, newshape=None, copy=None):
    if shape is None:
        if newshape is None:
            raise TypeError("reshape() missing 1 required positional argument: 'shape'")
        shape = newshape
    return asarray_like(a).reshape(shape, order=order, copy=copy)


@_implements(np.transpose, getattr(np, "permute_dims", None))
def transpose(a, axes=None):
    a = asarray_like(a)
    return a.transpose(None if axes is None else tuple(operator.index(x) for x in axes))


permute_dims = transpose


if hasattr(np, "matrix_transpose"):
    @implements(np.matrix_transpose)
    def matrix_transpose(x, /):
        x = asarray_like(x)
        if x.ndim < 2:
            raise ValueError(f"Input array must be at least 2-dimensional, but it is {x.ndim}")
        return x.swapaxes(-1, -2)


@implements(np.swapaxes)
def swapaxes(a, axis1, axis2):
    return asarray_like(a).swapaxes(axis1, axis2)


@implements(np.moveaxis)
def moveaxis(a, source, destination):
    a = asarray_like(a)
    origin = a._standin()
    out = np.moveaxis(origin, source, destination)
    source = normalize_axis_tuple(source, a.ndim, "source")
    destination = normalize_axis_tuple(destination, a.ndim, "destination")
    order = [n for n in range(a.ndim) if n not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return _permute(a, order, out, origin)


@implements(np.rollaxis)
def rollaxis(a, axis, start=0):
    a = asarray_like(a)
    origin = a._standin()
    out = np.rollaxis(origin, axis, start)
    n = a.ndim
    axis = normalize_axis_index(axis, n)
    start = start + n if start < 0 else start
    if axis < start:
        start -= 1
    order = list(range(n))
    order.remove(axis)
    order.insert(start, axis)
    return _permute(a, order, out, origin)


@implements(np.expand_dims)
def expand_dims(a, axis):
    a = asarray_like(a)
    origin = a._standin()
    return _reshaped(a, np.expand_dims(origin, axis), origin)


@implements(np.squeeze)
def squeeze(a, axis=None):
    a = asarray_like(a)
    origin = a._standin()
    return _reshaped(a, np.squeeze(origin, axis=axis), origin)


@implements(np.ravel)
def ravel(a, order="C"):
    """A view when the array is C-contiguous, else a copy (NumPy's rule, even
    where a strided view would do)."""
    a = asarray_like(a)
    origin = a._standin()
    if order in ("K", "A") and origin.flags.c_contiguous:
        order = "C"
    elif order == "A" and not origin.flags.f_contiguous:
        order = "C"
    if order != "C":
        if order not in ("F", "K", "A"):
            raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got '{order}')")
        return call_numpy(np.ravel, (a,), {"order": order})
    if origin.flags.c_contiguous:
        return _reshaped(a, origin.reshape(-1), origin)
    return wrap(apply("reshape", value(a), shape=(a.size,)), a.dtype)


@_implements(np.atleast_1d)
def atleast_1d(*arys):
    return _atleast(arys, np.atleast_1d)


@_implements(np.atleast_2d)
def atleast_2d(*arys):
    return _atleast(arys, np.atleast_2d)


@_implements(np.atleast_3d)
def atleast_3d(*arys):
    return _atleast(arys, np.atleast_3d)


def _atleast(arys, np_fn):
    res = []
    for ary in arys:
        a = asarray_like(ary)
        origin = a._standin()
        out = np_fn(origin)
        res.append(a if out.shape == a.shape else _reshaped(a, out, origin))
    return res[0] if len(res) == 1 else tuple(res)


# --- flips ----------------------------------------------------------------------------------------


@implements(np.flip)
def flip(m, axis=None):
    a = asarray_like(m)
    origin = a._standin()
    if a.ndim == 0:
        if axis is not None:
            normalize_axis_tuple(axis, 0)
        return a._view((), origin, origin)
    out = np.flip(origin, axis)
    axes = range(a.ndim) if axis is None else normalize_axis_tuple(axis, a.ndim)
    dims = tuple(sorted(d for d in axes if a.shape[d] > 1))
    return a._view((Reverse(dims),) if dims else (), out, origin)


@implements(np.fliplr)
def fliplr(m):
    a = asarray_like(m)
    np.fliplr(a._standin())
    return flip(a, 1)


@implements(np.flipud)
def flipud(m):
    a = asarray_like(m)
    np.flipud(a._standin())
    return flip(a, 0)


@implements(np.rot90)
def rot90(m, k=1, axes=(0, 1)):
    a = asarray_like(m)
    np.rot90(a._standin(), k, axes)  # NumPy's checks
    axes = tuple(axes)
    k %= 4
    if k == 0:
        return a[:]
    if k == 2:
        return flip(flip(a, axes[0]), axes[1])
    perm = list(range(a.ndim))
    perm[axes[0]], perm[axes[1]] = perm[axes[1]], perm[axes[0]]
    if k == 1:
        return transpose(flip(a, axes[1]), perm)
    return flip(transpose(a, perm), axes[1])


# --- broadcasting ---------------------------------------------------------------------------------


@implements(np.broadcast_to)
def broadcast_to(array, shape, subok=False):
    """A read-only view (as NumPy's): many of its elements share one source element."""
    a = asarray_like(array)
    origin = a._standin()
    out = np.broadcast_to(origin, shape)
    steps = (Expand(out.shape),) if out.shape != a.shape else ()
    return a._view(steps, out, origin, writeable=False)


class _WritableExpand(Expand):
    """A broadcast step that can be written through, as ``broadcast_arrays``'
    results still can in NumPy: the elements are stored one after another in
    C order, so each source element keeps the last value written to it."""

    __slots__ = ()

    def inverse(self, old, new, storage):
        warnings.warn("future versions will not create a writeable array from broadcast_array. Set the "
                      "writable flag explicitly to avoid this warning.", FutureWarning, stacklevel=5)
        if 0 in self.shape:
            return old
        lead = len(self.shape) - len(old.shape)
        start = [n - 1 if d < lead or old.shape[d - lead] != n else 0 for d, n in enumerate(self.shape)]
        last = apply("slice", new, start=start, limit=list(self.shape), strides=[1] * len(self.shape))
        return apply("reshape", last, shape=old.shape)


@implements(np.broadcast_arrays)
def broadcast_arrays(*args, subok=False):
    arrays = [asarray_like(x) for x in args]
    shape = np.broadcast_shapes(*(x.shape for x in arrays))
    result = []
    for a in arrays:
        if a.shape == shape:
            result.append(a)
            continue
        origin = a._standin()
        out = np.broadcast_to(origin, shape)
        result.append(a._view((_WritableExpand(shape),), out, origin))
    return tuple(result)


@implements(np.meshgrid)
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """NumPy's steps: each vector reshaped along its own dim (the first two swapped
    for ``"xy"``), broadcast together, copied."""
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    n = len(xi)
    ones = (1,) * n
    out = [asarray_like(x).reshape(ones[:i] + (-1,) + ones[i + 1:]) for i, x in enumerate(xi)]
    if indexing == "xy" and n > 1:
        out[0] = out[0].reshape((1, -1) + ones[2:])
        out[1] = out[1].reshape((-1, 1) + ones[2:])
    if not sparse:
        out = broadcast_arrays(*out)
    return tuple(x.copy() for x in out) if copy else tuple(out)


@implements(np.lib.stride_tricks.sliding_window_view)
def sliding_window_view(x, window_shape, axis=None, *, subok=False, writeable=False):
    """A read-only view as NumPy's (windows overlap: one strided step, a gather over
    the storage's memory, at the strides NumPy gives its view). A writeable one runs
    NumPy: a write to an element many windows share has no one place to go."""
    a = asarray_like(x)
    if writeable:
        return call_numpy(np.lib.stride_tricks.sliding_window_view, (a, window_shape),
                          dict(axis=axis, subok=subok, writeable=True), name="numpy.sliding_window_view")
    origin = a._standin()
    out = np.lib.stride_tricks.sliding_window_view(origin, window_shape, axis=axis)
    view = a._view((), out, origin, writeable=False)
    return _new(a._storage, (Strided(view.shape, view._estrides, view._offset),), view.shape, a.dtype,
                view._estrides, view._offset, False)


# --- joining ----------------------------------------------------------------------------------------


@_implements(np.concatenate, getattr(np, "concat", None))
def concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    arrays = [asarray_like(x) for x in arrays]
    if not arrays:
        raise ValueError("need at least one array to concatenate")
    if axis is None:
        arrays = [ravel(x) for x in arrays]
        axis = 0
    ndim = arrays[0].ndim
    if ndim == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    axis = normalize_axis_index(axis, ndim)
    first = arrays[0].shape
    for i, x in enumerate(arrays[1:], 1):
        if x.ndim != ndim:
            raise ValueError(f"all the input arrays must have same number of dimensions, but the array at index 0 "
                             f"has {ndim} dimension(s) and the array at index {i} has {x.ndim} dimension(s)")
        for d in range(ndim):
            if d != axis and x.shape[d] != first[d]:
                raise ValueError(f"all the input array dimensions except for the concatenation axis must match "
                                 f"exactly, but along dimension {d}, the array at index 0 has size {first[d]} "
                                 f"and the array at index {i} has size {x.shape[d]}")
    if out is not None and dtype is not None:
        raise TypeError("concatenate() only takes `out` or `dtype` as an argument, but both were provided.")
    if out is not None:
        dt = out.dtype
    else:
        dt = np.dtype(dtype) if dtype is not None else np.result_type(*(x.dtype for x in arrays))
    for x in arrays:
        if not np.can_cast(x.dtype, dt, casting):
            raise TypeError(f"Cannot cast array data from {x.dtype!r} to {dt!r} according to the rule '{casting}'")
    res = wrap(_concat([cast(value(x), dt) for x in arrays], axis), dt)
    if out is None:
        return res
    if not isinstance(out, ndarray):
        raise TypeError("lazycore.numpy: out= must be a lazy array")
    if out.shape != res.shape:
        raise ValueError("Output array is the wrong shape")
    write(out, value(res))
    return out


concat = concatenate


@implements(np.stack)
def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    arrays = [asarray_like(x) for x in arrays]
    if not arrays:
        raise ValueError("need at least one array to stack")
    if len({x.shape for x in arrays}) != 1:
        raise ValueError("all input arrays must have the same shape")
    axis = normalize_axis_index(axis, arrays[0].ndim + 1)
    return concatenate([expand_dims(x, axis) for x in arrays], axis, out, dtype=dtype, casting=casting)


@implements(np.apply_along_axis)
def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """NumPy's loop over the 1-d slices along ``axis``, on lazy slices: ``func1d`` traces
    each (scipy.stats.spearmanr ranks with it), and the results are stacked where NumPy
    writes them into a buffer of the first result's shape and dtype (later results
    broadcast and cast to it), the result's dims in place of ``axis``."""
    arr = asarray_like(arr)
    nd = arr.ndim
    axis = normalize_axis_index(axis, nd)
    dims = list(range(nd))
    view = arr.transpose(dims[:axis] + dims[axis + 1:] + [axis])
    inds = [ind + (Ellipsis,) for ind in np.ndindex(view.shape[:-1])]
    if not inds:
        raise ValueError("Cannot apply_along_axis when any iteration dimensions are 0")
    first = asarray_like(func1d(view[inds[0]], *args, **kwargs))
    parts = [first]
    for ind in inds[1:]:
        r = asarray_like(func1d(view[ind], *args, **kwargs))
        if r.shape != first.shape:
            try:
                r = broadcast_to(r, first.shape)
            except ValueError:
                raise ValueError(f"could not broadcast input array from shape {r.shape} into shape "
                                 f"{first.shape}") from None
        parts.append(r.astype(first.dtype, casting="unsafe", copy=False))
    out = stack(parts).reshape(view.shape[:-1] + first.shape)
    n = out.ndim
    odims = list(range(n))
    return out.transpose(odims[:axis] + odims[n - first.ndim:] + odims[axis:n - first.ndim])


def _tuple(res):
    return res if isinstance(res, tuple) else (res,)


@implements(np.hstack)
def hstack(tup, *, dtype=None, casting="same_kind"):
    arrs = _tuple(atleast_1d(*tup))
    axis = 0 if arrs and arrs[0].ndim == 1 else 1
    return concatenate(arrs, axis, dtype=dtype, casting=casting)


@implements(np.vstack)
def vstack(tup, *, dtype=None, casting="same_kind"):
    return concatenate(_tuple(atleast_2d(*tup)), 0, dtype=dtype, casting=casting)


@implements(np.dstack)
def dstack(tup):
    return concatenate(_tuple(atleast_3d(*tup)), 2)


@implements(np.column_stack)
def column_stack(tup):
    arrays = []
    for v in tup:
        a = asarray_like(v)
        arrays.append(atleast_2d(a).T if a.ndim < 2 else a)
    return concatenate(arrays, 1)


@implements(np.append)
def append(arr, values, axis=None):
    arr = asarray_like(arr)
    values = asarray_like(values)
    if axis is None:
        if arr.ndim != 1:
            arr = ravel(arr)
        values = ravel(values)
        axis = arr.ndim - 1
    return concatenate((arr, values), axis=axis)


# --- splitting (views) --------------------------------------------------------------------------------


def _host_indices(ios):
    """Split points are shapes: lazy ones would have to be read first."""
    return isinstance(ios, ndarray)


@implements(np.array_split)
def array_split(ary, indices_or_sections, axis=0):
    a = asarray_like(ary)
    if _host_indices(indices_or_sections):
        return call_numpy(np.array_split, (a, indices_or_sections), {"axis": axis})
    np.array_split(a._standin(), indices_or_sections, axis)  # NumPy's checks
    n = a.shape[axis]
    axis = axis % a.ndim
    try:
        sections = len(indices_or_sections) + 1
        points = [0] + list(indices_or_sections) + [n]
    except TypeError:
        sections = int(indices_or_sections)
        each, extras = divmod(n, sections)
        sizes = [0] + extras * [each + 1] + (sections - extras) * [each]
        points = np.cumsum(sizes).tolist()
    lead = (slice(None),) * axis
    return [a[lead + (slice(points[i], points[i + 1]),)] for i in range(sections)]


@implements(np.split)
def split(ary, indices_or_sections, axis=0):
    a = asarray_like(ary)
    if _host_indices(indices_or_sections):
        return call_numpy(np.split, (a, indices_or_sections), {"axis": axis})
    np.split(a._standin(), indices_or_sections, axis)  # NumPy's checks (equal division)
    return array_split(a, indices_or_sections, axis)


def _split_along(np_fn, axis_of):
    def fn(ary, indices_or_sections):
        a = asarray_like(ary)
        if _host_indices(indices_or_sections):
            return call_numpy(np_fn, (a, indices_or_sections), {})
        np_fn(a._standin(), indices_or_sections)  # NumPy's checks
        return split(a, indices_or_sections, axis_of(a))

    fn.__name__ = np_fn.__name__
    fn.__doc__ = f"``numpy.{np_fn.__name__}`` as views."
    return implements(np_fn)(fn)


hsplit = _split_along(np.hsplit, lambda a: 1 if a.ndim > 1 else 0)
vsplit = _split_along(np.vsplit, lambda a: 0)
dsplit = _split_along(np.dsplit, lambda a: 2)


if hasattr(np, "unstack"):
    @implements(np.unstack)
    def unstack(x, /, *, axis=0):
        a = asarray_like(x)
        if a.ndim == 0:
            raise ValueError("Input array must be at least 1-d.")
        axis = normalize_axis_index(axis, a.ndim)
        lead = (slice(None),) * axis
        return tuple(a[lead + (i,)] for i in range(a.shape[axis]))


# --- copies: roll, tile, repeat, pad, diff --------------------------------------------------------------


@implements(np.roll)
def roll(a, shift, axis=None):
    a = asarray_like(a)
    if isinstance(shift, ndarray):
        return call_numpy(np.roll, (a, shift), {"axis": axis})
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), a.shape)
    axis = normalize_axis_tuple(axis, a.ndim, allow_duplicate=True)
    pairs = np.broadcast(shift, axis)
    if pairs.ndim > 1:
        raise ValueError("'shift' and 'axis' should be scalars or 1D sequences")
    shifts = dict.fromkeys(range(a.ndim), 0)
    for sh, ax in pairs:
        shifts[ax] += int(sh)
    h = value(a)
    for ax, sh in shifts.items():
        n = a.shape[ax]
        s = sh % n if n else 0
        if s:
            h = _concat([_slice(h, ax, n - s, n), _slice(h, ax, 0, n - s)], ax)
    return wrap(h, a.dtype)


@implements(np.tile)
def tile(A, reps):
    try:
        tup = tuple(operator.index(r) for r in reps)
    except TypeError:
        tup = (operator.index(reps),)
    a = asarray_like(A)
    d = len(tup)
    if builtins.any(t < 0 for t in tup):
        raise ValueError("negative dimensions are not allowed")
    shape = (1,) * (d - a.ndim) + a.shape
    tup = (1,) * (len(shape) - d) + tup
    h = value(a)
    if h.shape != shape:
        h = apply("reshape", h, shape=shape)
    if builtins.all(t == 1 for t in tup):
        return wrap(h, a.dtype)
    # copy i of the whole array along dim k is the outer index of an (r_k, n_k) pair
    big = apply("broadcast_in_dim", h, dims=tuple(2 * k + 1 for k in range(len(shape))),
                shape=tuple(x for t, n in zip(tup, shape) for x in (t, n)))
    return wrap(apply("reshape", big, shape=tuple(t * n for t, n in zip(tup, shape))), a.dtype)


@implements(np.repeat)
def repeat(a, repeats, axis=None):
    a = asarray_like(a)
    # lazy counts (scipy's rankdata repeats each tie's rank) are read: their sum is the
    # output's length; the copy stays on the device
    reps = to_host(repeats) if isinstance(repeats, ndarray) else np.asarray(repeats)
    if reps.ndim > 1:
        raise ValueError("setting an array element with a sequence. The requested array would exceed the maximum "
                         "number of dimension of 1.")
    reps = reps.astype(np.intp).ravel()
    if axis is None:
        a = ravel(a)
        axis = 0
    else:
        axis = normalize_axis_index(axis, a.ndim)
    n = a.shape[axis]
    if reps.size == 1:
        if reps[0] < 0:
            raise ValueError("negative dimensions are not allowed")
    elif reps.size != n:
        raise ValueError(f"operands could not be broadcast together with shape ({n},) ({reps.size},)")
    elif (reps < 0).any():
        raise ValueError("repeats may not contain negative values.")
    h = value(a)
    shape = a.shape
    if reps.size == 1 or (n and (reps == reps[0]).all()):
        r = int(reps[0]) if reps.size else 0
        wide = shape[:axis + 1] + (r,) + shape[axis + 1:]
        big = apply("broadcast_in_dim", h, dims=tuple(d if d <= axis else d + 1 for d in range(a.ndim)), shape=wide)
        out = shape[:axis] + (shape[axis] * r,) + shape[axis + 1:]
        return wrap(apply("reshape", big, shape=out), a.dtype)
    return wrap(_gather(h, axis, _repeat_index(reps)), a.dtype)


def _repeat_index(reps: np.ndarray):
    """Source index of every output element: a scan of marks at the element boundaries."""
    total = int(reps.sum())
    bounds = np.cumsum(reps)[:-1]
    bounds = bounds[bounds < total]
    marks = core.apply("broadcast_in_dim", core.scalar(0, "i64"), dims=(), shape=(total,))
    if bounds.size and total:
        ones = core.apply("broadcast_in_dim", core.scalar(1, "i64"), dims=(), shape=(bounds.size,))
        marks = apply("scatter", marks, value(from_host(bounds.astype(np.int64))), ones,
                      update_window_dims=(), inserted_window_dims=(0,), input_batching_dims=(),
                      scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=(0,), index_vector_dim=1,
                      mode="add")
    return scan(marks, 0, "add", 0) if total > 1 else marks


def _gather(h, axis: int, idx):
    rank = len(h.shape)
    return apply("gather", h, idx, offset_dims=tuple(d for d in range(rank) if d != axis),
                 collapsed_slice_dims=(axis,), operand_batching_dims=(), start_indices_batching_dims=(),
                 start_index_map=(axis,), index_vector_dim=1,
                 slice_sizes=tuple(1 if d == axis else n for d, n in enumerate(h.shape)), indices_are_sorted=True)


def _as_pairs(x, ndim, as_index=False):
    """``x`` broadcast to ``ndim`` (before, after) pairs (NumPy's ``pad`` argument rules)."""
    if x is None:
        return ((None, None),) * ndim
    x = np.array(x)
    if as_index:
        x = np.round(x).astype(np.intp, copy=False)
    if x.ndim < 3:
        if x.size == 1:
            x = x.ravel()
            if as_index and x < 0:
                raise ValueError("index can't contain negative values")
            return ((x[0], x[0]),) * ndim
        if x.size == 2 and x.shape != (2, 1):
            x = x.ravel()
            if as_index and (x[0] < 0 or x[1] < 0):
                raise ValueError("index can't contain negative values")
            return ((x[0], x[1]),) * ndim
    if as_index and x.min() < 0:
        raise ValueError("index can't contain negative values")
    return np.broadcast_to(x, (ndim, 2)).tolist()


_PAD_KWARGS = {
    "empty": [], "edge": [], "wrap": [], "constant": ["constant_values"], "linear_ramp": ["end_values"],
    "maximum": ["stat_length"], "mean": ["stat_length"], "median": ["stat_length"], "minimum": ["stat_length"],
    "reflect": ["reflect_type"], "symmetric": ["reflect_type"],
}


@implements(np.pad)
def pad(array, pad_width, mode="constant", **kwargs):
    """Constant, edge, reflect, symmetric and wrap padding lazily; the statistics and ramp modes
    are NumPy's own code run lazily (:mod:`.pycode`); a lazy width or a callable mode run NumPy
    (counted)."""
    a = asarray_like(array)
    if isinstance(pad_width, ndarray) or callable(mode):
        return call_numpy(np.pad, (a, pad_width, mode), kwargs)
    if mode in ("linear_ramp", "maximum", "mean", "median", "minimum"):
        return run_numpy_code(np.pad, (a, pad_width, mode), kwargs)
    if isinstance(pad_width, dict):
        seq = [(0, 0)] * a.ndim
        for ax, width in pad_width.items():
            seq[ax] = (width, width) if isinstance(width, int) else tuple(width)
        pad_width = seq
    pad_width = np.asarray(pad_width)
    if pad_width.dtype.kind != "i":
        raise TypeError("`pad_width` must be of integral type.")
    widths = [(int(lo), int(hi)) for lo, hi in _as_pairs(pad_width, a.ndim, as_index=True)]
    try:
        unsupported = set(kwargs) - set(_PAD_KWARGS[mode])
    except (KeyError, TypeError):
        raise ValueError(f"mode '{mode}' is not supported") from None
    if unsupported:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {unsupported}")
    h = value(a)
    if mode in ("constant", "empty"):
        values = _as_pairs(kwargs.get("constant_values", 0) if mode == "constant" else 0, a.ndim)
        return wrap(_pad_constant(h, a.dtype, widths, values), a.dtype)
    if a.size == 0:
        for ax, pair in enumerate(widths):
            if a.shape[ax] == 0 and builtins.any(pair):
                raise ValueError(f"can't extend empty axis {ax} using modes other than 'constant' or 'empty'")
        return wrap(_pad_constant(h, a.dtype, widths, ((0, 0),) * a.ndim), a.dtype)
    for ax, (lo, hi) in enumerate(widths):
        if not (lo or hi):
            continue
        n = a.shape[ax]
        if mode == "edge" or (mode in ("reflect", "symmetric") and n == 1):
            h = _pad_edge(h, ax, lo, hi)
        elif mode == "wrap":
            h = _pad_wrap(h, ax, lo, hi, n)
        else:
            odd = kwargs.get("reflect_type", "even") == "odd"
            h = _pad_reflect(h, ax, lo, hi, n, mode == "symmetric", odd, a.dtype)
    return wrap(h, a.dtype)


def _pad_constant(h, dt, widths, values):
    rank = len(h.shape)
    zeros = [0] * rank
    flat = {v for pair in values for v in pair}
    if len(flat) == 1:
        low, high = [lo for lo, _ in widths], [hi for _, hi in widths]
        return apply("pad", h, _scalar(flat.pop(), dt), low=low, high=high, interior=zeros)
    # axis by axis, so the corners take the later axis' values (NumPy's order)
    for ax, ((lo, hi), (vlo, vhi)) in enumerate(zip(widths, values)):
        for width, v, side in ((lo, vlo, 0), (hi, vhi, 1)):
            if width:
                pads = [list(zeros), list(zeros)]
                pads[side][ax] = width
                h = apply("pad", h, _scalar(v, dt), low=pads[0], high=pads[1], interior=zeros)
    return h


def _pad_edge(h, ax, lo, hi):
    n = h.shape[ax]
    left = _widen(_slice(h, ax, 0, 1), ax, lo) if lo else None
    right = _widen(_slice(h, ax, n - 1, n), ax, hi) if hi else None
    return _concat([left, h, right], ax)


def _pad_wrap(h, ax, left, right, period0):
    """NumPy's iterative wrap: each round copies at most a whole number of periods."""
    length = period0
    while left > 0 or right > 0:
        period = length // period0 * period0
        lchunk = rchunk = None
        new_left = new_right = 0
        if left > 0:
            m = builtins.min(period, left)
            lchunk = _slice(h, ax, period - m, period)
            new_left = left - period if left > period else 0
        if right > 0:
            m = builtins.min(period, right)
            rchunk = _slice(h, ax, length - period, length - period + m)
            new_right = right - period if right > period else 0
        h = _concat([lchunk, h, rchunk], ax)
        length = h.shape[ax]
        left, right = new_left, new_right
    return h


def _pad_reflect(h, ax, left, right, period0, include_edge, odd, dt):
    """NumPy's iterative reflect/symmetric padding (about the current edges, round by round)."""
    e = 1 if include_edge else 0
    while left > 0 or right > 0:
        length = h.shape[ax]
        if include_edge:
            old = length // period0 * period0
        else:
            old = (length - 1) // (period0 - 1) * (period0 - 1)
        lchunk = rchunk = None
        if left > 0:
            c = builtins.min(old, left)
            lchunk = _reverse(_slice(h, ax, 1 - e, c + 1 - e), ax)
            if odd:
                lchunk = _odd(_slice(h, ax, 0, 1), lchunk, ax, dt)
            left -= c
        if right > 0:
            c = builtins.min(old, right)
            rchunk = _reverse(_slice(h, ax, length + e - 1 - c, length + e - 1), ax)
            if odd:
                rchunk = _odd(_slice(h, ax, length - 1, length), rchunk, ax, dt)
            right -= c
        h = _concat([lchunk, h, rchunk], ax)
    return h


def _odd(edge, chunk, ax, dt):
    """``2 * edge - chunk`` stored back as ``dt`` (bools compute in integers, as NumPy's do)."""
    work = np.dtype(np.int64) if dt.kind == "b" else dt
    edge, chunk = cast(edge, work), cast(chunk, work)
    edge = _widen(edge, ax, chunk.shape[ax])
    two = broadcast_to_shape(core.scalar(2, dtypes.lazy_dtype(work)), chunk.shape)
    return cast(apply("sub", apply("mul", two, edge), chunk), dt)


@implements(np.diff)
def diff(a, n=1, axis=-1, prepend=_NoValue, append=_NoValue):
    if n == 0:
        return a
    if n < 0:
        raise ValueError("order must be non-negative but got " + repr(n))
    a = asarray_like(a)
    if a.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = normalize_axis_index(axis, a.ndim)
    combined = []
    for extra in (prepend, None, append):
        if extra is None:
            combined.append(a)
        elif extra is not _NoValue:
            extra = asarray_like(extra)
            if extra.ndim == 0:
                shape = list(a.shape)
                shape[axis] = 1
                extra = broadcast_to(extra, tuple(shape))
            combined.append(extra)
    if len(combined) > 1:
        a = concatenate(combined, axis)
    lead = (slice(None),) * axis
    op = UFUNCS["not_equal"] if a.dtype == np.dtype(bool) else UFUNCS["subtract"]
    for _ in range(n):
        a = op(a[lead + (slice(1, None),)], a[lead + (slice(None, -1),)])
    return a


# --- selection ------------------------------------------------------------------------------------


def _probe(x):
    """What NumPy's type resolution needs of ``x``: Python scalars stay weak."""
    if isinstance(x, ndarray):
        return np.empty((), x.dtype)
    if type(x) in (bool, int, float, complex):
        return x
    return np.empty((), np.asarray(x).dtype)


def _operand(x, dt, shape, dev):
    if type(x) in (int, float) and not isinstance(x, bool):
        h = _scalar_unsafe(x, dt, dev)
    else:
        h = to_handle(x, dt, dev)
    return broadcast_to_shape(h, shape)


def _scalar_unsafe(v, dt, dev):
    """A weak Python scalar stored as ``dt`` the way NumPy's ``where`` does (wrapping)."""
    return core.scalar(np.asarray(v).astype(dt).item(), dtypes.lazy_dtype(dt), device=dev)


@implements(np.where)
def where(condition, x=_NoValue, y=_NoValue):
    """``where(cond, x, y)`` lazily; ``where(cond)`` is ``nonzero(cond)`` (its mask read, coordinates uploaded)."""
    if x is _NoValue and y is _NoValue:
        return nonzero(condition)
    if x is _NoValue or y is _NoValue:
        raise ValueError("either both or neither of x and y should be given")
    dt = np.where(np.empty((), bool), _probe(x), _probe(y)).dtype
    dtypes.lazy_dtype(dt)
    shape = np.broadcast_shapes(shape_of(condition), shape_of(x), shape_of(y))
    dev = device_of(condition, x, y)
    c = broadcast_to_shape(to_handle(condition, np.dtype(bool), dev), shape)
    return wrap(apply("select", c, _operand(x, dt, shape, dev), _operand(y, dt, shape, dev)), dt)


@implements(np.select)
def select(condlist, choicelist, default=0):
    """NumPy's: the first choice whose condition holds, else ``default``, in the type
    of all the choices and the default (a chain of ``select`` ops, the last choice first)."""
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise ValueError("select with an empty condition list is not possible")
    try:
        dt = np.result_type(*(_probe(c) for c in (*choicelist, default)))
    except TypeError as e:
        raise TypeError(f"Choicelist and default value do not have a common dtype: {e}") from None
    dtypes.lazy_dtype(dt)
    shapes = [shape_of(c) for c in (*condlist, *choicelist, default)]
    shape = np.broadcast_shapes(*shapes)
    for i, c in enumerate(condlist):
        kind = c.dtype if isinstance(c, (ndarray, np.ndarray)) else np.asarray(c).dtype
        if kind != np.bool_:
            raise TypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    dev = device_of(*condlist, *choicelist, default)
    out = _operand(default, dt, shape, dev)
    for cond, choice in zip(condlist[::-1], choicelist[::-1]):
        c = broadcast_to_shape(to_handle(cond, np.dtype(bool), dev), shape)
        out = apply("select", c, _operand(choice, dt, shape, dev), out)
    return wrap(out, dt)


@implements(np.clip)
def clip(a, a_min=_NoValue, a_max=_NoValue, out=None, *, min=_NoValue, max=_NoValue, **kwargs):
    if a_min is _NoValue and a_max is _NoValue:
        a_min = None if min is _NoValue else min
        a_max = None if max is _NoValue else max
    elif a_min is _NoValue:
        raise TypeError("clip() missing 1 required positional argument: 'a_min'")
    elif a_max is _NoValue and min is _NoValue and max is _NoValue:
        # the Array API standard's clip(x, min): SciPy's array-API code passes the lower bound alone
        # (xp.clip(p, 0.) in stats.cramervonmises_2samp); NumPy's own clip wants both
        a_max = None
    elif a_max is _NoValue:
        raise TypeError("clip() missing 1 required positional argument: 'a_max'")
    elif min is not _NoValue or max is not _NoValue:
        raise ValueError("Passing `min` or `max` keyword argument when `a_min` and `a_max` are provided is "
                         "forbidden.")
    a = asarray_like(a)
    lo, hi = a_min, a_max
    if a.dtype.kind in "iu":
        # Python ints beyond the type's range clip nothing (NumPy's NEP 50 handling)
        if type(lo) is int and lo <= np.iinfo(a.dtype).min:
            lo = None
        if type(hi) is int and hi >= np.iinfo(a.dtype).max:
            hi = None
    kw = dict(kwargs)
    if lo is None and hi is None:
        return UFUNCS["positive"](a, out=out, **kw)
    if lo is None:
        return UFUNCS["minimum"](a, hi, out=out, **kw)
    if hi is None:
        return UFUNCS["maximum"](a, lo, out=out, **kw)
    # NumPy's clip loop is min(max(x, lo), hi): NaN anywhere gives NaN, lo > hi gives hi; on a
    # tie of zeros it keeps x, then the bound (the ufuncs here give their second operand on one)
    return UFUNCS["minimum"](hi, UFUNCS["maximum"](lo, a, **kw), out=out, **kw)


# --- diagonals (views) ------------------------------------------------------------------------------


@implements(np.diagonal)
def diagonal(a, offset=0, axis1=0, axis2=1):
    """NumPy's read-only view of the diagonal: ``axis1`` and ``axis2`` moved last and
    flattened to ``n * m`` elements, of which the diagonal is every ``m + 1``-th from
    ``offset`` (row ``-offset``'s first element below the main diagonal); the diagonal's
    axis comes last, as NumPy's. The view reads the source lazily, after any later write
    to it too."""
    return diagonal_view(asarray_like(a), offset, axis1, axis2, writeable=False)


def diagonal_view(a: ndarray, offset, axis1, axis2, writeable=None) -> ndarray:
    """:func:`diagonal`'s view, writeable as ``a`` is unless ``writeable`` says
    (``np.einsum("ii->i", a)`` is a writeable view in NumPy)."""
    origin = a._standin()
    out = origin.diagonal(offset, axis1, axis2)  # NumPy's errors, shape, strides, offset
    ax1, ax2 = normalize_axis_index(axis1, a.ndim), normalize_axis_index(axis2, a.ndim)
    perm = [d for d in range(a.ndim) if d not in (ax1, ax2)] + [ax1, ax2]
    n, m = a.shape[ax1], a.shape[ax2]
    offset = operator.index(offset)
    count = out.shape[-1]
    start = (offset if offset >= 0 else -offset * m) if count else 0
    steps = []
    if perm != list(range(a.ndim)):
        steps.append(Permute(tuple(perm)))
    batch = tuple(a.shape[d] for d in perm[:-2])
    steps.append(Reshape(batch + (n * m,)))
    steps.append(Slice(len(batch), start, count, m + 1))
    return a._view(tuple(steps), out, origin, writeable=writeable)


__all__.append("diagonal")


# --- tril, triu, diag: selects over the row and column positions --------------------------------


def _on_or_below(rows: int, cols: int, k: int, dev):
    """i1 ``(rows, cols)``: ``col <= row + k`` (NumPy's ``tri``)."""
    r = core.apply("iota", dim=0, shape=(rows, cols), dtype="i64", device=dev)
    c = core.apply("iota", dim=1, shape=(rows, cols), dtype="i64", device=dev)
    return apply("compare", c, apply("add", r, _i64(k, r)), direction="LE")


def _i64(v: int, like):
    return broadcast_to_shape(core.apply("constant", value=np.asarray(v, np.int64), device=like.device), like.shape)


def _triangle(m, k: int, lower: bool):
    """NumPy's ``where(tri(*m.shape[-2:], k), m, 0)`` (``triu``: the complement of ``k - 1``'s)."""
    m = asarray_like(m)
    if m.ndim == 0:
        return call_numpy(np.tril if lower else np.triu, (m, k), {})  # NumPy's error
    k = operator.index(k)
    rows, cols = (m.shape[-2:] if m.ndim >= 2 else (m.shape[-1], m.shape[-1]))
    shape = np.broadcast_shapes(m.shape, (rows, cols))
    dev = device_of(m)
    keep = _on_or_below(rows, cols, k if lower else k - 1, dev)
    if not lower:
        keep = apply("not", keep)
    keep = broadcast_to_shape(keep, shape)
    h = broadcast_to_shape(value(m), shape)
    zero = broadcast_to_shape(core.apply("constant", value=np.zeros((), m.dtype), device=dev), shape)
    return wrap(apply("select", keep, h, zero), m.dtype)


@implements(np.tril)
def tril(m, k=0):
    return _triangle(m, k, lower=True)


@implements(np.triu)
def triu(m, k=0):
    return _triangle(m, k, lower=False)


@implements(np.diag)
def diag(v, k=0):
    """A 2-d array's ``k``-th diagonal (NumPy's read-only view), or a 1-d array laid on
    the ``k``-th diagonal of a square of zeros."""
    v = asarray_like(v)
    k = operator.index(k)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError("Input must be 1- or 2-d.")
    n = v.shape[0] + builtins.abs(k)
    dev = device_of(v)
    # row i holds v[i] at column i + k (k >= 0); column j holds v[j] at row j - k (k < 0)
    along = 0 if k >= 0 else 1
    padded = apply("pad", value(v), core.apply("constant", value=np.zeros((), v.dtype), device=dev),
                   low=[0], high=[builtins.abs(k)], interior=[0])
    spread = apply("broadcast_in_dim", padded, dims=(along,), shape=(n, n))
    r = core.apply("iota", dim=0, shape=(n, n), dtype="i64", device=dev)
    c = core.apply("iota", dim=1, shape=(n, n), dtype="i64", device=dev)
    on = apply("compare", c, apply("add", r, _i64(k, r)), direction="EQ")
    zero = broadcast_to_shape(core.apply("constant", value=np.zeros((), v.dtype), device=dev), (n, n))
    return wrap(apply("select", on, spread, zero), v.dtype)


__all__ += ["tril", "triu", "diag"]


# --- nan_to_num: NumPy's three copyto's as selects --------------------------------------------------


@implements(np.nan_to_num)
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf of a real float array replaced (by default: 0 and the type's
    largest and lowest finite values); in place with ``copy=False``, as NumPy. Complex
    arrays run NumPy (counted)."""
    a = asarray_like(x)
    if a.dtype.kind == "c":
        return call_numpy(np.nan_to_num, (x,), dict(copy=copy, nan=nan, posinf=posinf, neginf=neginf))
    if copy or a is not x:
        a = a.copy()
    if a.dtype.kind == "f":
        info = np.finfo(a.dtype)
        h = value(a)
        for pick, fill in ((composites.isnan(h), nan),
                           (apply("compare", h, _const_of(np.inf, a.dtype, h), direction="EQ"),
                            info.max if posinf is None else posinf),
                           (apply("compare", h, _const_of(-np.inf, a.dtype, h), direction="EQ"),
                            info.min if neginf is None else neginf)):
            h = apply("select", pick, _const_of(fill, a.dtype, h), h)
        write(a, h)
    return a[()] if a.ndim == 0 else a


def _const_of(v, dt, like):
    host = np.asarray(v).astype(dt)  # a too-large fill: inf, with NumPy's overflow warning, as its copyto
    return broadcast_to_shape(core.apply("constant", value=host, device=like.device), like.shape)


__all__ += ["nan_to_num"]


@implements(np.isposinf)
def isposinf(x, out=None):
    """NumPy's own lines: its ``isinf`` and ``signbit`` ufuncs, lazy on a lazy array
    (a complex one gets NumPy's TypeError)."""
    return np.isposinf._implementation(x, out)


@implements(np.isneginf)
def isneginf(x, out=None):
    """NumPy's own lines, as :func:`isposinf`."""
    return np.isneginf._implementation(x, out)


__all__ += ["isposinf", "isneginf"]


_where = where  # (copyto's keyword shadows it)


@implements(np.copyto)
def copyto(dst, src, casting="same_kind", where=True):
    """``src`` written into the lazy ``dst`` (where ``where`` holds: a select), cast to its
    dtype. NumPy checks the casting rules on a 1-element stand-in (its errors, its value of a
    Python number) and the shapes on the real ones. A NumPy ``dst`` runs NumPy, counted."""
    if not isinstance(dst, ndarray):
        return call_numpy(np.copyto, (dst, src), dict(casting=casting, where=where))
    number = isinstance(src, (bool, int, float, complex)) and not isinstance(src, np.generic)
    s = src if number else asarray_like(src)
    w = where if isinstance(where, (bool, np.bool_)) else asarray_like(where)
    probe = np.empty(1, dst.dtype)
    if isinstance(w, ndarray):  # NumPy's error for a mask that is not boolean
        np.copyto(probe, probe, where=np.zeros(1, w.dtype))
    # NumPy's casting errors on a 1-element stand-in; a number: NumPy's value of it in dst's dtype
    np.copyto(probe, s if number else np.zeros(1, s.dtype), casting=casting)
    shapes = [dst.shape, () if number else s.shape, () if not isinstance(w, ndarray) else w.shape]
    try:
        fits = np.broadcast_shapes(*shapes) == dst.shape
    except ValueError:
        fits = False
    if not fits:  # NumPy's broadcasting error
        np.copyto(np.empty(dst.shape, dst.dtype), np.zeros(shapes[1], probe.dtype), casting="unsafe",
                  where=np.zeros(shapes[2], bool))
    if not dst._writeable:
        raise ValueError("assignment destination is read-only")
    if w is False or w is np.False_:
        return None
    if number:
        s = probe[0]
    else:
        s = s.astype(dst.dtype)
    dst[...] = s if not isinstance(w, ndarray) else _where(w, s, dst)
    return None


__all__ += ["copyto"]


__all__ += ["shares_memory", "may_share_memory"]


def _byte_standins(a: ndarray, b: ndarray):
    """``a`` and ``b`` (views of one storage) as int8 arrays over one buffer, each element
    its ``itemsize`` bytes: NumPy's overlap questions answered on their layouts (a part
    view of a complex array has its own element size)."""
    def layout(x):
        it = x.itemsize
        shape, strides = x._shape + (it,), tuple(s * it for s in x._estrides) + (1,)
        hi = x._offset * it + builtins.sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
        return shape, strides, x._offset * it, hi

    la, lb = layout(a), layout(b)
    buf = np.empty(builtins.max(la[3], lb[3]) + 1, np.int8)
    return tuple(np.ndarray(shape, np.int8, buf, off, strides) for shape, strides, off, _ in (la, lb))


def _overlap(question, a, b, max_work):
    # Views share a storage object; a copy, an upload or a lazy scalar (NumPy's scalar is
    # a copy) has its own. The fallback compared two fresh host copies: never shared.
    if type(a) is not ndarray or type(b) is not ndarray or a._storage is not b._storage or not a.size or not b.size:
        return False
    sa, sb = _byte_standins(a, b)
    return question(sa, sb) if max_work is None else question(sa, sb, max_work=max_work)


@implements(np.shares_memory)
def shares_memory(a, b, max_work=None) -> bool:
    return _overlap(np.shares_memory, a, b, max_work)


@implements(np.may_share_memory)
def may_share_memory(a, b, max_work=None) -> bool:
    return _overlap(np.may_share_memory, a, b, max_work)


__all__ += ["fill_diagonal"]


@implements(np.fill_diagonal)
def fill_diagonal(a, val, wrap=False):
    """NumPy's own steps (a strided write through ``a.flat``) on the lazy array: the
    fallback read the array and wrote it back, a barrier in every step of a loop (an
    n-body's self-distances). An array of values (NumPy repeats it along the diagonal)
    runs NumPy, counted."""
    if not isinstance(a, ndarray) or np.ndim(val) != 0:
        return call_numpy(np.fill_diagonal, (a, val), dict(wrap=wrap))
    if a.ndim < 2:
        raise ValueError("array must be at least 2-d")
    end = None
    if a.ndim == 2:
        step = a.shape[1] + 1
        if not wrap:
            end = a.shape[1] * a.shape[1]
    else:
        if builtins.any(s != a.shape[0] for s in a.shape):
            raise ValueError("All dimensions of input must be of equal length")
        step = 1 + builtins.sum(math.prod(a.shape[:k]) for k in range(1, a.ndim))
    a.flat[:end:step] = val
