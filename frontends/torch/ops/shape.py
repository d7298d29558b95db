"""Ops that rearrange values into a new tensor: cat, pad, flip, index_select, ..."""

from __future__ import annotations

import torch

from ..lowering import apply, const, convert, dim, dims, lowers, reshape, operand

aten = torch.ops.aten


@lowers(aten._unsafe_view.default, aten.view_copy.default)
def _reshape(ctx, x, size):
    return reshape(x, ctx.shape)


@lowers(aten.cat.default)
def _cat(ctx, tensors, dim=0):
    rank = len(ctx.shape)
    d = dim % rank if rank else 0
    # legacy: 1-D empty tensors are skipped whatever the other shapes are
    parts = [convert(t, ctx.dtype) for t in tensors if not (t.shape == (0,) and rank != 1)]
    parts = [p for p in parts if p.shape[d] != 0] or parts[:1]
    if not parts:
        return const(0, ctx.dtype, ctx.device, ctx.shape)
    return reshape(_joined(parts, d), ctx.shape)


@lowers(aten.stack.default)
def _stack(ctx, tensors, dim=0):
    # joined along the new dimension (PyTorch's reference joins along the old
    # one and splits it again: a split padding refuses where the tensors are
    # padded counts, UDOP's patches made up to a length)
    return _joined([convert(t, ctx.dtype) for t in tensors], dim % len(ctx.shape), new=True)


def _joined(parts, d: int, new: bool = False):
    """``parts`` side by side along ``d`` (``new``: a new dimension ``d``);
    copies of one value are one broadcast (:func:`_copies`)."""
    first = parts[0]
    if len(parts) > 1 and all(p is first for p in parts):
        out = _copies(first, len(parts), d)
        return out if new else reshape(out, (*first.shape[:d], len(parts) * first.shape[d], *first.shape[d + 1:]))
    if new:  # (one tensor: its reshape, as a count of none reads it, test_count_of_none)
        parts = [reshape(p, (*p.shape[:d], 1, *p.shape[d:])) for p in parts]
    out = parts[0]
    for p in parts[1:]:
        out = apply("concatenate", out, p, dim=d)
    return out


def _copies(x, k: int, d: int):
    """``k`` copies of ``x`` side by side along a new dimension ``d``: one
    broadcast, whose rows padding can make at any length (runtime/padding.py
    ``_rows``: ``torch.stack([filler] * m)``, transformers' UDOP making a
    sequence up to a length)."""
    shape = (*x.shape[:d], k, *x.shape[d:])
    return apply("broadcast_in_dim", x, dims=tuple(j for j in range(len(shape)) if j != d), shape=shape)


@lowers(aten.flip.default)
def _flip(ctx, x, ds):
    ds = dims(ds, len(x.shape)) if ds else ()
    ds = tuple(d for d in ds if x.shape[d] > 1)
    return apply("reverse", x, dims=ds) if ds else x


@lowers(aten.constant_pad_nd.default)
def _constant_pad_nd(ctx, x, pad, value=0):
    rank = len(x.shape)
    low, high = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        d = rank - 1 - i
        low[d], high[d] = pad[2 * i], pad[2 * i + 1]
    # negative padding crops: slice first, then pad the rest
    start = [max(-lo, 0) for lo in low]
    limit = [n - max(-hi, 0) for n, hi in zip(x.shape, high)]
    if any(start) or limit != list(x.shape):
        x = apply("slice", x, start=start, limit=limit, strides=[1] * rank)
    low = [max(lo, 0) for lo in low]
    high = [max(hi, 0) for hi in high]
    if not any(low) and not any(high):
        return x
    return apply("pad", x, operand(value, x.dtype, (), ctx.device), low=low, high=high, interior=[0] * rank)


@lowers(aten.index_select.default)
def _index_select(ctx, x, d, index):
    rank = len(x.shape)
    if rank == 0:
        return reshape(x, ctx.shape)
    d = dim(d, rank)
    index = reshape(convert(index, "i64"), (_numel(index.shape),))
    # eager's CPU kernel: its dim-1 fast path raises a RuntimeError, the others an IndexError
    from .indexing import checked

    n = x.shape[d]
    if d == 1:
        index = checked(index, n, f"index_select(): INDICES element is out of DATA bounds, axis_dim={n}", "RuntimeError")
    else:
        index = checked(index, n, "index_select(): index out of range in self", "IndexError")
    index = _wrap_negative(index, n)
    sizes = list(x.shape)
    sizes[d] = 1
    g = apply(
        "gather", x, reshape(index, (index.shape[0], 1)),
        offset_dims=tuple(range(1, rank)),
        collapsed_slice_dims=(d,), operand_batching_dims=(), start_indices_batching_dims=(),
        start_index_map=(d,), index_vector_dim=1, slice_sizes=tuple(sizes), indices_are_sorted=False,
    )
    # gather puts the batch (index) dim first; move it to position d
    perm = list(range(1, rank))
    perm.insert(d, 0)
    if perm != list(range(rank)):
        g = apply("permute", g, dims=tuple(perm))
    return reshape(g, ctx.shape)


def _wrap_negative(index, n):
    zero = const(0, "i64", index.device, index.shape)
    neg = apply("compare", index, zero, direction="LT")
    return apply("select", neg, apply("add", index, const(n, "i64", index.device, index.shape)), index)


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n
