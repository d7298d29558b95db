"""Which output positions eager's CPU binary loop computes in its scalar tail.

Eager's float ``maximum``/``minimum`` answer a tie of signed zeros by the
loop that computed the position, not by IEEE's order: the vector loop
(``at::vec::maximum``: AVX's max/min) gives the second operand, the scalar
loop (``std::max``/``std::min``) the first. TensorIterator
(``aten/src/ATen/TensorIterator.cpp``, ``cpu/Loops.h``) runs a binary op as

- rows: the output's innermost dims coalesced while every operand's strides
  continue each other (a dim an operand broadcasts over breaks the run unless
  it broadcasts over the next one too), one call of the inner loop per row;
- at or above ``GRAIN_SIZE`` (32768) elements and with more than one thread,
  the flat range split in ``at::parallel_for``'s chunks
  (``ceil(numel / threads)`` each), a row cut where a chunk ends;
- per call of ``n`` elements: ``vectorized_loop`` over the first
  ``floor(n / run) * run`` (``run`` = two vectors) when both operands are
  contiguous along the row or one is a broadcast scalar there, ``basic_loop``
  (scalar) over the rest; a row along which both operands are broadcast runs
  ``basic_loop`` whole.

``run`` is asked of eager once per dtype (a ``maximum`` of -0.0 and +0.0
shows where its vector loop stops), so it is the machine's own (AVX2,
AVX512, or none). Operands that are not contiguous (TensorIterator would
reorder the dims) are not modelled: the caller keeps its vector-loop rule.

``amax``/``amin`` over contiguous trailing dims of four vectors or more
(:func:`inner_reduction`: ``vectorized_inner_reduction``'s four accumulators,
then lanes and tail with the scalar ``max``) are modelled too; reductions over
leading or non-contiguous dims, and runs split among threads, are not.
"""

from __future__ import annotations

import torch

from lazycore.ir.memo import Memo

from lazycore.trace import composites

from ..lowering import apply, broadcast, const, reshape

_GRAIN = 32768  # at::internal::GRAIN_SIZE
_PROBE = 255

_RUNS = Memo("torch.eager_vector_runs", 32)
"""dtype -> elements eager's binary ``vectorized_loop`` takes per step (0: it
never vectorizes that dtype; -1: the probe showed no prefix/tail split)."""


