"""Indexing ATen ops: gather/scatter families, index_add/copy/fill/reduce, put,
advanced indexing (``x[i, :, j]`` and its assignment), masked_scatter, the
``*_like`` factories and cumulative scans.

Everything lowers onto ``lazy.gather`` / ``lazy.scatter`` (StableHLO's
dimension numbers; per-element ops along one dim use batching dims), ``select``
and shape ops; nothing runs on the CPU. i32 and i64 index tensors are both
accepted, and negative indices wrap as in eager's ``x[i]``, ``take``, ``put``
and ``index_fill``.

Index values live on the device, so eager's bounds check on them cannot run
at the call: each op records it as a value check (:func:`checked`,
:mod:`lazycore.runtime.checks`), over the range eager allows (``-n..n-1``
where eager wraps negative indices: ``x[i]``, ``index_put_``, ``take``,
``put``, ``index_fill``; ``0..n-1`` for ``gather``, the scatter family,
``index_add``/``index_copy``/``index_reduce``), and an out-of-range index
fails what the op computed at its barrier with eager's exception type and
message (the first offending value, found only once a check has failed:
:func:`checked`) and the user's line. With ``settings.index_checks`` off
an out-of-range index is clamped into range by ``gather`` and its update is
dropped by ``scatter`` (XLA's semantics). ``masked_scatter`` cannot check
that ``source`` is long enough. Boolean-mask indexing has a data-dependent
result shape: ``x[mask] = value`` with one value is a ``select``; otherwise
(and ``masked_select``, bool ``nonzero``) the mask's values are read on the
host and the op gathers or scatters at its nonzero indices, reached from the
fallback (:func:`host_masked`, the last section). ``scatter`` with ``replace`` picks an unspecified one of
duplicate indices, as eager does.

There is no scan op in the dialect. Float and complex ``cumsum``/``cumprod``
(and float ``logcumsumexp``) in a program for the CPU are eager CPU's loop, one element
after another with eager's accumulator (float32 carried in float64, half
types in float32, each output rounded from the carry): eager's bits, and a
running sum of non-negative terms never decreases
(:func:`lazycore.trace.scans.one_by_one`). Integer scans, and float scans on
other platforms (:func:`lazycore.trace.scans.in_order` says why), are
Hillis-Steele scans, log2(n) steps of shift (``pad``) and combine: exact for
integers; for floats a tree order, which differs from eager CPU's by
rounding (half types accumulate in f32).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lazycore.dialect.types import is_float, to_numpy_dtype
from lazycore.ir.config import settings
from lazycore.ir.context import TRACE
from lazycore.ir.failure import Failure
from lazycore.ir.graph import Data
from lazycore.ir.memo import Memo
from lazycore.trace import core, scans

from .. import counts
from ..lowering import apply, broadcast, const, convert, lowers, operand, reshape, scalar
from ..lowering import dim as wrap_dim
from ..tensor import Tensor, lc_device, read, upload, wrap

aten = torch.ops.aten


# --- helpers -------------------------------------------------------------------------------


def _numel(shape) -> int:
    return math.prod(shape)


def _zeros(ctx):
    return const(0, ctx.dtype, ctx.device, ctx.shape)


def checked(index, high: int, message: str, error: str, low: int = 0, ignore: int | None = None, layout=None):
    """``index`` (an integer handle), checked as eager checks it: when an entry
    lies outside ``low..high-1`` (and is not ``ignore``), every value computed
    from the result fails at its barrier with ``message``, as an ``error``
    (eager's type), at the user's line (:func:`lazycore.check`); ``{index}``
    in ``message`` becomes the first offending entry, found once the flag is
    true (:func:`lazycore.runtime.checks.text`).
    ``layout``: the index tensor's meta twin (the lowering's ``ctx.margs``
    entry), whose strides tell the dims it repeats (:func:`_repeated`).
    With ``settings.index_checks`` off, ``index`` itself."""
    if not settings.index_checks or (_numel(index.shape) == 0 and not _padded_count(index.value.node)):
        return index
    repeated = _repeated(index.shape, layout)
    if repeated:
        # an expanded index (``i[:, None].expand(-1, w)``, a scatter's
        # ``expand_as``) holds each value once per repeat: its first row along
        # those dims has the same values, and the same first offending one
        # in row-major order, for a fraction of the reduction (benchmark 12's
        # gather: 8192 entries checked, not 8192 x 64, issue 41's cost)
        rank = len(index.shape)
        limit = [1 if d in repeated else n for d, n in enumerate(index.shape)]
        part = apply("slice", index, start=[0] * rank, limit=limit, strides=[1] * rank)
        return broadcast(checked(part, high, message, error, low, ignore), index.shape)
    if len(index.shape) != 1:
        # checked as a row: one op's check of ``i`` and another's of
        # ``i.reshape(-1)`` (or of an expanded ``i``'s first row) are then
        # one node, and one reduction in the program (row-major order, so
        # the same first offending entry)
        return reshape(checked(reshape(index, (_numel(index.shape),)), high, message, error, low, ignore),
                       index.shape)
    shape, dev, dt = index.shape, index.device, index.dtype
    if low == 0 and dt in _UNSIGNED:
        # read as unsigned, a negative entry lies above every in-range one:
        # one compare for the two ends (a node fewer a check, issue 41's cost)
        bad = apply("compare", apply("bitcast_convert", index, dtype=_UNSIGNED[dt]),
                    const(high, _UNSIGNED[dt], dev, shape), direction="GE")
    else:
        bad = apply("compare", index, const(high, dt, dev, shape), direction="GE")
        bad = apply("or", apply("compare", index, const(low, dt, dev, shape), direction="LT"), bad)
    if ignore is not None:
        bad = apply("and", bad, apply("compare", index, const(ignore, dt, dev, shape), direction="NE"))
    return core.check(index, _any(bad), message, error)


_UNSIGNED = {"i64": "ui64", "i32": "ui32"}
"""An index's type -> the unsigned type of its width (:func:`checked`)."""


