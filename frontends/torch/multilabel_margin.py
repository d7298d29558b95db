"""``F.multilabel_margin_loss`` and its backward on the lazy device.

``torch._decomp``'s ``multilabel_margin_loss_forward`` forgets that a
target row ends at its first ``-1``: the slots after it read class 0 through
its masked ``gather`` and add their hinge terms, so the loss of any row with
fewer targets than classes was wrong (``[[3, 0, -1, 1, 2]]``-style rows:
0.85 against eager's 0.85 + 2.6). The op has no backward decomposition
either, so its training step ran eager's kernel (a counted fallback).

Both follow eager's CPU kernel (``aten/src/ATen/native/LossMultiLabelMargin.cpp``):
per sample, for every target slot before the first ``-1`` and every class
that is not a target, the hinge ``max(0, 1 - x[target] + x[class])``,
summed and divided by the number of classes; the backward counts, per
class, the positive hinges it takes part in (plus as the class, minus as
the target), times ``1 / dim`` (``1 / (n * dim)`` for ``mean``), times the
incoming gradient. They run as decompositions: their pieces are lazy ops.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

_NONE, _MEAN = 0, 1  # torch's Reduction values (SUM is 2)


def _slots(x, target):
    """``(valid, safe)``: which target slots come before the row's first -1
    (N, C), and the targets with the others set to class 0 (gatherable)."""
    c = x.shape[1]
    idx = torch.arange(c, device=target.device)
    end = torch.amin(torch.where(target == -1, idx, c), dim=-1, keepdim=True)
    valid = idx < end
    return valid, torch.where(valid, target, 0)


def _hinges(x, target, is_target):
    """The hinge terms ``(N, J, K)`` that count: slot ``j`` valid, class ``k``
    not a target (``is_target`` boolean, (N, K))."""
    valid, safe = _slots(x, target)
    u = torch.gather(x, -1, safe)
    z = 1.0 - u.unsqueeze(-1) + x.unsqueeze(1)
    counts = valid.unsqueeze(-1) & ~is_target.unsqueeze(1)
    return z, counts, valid, safe


def forward(input, target, reduction):
    x, t = torch.atleast_2d(input), torch.atleast_2d(target)
    valid, safe = _slots(x, t)
    is_target = torch.any(torch.arange(x.shape[1], device=x.device) == torch.where(valid, t, -1).unsqueeze(-1), dim=1)
    z, counts, _, _ = _hinges(x, t, is_target)
    per = torch.where(counts, z.clamp_min(0), 0).sum(dim=(1, 2)) / x.shape[1]
    if reduction == _MEAN:
        loss = per.mean()
    elif reduction == _NONE:
        loss = per.reshape(input.shape[:-1]) if input.dim() > 1 else per.reshape(())
    else:
        loss = per.sum()
    return loss, is_target.to(input.dtype).reshape(target.shape)


def backward(grad_output, input, target, reduction, is_target):
    x, t = torch.atleast_2d(input), torch.atleast_2d(target)
    n, c = x.shape
    z, counts, valid, safe = _hinges(x, t, torch.atleast_2d(is_target) != 0)
    active = (counts & (z > 0)).to(x.dtype)
    as_class = active.sum(dim=1)
    as_target = torch.where(valid, active.sum(dim=2), 0)
    steps = as_class - torch.zeros_like(x).scatter_add(1, safe, as_target)
    g = steps * (1.0 / max(n * c, 1) if reduction == _MEAN else 1.0 / c)  # (no rows: no values)
    if reduction == _NONE and grad_output.dim() > 0:
        g = g * grad_output.reshape(n, 1)
    else:
        g = g * grad_output
    return g.reshape(input.shape)


def decomposition(func):
    """The decomposition here for ``func``, or ``None``."""
    if func is aten.multilabel_margin_loss_forward.default:
        return forward
    if func is aten.multilabel_margin_loss_backward.default:
        return backward
    return None
