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
AVX512, or none). Operands that are not contiguous take TensorIterator's
order (``reorder_dimensions``: the dims sorted by the operands' strides,
innermost the fastest) before the rows are coalesced.

Where the thread count decides the loops (``at::parallel_for``'s chunks), it
is read through :func:`threads` when the lowering runs. A recorded lowering's
key does not hold the count, so ``torch.set_num_threads`` is watched
(:func:`_watch_thread_count`): a change drops the recorded lowerings, as a
change of the lowering registry does, and the next calls lower again with the
new count; a captured step holds the count among its guards.

``amax``/``amin`` of a contiguous input are modelled too: over trailing dims of
four vectors or more (:func:`inner_reduction`: ``vectorized_inner_reduction``'s
four accumulators, then lanes and tail with the scalar ``max``; one result's run
split among threads by ``two_pass_reduction``), and over leading dims
(:func:`outer_reduction`: ``vectorized_outer_reduction``'s column blocks, the
threads' column ranges). Reductions over non-contiguous inputs or over dims
between kept ones, and the output's layout for ``out=``, are not.

Small-K matrix products (:func:`gemm_chain`): eager's CPU GEMM (MKL) computes each
output of a float32/float64 ``mm``/``addmm`` of a small K with M or N of 16 or more
as one sequential fused multiply-add over k in order from +0 (:data:`GEMM_CHAIN_MIN`
says where exactly; an ``addmm``'s bias added after, rounded once more). XLA's
float64 dot gives the same bits there (every probed shape); its float32 dot sums
otherwise where it reads a linear layer's weight transposed (219-286 of 512 outputs of
a 16 x 6 by 6 x 32 product; 0 with the weight laid out K by N behind a fence), so
float32's is the chain, chosen by M's and N's buckets (padded steps share a program)
and never for ``lazycore.export``'s symbolic sizes (:func:`takes_chain`); but where
the fenced dot sums in that order (:func:`xla_dot_chains`), that dot: K slices and
multiply-adds a product cost XLA's compile and run (a tiny Encodec's LSTM, unrolled
over 32 frames: a training step's program compiled in 159 s as chains, 26 s as dots).
"""

from __future__ import annotations

import torch

from lazycore.ir.context import TRACE
from lazycore.ir.memo import Memo
from lazycore.runtime import buckets

from lazycore.trace import composites

from .. import lowering
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


def threads() -> int:
    """``torch.get_num_threads()``, which eager's ``at::parallel_for`` splits by (the
    lowerings that read it are dropped when it changes: :func:`_watch_thread_count`)."""
    return torch.get_num_threads()


def _watch_thread_count() -> None:
    """Wrap ``torch.set_num_threads`` so that a change of the count drops the recorded
    lowerings and handler choices (the registry's change listeners, ``op`` None: the
    dispatcher's ``forget``): a recording keyed by the call's types alone would replay
    the old split. Once per process; a count set to what it was changes nothing."""
    original = torch.set_num_threads
    if getattr(original, "__wrapped__", None) is not None and getattr(original, "_lazycore", False):
        return

    def set_num_threads(n):
        before = torch.get_num_threads()
        original(n)
        if torch.get_num_threads() != before:
            lowering._changed(None)

    set_num_threads.__wrapped__ = original
    set_num_threads.__doc__ = original.__doc__
    set_num_threads._lazycore = True
    torch.set_num_threads = set_num_threads


_watch_thread_count()


def _strides(t, out_shape):
    """``t``'s element strides over ``out_shape`` as TensorIterator takes them (0
    where it broadcasts; a number: 0 everywhere)."""
    rank = len(out_shape)
    if not isinstance(t, torch.Tensor):
        return (0,) * rank
    shape, stride = tuple(t.shape), tuple(t.stride())
    lead = rank - len(shape)
    return tuple(0 if d < lead or (shape[d - lead] == 1 and out_shape[d] != 1) else stride[d - lead]
                 for d in range(rank))


def _order(out_shape, strides):
    """TensorIterator's ``reorder_dimensions`` for a new output: the dims, innermost
    first, by an insertion sort on the inputs' strides (a broadcast one undecided, an
    equal stride the smaller dim first)."""
    rank = len(out_shape)
    perm = list(range(rank - 1, -1, -1))

    def should_swap(d0, d1):
        for s in strides:
            s0, s1 = s[d0], s[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if out_shape[d0] > out_shape[d1]:
                return 1
        return 0

    for i in range(1, rank):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            c = should_swap(perm[dim0], perm[dim1])
            if c > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif c < 0:
                break
    return perm


def _row(out_shape, strides, perm):
    """(length of the coalesced innermost run, each operand's stride along it), the dims
    taken in ``perm``'s order (TensorIterator's ``coalesce_dimensions``: a dim of one
    element joins, else the strides must continue each other, the output's too, which
    is dense in that order)."""
    if not perm:
        return 1, [0] * len(strides)  # (a 0-d result: one element)
    dense, step = {}, 1
    for d in perm:
        dense[d] = step
        step *= out_shape[d]
    table = [dense] + [dict(enumerate(s)) for s in strides]
    size, inner, prev = out_shape[perm[0]], [s[perm[0]] for s in strides], perm[0]
    for d in perm[1:]:
        n = out_shape[d]
        if size == 1:
            size, inner, prev = n, [s[d] for s in strides], d
            continue
        if n == 1:
            continue
        if all(size * t[prev] == t[d] for t in table):
            size *= n
            continue
        break
    return size, inner


def scalar_tail(out_shape, dtype: torch.dtype, operands, device, run: int | None = None, grain: int = _GRAIN):
    """Where eager's binary loop over ``operands`` (meta tensors or numbers) runs
    its scalar code: True (everywhere), False (nowhere), an ``i1`` handle of
    ``out_shape``, or None when not modelled (probe unclear). ``run``: the
    elements of the kernel's vector step where it is not the binary loops'
    (a kernel built for AVX512 too: ``ALSO_REGISTER_AVX512_DISPATCH``); ``grain``
    the kernel's ``at::parallel_for`` grain where it passes its own. None while
    ``lazycore.export`` traces one program for every size (``TRACE.symbolic``):
    the tail's place is the sizes'."""
    if TRACE.symbolic:
        return None
    strides = [_strides(t, out_shape) for t in operands]
    numel = 1
    for n in out_shape:
        numel *= n
    if numel == 0:
        return False
    if run is None:
        run = vector_run(dtype)
    if run < 0:
        return None
    perm = _order(out_shape, strides)
    length, inner = _row(out_shape, strides, perm)
    # (cpu_kernel_vec: every operand contiguous along the row, or one a broadcast scalar there)
    vectorized = all(s == 1 for s in inner) or (
        len(inner) >= 2 and list(inner).count(0) == 1 and all(s in (0, 1) for s in inner))
    if run == 0 or not vectorized:
        return True
    count = threads()
    splits = []
    if numel >= grain and count > 1:
        parts = min(count, -(-numel // grain))
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
    # the grid is the iteration's order (outermost first); the output's dims from it
    walk = perm[::-1]
    mask = reshape(mask, tuple(out_shape[d] for d in walk))
    if walk != sorted(walk):
        mask = apply("permute", mask, dims=tuple(walk.index(d) for d in range(len(out_shape))))
    return mask


def _full(value, shape, device):
    return composites.constant(value, "i64", device, shape)


def _lanes(dtype: torch.dtype) -> int | None:
    """The lanes of one of eager's vectors of ``dtype`` (None: no vector loop)."""
    run = vector_run(dtype)
    return None if run < 2 or run % 2 else run // 2


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


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
    rest (the result so far first). With more than one thread and ``GRAIN_SIZE``
    elements or more, ``parallel_reduce`` gives each thread whole results (the same
    runs) or, for one result, a chunk of the run each (``two_pass_reduction``: chunks
    of ``at::parallel_for``, each reduced as a run of its own, then the chunks' results
    one after another with the scalar ``max``: the first of equal ones)."""
    lanes = _lanes(dtype)
    if lanes is None:
        return None
    rank = len(x.shape)
    rows = _numel(x.shape[:rank - len(ds)])
    n = _numel(x.shape[rank - len(ds):])
    if n // (4 * lanes) == 0:
        return None
    flat = reshape(x, (rows, n))
    count = threads()
    if rows == 1 and n >= _GRAIN and count > 1:
        parts = min(count, -(-n // _GRAIN))
        chunk = -(-n // parts)
        values = [_run_value(_cut(flat, lo, min(n, lo + chunk)), op, lanes) for lo in range(0, n, chunk)]
        seq = reshape(values[0], (1, 1))
        for v in values[1:]:  # (concatenate takes two operands)
            seq = apply("concatenate", seq, reshape(v, (1, 1)), dim=1)
        first = apply("neg", apply("iota", dim=1, shape=(1, len(values)), dtype="i64", device=x.device))
        value = _pick(seq, first, op)
    else:
        value = _run_value(flat, op, lanes)
    value = reshape(value, tuple(r.shape))
    return apply("select", apply("compare", r, r, direction="NE"), r, value)  # (NaN stays)


def _run_value(flat, op, lanes):
    """Per row of ``flat`` ``(rows, n)``, the element ``vectorized_inner_reduction`` keeps
    (see :func:`inner_reduction`; ``n`` at least four vectors)."""
    rows, n = flat.shape
    block = 4 * lanes
    count = n // block
    body_len = count * block
    body = reshape(_cut(flat, 0, body_len), (rows, count * block))
    grid = (rows, count, 4, lanes)
    i = apply("iota", dim=1, shape=grid, dtype="i64", device=flat.device)
    j = apply("iota", dim=2, shape=grid, dtype="i64", device=flat.device)
    lane = apply("iota", dim=3, shape=grid, dtype="i64", device=flat.device)
    # the first lane holding the maximum, in it the last accumulator, in that the last vector
    key = apply("add", apply("mul", lane, _full(-4 * count, grid, flat.device)),
                apply("add", apply("mul", j, _full(count, grid, flat.device)), i))
    value = _pick(reshape(body, (rows, count * block)), reshape(key, (rows, count * block)), op)  # (rows,)
    if body_len < n:
        seq = apply("concatenate", reshape(value, (rows, 1)), _cut(flat, body_len, n), dim=1)
        width = n - body_len + 1
        first = apply("neg", apply("iota", dim=1, shape=(rows, width), dtype="i64", device=flat.device))
        value = _pick(seq, first, op)
    return value


_ROUND_BYTES = 128
"""``parallel_dim_reduction`` rounds a thread's columns to this many bytes of them."""


