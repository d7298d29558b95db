"""Eager's CPU loops decide which of two equal values a max/min gives (a tie of signed
zeros shows it), and they depend on the operands' layout and the thread count;
frontends/torch/ops/eager_loops.py models them. Three gaps were left:

- binary ops over non-contiguous operands: TensorIterator sorts the dims by the
  operands' strides before it coalesces rows (a transposed pair runs in memory
  order), so which positions its scalar tail computes moved; the lazy op gave the
  vector loop's operand everywhere;
- ``amax``/``amin`` over leading dims (``vectorized_outer_reduction``: blocks of four
  vectors of columns keep the later row, the columns after them the first) and over
  one run split among threads (``two_pass_reduction``), or columns split among threads
  (``parallel_dim_reduction``, rounded to 128 bytes), and ``max()``/``min()`` of more
  than ``GRAIN_SIZE`` elements with more than one thread (``at::parallel_reduce``); the
  lazy op took IEEE's order;
- the thread count was read when a lowering was recorded: a recipe replayed, or a
  captured step, after ``torch.set_num_threads`` kept the old split.

Each case counts elements whose sign differs from eager's (all values are zeros of
either sign, or below them). Before (6d1df9a's lowerings in the same process; float32 and
float64): 3,308 of 19,324 binary elements, 774 of 2,412 leading-dim results and 114 of
401 thread-split results (under 1 and 2 threads alike) and 5 of 12 three-thread
``max()``/``min()``/``amax`` results were off; the recorded ``maximum`` replayed after
``set_num_threads``: 8 elements off in 2 of 5 calls (so too with only the watch of
``torch.set_num_threads`` taken away); the captured batch norm: 4 of 10 calls off
(2,385-2,809 elements each; so too with only the thread count taken out of capture's
guard)."""

import pytest
import torch
import torch.nn.functional as F

import lazycore
import lazycore.torch as ltorch
from _bits import FULL  # (tests/ is on the path)

DTYPES = [torch.float32, torch.float64] if FULL else [torch.float32]
"""CI runs float32 and two threads (each a program of its own); ``LAZYCORE_TEST_FULL=1`` all."""


def _zeros(g, shape, dtype=torch.float32, low=0.0):
    """Zeros of random sign; with ``low`` < 0, a third of the elements ``low`` (below them)."""
    x = torch.where(torch.rand(shape, generator=g) < 0.5, -0.0, 0.0)
    if low:
        x = torch.where(torch.rand(shape, generator=g) < 0.33, low, x)
    return x.to(dtype)


def _off(got, want) -> int:
    got = got.cpu()
    assert got.shape == want.shape and got.dtype == want.dtype
    same = (torch.signbit(got) == torch.signbit(want)) & ((got == want) | (got.isnan() & want.isnan()))
    return int((~same).sum())


def _threads(n):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    return before


LAYOUTS = {
    "both transposed": ((21, 37), (21, 37), lambda a, b: (a.t(), b.t())),
    "transposed and contiguous": ((21, 37), (37, 21), lambda a, b: (a.t(), b)),
    "permuted 3d": ((5, 7, 9), (5, 7, 9), lambda a, b: (a.permute(2, 0, 1), b.permute(2, 0, 1))),
    "strided columns": ((30, 42), (30, 21), lambda a, b: (a[:, ::2], b)),
    "transposed with a row": ((21, 37), (21,), lambda a, b: (a.t(), b)),
    "transposed with a column": ((21, 37), (37, 1), lambda a, b: (a.t(), b)),
    "0-d": ((), (), lambda a, b: (a, b)),
    "0-d with a transposed one": ((), (21, 37), lambda a, b: (a, b.t())),
}


@pytest.mark.parametrize("dtype", DTYPES)
def test_maximum_minimum_of_non_contiguous_operands_are_eagers(dev, dtype):
    g = torch.Generator().manual_seed(0)
    pairs = {}
    for name, (sa, sb, view) in LAYOUTS.items():
        a, b = _zeros(g, sa, dtype), _zeros(g, sb, dtype)
        for f in (torch.maximum, torch.minimum):
            pairs[(name, f.__name__)] = (f(*view(a.to(dev), b.to(dev))), f(*view(a, b)))
    lazycore.mark_step()
    off = {k: _off(got, want) for k, (got, want) in pairs.items()}
    assert off == {k: 0 for k in off}


LEADING = [((6, 70), (0,)), ((9, 33), (0,)), ((5, 3, 40), (0,)), ((4, 3, 50), (0, 1)), ((7, 130), (0,)),
           ((3, 200), (0,))]


