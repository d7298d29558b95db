"""Lowerings of ``lazy.lane_sum``, ``lazy.lane_moments`` and
``lazy.cascade_sum`` (see :mod:`lazycore.dialect.lanes`): eager's CPU loops
unrolled into StableHLO over ``(..., lanes)`` slices of the rows.

XLA keeps the order of elementwise float ops (it reassociates only its own
``reduce``), so the adds below run in the sequence written; a product whose
rounding eager keeps is fenced by ``lazy-keep-roundings``, and where eager's
kernel contracts a product into its sum (probed against its bits, float32
rows of 5 to 4,096) the sum is one fused multiply-add: a product marked
``lazy.fused``, which that pass ties to its sum so that XLA's CPU backend
contracts the two. (float32's was a float64 sum of the exact product behind
a replica-id fence, 5 ops where this is 1 and the tie's 2, and rounded twice
within 2**-29 of a float32 midpoint.) The sequence is static (the row length
is in the type), so XLA fuses it into one loop over the rows. A ``lane_sum``
row of more than :data:`UNROLL_VECTORS` vectors adds its vectors in a
``stablehlo.while`` over blocks of :data:`BLOCK` (GPT-2's 50,257 classes are
3,141 vectors), the same adds in the same order: a ``reduce`` over the
vectors' axis would not keep it (XLA's CPU reduce of a 512 x 3,141 x 16 array
over its middle axis, a YNNPACK fusion, gave 7,960 of 8,192 lane sums off the
sequential ones).
"""

from __future__ import annotations

import numpy as np

from lazycore.dialect import TensorType, attr
from lazycore.dialect.lanes import GRAIN, ceil_log2, level_step

from . import hlo
from .collectives import partitioned, whole_along
from .elementwise import _unseen_divisor
from .elementwise import fused_multiply_add as _fma
from .reduction import reduce
from .registry import lowering

CHUNK = 16
"""Vectors per Welford chunk (``kChunkSize`` of eager's ``moments_utils.h``)."""


def _slab(x, lo: int, hi: int, dim: int):
    """``x[lo:hi]`` along ``dim``."""
    t = hlo.type_of(x)
    start, limit = [0] * t.rank, list(t.shape)
    start[dim], limit[dim] = lo, hi
    shape = t.shape[:dim] + (hi - lo,) + t.shape[dim + 1:]
    return hlo.value("slice", [x], TensorType(shape, t.dtype), start_indices=hlo.i64s(start),
                     limit_indices=hlo.i64s(limit), strides=hlo.i64s([1] * t.rank))


def _cut(x, lo: int, hi: int):
    """``x[..., lo:hi]``."""
    return _slab(x, lo, hi, hlo.type_of(x).rank - 1)


def _reshape(x, shape):
    return hlo.value("reshape", [x], TensorType(tuple(shape), hlo.type_of(x).dtype))


def _add(a, b):
    return hlo.binary("add", a, b)


def _sub(a, b):
    return hlo.binary("subtract", a, b)


def _mul(a, b):
    return hlo.binary("multiply", a, b)


def _splat(value, like):
    t = hlo.type_of(like)
    return hlo.constant(np.asarray(value, dtype=_numpy(t.dtype)), TensorType(t.shape, t.dtype))


def _numpy(dtype: str):
    return {"f32": np.float32, "f64": np.float64, "f16": np.float16}[dtype] if dtype != "bf16" else np.float32


UNROLL_VECTORS = 256
"""Rows of up to this many whole vectors are summed as a static sequence of
slices and adds; longer ones by a ``stablehlo.while`` over blocks of
:data:`BLOCK` vectors (the program's size and XLA's compile time grow with
the unrolled sequence; the loop's cost is per iteration)."""

BLOCK = 64
"""Vectors added in sequence per iteration of the loop form."""

ONE_ROW_BLOCK = 8
"""A single row (a whole tensor reduced: ``clip_grad_norm_``'s norms) has a vector
per slice, which an unrolled sequence does not run faster: past this many
vectors its sum is the loop form with blocks of this many. Ten norms of 8,192
float32s compiled in 1.6 s unrolled in blocks of 64 and 0.75 s so, and ran as
fast (600,000: 0.95 s against 0.58, 13.7 ms against 14.1)."""


