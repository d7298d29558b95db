"""``nn.EmbeddingBag``'s ATen ops: ``_embedding_bag`` and
``_embedding_bag_forward_only`` (the forward with and without gradients),
``_embedding_bag_backward`` (dense) and the per-sample weights' backward.

A bag is the run of positions of the 1-d ``indices`` from one offset to the
next; each position's row of ``weight`` (times its per-sample weight) is
summed, averaged or maxed into its bag's row of the result. Everything is a
gather or a scatter over each position's bag number (``offset2bag``: a 1
where each later bag starts, then a running sum), so nothing runs on the
CPU (inductor falls back to eager's kernel here; lazycore did too, two
programs a step and no captured replay).

Eager's CPU kernel reads the offsets and indices on the host and raises at
the call; here those are value checks (:func:`.indexing.checked`): a first
offset that is not 0, a last one past the input's length, an index outside
the table fail what the op computed at its barrier, with eager's exception
type and message (for ``sum`` and ``mean`` the message names the bad value,
not also its position).

The auxiliary results have the meta kernel's shapes, which are not eager
CPU's (the lazy device is not the CPU), and what the backward needs in them:
``offset2bag`` a bag number per position, ``bag_size`` a bag's count of
positions that are not ``padding_idx`` (eager's CPU zeroes it in ``sum``
mode, where nothing reads it), ``max_indices`` in ``max`` mode the row each
maximum came from, the first position's of equal maxima as eager's strict
``>`` keeps it (0 for an empty bag).

``sparse=True`` (a sparse gradient) and ``scale_grad_by_freq`` (whose eager
CPU kernel divides by another row's count: see the backward) keep eager's
kernels, counted fallbacks.
"""

from __future__ import annotations

import torch

from ..lowering import apply, const, convert, lowers, reshape
from .indexing import _scan, checked

aten = torch.ops.aten

_SUM, _MEAN, _MAX = 0, 1, 2


def _rows(table, index):
    """``table[index]`` for a checked 1-d ``index``: (n, width)."""
    n, width = index.shape[0], table.shape[1]
    return apply(
        "gather", table, reshape(index, (n, 1)),
        offset_dims=(1,), collapsed_slice_dims=(0,), operand_batching_dims=(), start_indices_batching_dims=(),
        start_index_map=(0,), index_vector_dim=1, slice_sizes=(1, width), indices_are_sorted=False,
    )


def _scatter_rows(base, index, rows, mode: str):
    """``base`` with row ``i`` of ``rows`` combined into row ``index[i]``; an
    index outside ``base`` drops its row (StableHLO's scatter)."""
    window = tuple(range(1, len(base.shape)))
    return apply(
        "scatter", base, reshape(index, (index.shape[0], 1)), rows,
        update_window_dims=window, inserted_window_dims=(0,), input_batching_dims=(),
        scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=(0,), index_vector_dim=1, mode=mode,
    )


def _offset2bag(offsets, n: int, bags: int, device):
    """Each of the ``n`` positions' bag number, from the ``bags`` first
    offsets (i64): an empty bag's offset repeats the next one's, so two marks
    at one position skip its number, as eager's ``index_add`` of ones and
    cumulative sum; an offset at ``n`` (empty bags at the end) marks nothing."""
    zeros = const(0, "i64", device, (n,))
    if bags <= 1 or n == 0:
        return zeros
    starts = apply("slice", offsets, start=[1], limit=[bags], strides=[1])
    marks = _scatter_rows(zeros, starts, const(1, "i64", device, (bags - 1,)), "add")
    return _scan(marks, 0, "add")


def _counted(bag, keep, bags: int, device):
    """Each bag's count of kept positions (i64)."""
    if bag.shape[0] == 0:
        return const(0, "i64", device, (bags,))
    return _scatter_rows(const(0, "i64", device, (bags,)), bag, convert(keep, "i64"), "add")


def _keep(index, padding_idx: int):
    """Which positions count (not ``padding_idx``), or None when all do."""
    if padding_idx < 0:
        return None
    return apply("compare", index, const(padding_idx, "i64", index.device, index.shape), direction="NE")


def _zero_dropped(rows, keep):
    if keep is None:
        return rows
    return apply("select", _per_row(keep, rows.shape), rows,
                 const(0, rows.dtype, rows.device, rows.shape))


def _per_row(v, shape):
    """A (rows,) value broadcast along a (rows, width) one."""
    return apply("broadcast_in_dim", v, dims=(0,), shape=tuple(shape))