@pytest.mark.parametrize("dtype", DTYPES)
def test_amax_amin_over_leading_dims_are_eagers(dev, dtype):
    g = torch.Generator().manual_seed(1)
    pairs = {}
    for shape, dims in LEADING:
        x = _zeros(g, shape, dtype, low=-2.0)
        for f in (torch.amax, torch.amin):
            y = x if f is torch.amax else -x
            pairs[(shape, dims, f.__name__)] = (f(y.to(dev), dim=dims), f(y, dim=dims))
    lazycore.mark_step()
    off = {k: _off(got, want) for k, (got, want) in pairs.items()}
    assert off == {k: 0 for k in off}


@pytest.mark.parametrize("threads", [1, 2] if FULL else [2])
def test_amax_split_among_threads_is_eagers(dev, threads):
    """One result of 40,000 elements (``two_pass_reduction``: two chunks), 200 columns
    of 200 rows (``parallel_dim_reduction``: columns 0-95 and 96-199) and 200 rows of
    200 (whole rows per thread)."""
    g = torch.Generator().manual_seed(2)
    before = _threads(threads)
    try:
        off = {}
        for shape, dims in (((40000,), (0,)), ((200, 200), (0,)), ((200, 200), (1,))):
            x = _zeros(g, shape, low=-1.0)
            got = torch.amax(x.to(dev), dim=dims)
            lazycore.mark_step()
            off[(shape, dims)] = _off(got, torch.amax(x, dim=dims))
        assert off == {k: 0 for k in off}
    finally:
        torch.set_num_threads(before)


def test_max_of_every_element_split_among_threads_is_eagers(dev):
    """``max()``/``min()`` (``at::parallel_reduce`` of ``vec::reduce_all``: each thread's
    chunk reduced, then the chunks' results from the first) and ``amax`` of one run
    (``two_pass_reduction``) with three threads: three chunks."""
    g = torch.Generator().manual_seed(5)
    before = _threads(3)
    try:
        pairs = {}
        for seed in range(4):
            x = _zeros(g, (70001,), low=-1.0)
            lx = x.to(dev)
            pairs[("max", seed)] = (lx.max(), x.max())
            pairs[("min", seed)] = ((-lx).min(), (-x).min())
            pairs[("amax", seed)] = (torch.amax(lx, dim=0), torch.amax(x, dim=0))
        lazycore.mark_step()
        off = {k: _off(got, want) for k, (got, want) in pairs.items()}
        assert off == {k: 0 for k in off}
    finally:
        torch.set_num_threads(before)


def test_a_recorded_lowering_follows_set_num_threads(dev):
    """``torch.maximum`` of 39,997 elements: with two threads eager's chunk ends inside
    row 18, whose tail moves; the same call signature after ``set_num_threads`` must
    not replay the one-thread recording."""
    g = torch.Generator().manual_seed(3)
    a, b = _zeros(g, (37, 1081)), _zeros(g, (37, 1081))
    la, lb = a.to(dev), b.to(dev)
    before = torch.get_num_threads()
    try:
        off = []
        for threads in (1, 1, 2, 2, 1):
            torch.set_num_threads(threads)
            got = torch.maximum(la, lb)
            lazycore.mark_step()
            off.append(_off(got, torch.maximum(a, b)))
        assert off == [0] * 5
    finally:
        torch.set_num_threads(before)


def test_a_captured_batch_norm_follows_set_num_threads(dev):
    """A captured channels-last training batch norm: eager sums its rows in float32
    within each thread's chunk; neither a replayed recording of the decomposition nor
    a captured step's replay may keep the chunks of the thread count it was recorded
    with (the count is a guard of the capture, and the lowering is not recorded)."""
    g = torch.Generator().manual_seed(4)
    w, b = torch.randn(16, generator=g), torch.randn(16, generator=g)
    lw, lb = w.to(dev), b.to(dev)
    step = ltorch.capture(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True))
    before = torch.get_num_threads()
    try:
        off = []
        for i, threads in enumerate((1, 1, 1, 1, 3, 3, 3, 3, 1, 1)):
            torch.set_num_threads(threads)
            x = (torch.randn(4, 16, 7, 7, generator=g) * 3 + 5 + i).contiguous(memory_format=torch.channels_last)
            got = step(x.to(dev), lw, lb)
            lazycore.mark_step()
            off.append(_off(got, F.batch_norm(x, None, None, w, b, training=True)))
        assert off == [0] * 10
        assert step.replays >= 4  # (replays under both thread counts)
    finally:
        torch.set_num_threads(before)