def _whole_vectors(lhs, rhs, lanes: int, k: int, fused: bool):
    """The lane-wise sums of the first ``k`` whole vectors: vector 0, then each
    next one added (``fused``: its products contracted into the sum) in order."""

    def step(acc, lo, hi, src_lhs, src_rhs, src_products):
        if fused:
            return _fma(_cut(src_lhs, lo, hi), _cut(src_rhs, lo, hi), acc)
        if src_products is None:  # (a product of slices: no full product array read outside the loop)
            return _add(acc, _mul(_cut(src_lhs, lo, hi), _cut(src_rhs, lo, hi)))
        return _add(acc, _cut(src_products, lo, hi))

    size, unrolled = (ONE_ROW_BLOCK, ONE_ROW_BLOCK) if hlo.type_of(lhs).rank == 1 else (BLOCK, UNROLL_VECTORS)
    if k <= unrolled:
        products = _mul(lhs, rhs)
        acc = _cut(products, 0, lanes)
        for i in range(1, k):
            acc = step(acc, i * lanes, (i + 1) * lanes, lhs, rhs, products)
        return acc
    acc = _mul(_cut(lhs, 0, lanes), _cut(rhs, 0, lanes))
    blocks = (k - 1) // size
    acc = _loop(acc, [lhs, rhs] if fused else [_mul(lhs, rhs)], lanes, blocks, size,
                lambda acc, block: _block(acc, block, lanes, size, step, fused))
    for i in range(1 + blocks * size, k):
        acc = step(acc, i * lanes, (i + 1) * lanes, lhs, rhs, None)
    return acc


def _block(acc, block, lanes, size, step, fused):
    """``acc`` with the ``size`` vectors of ``block`` (``[lhs, rhs]`` or
    ``[products]`` slices of ``size * lanes`` elements) added in order."""
    for b in range(size):
        lo, hi = b * lanes, (b + 1) * lanes
        acc = step(acc, lo, hi, *((*block, None) if fused else (None, None, block[0])))
    return acc


def _loop(acc, sources, lanes: int, blocks: int, size: int, body):
    """``acc`` after ``blocks`` iterations of ``body(acc, block)``, iteration
    ``j``'s ``block`` the ``sources``' elements ``[(1 + j * size) * lanes,
    (1 + (j + 1) * size) * lanes)`` along the last dimension (in order, unlike a ``reduce``)."""
    st = hlo.type_of(sources[0])

    def step(j, carried):
        acc_in, *srcs = carried
        offset = hlo.binary("add", hlo.binary("multiply", j, hlo.constant(np.array(size * lanes, np.int32))),
                            hlo.constant(np.array(lanes, np.int32)))
        zero = hlo.constant(np.array(0, np.int32))
        piece = TensorType(st.shape[:-1] + (size * lanes,), st.dtype)
        block = [hlo.value("dynamic_slice", [v] + [zero] * (st.rank - 1) + [offset], piece,
                           slice_sizes=hlo.i64s(piece.shape)) for v in srcs]
        return [body(acc_in, block), *srcs]

    return hlo.counted_loop(blocks, [acc] + list(sources), step)[0]


