"""Packed sequences on lazy tensors: packing, padding and a packed batch's step layout.

``pack_padded_sequence`` and ``pad_packed_sequence`` reach the device as
``_pack_padded_sequence`` and ``_pad_packed_sequence``, whose kernels off the
CPU copy one slice per time step (their sizes from the CPU ``batch_sizes``):
every step's slices, and the packed length N (the sum of the lengths) and the
longest length T, were in the program, which compiled again for every batch
of other lengths (a training step of an ``LSTM(8, 8)`` over random lengths:
one compile, 5-11 s, every step).

Here each is one lookup of uploaded positions (:class:`Steps`: where each
element of each sequence sits, from the lengths the host holds), and a count
that varies at the user's line (N, or T where the padded result is as long
as the longest sequence) is uploaded in a bucket and handed out as its valid
region (:func:`..counts.rows`), so the barriers over it pad it and a bucket of
counts runs one program. The recurrent layers' packed forms
(:mod:`.recurrent`) run their loops over the same positions.
"""

from __future__ import annotations

import numpy as np
import torch

from lazycore.ir.graph import Data, operand_values
from lazycore.runtime import buckets
from lazycore.trace.scalar_policy import POLICY

from .. import counts
from ..lowering import apply, const, lowers
from ..tensor import Tensor, from_host, read


# Rows at positions the host laid out (in range by construction): a lookup
# and its gradient without index_select's value check, whose nodes would
# hold the packed count in every step's graph beside the lookup's own.
_OPS = torch.library.Library("lazycore", "FRAGMENT")
_OPS.define("take_rows(Tensor self, Tensor index) -> Tensor")
_OPS.define("put_rows(Tensor rows, Tensor index, SymInt count) -> Tensor")
_OPS.impl("take_rows", lambda x, index: x.new_empty((index.shape[0], *x.shape[1:])), "Meta")
_OPS.impl("put_rows", lambda rows, index, count: rows.new_empty((count, *rows.shape[1:])), "Meta")
_OPS.impl("take_rows", lambda x, index: x.index_select(0, index), "CPU")
_OPS.impl("put_rows", lambda rows, index, count: rows.new_zeros((count, *rows.shape[1:])).index_add_(0, index, rows),
          "CPU")


@lowers(torch.ops.lazycore.take_rows.default)
def _take_rows(ctx, x, index):
    # (a 1-d index with its vector dimension past its last: no reshape, whose
    # size attribute would hold the packed count where a bucket hides it)
    return apply("gather", x, index, offset_dims=tuple(range(1, len(x.shape))),
                 collapsed_slice_dims=(0,), operand_batching_dims=(), start_indices_batching_dims=(),
                 start_index_map=(0,), index_vector_dim=1, slice_sizes=(1, *x.shape[1:]), indices_are_sorted=False)


@lowers(torch.ops.lazycore.put_rows.default)
def _put_rows(ctx, rows, index, count):
    return apply("scatter", const(0, ctx.dtype, ctx.device, (count, *rows.shape[1:])), index, rows,
                 update_window_dims=tuple(range(1, len(rows.shape))), inserted_window_dims=(0,),
                 input_batching_dims=(), scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=(0,),
                 index_vector_dim=1, mode="add")


def _keep_index(ctx, inputs, output):
    ctx.save_for_backward(inputs[1])
    ctx.count = inputs[0].shape[0] if len(inputs) == 2 else None


def _take_back(ctx, grad):
    index, = ctx.saved_tensors
    return torch.ops.lazycore.put_rows(grad, index, ctx.count), None


def _put_back(ctx, grad):
    index, = ctx.saved_tensors
    return torch.ops.lazycore.take_rows(grad, index), None, None


torch.library.register_autograd("lazycore::take_rows", _take_back, setup_context=_keep_index, lib=_OPS)
torch.library.register_autograd("lazycore::put_rows", _put_back, setup_context=_keep_index, lib=_OPS)


def take_rows(x, index):
    """``x[index]`` along the first dimension, ``index`` in range (laid out by the host)."""
    return torch.ops.lazycore.take_rows(x, index)


