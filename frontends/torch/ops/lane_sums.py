"""Row sums and row moments in eager's CPU vector-lane order, one node each
(``lazy.lane_sum``, ``lazy.lane_moments``: :mod:`lazycore.dialect.lanes`).

Eager's CPU kernels reduce a row in their ``at::vec`` lanes (8 float32s, 4
float64s here: :func:`.eager_loops._lanes`, probed), which XLA's ``reduce``
does not reproduce; these helpers give the lowerings eager's sums without a
node per vector. ``lazy.lane_sum`` takes rows of up to :data:`MAX_VECTORS`
vectors (its lowering adds a long row's vectors in a loop, in eager's order);
``lazy.lane_moments`` unrolls a Welford step per vector into the program, so
:func:`lanes` (layer norm's rows) stops at :data:`MAX_MOMENT_VECTORS`.
"""

from __future__ import annotations

import torch

from lazycore.ir.context import TRACE
from lazycore.ir.memo import Memo

from ..lowering import apply
from . import eager_loops

MAX_VECTORS = 2**31 // 64
"""The most whole vectors a row of ``lazy.lane_sum`` may have: past 256 its
lowering adds them in a ``stablehlo.while`` (blocks of 64 vectors), so the
program does not grow with the row; the bound only keeps the loop's int32
element offsets in range (2**31 elements at 64 lanes)."""

MAX_MOMENT_VECTORS = 1024
"""The most whole vectors a row may have in :func:`lanes` (8,192 float32s):
``lazy.lane_moments``' lowering writes a Welford step (six ops) per vector
into the program."""


def lanes(dtype: torch.dtype, n: int) -> int | None:
    """The lanes of eager's vectors of ``dtype`` for rows of ``n`` elements, or
    None where these helpers do not apply (no vector loop, a half type, which
    eager accumulates in float32, or too long a row), nor while
    ``lazycore.export`` traces one program for every size (``TRACE.symbolic``:
    a row's vectors and tail are its length's)."""
    if dtype not in (torch.float32, torch.float64) or n == 0 or TRACE.symbolic:
        return None
    count = eager_loops._lanes(dtype)
    if count is None or n // count > MAX_MOMENT_VECTORS:
        return None
    return count


def row_sum(p, q, count: int):
    """``vec::map2_reduce_all``'s sum of ``p * q`` over the last dimension of each
    row (float32's lanes combined by halving, float64's in order)."""
    return apply("lane_sum", p, q, lanes=count, halving=p.dtype == "f32", fused=False)


def fma_chain(p, q):
    """``fma(p[..., n-1], q[..., n-1], ... fma(p[..., 1], q[..., 1], p[..., 0] * q[..., 0]))``:
    a buffer from zero taking each product fused, in order along the last dimension."""
    return apply("lane_sum", p, q, lanes=1, halving=False, fused=True)


def row_moments(x, count: int):
    """``RowwiseMoments``' (mean, biased variance) over the last dimension of each row."""
    return apply("lane_moments", x, lanes=count)


_LANES = Memo("torch.softmax_kernel_lanes", 8)
"""dtype -> lanes of eager's softmax kernels' vectors (asked of eager once)."""


