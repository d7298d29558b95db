"""``torch.sum`` as eager's CPU kernel adds (``lazy.vector_sum``, ``lazy.column_sum``).

Eager sums a float32 or float64 row with ATen's ``cascade_sum``
(``aten/src/ATen/native/cpu/SumKernel.cpp``): vectors four at a time into
four partial sums, each a cascade of levels, then the tail and the lanes in
order (:mod:`lazycore.dialect.lanes` has the whole sequence). XLA's ``reduce``
adds in an order of its own: 42 of 64 float32 row means of 64 x 100 differed
from eager's. Which vectors the kernel runs is asked of eager once per type:
its sums of a few fixed rows against this module's reference of the sequence
at each candidate width (8 float32 lanes on an AVX2 and on an AVX512 build
alike, where the kernel is compiled for AVX2's vectors). No width matching
(another kernel), the reduction stays ``lazy.reduce_sum``.
"""

from __future__ import annotations

import contextvars

import numpy as np
import torch
from torch._decomp import decomposition_table
from torch.utils._python_dispatch import _disable_current_modes

from lazycore.dialect.lanes import level_step
from lazycore.ir.memo import Memo

MAX_ROW = 1 << 23
"""The longest row given to ``lazy.vector_sum``: its lowering's last level adds
one value per 2**18 elements in sequence (32 at this length)."""

_CANDIDATES = {torch.float32: (8, 16, 4), torch.float64: (4, 8, 2)}
_NUMPY = {torch.float32: np.float32, torch.float64: np.float64}
_LANES = Memo("torch.sum_kernel_lanes", 4)
"""dtype -> the lanes of eager's sum kernel's vectors, 0 where none matched."""


def _levels(rows: list, zero):
    """``multi_row_sum``'s cascade over ``rows`` (arrays of one shape)."""
    size = len(rows)
    step = level_step(size)
    power, mask = step.bit_length() - 1, step - 1
    acc = [zero.copy() for _ in range(4)]
    i = 0
    while i + step <= size:
        for _ in range(step):
            acc[0] = acc[0] + rows[i]
            i += 1
        for j in range(1, 4):
            acc[j], acc[j - 1] = acc[j] + acc[j - 1], zero.copy()
            if i & (mask << (j * power)):
                break
    for r in rows[i:]:
        acc[0] = acc[0] + r
    for j in range(1, 4):
        acc[0] = acc[0] + acc[j]
    return acc[0]


def _four_at_a_time(items: list, zero):
    groups = len(items) // 4
    partial = _levels([np.stack(items[4 * g:4 * g + 4]) for g in range(groups)], np.stack([zero] * 4))
    first = partial[0]
    for item in items[4 * groups:]:
        first = first + item
    for k in range(1, 4):
        first = first + partial[k]
    return first


def reference(row: np.ndarray, lanes: int):
    """Eager's one-thread sum of a 1-d float ``row`` with vectors of ``lanes`` (NumPy scalars keep the type)."""
    t = row.dtype.type
    n = len(row)
    if n < lanes:
        return t(0) + _four_at_a_time([row[i:i + 1] for i in range(n)], np.zeros(1, row.dtype))[0]
    vectors = n // lanes
    sums = _four_at_a_time([row[v * lanes:(v + 1) * lanes] for v in range(vectors)], np.zeros(lanes, row.dtype))
    total = t(0)
    for value in row[vectors * lanes:]:
        total = total + value
    for value in sums:
        total = total + value
    return total


def probed_lanes(memo: Memo, dtype: torch.dtype, shapes, eager, model) -> int | None:
    """The lanes of an eager kernel's vectors for ``dtype`` (float32, float64), asked of
    eager once (``memo`` keeps the answer, 0 where none matched): the first of the
    candidate widths at which ``model(x, lanes)`` gives ``eager(tensor)``'s bits on
    random arrays of each of ``shapes``, spread over many binades."""
    found = memo.get(dtype)
    if found is None:
        found = 0
        if dtype in _CANDIDATES:
            rng = np.random.default_rng(0)
            xs = [(rng.standard_normal(n) * np.exp(3 * rng.standard_normal(n))).astype(_NUMPY[dtype]) for n in shapes]
            # (eager's own kernel, whatever dispatch modes the trace runs under: a fake tensor has no sum)
            with _disable_current_modes(), torch.inference_mode():
                want = [eager(torch.from_numpy(x)).numpy() for x in xs]
            for count in _CANDIDATES[dtype]:
                if all(np.array_equal(model(x, count), w) for x, w in zip(xs, want)):
                    found = count
                    break
        memo.put(dtype, found)
    return found or None


def lanes(dtype: torch.dtype) -> int | None:
    """The lanes of eager's ``cascade_sum`` vectors for ``dtype`` (float32, float64), or None."""
    return probed_lanes(_LANES, dtype, (13, 100, 1100, 4133), torch.sum, reference)


def columns_alike(dtype: torch.dtype, count: int) -> bool:
    """Whether eager's threads sum leading dimensions' columns as one thread does:
    ``parallel_dim_reduction`` cuts the columns at multiples of 128 bytes, which
    are whole blocks of four vectors at ``count`` lanes only where those are 128
    bytes (8 float32 or 4 float64 lanes; checked at 1 and 2 threads)."""
    return 4 * count * dtype.itemsize == 128


_OTHER_KERNEL = contextvars.ContextVar("lazycore.torch.sum_kernel.other", default=False)
_OTHERS = (torch.ops.aten.linalg_vector_norm.default,)
"""Ops whose eager kernel is not the sum kernel but whose ``torch._decomp``
decomposition sums: ``linalg_vector_norm`` runs a kernel of its own (its 2-norm
of trailing dimensions is :mod:`.norm_kernel`'s; other orders and layouts reach
eager's generic reduction, not modelled), so its decomposition's sum stays one
``lazy.reduce_sum``, as small as it was (benchmark 7's GPT step: 18 norms a step
summed by the sum kernel's sequence took its program from 3,895 to 5,304
StableHLO ops)."""


def applies() -> bool:
    """Whether a sum traced now is eager's sum kernel's (not a piece of :data:`_OTHERS`' decompositions)."""
    return not _OTHER_KERNEL.get()


def decomposition(func):
    """``torch._decomp``'s decomposition of ``func`` with :func:`applies` false
    while it runs, for :data:`_OTHERS`; else None."""
    if func not in _OTHERS:
        return None
    inner = decomposition_table[func]

    def run(*args, **kwargs):
        token = _OTHER_KERNEL.set(True)
        try:
            return inner(*args, **kwargs)
        finally:
            _OTHER_KERNEL.reset(token)

    return run