class Steps:
    """A packed batch's layout, from its ``batch_sizes`` (how many sequences
    are longer than each step; sorted longest first): its ``steps`` (the
    longest length), ``batch`` and ``count`` of elements, where each step
    starts in the packed data, and the packed position of each step of each
    sequence."""

    def __init__(self, batch_sizes: np.ndarray):
        self.sizes = batch_sizes.astype(np.int64)
        self.steps = len(self.sizes)
        self.batch = int(self.sizes[0])
        self.count = int(self.sizes.sum())
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)

    def positions(self, steps: int) -> np.ndarray:
        """``(steps, batch)``: the packed position of step ``t`` of sequence
        ``b``, -1 past its end (and for every step from the longest length
        to ``steps``)."""
        out = np.full((steps, self.batch), -1, np.int64)
        b = np.arange(self.batch)
        for t in range(min(steps, self.steps)):
            live = b < self.sizes[t]
            out[t, live] = self.starts[t] + b[live]
        return out

    def packing(self) -> np.ndarray:
        """``(count,)``: the place in a ``(steps, batch)`` layout of each
        packed element, in packed order (step by step, longest sequences first)."""
        return np.concatenate([t * self.batch + np.arange(n) for t, n in enumerate(self.sizes)]).astype(np.int64)


def host_steps(batch_sizes) -> Steps | None:
    """The :class:`Steps` of a CPU ``batch_sizes`` as packing makes it; None
    for anything else (the composite takes it, and raises eager's error)."""
    if isinstance(batch_sizes, Tensor) or batch_sizes.device.type != "cpu" or batch_sizes.dim() != 1 \
            or batch_sizes.dtype != torch.int64 or batch_sizes.numel() == 0 or int(batch_sizes[0]) < 1:
        return None
    return Steps(batch_sizes.numpy())


def span(steps: Steps) -> int:
    """How many steps a packed batch's loops run: its longest length, or
    the widest bucket its lengths have taken at the user's line once that
    length has varied there (:func:`..counts.width`: the steps past it leave
    every state as it is)."""
    n = steps.steps
    if n >= 2 and POLICY.varies(("packed steps", steps.batch), (n,)):
        return counts.width(n, ("packed steps", steps.batch))
    return n


def _pack(input, lengths, batch_first):
    if isinstance(lengths, Tensor):
        lengths = lengths.cpu()
    # eager's checks (its errors) and batch sizes, from a batch of one element per step
    _, batch_sizes = torch._pack_padded_sequence(torch.zeros(*input.shape[:2], *([1] if input.dim() > 1 else [])),
                                                 lengths, batch_first)
    steps = Steps(batch_sizes.numpy())
    length, batch = (input.shape[1], input.shape[0]) if batch_first else input.shape[:2]
    if steps.steps > length:
        # (eager's CPU kernel reads past its input here)
        raise RuntimeError(f"pack_padded_sequence: a length of {steps.steps} is longer than the input's {length} steps")
    place = steps.packing()  # (in the (steps, batch) layout; a batch-first input's is (batch, steps))
    if batch_first:
        place = (place % batch) * length + place // batch
    flat = input.reshape(length * batch, *input.shape[2:])
    index = counts.rows(place, input.device, "packed", length * batch)
    return take_rows(flat, index), batch_sizes


def _pad(data, batch_sizes, batch_first, padding_value, total_length):
    steps = host_steps(batch_sizes)
    if not isinstance(data, Tensor) or steps is None or data.dim() < 1:
        return torch.ops.aten._pad_packed_sequence.default._op_dk(torch._C.DispatchKey.CompositeImplicitAutograd,
                                                                  data, batch_sizes, batch_first, padding_value,
                                                                  total_length)
    # eager's checks and lengths
    _, lengths = torch._pad_packed_sequence(torch.zeros(data.shape[0], 1), batch_sizes, batch_first, 0.0,
                                            total_length)
    counted(data)
    span = max(total_length, steps.steps)
    where = counts.rows(steps.positions(span), data.device, "padded steps")
    rest = tuple(data.shape[1:])
    out = take_rows(data, where.clamp(min=0).reshape(-1)).reshape(span, steps.batch, *rest)
    out = out.masked_fill(where.lt(0).reshape(span, steps.batch, *(1 for _ in rest)), padding_value)
    return (out.transpose(0, 1) if batch_first else out), lengths


