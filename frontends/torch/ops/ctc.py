"""CTC loss (``F.ctc_loss``) and its backward on the lazy device.

``F.ctc_loss`` reaches ``aten._ctc_loss`` (the per-sample negative log
likelihood and the log alphas; the reduction and ``zero_infinity``'s zeroing
are the composite's, above), and autograd its ``_ctc_loss_backward``. Both
ran eager's CPU kernel before (issue 39). The lengths are Python integers
(the composite reads tensor lengths on the host first), so what varies per
sample (the extended label sequence's valid positions, where each sample's
time ends) is a constant of the program, and the targets' values, read on the
device, decide only which transitions the recursion allows.

The recursions are eager's (``aten/src/ATen/native/LossCTC.cpp``, Graves et
al. 2006, in log space): one loop over time (:func:`lazycore.trace.control.scan`)
whose step updates every sample's extended sequence at once, each term
computed as eager computes it (the maximum of the one to three predecessors,
0 where all are minus infinity, the sum of their exponentials in eager's
order, plus the log-probability of the position's label). The backward's
loop runs the betas from each sample's last time step down; the gradient
then adds up, per time step and label, ``exp(alpha + beta)`` over the
positions holding that label (relative to the step's largest term: a label
more than e^-87 below it in float32 contributes less than 1e-38 to the
gradient) and is eager's ``exp(lp) - exp(log(sum) + nll - lp)`` times the
incoming gradient, 0 after a sample's end and, with ``zero_infinity``, for a
sample whose likelihood is 0.
"""

from __future__ import annotations

import numpy as np
import torch

from lazycore.trace import control

from ..lowering import apply, const, convert, lowers, reshape

aten = torch.ops.aten

_INF = float("inf")


class _Layout:
    """What the lengths fix: sizes, each sample's extended-sequence positions
    that exist, and each sample's last time step."""

    def __init__(self, log_probs, targets, input_lengths, target_lengths, blank):
        self.T, self.N, self.C = log_probs.shape
        self.il = [int(n) for n in input_lengths]
        self.tl = [int(n) for n in target_lengths]
        self.K = max(self.tl, default=0)
        self.S = 2 * self.K + 1
        self.blank = int(blank)
        self.device = log_probs.device
        s = np.arange(self.S)
        self.valid = s[None, :] <= 2 * np.asarray(self.tl)[:, None]  # (N, S)
        t = np.arange(self.T)[:, None]
        self.alive = t < np.asarray(self.il)[None, :]  # (T, N): time steps each sample has

    def const(self, value, dtype, shape=()):
        return const(value, dtype, self.device, shape)

    def labels(self, targets):
        """(N, K) int64: sample ``n``'s ``k``-th label (the blank past its length)."""
        N, K = self.N, self.K
        if K == 0:
            return self.const(self.blank, "i64", (N, 0))
        flat = reshape(convert(targets, "i64"), (int(np.prod(targets.shape)),))
        k = np.arange(K)[None, :]
        if len(targets.shape) == 2:
            where = np.arange(N)[:, None] * targets.shape[1] + k
        else:
            where = np.concatenate([[0], np.cumsum(self.tl)[:-1]])[:, None].astype(np.int64) + k
        inside = k < np.asarray(self.tl)[:, None]
        where = np.where(inside, where, 0).reshape(-1, 1).astype(np.int64)
        got = apply("gather", flat, self.const(where, "i64"), offset_dims=(), collapsed_slice_dims=(0,),
                    operand_batching_dims=(), start_indices_batching_dims=(), start_index_map=(0,),
                    index_vector_dim=1, slice_sizes=(1,), indices_are_sorted=False)
        return apply("select", self.const(inside.reshape(-1), "i1"), got,
                     self.const(self.blank, "i64", (N * K,)))

    def extended(self, targets):
        """(N, S): the blank, then each label followed by a blank."""
        N, K = self.N, self.K
        blanks = self.const(self.blank, "i64", (N, K, 1))
        lab = reshape(self.labels(targets), (N, K, 1))
        pairs = reshape(apply("concatenate", blanks, lab, dim=2), (N, 2 * K)) if K else None
        last = self.const(self.blank, "i64", (N, 1))
        return last if pairs is None else apply("concatenate", pairs, last, dim=1)

    def flat_index(self, ext):
        """(N * S, 1): each extended position's label as an index into (N * C)."""
        rows = self.const((np.arange(self.N) * self.C)[:, None], "i64", (self.N, 1))
        rows = apply("broadcast_in_dim", rows, dims=(0, 1), shape=(self.N, self.S))
        return reshape(apply("add", ext, rows), (self.N * self.S, 1))

    def per_position(self, lp, index):
        """(T, N, S): each time step's log-probability of each extended position's label."""
        T = self.T
        flat = reshape(lp, (T, self.N * self.C))
        got = apply("gather", flat, index, offset_dims=(0,), collapsed_slice_dims=(1,), operand_batching_dims=(),
                    start_indices_batching_dims=(), start_index_map=(1,), index_vector_dim=1,
                    slice_sizes=(T, 1), indices_are_sorted=False)
        return reshape(got, (T, self.N, self.S))

    def skips(self, ext):
        """(N, S) bool: position ``s`` may be reached from ``s - 2`` (its label
        differs from the one two before: never for a blank)."""
        N, S = self.N, self.S
        if S < 3:
            return self.const(False, "i1", (N, S))
        before = apply("slice", ext, start=[0, 0], limit=[N, S - 2], strides=[1, 1])
        after = apply("slice", ext, start=[0, 2], limit=[N, S], strides=[1, 1])
        differ = apply("compare", after, before, direction="NE")
        return apply("concatenate", self.const(False, "i1", (N, 2)), differ, dim=1)

    def masked(self, h, mask: np.ndarray, fill=-_INF):
        """``h`` where the host ``mask`` holds (broadcast from its leading dims), ``fill`` elsewhere."""
        m = self.const(mask, "i1")
        if tuple(mask.shape) != tuple(h.shape):
            m = apply("broadcast_in_dim", m, dims=tuple(range(mask.ndim)), shape=h.shape)
        return apply("select", m, h, self.const(fill, h.dtype, h.shape))