def _repeated(shape, layout) -> tuple:
    """The dims of an index tensor of ``layout`` (a torch tensor of its
    sizes and strides, or None) that repeat one element: stride 0 and more
    than one entry (an ``expand``'s view). Its lazy value repeats its values
    there as eager's memory does, and strides are part of a call's dispatch
    signature, so a recorded lowering that relies on them replays only for
    calls with the same ones (:mod:`lazycore.trace.recipes`)."""
    if layout is None or not isinstance(layout, torch.Tensor) or tuple(layout.shape) != tuple(shape):
        return ()
    return tuple(d for d, (n, s) in enumerate(zip(layout.shape, layout.stride())) if s == 0 and n > 1)


def _layout(ctx, at: int, item: int | None = None):
    """The meta twin of the lowering's argument ``at`` (entry ``item`` of a
    list argument), or None where the call was not dispatched with it."""
    margs = ctx.margs if ctx is not None else None
    if margs is None or at >= len(margs):
        return None
    m = margs[at]
    if item is not None:
        m = m[item] if isinstance(m, (list, tuple)) and item < len(m) else None
    return m if isinstance(m, torch.Tensor) else None


def _any(bad):
    """Whether any entry of the i1 ``bad`` is true, as ``sum(f32(bad)) != 0``:
    XLA's CPU backend reduces floats in one kernel and booleans in a tree of
    them, and the program returns the sum itself as the flag
    (:func:`lazycore.runtime.checks.flag_values`): no kernel for the compare
    (issue 41's cost, benchmark 12). A sum, not a maximum: on a mesh XLA
    combines the flags' all-reduce with the gradients' (both f32 sums), where
    a maximum took an all-reduce of its own, a rendezvous of every device per
    step (benchmark 8). A sum of zeros and ones is 0 only when all are 0."""
    top = apply("reduce_sum", convert(bad, "f32"), dims=tuple(range(len(bad.shape))))
    return apply("compare", top, const(0, "f32", bad.device), direction="NE")


def _bounds(dim: int, n: int) -> str:
    return f"index {{index}} is out of bounds for dimension {dim} with size {n}"


def _wrap(index, n: int):
    """``index`` as i64 with negative entries counted from the end of a size-``n`` dim."""
    index = convert(index, "i64")
    shape, dev = index.shape, index.device
    neg = apply("compare", index, const(0, "i64", dev, shape), direction="LT")
    return apply("select", neg, apply("add", index, const(n, "i64", dev, shape)), index)


def _at_least_1d(h):
    return reshape(h, (1,)) if h.shape == () else h


def _corner(h, sizes):
    """The leading ``sizes`` block of ``h`` (torch lets index tensors be smaller than self)."""
    sizes = tuple(sizes)
    if h.shape == sizes:
        return h
    r = len(sizes)
    return apply("slice", h, start=[0] * r, limit=list(sizes), strides=[1] * r)


def _mode(mode: str, dtype: str) -> str:
    if dtype == "i1":  # bool add/mul are or/and
        return {"add": "max", "mul": "min"}.get(mode, mode)
    return mode


def _no_lazy_device(device) -> bool:
    return device is not None and torch.device(device).type != "lazy"


# --- torch.gather and the scatter family ----------------------------------------------------
# Per-element ops along one dim: every other dim of index pairs up with the same
# dim of self, which is what gather/scatter batching dims express.


@lowers(aten.gather.default)
def _gather(ctx, x, dim, index, sparse_grad=False):
    if _numel(ctx.shape) == 0:
        return _zeros(ctx)
    x, index = _at_least_1d(x), _at_least_1d(index)
    rank = len(x.shape)
    d = wrap_dim(dim, rank)
    message = "gather(): " + _bounds(d, x.shape[d])
    index = _wrap(checked(index, x.shape[d], message, "RuntimeError", layout=_layout(ctx, 2)), x.shape[d])
    region = list(index.shape)
    region[d] = x.shape[d]
    others = tuple(i for i in range(rank) if i != d)
    g = apply(
        "gather", _corner(x, region), index,
        offset_dims=(), collapsed_slice_dims=(d,), operand_batching_dims=others,
        start_indices_batching_dims=others, start_index_map=(d,), index_vector_dim=rank,
        slice_sizes=(1,) * rank, indices_are_sorted=False,
    )
    return reshape(g, ctx.shape)


def _scatter_along(ctx, x, dim, index, updates, mode):
    """``x`` with ``updates`` (index's shape) combined in at ``x[..., index[i], ...]``."""
    x = convert(x, ctx.dtype)
    if _numel(index.shape) == 0:
        return x
    x1, index = _at_least_1d(x), _at_least_1d(index)
    updates = reshape(updates, index.shape)
    rank = len(x1.shape)
    d = wrap_dim(dim, rank)
    n = x1.shape[d]
    index = _wrap(checked(index, n, f"{ctx.func_name}(): " + _bounds(d, n), "RuntimeError", layout=_layout(ctx, 2)), n)
    region = list(index.shape)
    region[d] = x1.shape[d]
    part = _corner(x1, region)
    others = tuple(i for i in range(rank) if i != d)
    out = apply(
        "scatter", part, index, updates,
        update_window_dims=(), inserted_window_dims=(d,), input_batching_dims=others,
        scatter_indices_batching_dims=others, scatter_dims_to_operand_dims=(d,), index_vector_dim=rank,
        mode=_mode(mode, ctx.dtype),
    )
    if part.shape != x1.shape:
        starts = [const(0, "i64", ctx.device)] * rank
        out = apply("dynamic_update_slice", x1, out, starts)
    return reshape(out, ctx.shape)


def _src(ctx, src, index):
    return _corner(_at_least_1d(convert(src, ctx.dtype)), _at_least_1d(index).shape)


_SCATTER_REDUCE = {"add": "add", "multiply": "mul", "sum": "add", "prod": "mul", "mean": "add",
                   "amax": "max", "amin": "min"}