@lowering("lane_sum")
def _lane_sum(op, rewriter):
    """``vec::map2_reduce_all(x * y, +)`` per row (``aten/src/ATen/cpu/vec/functional_base.h``).
    Rows of more than :data:`UNROLL_VECTORS` vectors add theirs in a loop
    (:func:`_loop`), in the same order."""
    lhs, rhs = op.operands
    lanes, halving, fused = int(attr(op, "lanes")), bool(attr(op, "halving")), bool(attr(op, "fused"))
    n = hlo.type_of(lhs).shape[-1]
    kept = hlo.type_of(op.results[0]).shape
    if n == 0:
        return hlo.constant(0, hlo.type_of(op.results[0]))
    if n < lanes:  # one partial vector: its lanes in order
        products = _mul(lhs, rhs)
        acc = _cut(products, 0, 1)
        for j in range(1, n):
            acc = _add(acc, _cut(products, j, j + 1))
        return _reshape(acc, kept)
    k = n // lanes
    acc = _whole_vectors(lhs, rhs, lanes, k, fused)
    r = n - k * lanes
    if r:  # the partial vector's products contracted into the first lanes
        head = _fma(_cut(lhs, k * lanes, n), _cut(rhs, k * lanes, n), _cut(acc, 0, r))
        t = hlo.type_of(acc)
        acc = hlo.value("concatenate", [head, _cut(acc, r, lanes)], t, dimension=hlo.i64(t.rank - 1))
    if halving:  # float32's vec_reduce_all: lane i with lane i + width, halving the width
        width = lanes
        while width > 1:
            width //= 2
            acc = _add(_cut(acc, 0, width), _cut(acc, width, 2 * width))
        return _reshape(acc, kept)
    return _reshape(_lanes_in_order(acc, lanes), kept)


def _lanes_in_order(acc, lanes: int):
    """``acc``'s ``lanes`` lanes (its last dimension) added in order, that dimension kept (size 1)."""
    total = _cut(acc, 0, 1)
    for j in range(1, lanes):
        total = _add(total, _cut(acc, j, j + 1))
    return total


