"""A data-dependent count's indices, uploaded in a bucket once the count varies.

``torch.where(mask)``, ``x[mask]`` and ``nonzero`` hand the mask's nonzero
indices to the device as uploaded columns (ops/indexing.py), and every graph
over them has the count in its shapes. Where the count at the user's line
changes from step to step (Faster R-CNN's boxes kept per image, positives
sampled, proposals per pooler level: issue 39), each new count compiled the
programs over it again. The scalar policy says when a count varies
(:meth:`~lazycore.trace.scalar_policy.ScalarPolicy.varies`, as for CutMix's
boxes): while it repeats, the columns are uploaded as they are; from the
first other count on, each column is uploaded padded with zeros to its bucket
and handed out as its valid region (:func:`lazycore.runtime.buckets.cut`, as
``DeviceLoader(dynamic=0)`` hands out a batch), so the barriers over it pad
that count (:mod:`lazycore.runtime.padding`) and every count of a bucket runs
one program. The values are the same either way; a graph the padding rules
refuse compiles at its own sizes.

A ``randperm`` of such a count (the sampler's draws, torchvision
``_utils.py``: ``torch.randperm(positive.numel())``) runs eager's kernel on
eager's generator (a counted fallback: its values must be eager's) and is
uploaded the same way (:func:`permutation`), so ``positive[perm]`` pairs two
values padded alike instead of one padded and one at the count's own size.
"""

from __future__ import annotations

import numpy as np
import torch

from lazycore.runtime import buckets
from lazycore.trace import core
from lazycore.trace.scalar_policy import POLICY

from .tensor import from_host, lc_device, upload, wrap


def columns(where: np.ndarray, device, rank: int) -> list:
    """The columns of ``where`` (a mask's ``(n, rank)`` nonzero indices) as
    handles on ``device``: padded to ``n``'s bucket along their one dimension
    once ``n`` has varied at the user's line (see the module)."""
    n = where.shape[0]
    padded = n >= 2 and POLICY.varies(("nonzero", rank), (n,))
    out = []
    for d in range(where.shape[1]):
        column = np.ascontiguousarray(where[:, d])
        if not padded:
            out.append(upload(torch.from_numpy(column), device, scalar=False))
            continue
        handle = upload(torch.from_numpy(buckets.pad_host(column, 0)), device, scalar=False)
        out.append(core.LazyTensor(buckets.cut(handle.value.node, (n,), 0), handle.device))
    return out


def permutation(host: torch.Tensor, tdev):
    """A fallback's 1-d result ``host`` (``randperm(n)``'s draws) as a tensor
    on the lazy device ``tdev``: uploaded padded to ``n``'s bucket, handed out
    as its valid region, once ``n`` has varied at the user's line; else as
    it is (:func:`columns`' policy)."""
    n = host.shape[0]
    if n < 2 or not POLICY.varies(("randperm", host.dtype), (n,)):
        return from_host(host, tdev)
    dev = lc_device(tdev)
    handle = upload(torch.from_numpy(buckets.pad_host(host.numpy(), 0)), dev, scalar=False)
    return wrap(core.LazyTensor(buckets.cut(handle.value.node, (n,), 0), handle.device))


def padded(node) -> bool:
    """Whether ``node`` is a padded result's valid region (a mask computed in
    a padded program: its values are read cut from the padded result)."""
    return buckets.padded_leaf(node) is not None