def counted(data) -> int | None:
    """The bucket an uploaded packed batch's element count is padded to: a
    ``PackedSequence`` packed on the CPU and moved to the device (a
    collate function's), whose data, or the tokens its data was looked up
    from (:func:`_count_inputs`), are inputs of that count. Marked dynamic
    once the count varies at the user's line, the barrier pads them as a
    loader's batch (:func:`lazycore.torch.dynamic`); None for data packed on
    the device (packing there buckets it, :func:`..counts.rows`) or a count
    that has not varied."""
    n = data.shape[0]
    if n < 2 or data._steps:
        return None
    leaves = _count_inputs(read(data)._value, n)
    if not leaves:
        return None
    if not any(leaf.dynamic for leaf in leaves) \
            and not POLICY.varies(("packed data", tuple(data.shape[1:]), data.dtype), (n,)):
        return None
    for leaf in leaves:
        if 0 not in leaf.dynamic:
            buckets.mark(leaf, 0)
    return buckets.bucket(n)


def _count_inputs(value, n: int, depth: int = 8) -> list:
    """The inputs (device data) whose rows are ``value``'s ``n`` rows: ``value``
    itself, or the inputs it was computed from row by row within ``depth``
    ops (an embedding of packed tokens: a lookup's indices, a product's
    rows, elementwise operands of its shape), never a table looked up or a
    weight (whose first dimension may be ``n`` by chance)."""
    found, seen, stack = [], set(), [(value[0], depth)]
    while stack:
        node, left = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if type(node) is Data:
            if node.types[0].shape[:1] == (n,) and node.sharding is None:
                found.append(node)
            continue
        if left == 0 or node.op not in _ROW_OPS or node.types[0].shape[:1] != (n,):
            continue
        for i, v in enumerate(operand_values(node)):
            if i in _ROW_OPS[node.op] and v[0].types[v[1]].shape[:1] == (n,):
                stack.append((v[0], left - 1))
    return found


_ROW_OPS = {"gather": (1,), "dot_general": (0,), "reshape": (0,), "convert": (0,), "add": (0, 1), "mul": (0, 1),
            "sub": (0, 1), "div": (0, 1), "check": (0,), "clamp": (1,), "select": (1, 2)}
"""The ops whose result's rows are their operands' (those listed) row for row."""


def unpacking(steps: Steps, span: int, device):
    """The positions (flat, clamped to the data: read, then masked) and the
    live mask ``(span, batch, 1)`` of a ``(span, batch)`` layout of a packed
    batch, on ``device``: a recurrent layer's loop runs over them."""
    where = steps.positions(span)
    index = from_host(torch.from_numpy(np.maximum(where, 0).reshape(-1)), device)
    live = from_host(torch.from_numpy((where >= 0)[:, :, None]), device)
    return index, live


def packed_rows(steps: Steps, device, given: int | None = None):
    """Where each packed element sits in a ``(steps, batch)`` layout, on
    ``device`` (in the count's bucket once it varies, as packing puts it, or
    as ``given``: :func:`counted`'s)."""
    return counts.rows(steps.packing(), device, "packed", given=given)


KERNELS = {torch.ops.aten._pack_padded_sequence.default: _pack, torch.ops.aten._pad_packed_sequence.default: _pad}
"""Each op's kernel here (above autograd; the dispatcher's too, for the op
reached below autograd, as under ``torch.inference_mode``)."""

_LIB = torch.library.Library("aten", "IMPL")
_LIB.impl("_pack_padded_sequence", _pack, "AutogradLazy")
_LIB.impl("_pad_packed_sequence", _pad, "AutogradLazy")