def outer_reduction(x, r, ds, op, dtype: torch.dtype, itemsize: int):
    """``r`` (``amax``/``amin`` of contiguous ``x`` over its leading dims ``ds``) as the
    element eager keeps of equal ones, or None where not modelled. TensorIterator
    puts the reduced dims innermost (one run of ``R`` rows, ``C`` kept columns), and
    ``binary_kernel_reduce_vec`` takes ``vectorized_outer_reduction``: blocks of four
    vectors of columns with ``reduction128`` (each column's accumulator the first row,
    then ``vec::maximum`` with each later row: the last of equal values), the columns
    left after the blocks with ``basic_loop`` (the scalar ``max``, the result so far
    first: the first of equal values). With more than one thread and ``GRAIN_SIZE``
    elements or more, ``parallel_dim_reduction`` gives each thread a range of columns
    (``at::parallel_for``'s chunks, rounded to 128 bytes of columns), whose blocks
    start at its first column."""
    lanes = _lanes(dtype)
    if lanes is None:
        return None
    rows = _numel(x.shape[:len(ds)])
    cols = _numel(x.shape[len(ds):])
    if cols < 2 or rows < 2:
        return None
    block = 4 * lanes
    count = threads()
    ranges = [(0, cols)]
    if rows * cols >= _GRAIN and count > 1:
        parts = min(count, cols)
        chunk = -(-cols // parts)
        multiple = max(1, _ROUND_BYTES // itemsize)
        ranges = []
        for lo in range(0, cols, chunk):
            hi = min(cols, lo + chunk)
            lo -= lo % multiple
            if hi != cols:
                hi -= hi % multiple
            if lo < hi:
                ranges.append((lo, hi))
    last = [c for lo, hi in ranges for c in range(lo, lo + ((hi - lo) // block) * block)]
    flat = reshape(x, (rows, cols))
    seq = apply("permute", flat, dims=(1, 0))  # (cols, rows)
    grid = (cols, rows)
    row = apply("iota", dim=1, shape=grid, dtype="i64", device=x.device)
    if len(last) == cols:
        key = row
    elif not last:
        key = apply("neg", row)
    else:
        column = apply("iota", dim=0, shape=grid, dtype="i64", device=x.device)
        edges = _spans(last)
        later = None
        for lo, hi in edges:
            inside = apply("and", apply("compare", column, _full(lo, grid, x.device), direction="GE"),
                           apply("compare", column, _full(hi, grid, x.device), direction="LT"))
            later = inside if later is None else apply("or", later, inside)
        key = apply("select", later, row, apply("neg", row))
    value = reshape(_pick(seq, key, op), tuple(r.shape))
    return apply("select", apply("compare", r, r, direction="NE"), r, value)  # (NaN stays)


def _spans(cols):
    """Sorted column numbers as ``[lo, hi)`` runs."""
    out = []
    for c in cols:
        if out and out[-1][1] == c:
            out[-1][1] = c + 1
        else:
            out.append([c, c + 1])
    return [tuple(p) for p in out]


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


GEMM_CHAIN_K = (2, 16)
"""The K (inner sizes) :func:`gemm_chain` takes: eager's K = 1 product is another
path (an ``addmm``'s bias inside the one fused multiply-add, the product's -0
kept), and beyond 16 the chain's K elementwise steps cost more than a dot."""

GEMM_CHAIN_MIN = 16
"""The least of M's and N's buckets (:func:`_bucket`) where :func:`gemm_chain`
takes the product. Eager's GEMM was probed (float32, 1, 2, 4 and 8 threads,
K 2 to 16, row-major and transposed operands in the four combinations,
~24,000 products) to be the k-order chain, bitwise, wherever M is 16 or more
and N 2 or more, and wherever N is 16 or more and M 2 or more, but for a
column-major left operand (a weight gradient's ``grad.t()``) with M below 8;
an M or N of 1 (a matrix-vector product) and both below 16 take other
kernels, other orders. The chain is taken for a whole bucket (M 9 to 16 with
N below 16 too, where neither it nor the dot is eager's order), so a
dimension padded to its bucket (:mod:`lazycore.runtime.buckets`) never makes
a step's product a chain and another step's of the same bucket a dot."""

GEMM_CHAIN_WORK = 1 << 16
"""The most multiply-adds (M's and N's buckets times K) :func:`gemm_chain` takes:
its K steps are one XLA loop fusion that runs 1.5-3x the dot's time at 2**16 and
more (256 x 256 x 16: 2.1 ms against 0.7, float32, same process, load 11), the dot
there. By the buckets, not the sizes, for the reason :data:`GEMM_CHAIN_MIN` gives."""


def _bucket(n: int) -> int:
    """The power of two a dimension of ``n`` is padded to by default
    (``lazycore.runtime.buckets.bucket`` without ``LAZYCORE_BUCKETS``)."""
    return 1 << (n - 1).bit_length()


def takes_chain(m: int, n: int, k: int, rhs) -> bool:
    """Whether an ``m x k`` by ``k x n`` float32 product is :func:`gemm_chain`'s:
    not while ``lazycore.export`` traces for symbolic sizes (``TRACE.symbolic``:
    a chain of K steps at one batch size and a dot at another are no one
    program); only where K is the right operand's contiguous dimension
    (``rhs``: that operand as eager lays it out, a meta tensor; a linear
    layer's ``weight.t()``, a sample's features). A contraction over the right operand's rows is over samples (a
    weight gradient ``x.t() @ grad``, ``X.t() @ X``): the dimension a batch mark
    pads, and a chain's K steps are a graph per K, which no bucket shares. Then
    by :data:`GEMM_CHAIN_K`, :data:`GEMM_CHAIN_MIN` and :data:`GEMM_CHAIN_WORK`."""
    lo, hi = GEMM_CHAIN_K
    if TRACE.symbolic or not lo <= k <= hi or min(m, n) < 2 or rhs.layout != torch.strided or rhs.stride(0) != 1:
        return False
    bm, bn = _bucket(m), _bucket(n)
    return max(bm, bn) >= GEMM_CHAIN_MIN and bm * bn * k <= GEMM_CHAIN_WORK


def gemm_chain(a, b, fma, rhs):
    """``a @ b`` (M x K and K x N, float32; ``rhs``: ``b`` as eager lays it
    out, a meta tensor) as eager's CPU GEMM sums it: ``acc = fma(a[:, k], b[k, :], acc)``
    for k in order from +0 (``fma``: the frontend's once-rounded ``x * y + z``),
    or None where :func:`takes_chain` says the dot. Where XLA's fenced dot sums so
    at M's and N's buckets (:func:`xla_dot_chains`, either orientation), that dot:
    one op against K elementwise steps (an LSTM's step of 2 x 16 by 16 x 64, trained:
    34 ms a step against 55 as chains; a 16 x 6 by 6 x 32 layer 1.6 ms against 2.6)."""
    (m, k), n = a.shape, b.shape[1]
    if a.dtype != "f32" or not takes_chain(m, n, k, rhs):
        return None
    swap = _chaining_orientation(_padded(m), k, _padded(n))
    if swap is not None:
        return _fenced_dot(a, b, swap)
    acc = None
    for i in range(k):
        col = broadcast(apply("slice", a, start=(0, i), limit=(m, i + 1), strides=(1, 1)), (m, n))
        row = broadcast(apply("slice", b, start=(i, 0), limit=(i + 1, n), strides=(1, 1)), (m, n))
        if acc is None:  # fma(a0, b0, +0): the product, a -0 made +0 (XLA folds a sum with a zero away)
            acc = apply("mul", col, row)
            acc = apply("select", apply("compare", acc, const(0.0, a.dtype, a.device, (m, n)), direction="EQ"),
                        const(0.0, a.dtype, a.device, (m, n)), acc)
        else:
            acc = fma(col, row, acc)
    return acc


ORDERED_WORK = 1 << 22
"""The most multiply-adds (M's and N's buckets times K, times the batch) :func:`ordered_dot` takes.
Its transposed copies, barriers and blocks of K cost XLA's CPU program time
that grows with the product: ``linear`` 128 x 64 x 256 ran 0.25 ms a step
against the plain dot's 0.37, but 1024 x 128 x 128 0.93 against 0.73, 1024 x
128 x 512 2.8 against 1.7 and 1024 x 512 x 128 3.3 against 1.2 (one thread,
mark_step included); benchmark 7's GPT (1024 tokens, width 128) had its
program go from 38 to 65 ms; ``bmm`` 48 x (128 x 128 x 64) 2.6 against 1.4 ms. Below
the bound are the per-op-bound tiny models (transformers' GPT-2, BERT, Llama
tiny: at most 128 x 256 x 64; T5's attention products 16 x (32 x 32 x 16))."""


CHAIN_SIDE = 12
"""The fewest columns (and, but for 4 and 8, rows) of a product whose outputs
eager's MKL sums as :func:`gemm_blocks`' chains (probed, 64 x 64 by 64 x N: N
1-11 67-89% of the outputs otherwise, N 12-19 none; M x 64 by 64 x 64: M 1-3,
5-7 and 9-11 9-75% otherwise, 4, 8 and 12-19 none)."""


def _chain_or_halves(k: int, block: int) -> list[tuple[int, int]] | None:
    """All of K as one chain up to ``block``, two halves (the first rounded up)
    up to twice that, else None: how MKL's float32 GEMM starts on every CPU
    probed, at its own ``block``."""
    if k <= block:
        return [(0, k)]
    if k <= 2 * block:
        half = -(-k // 2)
        return [(0, half), (half, k)]
    return None


def _blocks_of_192(k: int) -> list[tuple[int, int]]:
    """MKL's float32 GEMM on an AMD EPYC (Zen 3): all of K up to 192, two
    halves (the first rounded up) up to 384, else blocks of 192. Probed with 1
    and 2 threads, M x N of 128 x 64, 64 x 256, 4 x 64 and 64 x 64, K 32 to
    3072 (K 200, 250, 300: halves; 400, 450, 600, 1000, 1100: 192s)."""
    return _chain_or_halves(k, 192) or [(lo, min(lo + 192, k)) for lo in range(0, k, 192)]


def _blocks_of_384(k: int) -> list[tuple[int, int]] | None:
    """MKL's float32 GEMM on an Intel Xeon with AVX-512 (model 207): all of K up
    to 384, two halves (the first rounded up) up to 768; None beyond, where it
    splits K otherwise with 2 threads. Probed with 1 and 2 threads, M x N of 16
    x 16, 128 x 64, 64 x 256, 4 x 64, 8 x 200 and 64 x 64, K 3 to 800 (one
    thread, K 769 to 3072: blocks of 384 while more than 768 remain, the rest
    halved)."""
    return _chain_or_halves(k, 384)


_GEMM_RULES = {_blocks_of_192: (64, 300, 1000), _blocks_of_384: (64, 300, 700)}
"""The orders eager's MKL is known to sum a float32 GEMM's K in (each a fused
chain per block, the blocks added in order), with the K each is asked at."""


def gemm_blocks(k: int) -> list[tuple[int, int]] | None:
    """The blocks of K eager's float32 GEMM sums apart here, each a chain, the
    blocks' results then added in order; None where that is not known (no rule
    of :data:`_GEMM_RULES` is eager's here, or this K is beyond the one that
    is)."""
    rule = eager_gemm_rule()
    return None if rule is None else rule(k)


def xla_dot_chains(m: int, k: int, n: int) -> bool:
    """Whether XLA's CPU dot of an ``(m, k)`` by a ``(k, n)`` operand, both laid
    out so, sums each output as one fused multiply-add chain over K from zero
    (eager's GEMM order): probed (this jaxlib, float32, 435 shapes of M 2-256,
    K 16-512, N 8-2048, and 2,520 of M 2-128, K 2-16, N 2-256) where ``n >= 32``
    and ``n >= m``, and with ``m < 64`` the right operand of at most 32,768
    elements, with ``m >= 64`` ``n`` a multiple of 64. Elsewhere it sums
    otherwise (58-90% of outputs off)."""
    if n < 32 or n < m:
        return False
    return n * k <= 32768 if m < 64 else n % 64 == 0


def _chaining_orientation(m: int, k: int, n: int) -> bool | None:
    """Which orientation of an ``(m, k)`` by ``(k, n)`` product :func:`xla_dot_chains`
    says sums in eager's order: False (as it is), True (``(b.T @ a.T).T``), or
    None (neither)."""
    if xla_dot_chains(m, k, n):
        return False
    return True if xla_dot_chains(n, k, m) else None


def ordered_dot(a, b, bias=None):
    """``a @ b`` (M x K by K x N, float32, with equal leading batch dimensions or
    none) in eager's GEMM order with XLA's own dot, or None where that is not
    known. It is that dot, or ``(b.T @ a.T).T`` (the same products in the same
    order), whichever :func:`xla_dot_chains` says sums in order at M's and N's
    buckets as configured (:func:`_padded`: a padded step's program runs the
    dot there, and the sizes of one bucket make one graph, so a size off its
    bucket may keep XLA's order); where neither does, the rows or columns are
    padded with zeros beyond the bucket (:func:`_widened`; the result cut
    back). Each operand is made
    in its layout behind a barrier that keeps XLA from folding a transpose into
    the dot, per block of :func:`gemm_blocks`; ``bias`` (an ``addmm``'s, ``M x
    N``) is added to the first block's result, the later blocks to that
    (probed: ``linear`` of K 256, 768, 1000: 0 off; the bias added last, 35-52%
    off). Not for ``lazycore.export``'s symbolic sizes, nor where eager's MKL
    sums otherwise (:data:`CHAIN_SIDE`). (A K in blocks that a batch mark pads,
    a weight gradient's samples, is sliced: the barrier compiles that graph at
    its own size, as for any op padding refuses.)"""
    *batch, m, k = a.shape
    n = b.shape[-1]
    plan = ordered_plan(a.dtype, _numel(batch), m, k, n)
    if plan is None:
        return None
    blocks, swap, wide_m, wide_n = plan
    total = None
    lead = len(batch)
    zeros, ones = (0,) * lead, (1,) * lead
    if wide_m > m:  # zero rows and columns: outputs of their own, cut off
        a = apply("pad", a, const(0.0, a.dtype, a.device), low=zeros + (0, 0), high=zeros + (wide_m - m, 0),
                  interior=zeros + (0, 0))
    if wide_n > n:
        b = apply("pad", b, const(0.0, b.dtype, b.device), low=zeros + (0, 0), high=zeros + (0, wide_n - n),
                  interior=zeros + (0, 0))
    for lo, hi in blocks:
        ab = a if hi - lo == k else apply("slice", a, start=zeros + (0, lo), limit=tuple(batch) + (wide_m, hi),
                                          strides=ones + (1, 1))
        bb = b if hi - lo == k else apply("slice", b, start=zeros + (lo, 0), limit=tuple(batch) + (hi, wide_n),
                                          strides=ones + (1, 1))
        part = _fenced_dot(ab, bb, swap)
        if (wide_m, wide_n) != (m, n):
            part = apply("slice", part, start=zeros + (0, 0), limit=tuple(batch) + (m, n), strides=ones + (1, 1))
        if total is None:
            total = part if bias is None else apply("add", part, bias)
        else:
            total = apply("add", total, part)
    return total


def _fenced_dot(a, b, swap: bool):
    """``a @ b`` (leading batch dimensions alike) as XLA's dot of the operands as laid out, or
    ``(b.T @ a.T).T`` (``swap``), each operand and the product behind :func:`fenced`."""
    lead = len(a.shape) - 2
    if not swap:
        return fenced(_dot2(fenced(a), fenced(b)))
    flip = tuple(range(lead)) + (lead + 1, lead)
    return fenced(apply("permute", fenced(_dot2(fenced(apply("permute", b, dims=flip)),
                                                 fenced(apply("permute", a, dims=flip)))), dims=flip))


def ordered_plan(dtype: str, count: int, m: int, k: int, n: int):
    """How :func:`ordered_dot` computes ``count`` products of ``(m, k)`` by ``(k, n)``
    of ``dtype`` (the blocks of K, whether swapped, the rows and columns it
    computes), or None where it does not: asked by shapes alone, so a caller
    lays its operands out only for a product that is ordered."""
    bm, bn = _padded(m), _padded(n)
    if (dtype != "f32" or TRACE.symbolic or k < 2 or bn < CHAIN_SIDE or (bm < CHAIN_SIDE and bm not in (4, 8))
            or count * bm * bn * k > ORDERED_WORK):
        return None
    blocks = gemm_blocks(k)
    if blocks is None:
        return None
    widest = max(hi - lo for lo, hi in blocks)
    wide_m, wide_n = m, n
    swap = _chaining_orientation(bm, widest, bn)
    if swap is None:
        widened = _widened(bm, bn, widest)
        if widened is None:
            return None
        swap, wm, wn = widened
        # (wider than the bucket: a pad of every size of it, so one graph per bucket)
        wide_m, wide_n = wm if wm > bm else m, wn if wn > bn else n
    return blocks, swap, wide_m, wide_n


def _widened(m: int, n: int, k: int) -> tuple[bool, int, int] | None:
    """Where XLA's dot sums an ``(m, k)`` by ``(k, n)`` product out of order
    in both orientations: ``(swap, m', n')``, the product's rows (swapped:
    ``m'``) or columns (``n'``) padded with zeros to the fewest at which
    :func:`xla_dot_chains` says it sums in order (T5's decoder attention,
    16 queries by 16 keys by a head of 16: 65% of its outputs off eager's
    as XLA's dot, 0 with 32 columns); None where no such size is in the rule."""
    best = None
    for swap, rows, cols in ((False, m, n), (True, n, m)):  # (swapped: the rows are n)
        wide = max(cols, 32, rows) if rows < 64 else -(-cols // 64) * 64
        if xla_dot_chains(rows, k, wide) and (best is None or rows * wide < best[0]):
            best = (rows * wide, swap, (m, wide) if not swap else (wide, n))
    return None if best is None else (best[1], *best[2])


_ASKED = Memo("torch.gemm_order", 1)
"""Which of :data:`_GEMM_RULES` eager's float32 GEMM here sums as (asked once)."""


def eager_gemm_rule():
    """The rule of :data:`_GEMM_RULES` by which eager's float32 ``mm`` and
    ``addmm`` here sum each output (a fused chain per block of K, the blocks and
    an ``addmm``'s bias added in order), or None: asked of eager on 64 x 64
    products at the rule's K, against that form in NumPy. MKL picks its code by
    CPU (vendor, vector width); where no rule holds the lowerings keep XLA's dot."""
    known = _ASKED.get("mm", False)
    if known is False:
        import numpy as np

        rng = np.random.default_rng(0)

        def agrees(rule, k):
            a = rng.standard_normal((64, k)).astype(np.float32)
            b = rng.standard_normal((k, 64)).astype(np.float32)
            bias = rng.standard_normal(64).astype(np.float32)
            want = torch.addmm(torch.from_numpy(bias), torch.from_numpy(a), torch.from_numpy(b)).numpy()
            total = None
            for lo, hi in rule(k):
                acc = np.zeros((64, 64), np.float32)
                for i in range(lo, hi):  # fma as float64's exact product and one rounded sum
                    acc = (a[:, i:i + 1].astype(np.float64) * b[i:i + 1, :] + acc).astype(np.float32)
                total = acc + bias if total is None else total + acc
            return bool((want.view(np.int32) == total.view(np.int32)).all())

        # a rule is left at its first K eager refuses (AMD's K 1000 is not summed on an Intel CPU)
        known = next((rule for rule, ks in _GEMM_RULES.items() if all(agrees(rule, k) for k in ks)), None)
        _ASKED.put("mm", known)
    return known


def eager_gemm_is_blocked_chain() -> bool:
    """Whether eager's float32 GEMM here sums in a known order (:func:`eager_gemm_rule`)."""
    return eager_gemm_rule() is not None


def _padded(n: int) -> int:
    """The bucket a dimension of ``n`` pads to as configured (``LAZYCORE_BUCKETS``),
    its power of two where no bucket holds it."""
    return buckets.bucket(n) or _bucket(n)


def _dot2(a, b):
    lead = tuple(range(len(a.shape) - 2))
    return apply("dot_general", a, b, lhs_batch=lead, rhs_batch=lead, lhs_contract=(len(lead) + 1,),
                 rhs_contract=(len(lead),))


def fenced(x):
    """``x`` behind ``optimization_barrier``: XLA folds neither a transpose nor a
    scalar factor across it into a dot."""
    out = apply("optimization_barrier", [x])
    return out[0] if isinstance(out, (tuple, list)) else out