def _checked_offsets(offsets, n: int):
    """``offsets`` (i64) with eager's two checks of its values: the first is
    0, the last (the end offset with ``include_last_offset``) at most ``n``."""
    total = offsets.shape[0]
    first = checked(apply("slice", offsets, start=[0], limit=[1], strides=[1]), 1,
                    "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                    "position 0. However, got {index}", "RuntimeError")
    last_message = f"offsets[-1] can not be greater than input's length {n} but got offsets[-1] of {{index}}"
    if total == 1:
        return checked(first, n + 1, last_message, "RuntimeError")
    last = checked(apply("slice", offsets, start=[total - 1], limit=[total], strides=[1]), n + 1, last_message,
                   "RuntimeError")
    # every result is computed from these offsets, so each check fails them all
    if total > 2:
        first = apply("concatenate", first, apply("slice", offsets, start=[1], limit=[total - 1], strides=[1]), dim=0)
    return apply("concatenate", first, last, dim=0)


@lowers(aten._embedding_bag.default, aten._embedding_bag_forward_only.default)
def _embedding_bag(ctx, weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    out_t, o2b_t, size_t, maxi_t = ctx.out
    if len(indices.shape) != 1 or len(offsets.shape) != 1:
        return NotImplemented  # (a 2-d input reaches here flattened, by F.embedding_bag)
    dev, dt = ctx.device, ctx.dtype
    n, (num, width) = indices.shape[0], weight.shape
    bags = out_t.shape[0]
    index_dt = _index_type(o2b_t)
    offsets = _checked_offsets(convert(offsets, "i64"), n)
    message = ("embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be {index}" if mode == _MAX
               else f"Index of input takes value {{index}} which is not in the valid range [0, {num})")
    index = checked(convert(indices, "i64"), num, message, "RuntimeError") if n else convert(indices, "i64")
    bag = _offset2bag(offsets, n, bags, dev)
    keep = _keep(index, padding_idx)
    counts = _counted(bag, keep if keep is not None else const(True, "i1", dev, (n,)), bags, dev)
    rows = _rows(convert(weight, dt), index) if n else const(0, dt, dev, (0, width))
    if mode == _MAX:
        out, table = _bag_max(rows, bag, keep, counts, index, bags, n, dev)
    else:
        if per_sample_weights is not None:
            rows = apply("mul", rows, _per_row(convert(per_sample_weights, dt), rows.shape))
        out = _scatter_rows(const(0, dt, dev, (bags, width)), bag, _zero_dropped(rows, keep), "add") if n else \
            const(0, dt, dev, (bags, width))
        if mode == _MEAN:
            # eager: output /= max(bag_size, 1)
            divisor = convert(apply("maximum", counts, const(1, "i64", dev, (bags,))), dt)
            out = apply("div", out, _per_row(divisor, out.shape))
        table = None
    sizes = _fit(counts, tuple(size_t.shape), _index_type(size_t), dev)
    o2b = convert(bag, index_dt) if tuple(o2b_t.shape) == (n,) else const(0, index_dt, dev, tuple(o2b_t.shape))
    if table is not None and tuple(maxi_t.shape) == (bags, width):
        maxi = convert(table, _index_type(maxi_t))
    else:
        maxi = _fit(counts, tuple(maxi_t.shape), _index_type(maxi_t), dev)
    return out, o2b, sizes, maxi


def _bag_max(rows, bag, keep, counts, index, bags: int, n: int, dev):
    """Each bag's maxima (0 for a bag without kept positions) and the row each
    came from (the first position's among equal maxima)."""
    dt, width = rows.dtype, rows.shape[1]
    if n == 0:
        return const(0, dt, dev, (bags, width)), const(0, "i64", dev, (bags, width))
    low = const(float("-inf"), dt, dev, rows.shape)
    kept = rows if keep is None else apply("select", _per_row(keep, rows.shape), rows, low)
    top = _scatter_rows(const(float("-inf"), dt, dev, (bags, width)), bag, kept, "max")
    hit = apply("compare", kept, _rows(top, bag), direction="EQ")
    if keep is not None:
        hit = apply("and", hit, _per_row(keep, rows.shape))
    position = apply("iota", dim=0, shape=(n, width), dtype="i64", device=dev)
    first = _scatter_rows(const(n, "i64", dev, (bags, width)), bag,
                          apply("select", hit, position, const(n, "i64", dev, (n, width))), "min")
    found = apply("compare", first, const(n, "i64", dev, (bags, width)), direction="LT")
    source = _rows(reshape(index, (n, 1)), reshape(apply("minimum", first, const(n - 1, "i64", dev, (bags, width))),
                                                   (bags * width,)))
    table = apply("select", found, reshape(source, (bags, width)), const(0, "i64", dev, (bags, width)))
    empty = apply("compare", counts, const(0, "i64", dev, (bags,)), direction="EQ")
    out = apply("select", _per_row(empty, top.shape), const(0, dt, dev, top.shape), top)
    return out, table


def _fit(counts, shape: tuple, dtype: str, dev):
    """``counts`` (i64, one per bag) as a result of ``shape``: cut, or zero
    past the bags (the meta kernel sizes ``bag_size`` by the offsets, one
    more than the bags with ``include_last_offset``)."""
    counts = convert(counts, dtype)
    if shape == counts.shape:
        return counts
    if len(shape) != 1:
        return const(0, dtype, dev, shape)
    have = counts.shape[0]
    if shape[0] < have:
        return apply("slice", counts, start=[0], limit=[shape[0]], strides=[1])
    return apply("pad", counts, const(0, dtype, dev), low=[0], high=[shape[0] - have], interior=[0])


def _index_type(t) -> str:
    """The lazy element type of a meta result of integers."""
    return {torch.int64: "i64", torch.int32: "i32"}[t.dtype]


def _bag_of(offset2bag, offsets, n: int, dev):
    """The forward's bag numbers (i64), or made again from the offsets where
    the forward gave none (eager's CPU ``sum`` fast path)."""
    if tuple(offset2bag.shape) == (n,):
        return convert(offset2bag, "i64")
    offsets = convert(offsets, "i64")
    return _offset2bag(offsets, n, offsets.shape[0], dev)


@lowers(aten._embedding_bag_backward.default, aten._embedding_bag_dense_backward.default)
def _embedding_bag_backward(ctx, grad, indices, *rest):
    # (the dense backward has no offsets and no sparse flag)
    if ctx.func is aten._embedding_bag_dense_backward.default:
        offsets = None
        offset2bag, bag_size, max_indices, num_weights, scale_grad_by_freq, mode, psw, *pad = rest
    else:
        offsets, offset2bag, bag_size, max_indices, num_weights, scale_grad_by_freq, mode, sparse, psw, *pad = rest
        if sparse:
            return NotImplemented
    if scale_grad_by_freq and mode != _MAX:
        # eager's CPU kernel divides by the count of the index at the sorted
        # positions' unique-group number, not the row's own count (EmbeddingBag.cpp's
        # ``counts[indices_data[i]]``): its kernel keeps its answers
        return NotImplemented
    padding_idx = pad[0] if pad else -1
    dev, dt = ctx.device, ctx.dtype
    n, width = indices.shape[0], ctx.shape[1]
    zeros = const(0, dt, dev, ctx.shape)
    if mode == _MAX:
        bags = grad.shape[0]
        if bags == 0:
            return zeros
        # eager's index_add of each non-empty bag's gradient into the rows its maxima came from
        full = apply("compare", convert(bag_size, "i64"), const(0, "i64", dev, tuple(bag_size.shape)), direction="NE")
        full = _fit(full, (bags,), "i1", dev) if tuple(bag_size.shape) != (bags,) else full
        g = apply("select", _per_row(full, (bags, width)), convert(grad, dt), const(0, dt, dev, (bags, width)))
        column = apply("iota", dim=1, shape=(bags, width), dtype="i64", device=dev)
        where = apply("concatenate", reshape(convert(max_indices, "i64"), (bags, width, 1)),
                      reshape(column, (bags, width, 1)), dim=2)
        return apply(
            "scatter", zeros, where, g,
            update_window_dims=(), inserted_window_dims=(0, 1), input_batching_dims=(),
            scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=(0, 1), index_vector_dim=2, mode="add",
        )
    if n == 0:
        return zeros
    index = convert(indices, "i64")
    bag = _bag_of(offset2bag, offsets, n, dev) if offsets is not None else convert(offset2bag, "i64")
    # eager's scale per position, in float64 then rounded to the gradient's type:
    # the per-sample weight (or 1), / the bag's size (mean)
    scale = convert(psw, "f64") if psw is not None else const(1.0, "f64", dev, (n,))
    if mode == _MEAN:
        size = convert(_rows(reshape(convert(bag_size, "i64"), (bag_size.shape[0], 1)), bag), "f64")
        size = reshape(size, (n,))
        nonzero = apply("compare", size, const(0.0, "f64", dev, (n,)), direction="NE")
        scale = apply("select", nonzero, apply("div", scale, size), scale)
    rows = apply("mul", _rows(convert(grad, dt), bag), _per_row(convert(scale, dt), (n, width)))
    rows = _zero_dropped(rows, _keep(index, padding_idx))
    return _scatter_rows(zeros, index, rows, "add")


@lowers(aten._embedding_bag_per_sample_weights_backward.default)
def _per_sample_weights_backward(ctx, grad, weight, indices, offsets, offset2bag, mode, padding_idx=-1):
    """Each position's dot product of its bag's gradient and its row (0 at ``padding_idx``)."""
    dev, dt = ctx.device, ctx.dtype
    n = indices.shape[0]
    if n == 0:
        return const(0, dt, dev, ctx.shape)
    index = convert(indices, "i64")
    bag = _bag_of(offset2bag, offsets, n, dev)
    dots = apply("reduce_sum", apply("mul", _rows(convert(grad, dt), bag), _rows(convert(weight, dt), index)),
                 dims=(1,))
    keep = _keep(index, padding_idx)
    if keep is None:
        return dots
    return apply("select", keep, dots, const(0, dt, dev, (n,)))