@lowers(aten.scatter.src, aten.scatter.reduce)
def _scatter_src(ctx, x, dim, index, src, reduce=None):
    mode = "replace" if reduce is None else _SCATTER_REDUCE[reduce]
    return _scatter_along(ctx, x, dim, index, _src(ctx, src, index), mode)


@lowers(aten.scatter.value, aten.scatter.value_reduce)
def _scatter_value(ctx, x, dim, index, value, reduce=None):
    mode = "replace" if reduce is None else _SCATTER_REDUCE[reduce]
    updates = operand(value, ctx.dtype, index.shape, ctx.device)
    return _scatter_along(ctx, x, dim, index, updates, mode)


@lowers(aten.scatter_add.default)
def _scatter_add(ctx, x, dim, index, src):
    return _scatter_along(ctx, x, dim, index, _src(ctx, src, index), "add")


def _identity(reduce: str, dtype: str):
    """The value a reduction starts from (what include_self=False puts in place first)."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype == "i1":
        return reduce == "amin"
    if is_float(dtype):
        return -math.inf if reduce == "amax" else math.inf
    info = np.iinfo(to_numpy_dtype(dtype))
    return int(info.min) if reduce == "amax" else int(info.max)


@lowers(aten.scatter_reduce.two)
def _scatter_reduce(ctx, x, dim, index, src, reduce, include_self=True):
    def put(base, updates, mode):
        return _scatter_along(ctx, base, dim, index, updates, mode)

    return _reduced(ctx, x, _src(ctx, src, index), reduce, include_self, put)


def _reduced(ctx, x, src, reduce, include_self, put):
    """scatter_reduce / index_reduce: ``put(base, updates, mode)`` combines
    updates of ``src``'s shape into base at the op's places."""
    x = convert(x, ctx.dtype)
    if not include_self:
        x = put(x, const(_identity(reduce, ctx.dtype), ctx.dtype, ctx.device, src.shape), "replace")
    out = put(x, src, _SCATTER_REDUCE[reduce])
    if reduce != "mean":
        return out
    # eager: divide by how many values met at each place (self counts once if included)
    count = const(1 if include_self else 0, ctx.dtype, ctx.device, ctx.shape)
    count = put(count, const(1, ctx.dtype, ctx.device, src.shape), "add")
    one = const(1, ctx.dtype, ctx.device, ctx.shape)
    count = apply("select", apply("compare", count, _zeros(ctx), direction="EQ"), one, count)
    if is_float(ctx.dtype) or ctx.dtype.startswith("complex"):
        return apply("div", out, count)
    return _floor_div(out, count)


def _floor_div(a, b):
    """Integer a // b for b > 0 (eager's scatter mean rounds down)."""
    q = apply("div", a, b)
    r = apply("rem", a, b)
    zero = const(0, a.dtype, a.device, a.shape)
    down = apply("and", apply("compare", r, zero, direction="NE"), apply("compare", a, zero, direction="LT"))
    return apply("select", down, apply("sub", q, const(1, a.dtype, a.device, a.shape)), q)


# --- index_add / index_copy / index_fill: whole slices along one dim ---------------------------


# eager's bounds check of each op: (lowest index allowed, error, message)
_ALONG = {
    "index_add": (False, "IndexError", lambda d, n: "index_add(): index out of range in self"),
    "index_reduce": (False, "IndexError", lambda d, n: "index_reduce(): index out of range in self"),
    "index_copy": (False, "IndexError", lambda d, n: "index_copy_(): " + _bounds(d, n)),
    "index_fill": (True, "IndexError", lambda d, n: "index_fill(): " + _bounds(d, n)),
}


def _index_along(ctx, x, dim, index, updates, mode):
    """``x`` with the slices of ``updates`` along ``dim`` combined in at ``index`` (1-D)."""
    x = convert(x, ctx.dtype)
    n = _numel(index.shape)
    if n == 0 or _numel(ctx.shape) == 0:
        return x
    x1 = _at_least_1d(x)
    rank = len(x1.shape)
    d = wrap_dim(dim, rank)
    size = x1.shape[d]
    negative, error, message = _ALONG[ctx.func_name.rstrip("_")]
    index = checked(reshape(index, (n,)), size, message(d, size), error, -size if negative else 0)
    index = _wrap(index, size)
    sizes = list(x1.shape)
    sizes[d] = n
    updates = reshape(updates, sizes)
    if n == 1 and mode == "replace" and settings.index_checks:
        # one slice written at one place: a static key-value cache's token
        # (transformers' StaticCache.update, index_copy_ at cache_position).
        # XLA writes a dynamic_update_slice of a donated buffer in place, where
        # a scatter became a copy of the whole cache every token; the check
        # above fails an out-of-range index, so the clamping never shows
        # (unchecked, a scatter drops such a write, as it did)
        starts = [reshape(index, ()) if i == d else const(0, index.dtype, ctx.device) for i in range(rank)]
        return reshape(apply("dynamic_update_slice", x1, updates, starts), ctx.shape)
    out = apply(
        "scatter", x1, index, updates,
        update_window_dims=tuple(i for i in range(rank) if i != d), inserted_window_dims=(d,),
        input_batching_dims=(), scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=(d,),
        index_vector_dim=1, mode=_mode(mode, ctx.dtype),
    )
    return reshape(out, ctx.shape)


@lowers(aten.index_add.default)
def _index_add(ctx, x, dim, index, source, alpha=1):
    source = convert(source, ctx.dtype)
    if alpha != 1:
        source = apply("mul", source, scalar(alpha, ctx.dtype, ctx.device, source.shape))
    return _index_along(ctx, x, dim, index, source, "add")


@lowers(aten.index_copy.default)
def _index_copy(ctx, x, dim, index, source):
    return _index_along(ctx, x, dim, index, convert(source, ctx.dtype), "replace")