def _shifted(h, by: int, toward_end: bool):
    """``h`` (N, S) moved ``by`` positions along S, minus infinity coming in."""
    N, S = h.shape
    pad = const(-_INF, h.dtype, h.device, (N, min(by, S)))
    if by >= S:
        return pad
    if toward_end:
        kept = apply("slice", h, start=[0, 0], limit=[N, S - by], strides=[1, 1])
        return apply("concatenate", pad, kept, dim=1)
    kept = apply("slice", h, start=[0, by], limit=[N, S], strides=[1, 1])
    return apply("concatenate", kept, pad, dim=1)


def _log_sum3(a, b, c):
    """Eager's ``log(exp(a - m) + exp(b - m) + exp(c - m)) + m``, ``m`` their
    maximum or 0 where all are minus infinity."""
    m = apply("maximum", apply("maximum", a, b), c)
    ninf = const(-_INF, m.dtype, m.device, m.shape)
    m = apply("select", apply("compare", m, ninf, direction="EQ"), const(0, m.dtype, m.device, m.shape), m)
    e = apply("add", apply("add", apply("exp", apply("sub", a, m)), apply("exp", apply("sub", b, m))),
              apply("exp", apply("sub", c, m)))
    return apply("add", apply("log", e), m)


def _log_sum2(a, b):
    m = apply("maximum", a, b)
    ninf = const(-_INF, m.dtype, m.device, m.shape)
    m = apply("select", apply("compare", m, ninf, direction="EQ"), const(0, m.dtype, m.device, m.shape), m)
    e = apply("add", apply("exp", apply("sub", a, m)), apply("exp", apply("sub", b, m)))
    return apply("add", apply("log", e), m)


def _pick(h, places: np.ndarray):
    """``h`` (T, N, S) at (t, n, s) for each row ``(t, s)`` of ``places`` (N, 2): (N,)."""
    T, N, S = h.shape
    flat = reshape(h, (T * N * S,))
    where = (places[:, 0] * N * S + np.arange(N) * S + places[:, 1]).reshape(-1, 1).astype(np.int64)
    return apply("gather", flat, const(where, "i64", h.device), offset_dims=(), collapsed_slice_dims=(0,),
                 operand_batching_dims=(), start_indices_batching_dims=(), start_index_map=(0,),
                 index_vector_dim=1, slice_sizes=(1,), indices_are_sorted=False)


