"""View steps: how a view's value derives from its storage, forward and back.

Each torch view op maps to steps with a ``forward(value)`` (read the view)
and an ``inverse(old_input, new_view_value)`` (the input's value after the
view was overwritten). The common views have structured steps that lower to
cheap ops (permute, reshape, slice, broadcast); any other view op
(``diagonal``, ``unfold``, ``as_strided``, ...) becomes one :class:`Strided`
step that indexes the storage's memory exactly as torch's sizes, strides and
offset say, so every view op torch has is covered.
"""

from __future__ import annotations

import numpy as np
import torch

from lazycore import core

aten = torch.ops.aten

OVERLAP_MESSAGE = (
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location. Please clone() the tensor before performing the operation."
)


def const(value, dtype: str, device):
    return core.apply("constant", value=np.asarray(value, dtype=_np(dtype)), device=device)


def _np(dtype):
    from lazycore.dialect.types import to_numpy_dtype

    return to_numpy_dtype(dtype)


class Permute:
    __slots__ = ("dims",)

    def __init__(self, dims):
        self.dims = tuple(dims)

    def forward(self, h, storage):
        return core.apply("permute", h, dims=self.dims)

    def inverse(self, old, new, storage):
        return core.apply("permute", new, dims=tuple(np.argsort(self.dims)))


class Reshape:
    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = tuple(shape)

    def forward(self, h, storage):
        return core.apply("reshape", h, shape=self.shape)

    def inverse(self, old, new, storage):
        return core.apply("reshape", new, shape=old.shape)


class Expand:
    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = tuple(shape)

    def forward(self, h, storage):
        lead = len(self.shape) - len(h.shape)
        return core.apply("broadcast_in_dim", h, dims=tuple(range(lead, len(self.shape))), shape=self.shape)

    def inverse(self, old, new, storage):
        raise RuntimeError(OVERLAP_MESSAGE)


class Slice:
    __slots__ = ("dim", "start", "count", "step")

    def __init__(self, dim, start, count, step):
        self.dim, self.start, self.count, self.step = dim, start, count, step

    def forward(self, h, storage):
        rank = len(h.shape)
        start = [0] * rank
        limit = list(h.shape)
        strides = [1] * rank
        start[self.dim] = self.start
        limit[self.dim] = self.start + (self.count - 1) * self.step + 1 if self.count else self.start
        strides[self.dim] = self.step
        return core.apply("slice", h, start=start, limit=limit, strides=strides)

    def inverse(self, old, new, storage):
        dev = old.device
        rank = len(old.shape)
        if self.step == 1:
            starts = [const(self.start if d == self.dim else 0, "i64", dev) for d in range(rank)]
            return core.apply("dynamic_update_slice", old, new, starts)
        # Strided slice: spread the update with interior padding and pick it
        # where a mask (padded the same way) says the update lands.
        low = [0] * rank
        high = [0] * rank
        interior = [0] * rank
        low[self.dim] = self.start
        interior[self.dim] = self.step - 1
        used = self.start + (self.count - 1) * self.step + 1 if self.count else self.start
        high[self.dim] = old.shape[self.dim] - used
        zero = const(0, new.dtype, dev)
        spread = core.apply("pad", new, zero, low=low, high=high, interior=interior)
        ones = core.apply("broadcast_in_dim", const(True, "i1", dev), dims=(), shape=new.shape)
        mask = core.apply("pad", ones, const(False, "i1", dev), low=low, high=high, interior=interior)
        return core.apply("select", mask, spread, old)


