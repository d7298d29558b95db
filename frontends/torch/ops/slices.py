"""Lowerings of a slice's backward and of slice_scatter as the slice view's
inverse (:meth:`lazycore.trace.views.Slice.update`): one dynamic_update_slice
(a pad for a strided one) whose start, a Python int, is a program parameter
once the start at the user's line has varied. torch's decomposition wrote it
with iota masks compared to the start and the end, two numbers more, so a
window's gradient in a loop over its start (``x[:, i:i + k]``) compiled four
programs where the forward took two.

The lowering is recorded per call signature, which holds the start: the
policy is asked when a new start records (:meth:`ScalarPolicy.varies
<lazycore.trace.scalar_policy.ScalarPolicy.varies>`, by the slice's dim, size
and length and the user's line), and a start recorded before its place
varied keeps its static slice. Asking at every call, as a view's read does,
would refuse every recording (a static window's backward recorded at each
call: a step of 20 of them 3x slower)."""

from __future__ import annotations

import torch

from lazycore.trace import core
from lazycore.trace.scalar_policy import POLICY
from lazycore.trace.views import Slice

from ..lowering import const, lowers
from ..views import picked_start

aten = torch.ops.aten


def _scattered(base, src, dim, start, step):
    rank = len(base.shape)
    dim = dim + rank if dim < 0 else dim
    size = base.shape[dim]
    picked, start = picked_start(start, step, size)
    count = src.shape[dim]
    if count == 0:
        return base
    if count == size and step == 1:
        return src
    at = None
    if picked and POLICY.varies(("slice_update", dim, size, count), (start,)):
        at = core.scalar(start, "i64", base.device, fold=False)
    return Slice(dim, start, count, step).update(base, src, at)


@lowers(aten.slice_backward.default)
def _slice_backward(ctx, grad, input_sizes, dim, start, end, step):
    return _scattered(const(0, ctx.dtype, ctx.device, ctx.shape), grad, dim, start, step)


@lowers(aten.slice_scatter.default)
def _slice_scatter(ctx, x, src, dim=0, start=None, end=None, step=1):
    return _scattered(x, src, dim, start, step)