def _alphas(lay: _Layout, lpp, skip):
    """(T, N, S) log alphas: minus infinity outside each sample's positions and time."""
    dt = lpp.dtype
    first = reshape(apply("slice", lpp, start=[0, 0, 0], limit=[1, lay.N, lay.S], strides=[1, 1, 1]),
                    (lay.N, lay.S))
    start = lay.valid & (np.arange(lay.S)[None, :] <= 1)
    a0 = lay.masked(first, start)
    if lay.T > 1:
        valid = lay.const(lay.valid, "i1")
        ninf = lay.const(-_INF, dt, (lay.N, lay.S))

        def step(prev, lp_t):
            a2 = _shifted(prev, 1, True)
            a3 = apply("select", skip, _shifted(prev, 2, True), ninf)
            new = apply("add", _log_sum3(prev, a2, a3), lp_t)
            new = apply("select", valid, new, ninf)
            return new, new

        rest = apply("slice", lpp, start=[1, 0, 0], limit=[lay.T, lay.N, lay.S], strides=[1, 1, 1])
        _, later = control.scan(step, a0, rest)
        alphas = apply("concatenate", reshape(a0, (1, lay.N, lay.S)), later, dim=0)
    else:
        alphas = reshape(a0, (1, lay.N, lay.S))
    return lay.masked(alphas, lay.alive)


def _nll(lay: _Layout, alphas):
    """(N,): minus the log of the last two alphas' sum at each sample's last step."""
    dt = alphas.dtype
    last = np.maximum(np.asarray(lay.il) - 1, 0)
    tl = np.asarray(lay.tl)
    l1 = _pick(alphas, np.stack([last, 2 * tl], 1))
    l2 = _pick(alphas, np.stack([last, np.maximum(2 * tl - 1, 0)], 1))
    l2 = apply("select", lay.const(tl > 0, "i1"), l2, lay.const(-_INF, dt, (lay.N,)))
    nll = apply("neg", _log_sum2(l1, l2))
    # no time steps: likelihood 1 for an empty target, else 0
    empty = np.asarray(lay.il) == 0
    if empty.any():
        nll = apply("select", lay.const(empty, "i1"), lay.const(np.where(tl == 0, 0.0, _INF), dt), nll)
    return nll


def _check(log_probs):
    return log_probs.dtype in ("f32", "f64")