@lowers(aten.index_fill.int_Scalar, aten.index_fill.int_Tensor)
def _index_fill(ctx, x, dim, index, value):
    sizes = list(_at_least_1d(x).shape)
    sizes[wrap_dim(dim, len(sizes))] = _numel(index.shape)
    updates = operand(value, ctx.dtype, tuple(sizes), ctx.device)
    return _index_along(ctx, x, dim, index, updates, "replace")


@lowers(aten.index_reduce.default)
def _index_reduce(ctx, x, dim, index, source, reduce, include_self=True):
    def put(base, updates, mode):
        return _index_along(ctx, base, dim, index, updates, mode)

    return _reduced(ctx, x, convert(source, ctx.dtype), reduce, include_self, put)


@lowers(aten.put.default)
def _put(ctx, x, index, source, accumulate=False):
    """``x.flatten()[index] = source`` (or ``+=``), negative indices from the end."""
    x = convert(x, ctx.dtype)
    n, k = _numel(x.shape), _numel(index.shape)
    if k == 0 or n == 0:
        return x
    index = _wrap(checked(reshape(index, (k,)), n, _out_of_range("put_", n), "IndexError", -n), n)
    out = apply(
        "scatter", reshape(x, (n,)), index, reshape(convert(source, ctx.dtype), (k,)),
        update_window_dims=(), inserted_window_dims=(0,), input_batching_dims=(),
        scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=(0,), index_vector_dim=1,
        mode=_mode("add" if accumulate else "replace", ctx.dtype),
    )
    return reshape(out, ctx.shape)


def _out_of_range(op: str, n: int) -> str:
    return f"{op}(): out of range: tried to access index {{index}} on a tensor of {n} elements."


@lowers(aten.take.default)
def _take(ctx, x, index):
    """``x.flatten()[index]``, negative indices from the end."""
    n, k = _numel(x.shape), _numel(index.shape)
    if k == 0:
        return _zeros(ctx)
    if n == 0:
        return NotImplemented  # eager's error for a non-empty take from an empty tensor
    index = _wrap(checked(reshape(index, (k,)), n, _out_of_range("take", n), "IndexError", -n), n)
    g = apply(
        "gather", reshape(x, (n,)), reshape(index, (k, 1)),
        offset_dims=(), collapsed_slice_dims=(0,), operand_batching_dims=(), start_indices_batching_dims=(),
        start_index_map=(0,), index_vector_dim=1, slice_sizes=(1,), indices_are_sorted=False,
    )
    return reshape(g, ctx.shape)


# --- advanced indexing: x[i0, :, i2] and x[i0, :, i2] = v ------------------------------------------


def _padded_none(indices) -> bool:
    """Whether an index is a count of none handed out padded (a pooler level
    no box falls in, :func:`lazycore.frontends.torch.counts.columns`): its
    gather or scatter is recorded all the same, so the step is the program
    of the line's other counts at a valid size of 0."""
    return any(t is not None and _padded_count(t.value.node) for t in indices)


def _padded_count(node) -> bool:
    """Whether ``node`` is a padded count's column (:func:`counts.padded`),
    or a view of one (``where(m)[0]``'s reshapes and slices)."""
    for _ in range(6):
        if counts.padded(node):
            return True
        if node.is_leaf or node.op not in ("reshape", "slice"):
            return False
        node = node.operands[0][0]
    return False


def _is_mask(t) -> bool:
    return t is not None and t.dtype in ("i1", "ui8")


def _in_bounds(index, d: int, n: int, layout=None):
    """Eager's IndexError for ``x[index]`` along dim ``d`` of size ``n`` (negatives wrap)."""
    return checked(index, n, _bounds(d, n), "IndexError", -n, layout=layout)


class _Plan:
    """Dimension numbers shared by ``x[indices]`` (gather) and its assignment (scatter).

    The index tensors broadcast to one shape B; B takes the place of the
    indexed dims when they are adjacent, else it goes first (numpy's rule).
    """

    def __init__(self, x_shape, indices, ctx=None):
        rank = len(x_shape)
        idx = list(indices) + [None] * (rank - len(indices))
        self.dims = tuple(i for i, t in enumerate(idx) if t is not None)
        batch = tuple(torch.broadcast_shapes(*(tuple(idx[i].shape) for i in self.dims)))
        rest = [i for i in range(rank) if i not in self.dims]
        first = self.dims[0]
        adjacent = self.dims == tuple(range(first, self.dims[-1] + 1))
        p = first if adjacent else 0  # where the batch dims go in the result
        before = [i for i in rest if adjacent and i < first]
        after = [i for i in rest if i not in before]
        self.offset_dims = tuple(range(p)) + tuple(range(p + len(batch), p + len(batch) + len(after)))
        self.shape = tuple(x_shape[i] for i in before) + batch + tuple(x_shape[i] for i in after)
        self.slice_sizes = tuple(1 if i in self.dims else n for i, n in enumerate(x_shape))
        self.batch = batch
        # the start indices: one coordinate per indexed dim along a new last axis
        coords = [reshape(broadcast(_wrap(_in_bounds(idx[i], i, x_shape[i], _layout(ctx, 1, i)), x_shape[i]), batch),
                          batch + (1,))
                  for i in self.dims]
        stacked = coords[0]
        for c in coords[1:]:
            stacked = apply("concatenate", stacked, c, dim=len(batch))
        self.indices = stacked

    def check_nonempty(self, x_shape):
        for i in self.dims:
            if x_shape[i] == 0 and _numel(self.batch):
                raise IndexError(f"index is out of bounds for dimension {i} with size 0")


@lowers(aten.index.Tensor)
def _index(ctx, x, indices):
    if any(_is_mask(t) for t in indices):
        return NotImplemented  # the result's size depends on the mask's values
    if all(t is None for t in indices):
        return reshape(x, ctx.shape)
    if _numel(ctx.shape) == 0 and not _padded_none(indices):
        return _zeros(ctx)
    plan = _Plan(x.shape, indices, ctx)
    plan.check_nonempty(x.shape)
    g = apply(
        "gather", x, plan.indices,
        offset_dims=plan.offset_dims, collapsed_slice_dims=plan.dims, operand_batching_dims=(),
        start_indices_batching_dims=(), start_index_map=plan.dims, index_vector_dim=len(plan.batch),
        slice_sizes=plan.slice_sizes, indices_are_sorted=False,
    )
    return reshape(g, ctx.shape)