def kernel_lanes(dtype: torch.dtype) -> int:
    """The lanes of a ``Vectorized`` vector in eager's softmax kernels, which
    the AVX512 build dispatches to its AVX512 code (16 float32 lanes), unlike
    the binary loops (8: :func:`.eager_loops.vector_run`). Asked of eager: with
    ``L`` lanes, a row of ``2L`` gradients ``2**25, .., 1 (at L/2), .., -2**25
    (at L)`` sums to 1 (lane 0 cancels, lane L/2 keeps the 1); with fewer lanes
    the 1 is absorbed into lane 0 before it cancels, and ``log_softmax``'s
    backward at a zero output gives ``-sum``."""
    lanes = _LANES.get(dtype)
    if lanes is None:
        lanes = 1
        for n in (16, 8, 4, 2):
            big = 2.0**54 if dtype == torch.float64 else 2.0**25
            g = torch.zeros(1, 2 * n, dtype=dtype)
            g[0, 0], g[0, n // 2], g[0, n] = big, 1.0, -big
            out = torch.full((1, 2 * n), float("-inf"), dtype=dtype)
            out[0, -1] = 0.0
            if float(torch.ops.aten._log_softmax_backward_data(g, out, 1, dtype)[0, -1]) == -1.0:
                lanes = n
                break
        _LANES.put(dtype, lanes)
    return lanes



def _in_threads(rows: int) -> bool:
    """Whether a kernel's ``at::parallel_for`` over ``rows`` runs in its threads
    (else in the calling thread, whose inlined copy the compiler built apart)."""
    return rows > 1 and torch.get_num_threads() > 1


_TAIL_FUSED = Memo("torch.softmax_backward_tail_fused", 8)
"""(dtype, whether the kernel runs in threads) -> whether eager's softmax backward
contracts a row's partial vector (asked of eager once each)."""


def softmax_backward_tail_fused(dtype: torch.dtype, rows: int) -> bool:
    """Whether ``_vec_host_softmax_backward_lastdim``'s ``vec::map2_reduce_all``
    contracts the row's last partial vector's products into the lanes
    (``Vec::set(acc, acc + x * y, r)``) for a call over ``rows`` rows. It
    depends on where the kernel's loop runs (probed on a Zen 3, AVX2 build,
    rows of 12, 21 and 100): called in the calling thread (one thread, or one
    row) the compiler's inlined copy fuses them; in ``at::parallel_for``'s
    threads (two rows or more on two threads) they are rounded, as in the
    AVX512 build's threads. Asked of eager: a row of ``L + 1`` with ``-a * b``
    first and ``a * b`` last (``a = b = 1 + 2**-12``, whose product rounds
    off ``2**-24``) sums to that ``2**-24`` fused, to 0 rounded; a zero
    gradient with output 1 reads the sum back as ``-sum``."""
    threaded = _in_threads(rows)
    fused = _TAIL_FUSED.get((dtype, threaded))
    if fused is None:
        n = kernel_lanes(dtype)
        a = 1.0 + 2.0**-12
        g = torch.zeros(2 if threaded else 1, n + 1, dtype=dtype)
        y = torch.zeros(2 if threaded else 1, n + 1, dtype=dtype)
        g[:, 0], y[:, 0], g[:, n], y[:, n], y[:, 1] = -a, a, a, a, 1.0
        sums = torch.ops.aten._softmax_backward_data(g, y, 1, dtype)[:, 1]
        fused = _TAIL_FUSED.put((dtype, threaded), bool((sums != 0.0).all()))
    return fused


_GROUP_TAIL = Memo("torch.group_norm_tail_grouped", 8)
"""(dtype, whether the kernel runs in threads) -> channels per rounded group of
the group norm backward's channel tail, 1 where it is a fused chain (asked of
eager once each)."""


def group_norm_tail_group(dtype: torch.dtype, rows: int) -> int:
    """How ``GroupNormInputBackward`` sums a group's last ``D mod K``
    channels' ``ds * gamma`` after ``CalcDsDb``'s vectors (``ds_val +=
    ds[j] * gamma``, for ``rows`` = samples x groups): returns 1 where each is
    one fused multiply-add in order, else ``g`` where the first ``g * (t // g)``
    of the ``t`` channels have their products rounded and added in order and
    the rest are fused. Probed on a Zen 3, AVX2 build: in ``at::parallel_for``'s
    threads (two rows or more on two threads) the loop is scalar, fused; run in
    the calling thread (one thread, or one row) the compiler vectorized it by
    16 bytes (4 float32, 2 float64: an in-order reduction of rounded products),
    the rest of the tail fused (0 off at 1..24 channels a group). Asked of
    eager: one sample, one group of ``g + 1`` channels (``g`` the 16 bytes),
    one pixel each, mean 0 and rstd 1, ``dy = (-a, 0.., a, 0)`` and ``gamma =
    (a, 1.., a, 1)`` with ``a * a`` inexact: ``ds`` and ``db`` are ``a * a``'s
    rounding error fused and 0 rounded, and the last channel (``dy = 0``)
    reads ``-(ds + db) / (g + 1)``."""
    threaded = _in_threads(rows)
    group = _GROUP_TAIL.get((dtype, threaded))
    if group is None:
        g = 16 // torch.empty((), dtype=dtype).element_size()
        n = 2 if threaded else 1
        a = 1.0 + (2.0**-12 if dtype == torch.float32 else 2.0**-27)
        dy = torch.zeros(n, g + 1, 1, dtype=dtype)
        dy[:, 0], dy[:, g - 1] = -a, a
        gamma = torch.ones(g + 1, dtype=dtype)
        gamma[0], gamma[g - 1] = a, a
        dx = torch.ops.aten.native_group_norm_backward(
            dy, torch.ones(n, g + 1, 1, dtype=dtype), torch.zeros(n, 1, dtype=dtype), torch.ones(n, 1, dtype=dtype),
            gamma, n, g + 1, 1, 1, [True, False, False])[0]
        group = _GROUP_TAIL.put((dtype, threaded), 1 if bool((dx[:, g] != 0).all()) else g)
    return group