@lowers(aten._ctc_loss.default)
def _ctc_loss(ctx, log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    if not _check(log_probs):
        return NotImplemented  # eager's CPU kernel takes float and double only: its error
    lay = _Layout(log_probs, targets, input_lengths, target_lengths, blank)
    ext = lay.extended(targets)
    lpp = lay.per_position(log_probs, lay.flat_index(ext))
    alphas = _alphas(lay, lpp, lay.skips(ext))
    nll = _nll(lay, alphas)
    return nll, apply("permute", alphas, dims=(1, 0, 2))


def _betas(lay: _Layout, lpp, skip):
    """(T, N, S) log betas, from each sample's last step down (minus infinity after it)."""
    dt = lpp.dtype
    N, S = lay.N, lay.S
    tl = np.asarray(lay.tl)
    s = np.arange(S)[None, :]
    ends = lay.valid & ((s == 2 * tl[:, None]) | ((s == 2 * tl[:, None] - 1) & (tl[:, None] > 0)))
    last = np.asarray(lay.il)[None, :] - 1
    t = np.arange(lay.T)[:, None]
    starts = lay.const(t == last, "i1")  # (T, N)
    after = lay.const(t > last, "i1")
    valid = lay.const(lay.valid, "i1")
    ends_h = lay.const(ends, "i1")
    ninf = lay.const(-_INF, dt, (N, S))
    skip_next = apply("concatenate", apply("slice", skip, start=[0, 2], limit=[N, S], strides=[1, 1]),
                      lay.const(False, "i1", (N, 2)), dim=1) if S >= 3 else lay.const(False, "i1", (N, S))

    def rows(flag):
        return apply("broadcast_in_dim", flag, dims=(0,), shape=(N, S))

    def step(nxt, x):
        lp_t, start_t, after_t = x
        b2 = _shifted(nxt, 1, False)
        b3 = apply("select", skip_next, _shifted(nxt, 2, False), ninf)
        new = apply("add", _log_sum3(nxt, b2, b3), lp_t)
        new = apply("select", rows(start_t), apply("select", ends_h, lp_t, ninf), new)
        new = apply("select", apply("and", rows(apply("not", after_t)), valid), new, ninf)
        return new, new

    _, betas = control.scan(step, ninf, (lpp, starts, after), reverse=True)
    return betas


@lowers(aten._ctc_loss_backward.default)
def _ctc_loss_backward(ctx, grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood,
                       log_alpha, blank, zero_infinity=False):
    if not _check(log_probs):
        return NotImplemented
    lay = _Layout(log_probs, targets, input_lengths, target_lengths, blank)
    dt = log_probs.dtype
    T, N, C, S = lay.T, lay.N, lay.C, lay.S
    ext = lay.extended(targets)
    index = lay.flat_index(ext)
    lp = convert(log_probs, dt)
    lpp = lay.per_position(lp, index)
    betas = _betas(lay, lpp, lay.skips(ext))
    alphas = lay.masked(lay.masked(apply("permute", convert(log_alpha, dt), dims=(1, 0, 2)), lay.valid[None]
                                   .repeat(T, 0)), lay.alive)
    ab = apply("add", alphas, betas)  # (T, N, S)
    # per (t, n): the labels' sums of exp(alpha + beta), relative to the largest term
    top = apply("reduce_max", ab, dims=(2,))
    ninf = lay.const(-_INF, dt, (T, N))
    top = apply("select", apply("compare", top, ninf, direction="EQ"), lay.const(0, dt, (T, N)), top)
    top3 = apply("broadcast_in_dim", top, dims=(0, 1), shape=(T, N, S))
    terms = reshape(apply("exp", apply("sub", ab, top3)), (T, N * S))
    sums = apply("scatter", lay.const(0, dt, (T, N * C)), index, terms,
                 update_window_dims=(0,), inserted_window_dims=(1,), input_batching_dims=(),
                 scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=(1,), index_vector_dim=1, mode="add")
    logsum = apply("add", apply("log", reshape(sums, (T, N, C))),
                   apply("broadcast_in_dim", top, dims=(0, 1), shape=(T, N, C)))
    nll = apply("broadcast_in_dim", convert(neg_log_likelihood, dt), dims=(1,), shape=(T, N, C))
    g = apply("broadcast_in_dim", convert(grad, dt), dims=(1,), shape=(T, N, C))
    out = apply("mul", apply("sub", apply("exp", lp), apply("exp", apply("sub", apply("add", logsum, nll), lp))), g)
    out = lay.masked(out, lay.alive, 0.0)
    if zero_infinity:
        inf = apply("compare", nll, lay.const(_INF, dt, (T, N, C)), direction="EQ")
        out = apply("select", inf, lay.const(0, dt, (T, N, C)), out)
    return convert(out, ctx.dtype)



def _backward_meta(grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood, log_alpha, blank,
                   zero_infinity=False):
    """The backward's result on the meta device: eager's, a contiguous tensor like ``log_probs``."""
    return torch.empty_like(log_probs, memory_format=torch.contiguous_format)


# torch has no meta kernel for the backward, and the dispatcher learns a
# result's size from one before it lowers (without, eager's kernel ran)
_LIB = torch.library.Library("aten", "IMPL")
if not torch._C._dispatch_has_kernel_for_dispatch_key(aten._ctc_loss_backward.default.name(), "Meta"):
    _LIB.impl("_ctc_loss_backward", _backward_meta, "Meta")


def _ctc_loss_tensor_lengths(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1,
                             zero_infinity=False):
    """``ctc_loss`` with lengths in tensors, as eager's CPU fast path: the
    lengths read on the host, then the list overload. (For a tensor subclass
    torch's composite keeps them in tensors, and ``_ctc_loss.Tensor``'s
    results are sized by their values, which no meta kernel can see.)"""
    if input_lengths.is_floating_point() or input_lengths.is_complex() or input_lengths.dtype is torch.bool:
        raise RuntimeError("input_lengths must be integral")
    if target_lengths.is_floating_point() or target_lengths.is_complex() or target_lengths.dtype is torch.bool:
        raise RuntimeError("target_lengths must be integral")
    il = input_lengths.to("cpu", torch.long).reshape(-1).tolist()
    tl = target_lengths.to("cpu", torch.long).reshape(-1).tolist()
    return torch.ctc_loss(log_probs, targets, il, tl, blank, reduction, zero_infinity)


_LIB.impl("ctc_loss.Tensor", _ctc_loss_tensor_lengths, "AutogradLazy")