@lowers(aten.index_put.default)
def _index_put(ctx, x, indices, values, accumulate=False):
    if accumulate and ctx.out.dtype is torch.complex32:
        return NotImplemented  # eager adds duplicates one by one, each sum rounded to float16 parts
    x = convert(x, ctx.dtype)
    values = convert(values, ctx.dtype)
    if any(_is_mask(t) for t in indices):
        return _masked_put(ctx, x, indices, values, accumulate)
    if all(t is None for t in indices):
        return NotImplemented
    plan = _Plan(x.shape, indices, ctx)
    if _numel(plan.shape) == 0 and not _padded_none(indices):
        return x
    plan.check_nonempty(x.shape)
    out = apply(
        "scatter", x, plan.indices, broadcast(values, plan.shape),
        update_window_dims=plan.offset_dims, inserted_window_dims=plan.dims, input_batching_dims=(),
        scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=plan.dims,
        index_vector_dim=len(plan.batch), mode=_mode("add" if accumulate else "replace", ctx.dtype),
    )
    return out


def _masked_put(ctx, x, indices, values, accumulate):
    """``x[mask] = v`` (one mask, one value): a select, no data-dependent shape."""
    held = [i for i, t in enumerate(indices) if t is not None]
    if len(held) != 1 or _numel(values.shape) != 1:
        return NotImplemented
    p = held[0]
    mask = convert(indices[p], "i1")
    mask = apply("broadcast_in_dim", mask, dims=tuple(range(p, p + len(mask.shape))), shape=ctx.shape)
    v = broadcast(reshape(values, ()), ctx.shape)
    if accumulate:
        v = apply("or" if ctx.dtype == "i1" else "add", x, v)
    return apply("select", mask, v, x)


@lowers(aten.masked_scatter.default)
def _masked_scatter(ctx, x, mask, source):
    """Where mask holds, the next unused element of source (in row-major order)."""
    x = broadcast(convert(x, ctx.dtype), ctx.shape)
    n, m = _numel(ctx.shape), _numel(source.shape)
    if n == 0 or m == 0:
        return x
    mask = broadcast(convert(mask, "i1"), ctx.shape)
    flat = reshape(mask, (n,))
    # position of each element in source: how many mask elements up to it, less one
    pos = apply("sub", _scan(convert(flat, "i64"), 0, "add"), const(1, "i64", ctx.device, (n,)))
    pos = apply("maximum", pos, const(0, "i64", ctx.device, (n,)))
    taken = apply(
        "gather", reshape(convert(source, ctx.dtype), (m,)), pos,
        offset_dims=(), collapsed_slice_dims=(0,), operand_batching_dims=(), start_indices_batching_dims=(),
        start_index_map=(0,), index_vector_dim=1, slice_sizes=(1,), indices_are_sorted=False,
    )
    return apply("select", mask, reshape(taken, ctx.shape), x)


@lowers(aten.masked_scatter_backward.default)
def _masked_scatter_backward(ctx, grad, mask, sizes):
    """``masked_scatter``'s gradient for its source (LLaVA's and Qwen2-VL's image
    features merged into the token embeddings): the gradient where mask holds,
    in row-major order, into the source's shape, zeros after it (eager's
    ``masked_select`` padded). Each held element goes to its own place (its
    count of held elements before it), so a replacing scatter is exact, -0.0
    kept; the others go to one slot past the end, cut off."""
    m = _numel(ctx.shape)
    shape = tuple(torch.broadcast_shapes(tuple(grad.shape), tuple(mask.shape)))
    n = _numel(shape)
    if n == 0 or m == 0:
        return _zeros(ctx)
    flat = reshape(broadcast(convert(mask, "i1"), shape), (n,))
    pos = apply("sub", _scan(convert(flat, "i64"), 0, "add"), const(1, "i64", ctx.device, (n,)))
    pos = apply("select", flat, pos, const(m, "i64", ctx.device, (n,)))
    out = apply(
        "scatter", const(0, ctx.dtype, ctx.device, (m + 1,)), reshape(pos, (n, 1)),
        reshape(broadcast(convert(grad, ctx.dtype), shape), (n,)),
        update_window_dims=(), inserted_window_dims=(0,), input_batching_dims=(), scatter_indices_batching_dims=(),
        scatter_dims_to_operand_dims=(0,), index_vector_dim=1, mode=_mode("replace", ctx.dtype),
    )
    return reshape(apply("slice", out, start=[0], limit=[m], strides=[1]), ctx.shape)


# --- *_like factories ---------------------------------------------------------------------------