class Strided:
    """Any view, as torch defines it: ``size``/``stride``/``offset`` over the
    storage's memory. Always the first and only step of its tensor."""

    __slots__ = ("size", "stride", "offset")

    def __init__(self, size, stride, offset):
        self.size, self.stride, self.offset = tuple(size), tuple(stride), offset

    def _index(self, dev):
        rank = len(self.size)
        idx = const(self.offset, "i64", dev)
        idx = core.apply("broadcast_in_dim", idx, dims=(), shape=self.size)
        for d in range(rank):
            if self.size[d] > 1 and self.stride[d]:
                i = core.apply("iota", dim=d, shape=self.size, dtype="i64", device=dev)
                s = core.apply("broadcast_in_dim", const(self.stride[d], "i64", dev), dims=(), shape=self.size)
                idx = core.apply("add", idx, core.apply("mul", i, s))
        return idx

    def forward(self, h, storage):
        flat = _memory(h, storage)
        rank = len(self.size)
        return core.apply(
            "gather", flat, self._index(h.device),
            offset_dims=(), collapsed_slice_dims=(0,), operand_batching_dims=(),
            start_indices_batching_dims=(), start_index_map=(0,), index_vector_dim=rank,
            slice_sizes=(1,), indices_are_sorted=False,
        )

    def inverse(self, old, new, storage):
        if any(n > 1 and s == 0 for n, s in zip(self.size, self.stride)):
            raise RuntimeError(OVERLAP_MESSAGE)
        flat = _memory(old, storage)
        rank = len(self.size)
        flat = core.apply(
            "scatter", flat, self._index(old.device), new,
            update_window_dims=(), inserted_window_dims=(0,), input_batching_dims=(),
            scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=(0,), index_vector_dim=rank,
            mode="replace",
        )
        return _from_memory(flat, old.shape, storage)


def _memory_order(shape, strides):
    """Dims from the slowest to the fastest varying in memory; checks the layout is dense."""
    order = sorted(range(len(shape)), key=lambda d: (-strides[d], -d))
    acc = 1
    for d in reversed(order):
        if shape[d] != 1 and strides[d] != acc:
            raise NotImplementedError(
                f"lazycore: views of a tensor with a non-dense layout (sizes {list(shape)}, strides "
                f"{list(strides)}) are not supported"
            )
        acc *= shape[d]
    return tuple(order)


def _memory(h, storage):
    order = _memory_order(h.shape, storage.strides)
    if order != tuple(range(len(order))):
        h = core.apply("permute", h, dims=order)
    return core.apply("reshape", h, shape=(int(np.prod(h.shape, dtype=np.int64)),))


def _from_memory(flat, shape, storage):
    order = _memory_order(shape, storage.strides)
    h = core.apply("reshape", flat, shape=tuple(shape[d] for d in order))
    if order != tuple(range(len(order))):
        h = core.apply("permute", h, dims=tuple(np.argsort(order)))
    return h


# --- torch view ops -> steps -----------------------------------------------------------
# Each maker gets the input tensor, the meta result(s) and the op's arguments,
# and returns the steps to append (a list of them for multi-output views).


def _dim(d, rank):
    return d + rank if d < 0 else d


def _reshape(t, out, *args, **kwargs):
    return () if tuple(out.shape) == tuple(t.shape) else (Reshape(out.shape),)


def _permute(t, out, dims, **kwargs):
    dims = tuple(_dim(d, t.dim()) for d in dims)
    return () if dims == tuple(range(t.dim())) else (Permute(dims),)


def _transpose(t, out, d0, d1):
    rank = t.dim()
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


def _slice(t, out, dim=0, start=None, end=None, step=1):
    dim = _dim(dim, t.dim())
    start = _norm_start(start, t.shape[dim])
    count = out.shape[dim]
    if start == 0 and count == t.shape[dim] and step == 1:
        return ()
    return (Slice(dim, start, count, step),)


def _select(t, out, dim, index):
    dim = _dim(dim, t.dim())
    index = index + t.shape[dim] if index < 0 else index
    return (Slice(dim, index, 1, 1), Reshape(out.shape))


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


def _identity(t, out, *args, **kwargs):
    return ()


VIEW_STEPS = {
    aten.view.default: _reshape,
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
    aten.unbind.int: _unbind,
    aten.alias.default: _identity,
    aten.detach.default: _identity,
    aten.lift_fresh.default: _identity,
}


def steps_for(func, t, out, args, kwargs):
    """Steps for each result of view op ``func`` (a list for multi-result ops)."""
    maker = VIEW_STEPS.get(func)
    multi = isinstance(out, (list, tuple))
    if maker is not None:
        new = maker(t, out, *args, **kwargs)
        if multi:
            return [t._steps + s for s in new]
        return t._steps + new
    outs = out if multi else [out]
    made = [(Strided(o.shape, o.stride(), o.storage_offset()),) for o in outs]
    return made if multi else made[0]