def vector_run(dtype: torch.dtype) -> int:
    run = _RUNS.get(dtype)
    if run is None:
        a = torch.full((_PROBE,), -0.0, dtype=dtype)
        first = torch.signbit(torch.maximum(a, torch.zeros((_PROBE,), dtype=dtype)))  # True: scalar tail
        k = int((~first).sum())
        run = -1
        if k == 0:
            run = 0
        elif not bool(first[:k].any()) and bool(first[k:].all()):
            run = next((c for c in (2, 4, 8, 16, 32, 64, 128) if (_PROBE // c) * c == k), -1)
        _RUNS.put(dtype, run)
    return run


def _strides(t, out_shape):
    """``t``'s element strides over ``out_shape`` (0 where it broadcasts), or None
    when it is not a contiguous tensor (or a number: broadcast everywhere)."""
    rank = len(out_shape)
    if not isinstance(t, torch.Tensor):
        return (0,) * rank
    if not t.is_contiguous():
        return None
    shape, stride = tuple(t.shape), tuple(t.stride())
    lead = rank - len(shape)
    return tuple(0 if d < lead or shape[d - lead] == 1 else stride[d - lead] for d in range(rank))


def _row(out_shape, strides):
    """(length of the coalesced innermost run, each operand's stride along it)."""
    size, inner = 1, None
    for d in reversed(range(len(out_shape))):
        n = out_shape[d]
        st = [s[d] for s in strides]
        if inner is None or size == 1:
            size, inner = size * n, (st if n != 1 or inner is None else inner)
            continue
        if n == 1:
            continue
        if all(i * size == s for i, s in zip(inner, st)):
            size *= n
            continue
        break
    return size, inner or [0] * len(strides)


def scalar_tail(out_shape, dtype: torch.dtype, operands, device):
    """Where eager's binary loop over ``operands`` (meta tensors or numbers) runs
    its scalar code: True (everywhere), False (nowhere), an ``i1`` handle of
    ``out_shape``, or None when not modelled (not contiguous, probe unclear)."""
    strides = [_strides(t, out_shape) for t in operands]
    if any(s is None for s in strides):
        return None
    numel = 1
    for n in out_shape:
        numel *= n
    if numel == 0:
        return False
    run = vector_run(dtype)
    if run < 0:
        return None
    length, inner = _row(out_shape, strides)
    # (cpu_kernel_vec: every operand contiguous along the row, or one a broadcast scalar there)
    vectorized = all(s == 1 for s in inner) or (
        len(inner) >= 2 and list(inner).count(0) == 1 and all(s in (0, 1) for s in inner))
    if run == 0 or not vectorized:
        return True
    threads = torch.get_num_threads()
    splits = []
    if numel >= _GRAIN and threads > 1:
        parts = min(threads, -(-numel // _GRAIN))
        chunk = -(-numel // parts)
        splits = [b for b in range(chunk, numel, chunk) if b % length]
    cut = (length // run) * run
    if not splits:
        if cut == length:
            return False
        if cut == 0:
            return True
    rows = numel // length
    grid = (rows, length)
    col = apply("iota", dim=1, shape=grid, dtype="i64", device=device)
    mask = apply("compare", col, _full(cut, grid, device), direction="GE")
    if splits:
        row = apply("iota", dim=0, shape=grid, dtype="i64", device=device)
        flat = apply("add", apply("mul", row, _full(length, grid, device)), col)
        for r in sorted({b // length for b in splits}):
            # row r's segments end at the chunk boundaries inside it
            edges = [r * length] + [b for b in splits if b // length == r] + [(r + 1) * length]
            in_row = apply("compare", row, _full(r, grid, device), direction="EQ")
            mask = apply("and", mask, apply("not", in_row))
            for lo, hi in zip(edges, edges[1:]):
                start = lo + ((hi - lo) // run) * run
                if start < hi:
                    tail = apply("and", apply("compare", flat, _full(start, grid, device), direction="GE"),
                                 apply("compare", flat, _full(hi, grid, device), direction="LT"))
                    mask = apply("or", mask, tail)
    return reshape(mask, tuple(out_shape))


def _full(value, shape, device):
    return composites.constant(value, "i64", device, shape)


def inner_reduction(x, r, ds, op, dtype: torch.dtype):
    """``r`` (``amax``/``amin`` of contiguous ``x`` over its trailing dims ``ds``, ``op``
    ``reduce_max``/``reduce_min``, four vectors or more each) as the element eager
    keeps of equal ones, or None where not modelled. ``binary_kernel_reduce_vec``'s
    ``vectorized_inner_reduction`` (``aten/src/ATen/native/cpu/Reduce.h``) runs each
    result's run of ``n`` elements as ``reduction128``: four accumulator vectors over
    the first ``n // (4 V) * 4 V`` elements (element ``i * 4V + j * V + l`` into lane
    ``l`` of accumulator ``j``; ``vec::maximum`` keeps the later of equal values), the
    four combined as ``max(max(a0, a1), max(a2, a3))`` (the later again), the lanes
    one after another with the scalar ``max`` (the first), then ``basic_loop`` over the
    rest (the result so far first). One chunk of ``parallel_reduce`` only."""
    run = vector_run(dtype)
    if run < 2 or run % 2:
        return None
    lanes = run // 2
    block = 4 * lanes
    rank = len(x.shape)
    rows = 1
    for n_ in x.shape[:rank - len(ds)]:
        rows *= n_
    n = 1
    for n_ in x.shape[rank - len(ds):]:
        n *= n_
    count = n // block
    if count == 0 or (rows * n >= _GRAIN and torch.get_num_threads() > 1):
        return None
    flat = reshape(x, (rows, n))
    body_len = count * block
    body = reshape(_cut(flat, 0, body_len), (rows, count * block))
    grid = (rows, count, 4, lanes)
    i = apply("iota", dim=1, shape=grid, dtype="i64", device=x.device)
    j = apply("iota", dim=2, shape=grid, dtype="i64", device=x.device)
    lane = apply("iota", dim=3, shape=grid, dtype="i64", device=x.device)
    # the first lane holding the maximum, in it the last accumulator, in that the last vector
    key = apply("add", apply("mul", lane, _full(-4 * count, grid, x.device)),
                apply("add", apply("mul", j, _full(count, grid, x.device)), i))
    value = _pick(reshape(body, (rows, count * block)), reshape(key, (rows, count * block)), op)  # (rows,)
    if body_len < n:
        seq = apply("concatenate", reshape(value, (rows, 1)), _cut(flat, body_len, n), dim=1)
        width = n - body_len + 1
        first = apply("neg", apply("iota", dim=1, shape=(rows, width), dtype="i64", device=x.device))
        value = _pick(seq, first, op)
    value = reshape(value, tuple(r.shape))
    return apply("select", apply("compare", r, r, direction="NE"), r, value)  # (NaN stays)


def _cut(flat, lo, hi):
    rows = flat.shape[0]
    return apply("slice", flat, start=[0, lo], limit=[rows, hi], strides=[1, 1])


def _pick(x, key, op):
    """Along ``x``'s last dim: of the elements equal to its ``op``, the one with the greatest ``key``."""
    shape = tuple(x.shape)
    kept = shape[:-1] + (1,)
    last = len(shape) - 1
    best = broadcast(reshape(apply(op, x, dims=(last,)), kept), shape)
    equal = apply("compare", x, best, direction="EQ")
    low = const(-(2 ** 62), "i64", x.device, shape)
    at = broadcast(reshape(apply("reduce_max", apply("select", equal, key, low), dims=(last,)), kept), shape)
    only = apply("and", equal, apply("compare", key, at, direction="EQ"))
    fill = float("-inf") if op == "reduce_max" else float("inf")
    return apply(op, apply("select", only, x, const(fill, x.dtype, x.device, shape)), dims=(last,))
