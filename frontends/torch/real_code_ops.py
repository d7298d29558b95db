"""Ops real code reached the fallback with, as decompositions on lazy tensors.

Each had no lowering and no entry in ``torch._decomp``, so every call ran
eager's CPU kernel on materialized inputs (a counted fallback, a barrier):

- ``_pdist_forward`` (``torch.pdist``): the rows' differences for every pair
  ``i < j`` in eager's order (row-major over the upper triangle), then the
  p-norm eager's kernel takes for ``p`` (0: the count of differing
  coordinates, 1, 2, inf, else ``sum(|d|^p)^(1/p)``); ``_pdist_backward`` (its
  training step) with eager's per-pair gradient formulas.
- ``unique_consecutive``: where each element (or slice along ``dim``) differs
  from the one before it is a lazy mask; its nonzero positions are the one
  number-dependent part, read as a boolean mask's are (the frontend's
  ``nonzero`` of a mask: one read, no fallback, see ``ops/indexing.py``); the
  values are a gather at those positions, the inverse a cumulative sum of the
  mask, the counts the gaps between the positions. Eager's outputs, also
  those it returns empty when not asked.
- ``rrelu_with_noise`` (``nn.RReLU``, ``F.rrelu``): in eval mode
  ``leaky_relu`` with slope ``(lower + upper) / 2`` (eager's kernel calls
  exactly that); in training mode ``noise`` gets a uniform draw in
  ``[lower, upper)`` where ``x <= 0`` and 1 elsewhere, and the result is
  ``x * noise``, as eager's kernel does (from the lazy device's generator:
  eager's own draws come from the CPU's).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


# --- pdist ---------------------------------------------------------------------------------------


def _vector_lanes(dtype):
    """How many ``dtype`` elements eager's CPU vectors hold (``Vectorized<T>::size()``), and
    whether its full-vector sum is a halving tree (``VecReduceAllSIMD``: float on AVX2/AVX512)
    rather than lane by lane."""
    capability = torch.backends.cpu.get_cpu_capability()
    width = 64 if capability.startswith("AVX512") else 32
    return width // dtype.itemsize, dtype is torch.float32 and capability.startswith("AVX")


def _map2_reduce_sum(t):
    """``t`` (pairs, m) summed over its last dim in the order of eager's ``map2_reduce_all``
    (``aten/src/ATen/cpu/vec/functional_base.h``): under one vector, element after element;
    else lane-wise over whole vectors, the last partial one into its first lanes, then the
    vector's lanes (a halving tree, or lane after lane)."""
    pairs, m = t.shape
    lanes, tree = _vector_lanes(t.dtype)
    if m == 0:
        return torch.zeros((pairs,), dtype=t.dtype, device=t.device)
    if m < lanes:
        acc = t[:, 0]
        for k in range(1, m):
            acc = acc + t[:, k]
        return acc
    acc = t[:, :lanes]
    for c in range(1, m // lanes):
        acc = acc + t[:, c * lanes:(c + 1) * lanes]
    rest = m % lanes
    if rest:
        acc = torch.cat([acc[:, :rest] + t[:, m - rest:], acc[:, rest:]], dim=1)
    if tree:
        width = lanes
        while width > 1:
            width //= 2
            acc = acc[:, :width] + acc[:, width:2 * width]
        return acc[:, 0]
    total = acc[:, 0]
    for k in range(1, lanes):
        total = total + acc[:, k]
    return total


def _pdist_forward(x, p=2.0):
    n = x.shape[0]
    if n < 2:
        return torch.empty((0,), dtype=x.dtype, device=x.device)
    i, j = torch.triu_indices(n, n, offset=1).unbind(0)
    i, j = i.to(x.device), j.to(x.device)
    d = (x[i] - x[j]).abs()
    if p == float("inf"):
        return d.amax(-1) if x.shape[1] else torch.zeros((d.shape[0],), dtype=x.dtype, device=x.device)
    if p == 0:
        return _map2_reduce_sum(d.ceil().clamp(max=1))
    if p == 1:
        return _map2_reduce_sum(d)
    if p == 2:
        return _map2_reduce_sum(d * d).sqrt()
    # std::pow(agg, 1.0 / p): a float sum to a double power, rounded back
    return _map2_reduce_sum(d.pow(p)).double().pow(1.0 / p).to(x.dtype)


def _pdist_backward(grad, x, p, pdist):
    """Eager's per-pair gradient (``DistanceOpsKernel.cpp``'s ``backward`` of each norm), added
    to the first row of the pair and taken from the second; every formula is odd in the
    difference, so row ``t`` sums the pair terms of ``x[t] - x[s]`` over ``s != t`` (in
    XLA's order of that sum: eager adds them row after row)."""
    n, m = x.shape
    if n < 2 or p == 0:
        return torch.zeros_like(x)
    i, j = torch.triu_indices(n, n, offset=1).unbind(0)
    pair = torch.zeros((n, n), dtype=torch.int64)
    pair[i, j] = torch.arange(i.shape[0])
    pair[j, i] = torch.arange(i.shape[0])
    pair = pair.to(x.device)
    g, dist = grad[pair].unsqueeze(-1), pdist[pair].unsqueeze(-1)
    diff = x.unsqueeze(1) - x.unsqueeze(0)
    sign = torch.sign(diff)
    zero = torch.zeros_like(diff)
    if p == 1:
        r = g * sign
    elif p == 2:
        r = torch.where(dist == 0, zero, g * diff / dist)
    elif p == float("inf"):
        r = g * sign * (1 - torch.clamp((diff.abs() - dist).abs().ceil(), max=1))
    elif p < 2:
        r = torch.where(dist == 0, zero, sign * diff.abs().pow(p - 1) * g / dist.pow(p - 1))
    else:
        r = torch.where(dist == 0, zero, diff * diff.abs().pow(p - 2) * g / dist.pow(p - 1))
    off_diagonal = ~torch.eye(n, dtype=torch.bool, device=x.device).unsqueeze(-1)
    return torch.where(off_diagonal, r, zero).sum(1)


# --- unique_consecutive ----------------------------------------------------------------------


def _unique_consecutive(x, return_inverse=False, return_counts=False, dim=None):
    long = dict(dtype=torch.int64, device=x.device)
    if dim is None:
        flat = x.reshape(-1)
        n = flat.shape[0]
        if n == 0:
            empty = torch.empty((0,), **long)
            return flat, empty, empty
        change = torch.cat([torch.ones((1,), dtype=torch.bool, device=x.device), flat[1:] != flat[:-1]])
        starts = torch.nonzero(change).reshape(-1)
        values = flat[starts]
        inverse = (torch.cumsum(change, 0) - 1).reshape(x.shape) if return_inverse else torch.empty((0,), **long)
        counts = (torch.diff(starts, append=torch.full((1,), n, **long)) if return_counts
                  else torch.empty((0,), **long))
        return values, inverse, counts
    d = dim % max(x.dim(), 1)
    n = x.shape[d]
    if n == 0:
        return x, torch.empty((0,), **long), torch.empty((0,), **long)
    moved = x.movedim(d, 0).reshape(n, -1)
    differs = (moved[1:] != moved[:-1]).any(-1) if moved.shape[1] else torch.zeros((n - 1,), dtype=torch.bool,
                                                                                      device=x.device)
    change = torch.cat([torch.ones((1,), dtype=torch.bool, device=x.device), differs])
    starts = torch.nonzero(change).reshape(-1)
    values = x.index_select(d, starts)
    inverse = torch.cumsum(change, 0) - 1
    counts = torch.diff(starts, append=torch.full((1,), n, **long))
    return values, inverse, counts


# --- rrelu_with_noise ----------------------------------------------------------------------------


def _rrelu_with_noise(x, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None):
    if not training:
        return aten.leaky_relu.default(x, (lower + upper) / 2)
    draw = torch.empty_like(x).uniform_(lower, upper, generator=generator)
    noise.copy_(torch.where(x <= 0, draw, torch.ones_like(x)))
    return x * noise


_DECOMPOSITIONS = {
    aten._pdist_forward.default: _pdist_forward,
    aten._pdist_backward.default: _pdist_backward,
    aten.unique_consecutive.default: _unique_consecutive,
    aten.rrelu_with_noise.default: _rrelu_with_noise,
}


def decomposition(func):
    """The decomposition here for ``func``, or ``None``."""
    return _DECOMPOSITIONS.get(func)
