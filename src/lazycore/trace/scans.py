"""Float scans in eager's order, and the platforms whose programs take it.

Eager CPU torch and NumPy compute ``cumsum``/``cumprod`` one element after
another: torch carries float32 in float64 (and half types in float32) and
rounds each output from that carry, NumPy carries each type in itself.
:func:`one_by_one` is that order, as one ``while`` loop along the scanned
dimension (the other dimensions are a vector per step), so it gives their
bits, and a running sum of non-negative terms never decreases. The
frontends' other order, the tree (Hillis-Steele: log2(n) shifted copies,
combined), can go down by an ulp where a term is 0 (scikit-learn's ``auc``
refused such a curve), and is not eager's bits.

Which order a program takes is its platform's (:func:`in_order`): on the
CPU, eager CPU's. A GPU's eager scan is itself parallel along a contiguous
dimension (CUDA torch's ``cumsum`` is CUB's scan or a tree in each block,
carried in float32 for float32): it has neither CPU's bits nor a sum that
never goes down, so the tree is the honest match there, and a loop of n
dependent steps costs n steps of the GPU's loop. TPUs have no float64, so a float32 carry in
float64 cannot be had there; they take the tree, in float32.
"""

from __future__ import annotations

from typing import Callable

from lazycore.ir.tensor import LazyTensor
from lazycore.trace import control
from lazycore.trace.composites import constant
from lazycore.trace.core import apply

__all__ = ["IN_ORDER_PLATFORMS", "in_order", "one_by_one"]

IN_ORDER_PLATFORMS = frozenset({"cpu"})
"""The platforms whose float scans add one element after another (see the module's text)."""


def in_order(device) -> bool:
    """Whether a float scan in a program for ``device`` takes eager CPU's order
    (:func:`one_by_one`) rather than the tree."""
    return device.platform in IN_ORDER_PLATFORMS


def one_by_one(h: LazyTensor, d: int, combine: Callable[[LazyTensor, LazyTensor], LazyTensor],
               start) -> LazyTensor:
    """``h`` scanned along ``d`` one element after another: ``out[0] =
    combine(start, h[0])``, ``out[i] = combine(out[i - 1], h[i])``, where
    ``combine`` takes and gives handles of ``h``'s type and shape less ``d``,
    and ``start`` is a number of that type (torch's kernels start from the
    identity 0.0, so a -0.0 comes out as 0.0; NumPy copies the first element:
    -0.0 there, which leaves every value as it is)."""
    n = h.shape[d]
    rank = len(h.shape)
    perm = (d,) + tuple(i for i in range(rank) if i != d)
    if d:
        h = apply("permute", h, dims=perm)
    first = constant(start, h.dtype, h.device, h.shape[1:])
    if n == 1:
        out = apply("reshape", combine(first, apply("reshape", h, shape=h.shape[1:])), shape=h.shape)
    else:
        def step(carry, x):
            s = combine(carry, x)
            return s, s

        _, out = control.scan(step, first, h)
    if d:
        out = apply("permute", out, dims=tuple(perm.index(i) for i in range(rank)))
    return out