@lowers(aten.full_like.default)
def _full_like(ctx, x, fill_value, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    if _no_lazy_device(device):
        return NotImplemented
    return operand(fill_value, ctx.dtype, ctx.shape, ctx.device)


@lowers(aten.ones_like.default)
def _ones_like(ctx, x, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    # full_like's lowering, not eager's decomposition through a second
    # dispatch: autograd makes one for every backward pass (the seed gradient)
    return _full_like(ctx, x, 1, device=device)


@lowers(aten.zeros_like.default)
def _zeros_like(ctx, x, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return _full_like(ctx, x, 0, device=device)


@lowers(aten.empty_like.default)
def _empty_like(ctx, x, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    if _no_lazy_device(device):
        return NotImplemented
    # eager leaves memory uninitialized; zeros keep programs deterministic
    return _zeros(ctx)


# --- cumulative scans ------------------------------------------------------------------------------


def _scan(h, d: int, combine: str, identity=None):
    """Inclusive scan of ``h`` along ``d`` (Hillis-Steele: shift by 1, 2, 4, ... and combine)."""
    n = h.shape[d]
    if identity is None:
        identity = {"add": 0, "mul": 1}[combine]
    fill = const(identity, h.dtype, h.device)
    k = 1
    while k < n:
        shifted = _shifted(h, d, k, fill)
        h = _logaddexp(h, shifted) if combine == "logaddexp" else apply(combine, h, shifted)
        k *= 2
    return h


def _shifted(h, d: int, k: int, fill):
    """``h`` moved ``k`` places on along ``d``, ``fill`` (a 0-d value of its type)
    in the first ``k``: each position's operand ``k`` places earlier in a
    Hillis-Steele scan's step."""
    rank = len(h.shape)
    low, high = [0] * rank, [0] * rank
    low[d], high[d] = k, -k
    return apply("pad", h, fill, low=low, high=high, interior=[0] * rank)


def _logaddexp(a, b):
    """``max + log1p(exp(-|a - b|))``, the max where it is infinite: eager CPU's
    ``_log_add_exp_helper`` value for value (``-|a - b|`` is its ``min - max``
    exactly; where both are one infinity, its ``x`` is that max), so the
    tree and the in-order loop share it."""
    m = apply("maximum", a, b)
    gap = apply("neg", apply("abs", apply("sub", a, b)))
    r = apply("add", m, apply("log1p", apply("exp", gap)))
    # both -inf (or an inf): the gap is NaN, the answer is the max
    inf = apply("compare", apply("abs", m), const(math.inf, m.dtype, m.device, m.shape), direction="EQ")
    return apply("select", inf, m, r)


# eager CPU's accumulator (``at::acc_type<T, /*is_cuda=*/false>``) per result type
_CARRY = {"f16": "f32", "bf16": "f32", "f32": "f64", "f64": "f64",
          "complex<f32>": "complex<f64>", "complex<f64>": "complex<f64>"}


def _cumulative(ctx, x, dim, combine, identity=None):
    if ctx.dtype in _CARRY and x.shape != () and _numel(x.shape) and scans.in_order(ctx.device):
        # eager CPU's loop: each element added to the carry in turn, each
        # output rounded from the carry (the input first cast to the result's type)
        h = convert(convert(x, ctx.dtype), _CARRY[ctx.dtype])
        start = {"add": 0.0, "mul": 1.0, "logaddexp": -math.inf}[combine]
        step = _logaddexp if combine == "logaddexp" else lambda a, b: apply(combine, a, b)
        return convert(scans.one_by_one(h, wrap_dim(dim, len(h.shape)), step, start), ctx.dtype)
    wide = "f32" if ctx.dtype in ("f16", "bf16") else ctx.dtype
    h = convert(x, wide)
    if h.shape != () and _numel(h.shape):
        h = _scan(h, wrap_dim(dim, len(h.shape)), combine, identity)
    return convert(h, ctx.dtype)



@lowers(aten.cumsum.default)
def _cumsum(ctx, x, dim, dtype=None):
    return _cumulative(ctx, x, dim, "add")


@lowers(aten.cumprod.default)
def _cumprod(ctx, x, dim, dtype=None):
    return _cumulative(ctx, x, dim, "mul")


@lowers(aten.logcumsumexp.default)
def _logcumsumexp(ctx, x, dim):
    if not is_float(ctx.dtype):
        return NotImplemented
    return _cumulative(ctx, x, dim, "logaddexp", -math.inf)


@lowers(aten.cummax.default, aten.cummin.default)
def _cummax_cummin(ctx, x, dim):
    """The running maximum (minimum) along ``dim`` and the index it was taken at,
    as eager CPU's loop (``cummax_cummin_helper``) takes them: an element
    replaces the running one where it is NaN, or where the running one is not
    NaN and the element is ``>=`` it (``<=``): an equal element's later index
    and its value (a signed zero's sign), a NaN kept until the next NaN. That
    choice between an earlier and a later pair is associative, so a
    Hillis-Steele scan of (value, index) pairs gives the loop's answers,
    exactly (Grounding DINO's text masks take them of positions)."""
    if x.dtype.startswith("complex"):
        return NotImplemented
    if x.shape == () or not _numel(x.shape):
        return x, const(0, "i64", x.device, x.shape)
    d = wrap_dim(dim, len(x.shape))
    v = convert(x, "i8") if x.dtype == "i1" else x
    most = ctx.func_name == "cummax"
    if is_float(v.dtype):
        fill = -math.inf if most else math.inf
    else:
        info = np.iinfo(to_numpy_dtype(v.dtype))
        fill = int(info.min if most else info.max)
    i = apply("iota", dim=d, shape=x.shape, dtype="i64", device=x.device)
    fill_v, fill_i = const(fill, v.dtype, v.device), const(-1, "i64", x.device)
    k = 1
    while k < x.shape[d]:
        earlier_v, earlier_i = _shifted(v, d, k, fill_v), _shifted(i, d, k, fill_i)
        later = apply("compare", v, earlier_v, direction="GE" if most else "LE")
        if is_float(v.dtype):
            nan, earlier_nan = (apply("compare", t, t, direction="NE") for t in (v, earlier_v))
            later = apply("or", nan, apply("and", apply("not", earlier_nan), later))
        v, i = apply("select", later, v, earlier_v), apply("select", later, i, earlier_i)
        k *= 2
    return convert(v, x.dtype), i


# --- one_hot --------------------------------------------------------------------------------------
# one_hot is composite (never reaches dispatch as itself) and, for a device
# other than CPU and CUDA, skips eager's checks of the values (they would read
# them): the lazy device gets them back as value checks, ahead of the composite.


def _one_hot(x, num_classes=-1):
    from ..tensor import Tensor, read, wrap

    if type(x) is Tensor:
        # eager's checks of the dtype and flags: its kernel on zeros (a valid
        # class wherever any is), cut to at most one per dimension
        aten.one_hot.default(torch.zeros([min(n, 1) for n in x.shape], dtype=x.dtype), num_classes)
    if (type(x) is Tensor and settings.index_checks and x.dtype == torch.int64 and num_classes >= 0
            and x.numel()):
        h = read(x)
        shape, dev = h.shape, h.device
        negative = apply("compare", h, const(0, "i64", dev, shape), direction="LT")
        h = core.check(h, negative, "one_hot(): Class values must be non-negative.", "RuntimeError")
        big = apply("compare", h, const(num_classes, "i64", dev, shape), direction="GE")
        h = core.check(h, big, "one_hot(): Class values must be smaller than num_classes.", "RuntimeError")
        x = wrap(h, x, owned=True)
    # the C++ composite (its Python decomposition reads the values for its checks)
    return aten.one_hot.default._op_dk(torch._C.DispatchKey.CompositeImplicitAutograd, x, num_classes)


_LIB = torch.library.Library("aten", "IMPL")
_LIB.impl("one_hot", _one_hot, "AutogradLazy")


# --- boolean masks whose values are known on the host -------------------------------------------
# ``x[mask]``, ``x[mask] = v``, ``masked_select`` and ``nonzero`` have a result
# shape (or, for index_put, index tensors) given by the mask's values, so they
# have no lowering of their own and reach the fallback, which brought every
# lazy argument to the host: a barrier that cut the step in two (a GCN's
# ``out[train_mask]`` and its backward's index_put: three programs a step).
# But a mask is mostly device data the user uploaded (``mask.to(lazy)``) or a
# CPU tensor: its values are one device-to-host copy away, with no program
# run. There the fallback first turns each mask into eager's own expansion of
# it (``mask.nonzero()``'s columns, at::native::expandTensors) and calls the
# op again with those integer indices: a static-shape gather or scatter, in
# the step's one program.
#
# The index columns enter the program as device data (a parameter), not as
# constants: a new mask selecting as many elements runs the same compiled
# program. They are kept per mask leaf (:data:`_HOST_INDICES`), so a mask
# used every step is read and uploaded once. A mask computed on the device (a
# pending value: one updated in place, ``keep > 0.5``) is read first: alone,
# by a program of its own, where no other live value's pending work is in it
# (the step's graph stays whole); else (``out.argmax(1) == y``) by a barrier,
# as the fallback's read did; the op then lowers as above, with no fallback.


_HOST_INDICES = Memo("torch.host_mask_indices", 16)
"""``(id of a mask's device-data leaf, shape its values are broadcast to,
layout of the mask's view of it or None)`` ->
``(the leaf, the host nonzero indices (n, rank) int64, their columns on the
device as handles)``. The leaf is kept so its id names no other leaf while the
entry lives; an in-place update of the mask gives it a new value (a new leaf
once computed), so a kept answer is never stale. The handles stay live, so
their buffers are never donated."""


def _host_mask(mask):
    """:func:`_host_values` of a boolean mask (a CPU one's values as bools)."""
    known = _host_values(mask, "i1")
    if known is not None and known[1] is None:
        return known[0].astype(bool, copy=False), None
    return known


def _host_values(mask, dtype: str):
    """``(values, kept)`` of a lazy or CPU tensor of lazy ``dtype`` (a mask's
    ``i1``): a CPU tensor's values
    (``kept`` None); for a lazy tensor the values if read here (else None) and ``kept``: the device data leaf of its
    value, its handle and None, or, for a view of a storage that holds device
    data, that leaf, the storage's handle and the view's layout on it. A
    pending tensor is computed first: by a program of its own where it shares
    no pending work with other live values (:func:`lazycore.runtime.reads._read_alone`),
    else by the barrier the fallback ran. None for a tensor of another kind."""
    if type(mask) is not Tensor:
        if isinstance(mask, torch.Tensor) and mask.device.type == "cpu" and mask.layout is torch.strided:
            return mask.numpy(force=True), None
        return None
    if mask._steps:
        # a view of device data (a row of a 2-D mask, one split of several): its
        # elements are the storage's, laid out by the view's strides and offset
        base = mask._storage.handle
        node = base.value.node
        if type(node) is Data and type(node.storage) is not Failure and base.dtype == dtype and _numel(base.shape):
            layout = (tuple(mask.shape), tuple(mask.stride()), mask.storage_offset(), mask._storage.strides)
            return None, (node, base, layout)
    h = read(mask)
    values = core.to_numpy(h) if h.pending else None  # (a failed computation raises, as the fallback's read)
    node = h.value.node
    if type(node) is not Data:
        if not counts.padded(node):  # (a padded result's valid region: its values were read, cut from it)
            return None
    elif type(node.storage) is Failure:
        return None
    return values, (node, h, None)


def _host_array(values, h, layout):
    """A lazy tensor's elements from :func:`_host_values`' answer: the values
    read (or, where none were, those of the storage ``h``), laid out by the
    view ``layout`` on it."""
    return _viewed(core.to_numpy(h) if values is None else values, h, layout)


def _viewed(values, h, layout):
    """The view ``layout`` of the storage whose value (``h``'s) is ``values``."""
    if layout is None:
        return values
    shape, strides, offset, base_strides = layout
    span = 1 + sum((n - 1) * st for n, st in zip(h.shape, base_strides))
    memory = torch.zeros(max(span, offset + 1 + sum((n - 1) * st for n, st in zip(shape, strides) if n)),
                         dtype=torch.from_numpy(values[:0]).dtype)
    memory.as_strided(h.shape, base_strides).copy_(torch.from_numpy(values))
    return memory.as_strided(shape, strides, offset).numpy()


def _mask_indices(mask, shape):
    """The handles of ``mask``'s nonzero indices (one int64 column per dim of
    ``shape``, the mask broadcast to it) on the mask's device, from
    :data:`_HOST_INDICES` or read now; for a CPU mask the indices themselves
    (an (n, rank) array); None when its values are not known on the host."""
    known = _host_mask(mask)
    if known is None:
        return None
    TRACE.taint()  # what follows depends on the mask's values: a recording of it cannot be replayed
    values, kept = known
    if kept is None:
        return np.argwhere(np.broadcast_to(values, shape))
    node, h, layout = kept
    key = (id(node), tuple(shape), layout)
    hit = _HOST_INDICES.get(key)
    if hit is not None and hit[0] is node:
        return [core.LazyTensor(c.value, c.device) for c in hit[2]]
    values = _host_array(values, h, layout).astype(bool, copy=False)
    where = np.argwhere(np.broadcast_to(values, shape))
    columns = counts.columns(where, h.device, len(shape), math.prod(shape))  # (in a bucket once the count varies)
    _HOST_INDICES.put(key, (node, where, columns))
    return [core.LazyTensor(c.value, c.device) for c in columns]


def _columns(mask, shape, like):
    """:func:`_mask_indices` as torch index tensors on ``like``'s device."""
    got = _mask_indices(mask, shape)
    if got is None:
        return None
    if isinstance(got, np.ndarray):  # a CPU mask
        dev = lc_device(like.device)
        got = [upload(torch.from_numpy(np.ascontiguousarray(got[:, d])), dev, scalar=False)
               for d in range(got.shape[1])]
    return [wrap(c) for c in got]


def _expanded_indices(x, indices):
    """``indices`` with each boolean mask replaced by its nonzero columns
    (eager's expansion), or None when a mask's values are not known on the
    host or do not fit (eager's error comes from the fallback), or ``x`` is
    not a lazy tensor (the fallback says what eager does with a CPU one)."""
    if type(x) is not Tensor:
        return None
    out, dim, changed = [], 0, False
    for t in indices:
        if t is None or t.dtype not in (torch.bool, torch.uint8):
            out.append(t)
            dim += 1
            continue
        k = t.dim()
        if k == 0 or tuple(t.shape) != tuple(x.shape[dim:dim + k]):
            return None
        if t.dtype is torch.uint8:
            return None  # (eager warns that uint8 masks are deprecated: the fallback says it)
        cols = _columns(t, tuple(t.shape), x)
        if cols is None:
            return None
        out.extend(cols)
        dim += k
        changed = True
    return out if changed else None


def _bound(func, args, kwargs):
    """The call's arguments by name (schema order)."""
    names = [a.name for a in func._schema.arguments]
    bound = dict(zip(names, args))
    bound.update(kwargs)
    return bound


def _masked_index(func, args, kwargs):
    b = _bound(func, args, kwargs)
    new = _expanded_indices(b["self"], b["indices"])
    if new is None:
        return NotImplemented
    return func(b["self"], new)


def _masked_index_put(func, args, kwargs):
    b = _bound(func, args, kwargs)
    new = _expanded_indices(b["self"], b["indices"])
    if new is None:
        return NotImplemented
    b["indices"] = new
    return func(**b)


def _masked_select(func, args, kwargs):
    b = _bound(func, args, kwargs)
    x, mask = b["self"], b["mask"]
    if mask.dtype is not torch.bool or type(x) is not Tensor:
        return NotImplemented  # eager's error
    try:
        shape = tuple(torch.broadcast_shapes(tuple(x.shape), tuple(mask.shape)))
    except RuntimeError:
        return NotImplemented  # eager's error
    x = x.expand(shape)
    if shape == ():  # both 0-d: the one element, or none
        shape, x = (1,), x.reshape(1)
    cols = _columns(mask, shape, x)
    if cols is None:
        return NotImplemented
    return aten.index.Tensor(x, cols)


def _nonzero(func, args, kwargs):
    b = _bound(func, args, kwargs)
    x = b["self"]
    if x.dim() == 0 or x.dtype.is_complex:
        return NotImplemented  # (0-d: eager's rule; complex: the fallback compares them)
    if x.dtype is not torch.bool:  # torchvision's samplers: torch.where of a uint8 mask
        if type(x) is not Tensor:
            return NotImplemented
        x = x != 0
    cols = _columns(x, tuple(x.shape), x)
    if cols is None:
        return NotImplemented
    return aten.stack.default(cols, 1)  # (n, rank), as eager's: the columns side by side, on the device


def _repeat_interleave(func, args, kwargs):
    """``repeat_interleave(repeats)``, the indices ``x.repeat_interleave(repeats,
    dim)`` selects (Qwen2-VL's vision tower repeats each image's patch count
    by its frames), with the repeats' values known on the host: index ``i``
    ``repeats[i]`` times, made on the host and uploaded. Other cases (an
    ``output_size``, a negative count: eager's error) go on to the fallback."""
    b = _bound(func, args, kwargs)
    repeats = b["repeats"]
    dtype = {torch.int64: "i64", torch.int32: "i32"}.get(repeats.dtype)
    if type(repeats) is not Tensor or dtype is None or repeats.dim() != 1 or b.get("output_size") is not None:
        return NotImplemented
    known = _host_values(repeats, dtype)
    if known is None:
        return NotImplemented
    TRACE.taint()  # what follows depends on the repeats' values: a recording of it cannot be replayed
    values, (_, h, layout) = known
    values = _host_array(values, h, layout)
    if (values < 0).any():
        return NotImplemented
    out = np.repeat(np.arange(len(values), dtype=values.dtype), values)
    return wrap(upload(torch.from_numpy(out), lc_device(repeats.device), scalar=False))


_MASKED = {
    aten.repeat_interleave.Tensor: _repeat_interleave,
    aten.index.Tensor: _masked_index,
    aten.index_put.default: _masked_index_put,
    aten.index_put_.default: _masked_index_put,
    aten._index_put_impl_.default: _masked_index_put,
    aten.masked_select.default: _masked_select,
    aten.nonzero.default: _nonzero,
}


def host_masked(func, args, kwargs):
    """``func`` (one of the ops above, on its way to the fallback) with its
    boolean masks' values known on the host, run again on their nonzero
    indices (lowered: no barrier, no fallback); else NotImplemented."""
    rewrite = _MASKED.get(func)
    if rewrite is None:
        return NotImplemented
    return rewrite(func, args, kwargs)