@lowering("norm_squares")
def _norm_squares(op, rewriter):
    """The 2-norm kernel's sum of squares per row (``ReduceOpsKernel.cpp``'s vectorized
    ``norm_kernel_tensor_iterator_impl``; its tail loop, vectorized by the compiler in
    groups of ``tail_group``, after the lanes)."""
    x = op.operands[0]
    lanes, group = int(attr(op, "lanes")), int(attr(op, "tail_group"))
    n = hlo.type_of(x).shape[-1]
    kept = hlo.type_of(op.results[0]).shape
    whole = n - n % lanes
    if whole:
        vectors = x if whole == n else _cut(x, 0, whole)
        total = _reshape(_lanes_in_order(_whole_vectors(vectors, vectors, lanes, whole // lanes, False), lanes), kept)
    else:
        total = hlo.constant(0, hlo.type_of(op.results[0]))
    grouped = whole + group * ((n - whole) // group)
    for i in range(whole, n):
        v = _reshape(_cut(x, i, i + 1), kept)
        total = _add(total, _mul(v, v)) if i < grouped else _fma(v, v, total)
    return total


def _merge(dtype, into, add, vector: bool):
    """``AddMoments``/``AddMomentsVec``: ``add``'s moments ``(count, m1, m2)`` merged
    into ``into``'s. The counts are static, so the weight is a constant."""
    m0, m1, m2 = into
    m0_add, m1_add, m2_add = add
    count = m0 + m0_add
    t = _numpy(dtype)
    c_value = t(0) if count == 0 else t(m0_add) / t(count)
    c = _splat(c_value, m1)
    delta = _sub(m1_add, m1)
    if vector:
        # probed (float32 rows of 136 to 4,096: every mean and rstd eager's): the
        # weighted delta rounded apart, and the squares' term delta * (delta * (c *
        # m0)), the scalar factor first (so an empty accumulator's m0 = 0 keeps an
        # overflowing delta finite), fused into m2 + m2_add
        scaled = _mul(delta, _splat(t(c_value * t(m0)), m1))
        return count, _add(m1, _mul(c, delta)), _fma(delta, scaled, _add(m2, m2_add))
    square = _mul(_mul(delta, delta), c)  # left to right: a lane's overflow squares to inf, NaN at m0 = 0
    return count, _fma(c, delta, m1), _add(m2, _fma(square, _splat(t(m0), m1), m2_add))


def _divide(a, b):
    """``a / b`` (``b`` a constant) correctly rounded: XLA would multiply by ``1 / b``."""
    t = hlo.type_of(b)
    if t.dtype in ("f32", "f64"):
        b = _unseen_divisor(b, a)
    return hlo.binary("divide", a, b)


def _at(x, i: int, dim: int):
    """``x`` at index ``i`` of ``dim``, that dimension dropped."""
    shape = hlo.type_of(x).shape
    return _reshape(_slab(x, i, i + 1, dim), shape[:dim] + shape[dim + 1:])


@lowering("lane_moments")
def _lane_moments(op, rewriter):
    """``RowwiseMoments`` per row (``aten/src/ATen/native/cpu/moments_utils.h``)."""
    x = op.operands[0]
    lanes = int(attr(op, "lanes"))
    xt = hlo.type_of(x)
    dtype, n_total = xt.dtype, xt.shape[-1]
    batch = xt.shape[:-1]
    t = _numpy(dtype)
    n = n_total // lanes
    m = -(-n // CHUNK)
    whole = n // CHUNK
    depth = ceil_log2(m)
    weights = [t(1) / t(j + 1) for j in range(CHUNK)]

    def welford(vectors, count):
        """One chunk's Welford over ``count`` vectors (``vectors(j)``), from zero."""
        m1 = m2 = hlo.constant(0, hlo.type_of(vectors(0)))
        for j in range(count):
            v = vectors(j)
            d = _sub(v, m1)
            m1 = _fma(d, _splat(weights[j], v), m1)
            m2 = _fma(d, _sub(v, m1), m2)
        return m1, m2

    chunks = []
    if whole:  # the whole chunks side by side: (..., chunk, lanes) per step
        body = _reshape(_cut(x, 0, whole * CHUNK * lanes), batch + (whole, CHUNK, lanes))
        m1, m2 = welford(lambda j: _at(body, j, len(batch) + 1), CHUNK)
        chunks += [(CHUNK, _at(m1, i, len(batch)), _at(m2, i, len(batch))) for i in range(whole)]
    if n > whole * CHUNK:
        base = whole * CHUNK * lanes
        m1, m2 = welford(lambda j: _cut(x, base + j * lanes, base + (j + 1) * lanes), n - whole * CHUNK)
        chunks.append((n - whole * CHUNK, m1, m2))
    vt = TensorType(batch + (lanes,), dtype)
    empty = lambda: (0, hlo.constant(0, vt), hlo.constant(0, vt))  # noqa: E731
    stack = [empty() for _ in range(depth)]
    for i, moments in enumerate(chunks):
        stack[0] = _merge(dtype, stack[0], moments, True)
        mask, j = i + 1, 1
        while j < depth and (mask & 1) == 0:
            stack[j] = _merge(dtype, stack[j], stack[j - 1], True)
            stack[j - 1] = empty()
            mask >>= 1
            j += 1
    for i in range(1, depth):
        stack[0] = _merge(dtype, stack[0], stack[i], True)
    st = TensorType(batch, dtype)
    count, m1, m2 = 0, hlo.constant(0, st), hlo.constant(0, st)
    for i in range(n * lanes, n_total):  # the scalar tail's Welford
        v = _reshape(_cut(x, i, i + 1), batch)
        d = _sub(v, m1)
        count += 1
        m1 = _add(m1, _divide(d, _splat(t(count), v)))
        m2 = _add(m2, _mul(d, _sub(v, m1)))
    _, lane_m1, lane_m2 = stack[0]
    for lane in range(lanes):
        count, m1, m2 = _merge(dtype, (count, m1, m2), (n, _at(lane_m1, lane, len(batch)), _at(lane_m2, lane, len(batch))),
                               False)
    # The mean leaves through an exact divide by one: XLA counts a divide expensive and does not
    # copy it (and the unrolled chain behind it) into a consumer that reads each element many
    # times, a broadcast over the row (Swin's window pad after its layer norm). Copied, the
    # chain was invariant in that loop and LLVM's loop vectorizer walked it along every path
    # (no memo; exponential in its shared steps): rows of 16 vectors never finished compiling.
    return _divide(m1, _splat(t(1), m1)), _divide(m2, _splat(t(n_total), m2))


def _chain(x):
    """The in-order sum from zero along ``x``'s last dimension, which is dropped."""
    t = hlo.type_of(x)
    acc = hlo.constant(0, TensorType(t.shape[:-1], t.dtype))
    for i in range(t.shape[-1]):
        acc = _add(acc, _at(x, i, t.rank - 1))
    return acc


@lowering("cascade_sum")
def _cascade_sum(op, rewriter):
    """``nll_loss``'s cascade per row (``aten/src/ATen/native/LossNLL.cpp``,
    ``nll_loss_out_frame``). Level ``j`` receives a sequence of values; it is
    flushed after its first one and after each ``step`` more, so its flushed
    sums are the first value and the in-order sums of the runs of ``step``
    after it, which make level ``j + 1``'s sequence, and what follows the
    last full run is level ``j``'s remainder. The remainders are added from
    zero, level 0 first; a level receiving one value passes it up whole.
    Over a mesh the row is gathered whole first (:func:`.collectives.whole_along`):
    the cuts cross the blocks of a row split by a batch axis."""
    x = whole_along(op, op.operands[0])
    step, levels = int(attr(op, "step")), int(attr(op, "levels"))
    t = hlo.type_of(x)
    kept, last = t.shape[:-1], t.rank - 1
    total = hlo.constant(0, TensorType(kept, t.dtype))
    level = x
    for j in range(levels):
        m = hlo.type_of(level).shape[-1]
        if m == 0:
            break
        if j == levels - 1:
            return _add(total, _chain(level))
        if m == 1:  # flushed up through every level unchanged (from zero each time)
            return _add(total, _chain(level))
        runs = (m - 1) // step
        tail = 1 + runs * step
        if tail < m:
            total = _add(total, _chain(_cut(level, tail, m)))
        first = _cut(level, 0, 1)
        up = _reshape(_chain(first), kept + (1,))
        if runs:
            sums = _chain(_reshape(_cut(level, 1, tail), kept + (runs, step)))
            vt = TensorType(kept + (1 + runs,), t.dtype)
            up = hlo.value("concatenate", [up, sums], vt, dimension=hlo.i64(last))
        level = up
    return total


def _in_order(x, dim: int):
    """The sum along ``dim`` (dropped) in index order, from its first element."""
    acc = _at(x, 0, dim)
    for i in range(1, hlo.type_of(x).shape[dim]):
        acc = _add(acc, _at(x, i, dim))
    return acc


def _levels(rows):
    """ATen's ``multi_row_sum`` over ``rows``' second-to-last dimension (``S``
    rows of ``W`` columns; None for none): each run of ``step`` rows summed in
    order into level 0 and flushed into level 1, level 1 into level 2 after
    every ``step`` flushes, level 2 into level 3 likewise (level 3 keeps all);
    the rows after the last whole run summed into level 0, which then takes
    levels 1, 2 and 3 in order. The runs of one level are one chain across
    all of them at once."""
    t = hlo.type_of(rows)
    size, width, lead = t.shape[-2], t.shape[-1], t.shape[:-2]
    rows_dim = t.rank - 2
    if size == 0:
        return None
    step = level_step(size)

    def runs(values):
        """(sums of ``values``' whole runs of ``step`` or None, sum of what follows them or None)."""
        m = hlo.type_of(values).shape[-2]
        whole = m // step * step
        rest = _in_order(_slab(values, whole, m, rows_dim), rows_dim) if whole < m else None
        if not whole:
            return None, rest
        grouped = _reshape(_slab(values, 0, whole, rows_dim), lead + (whole // step, step, width))
        return _in_order(grouped, rows_dim + 1), rest

    level, acc0 = runs(rows)
    left = []
    for _ in (1, 2):  # levels 1 and 2: their flushed sums go up, what is left stays
        if level is None:
            break
        level, rest = runs(level)
        left.append(rest)
    top = _in_order(level, rows_dim) if level is not None else None
    total = None
    for part in [acc0, *left, top]:
        if part is not None:
            total = part if total is None else _add(total, part)
    return total


def _four_at_a_time(items):
    """ATen's ``row_sum`` over ``items``' second-to-last dimension (``V`` items
    of ``w`` elements, None for none): items ``4i + k`` into partial sum ``k``
    (:func:`_levels` over the groups of four), the items after the last group
    into partial 0, then partials 0 to 3 in order."""
    t = hlo.type_of(items)
    count, width, lead = t.shape[-2], t.shape[-1], t.shape[:-2]
    groups = count // 4
    partial = None
    if groups:
        grouped = _reshape(_slab(items, 0, 4 * groups, t.rank - 2), lead + (groups, 4 * width))
        partial = _levels(grouped)
    first = _cut(partial, 0, width) if partial is not None else None
    for i in range(4 * groups, count):
        item = _at(items, i, t.rank - 2)
        first = item if first is None else _add(first, item)
    if partial is not None:
        for k in range(1, 4):
            first = _add(first, _cut(partial, k * width, (k + 1) * width))
    return first


def _eager_row_sum(x, lanes: int):
    """``cascade_sum``'s sum of each row of ``x`` (its last dimension) on one
    thread: ``vectorized_inner_sum`` for a row of ``lanes`` or more, else
    ``scalar_inner_sum``; the result stored into a zero (``+=``)."""
    t = hlo.type_of(x)
    n, kept = t.shape[-1], t.shape[:-1]
    if n == 0:
        return hlo.constant(0, TensorType(kept, t.dtype))
    if n < lanes:
        return hlo.plus_zero(_reshape(_four_at_a_time(_reshape(x, kept + (n, 1))), kept))
    vectors = n // lanes
    lanes_sum = _four_at_a_time(_reshape(_cut(x, 0, vectors * lanes), kept + (vectors, lanes)))
    total = None
    for k in range(vectors * lanes, n):  # the tail, from zero, then the lanes
        total = _at(x, k, t.rank - 1) if total is None else _add(total, _at(x, k, t.rank - 1))
    for lane in range(lanes):
        value = _at(lanes_sum, lane, t.rank - 1)
        total = value if total is None else _add(total, value)
    return hlo.plus_zero(total)


@lowering("vector_sum")
def _vector_sum(op, rewriter):
    """``torch.sum``'s CPU kernel per row (``aten/src/ATen/native/cpu/SumKernel.cpp``,
    ``cascade_sum``; ``parallel_reduce``'s ``two_pass_reduction`` for ``threads``
    above 1): every add a static slice-and-add, the runs of a level vectorized
    across the row, so the program grows with the row's log, not its length."""
    x = whole_along(op, op.operands[0])  # (over a mesh, each cut would cross devices' blocks)
    lanes, threads = int(attr(op, "lanes")), int(attr(op, "threads"))
    t = hlo.type_of(x)
    n, kept = t.shape[-1], t.shape[:-1]
    if threads == 1 or n < GRAIN:
        return _eager_row_sum(x, lanes)
    used = min(threads, -(-n // GRAIN))  # at::parallel_for's chunks of the row
    chunk = -(-n // used)
    sums = [_reshape(_eager_row_sum(_cut(x, lo, min(n, lo + chunk)), lanes), kept + (1,))
            for lo in range(0, n, chunk)]
    sums += [hlo.constant(0, TensorType(kept + (1,), t.dtype))] * (threads - len(sums))
    buffer = hlo.value("concatenate", sums, TensorType(kept + (threads,), t.dtype), dimension=hlo.i64(t.rank - 1))
    return _eager_row_sum(buffer, lanes)


@lowering("column_sum")
def _column_sum(op, rewriter):
    """``torch.sum``'s CPU kernel over leading dimensions (``SumKernel.cpp``,
    ``vectorized_outer_sum`` for ``lanes`` columns or more, else
    ``scalar_outer_sum``): the columns in whole blocks of four vectors (of four
    columns) each a cascade of levels down the rows (:func:`_levels`), the
    rest each the rows four at a time (:func:`_four_at_a_time`); all columns
    of one form at once."""
    x = op.operands[0]
    lanes = int(attr(op, "lanes"))
    t = hlo.type_of(x)
    rows, width = t.shape[-2], t.shape[-1]
    out = TensorType(t.shape[:-2] + (width,), t.dtype)
    if rows == 0 or width == 0:
        return hlo.constant(0, out)
    if partitioned(op):
        # over a mesh the rows are a batch split among devices (a Linear's bias
        # gradient): eager's order would gather every row of every column to
        # every device; XLA's reduce sums each block and all-reduces the sums,
        # as its products' gradients are summed
        return reduce("reduce_sum", x, [t.rank - 2], op.results[0].type)
    block = 4 * lanes if width >= lanes else 4
    whole = width // block * block
    parts = []
    if whole:
        parts.append(_levels(_cut(x, 0, whole)))
    if whole < width:
        parts.append(_four_at_a_time(_cut(x, whole, width)))
    total = parts[0] if len(parts) == 1 else hlo.value("concatenate", parts, out, dimension=hlo.i64(out.rank - 1))
    return hlo.plus_zero(total)


@lowering("buffer_sum")
def _buffer_sum(op, rewriter):
    """Eager's per-thread buffers (``layer_norm_kernel.cpp``'s weight and bias
    gradients): a ``stablehlo.while`` over the rows, each iteration fusing row
    ``r``'s products into buffer ``owner[r]`` (a select among the buffers,
    so one program whatever the split), then the buffers added in thread
    order. Over a mesh the rows are a batch split among devices: XLA's
    reduce of the products, as :func:`_column_sum` (not eager's order)."""
    lhs, rhs, owner = op.operands
    threads = int(attr(op, "threads"))
    t, ot = hlo.type_of(rhs), hlo.type_of(owner)
    lead, (rows, width) = t.shape[:-2], t.shape[-2:]
    out = TensorType(lead + (width,), t.dtype)
    if rows == 0 or width == 0:
        return hlo.constant(0, out)
    if partitioned(op):
        wide = hlo.value("broadcast_in_dim", [lhs], t, broadcast_dimensions=hlo.i64s([t.rank - 2, t.rank - 1]))
        return reduce("reduce_sum", _mul(wide, rhs), [t.rank - 2], op.results[0].type)
    buffers = TensorType(lead + (threads, width), t.dtype)
    k = len(lead)

    def step(r, carried):
        acc, a, b, who = carried
        zero = hlo.constant(np.array(0, np.int32))
        row_a = TensorType((1, width), t.dtype)
        row_b = TensorType(lead + (1, width), t.dtype)
        pa = hlo.value("dynamic_slice", [a, r, zero], row_a, slice_sizes=hlo.i64s(row_a.shape))
        pb = hlo.value("dynamic_slice", [b] + [zero] * k + [r, zero], row_b, slice_sizes=hlo.i64s(row_b.shape))
        mine = hlo.value("dynamic_slice", [who, r], TensorType((1,), ot.dtype), slice_sizes=hlo.i64s((1,)))
        # row r against every buffer: (..., threads, width), the threads' dimension where the row's was
        pa = hlo.value("broadcast_in_dim", [pa], buffers, broadcast_dimensions=hlo.i64s([k, k + 1]))
        pb = hlo.value("broadcast_in_dim", [pb], buffers, broadcast_dimensions=hlo.i64s(list(range(k + 2))))
        which = hlo.value("iota", [], TensorType(buffers.shape, ot.dtype), iota_dimension=hlo.i64(k))
        mine = hlo.value("broadcast_in_dim", [mine], TensorType(buffers.shape, ot.dtype),
                         broadcast_dimensions=hlo.i64s([k]))
        return [hlo.select(hlo.compare(which, mine, "EQ"), _fma(pa, pb, acc), acc), a, b, who]

    acc = hlo.counted_loop(rows, [hlo.constant(0, buffers), lhs, rhs, owner], step)[0]
    total = None
    for i in range(threads):
        part = _reshape(_slab(acc, i, i + 1, k), out.shape)
        total = part if total is None else _add(total, part)
    return hlo.plus_zero(total)
