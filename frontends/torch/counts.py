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

from lazycore.ir.memo import Memo
from lazycore.ir.sourceloc import caller
from lazycore.runtime import buckets
from lazycore.trace import core
from lazycore.trace.scalar_policy import POLICY

from .tensor import from_host, lc_device, upload, wrap


_SEEN = Memo("torch.count_buckets", 256)
"""A varying count's line (kind and user's instruction) -> the buckets its counts have taken."""

_WIDTHS = Memo("torch.count_widths", 64)
"""A bucket -> the wider one its varying counts are padded to (:func:`width`)."""

_GIVEN = Memo("torch.count_given_widths", 256)
"""A varying count -> the width its last indices were padded to (:func:`columns`),
which a ``randperm`` of that count takes (:func:`permutation`)."""


def width(n: int, kind=None) -> int:
    """The size a varying count ``n`` is padded to: the widest bucket that
    any line whose counts have taken ``n``'s bucket has needed (see the
    module); ``n``'s bucket where none has been wider, ``n`` where no bucket
    holds it. ``kind`` (what the count counts, with its bound: one line
    counts the positives of 135 anchors and of 51 proposals, whose buckets
    must stay apart) records ``n`` at the user's line; None only asks."""
    b = buckets.bucket(n)
    if b is None:
        return n
    if kind is not None:
        place = (kind, caller())
        seen = _SEEN.get(place, frozenset())
        if b not in seen:
            seen = _SEEN.put(place, seen | {b})
            top = max(seen)
            for s in seen:  # (every bucket the line has taken pads to its widest)
                if _WIDTHS.get(s, s) < top:
                    _WIDTHS.put(s, top)
    return max(b, _WIDTHS.get(b, b))


def _bounded(n: int, size: int | None, kind: tuple) -> int:
    """:func:`width` of a count ``n`` (``kind``'s) of at most ``size``
    elements (a mask's), never wider than ``size``'s bucket: the count never
    exceeds ``size``, so a width another line needed beyond it (Faster
    R-CNN's 265 sampled negatives of 270 anchors widening bucket 256 to
    512) serves none of this mask's counts, and would only make a program of
    the step it first reached them (the sampler's 129 negatives of 135
    anchors, padded to 256, then 512). Recorded per ``n`` for the
    :func:`permutation` of this count."""
    cap = buckets.bucket(size) if size is not None else None
    w = width(n, (*kind, cap))
    if cap is not None and cap < w:
        w = cap
    _GIVEN.put(n, w)
    return w


def _empty(size: int, rank: int) -> int | None:
    """The width of a count of 0 of a mask of ``size`` elements where the
    user's line has padded its counts before (a Faster R-CNN pooler level
    that no box falls in this step): its counts' width, so the step runs
    their program with a valid size of 0 instead of a program of its own
    at size 0. None (as it is) where the line has padded none. Records
    nothing: 0 is no bucket's, and widens none."""
    cap = buckets.bucket(size)
    seen = _SEEN.get((("nonzero", rank, cap), caller()))
    if not seen:
        return None
    top = max(seen)
    w = max(top, _WIDTHS.get(top, top))
    return w if cap is None or w <= cap else cap


def columns(where: np.ndarray, device, rank: int, size: int) -> list:
    """The columns of ``where`` (the ``(n, rank)`` nonzero indices of a mask
    of ``size`` elements) as handles on ``device``: padded to :func:`width`
    along their one dimension once ``n`` has varied at the user's line (see
    the module)."""
    n = where.shape[0]
    if n == 0:
        b = _empty(size, rank)
    else:
        varies = n >= 2 and POLICY.varies(("nonzero", rank), (n,))
        b = _bounded(n, size, ("nonzero", rank)) if varies else None
    out = []
    for d in range(where.shape[1]):
        column = np.ascontiguousarray(where[:, d])
        if b is None:
            out.append(upload(torch.from_numpy(column), device, scalar=False))
            continue
        handle = upload(torch.from_numpy(np.pad(column, (0, b - n))), device, scalar=False)
        out.append(core.LazyTensor(buckets.cut(handle.value.node, (n,), 0), handle.device))
    return out


def rows(host: np.ndarray, tdev, kind, bound: int | None = None, given: int | None = None):
    """``host``, whose first dimension is a count ``n`` (a packed sequence's
    elements, the longest of its sequences), as a tensor on the lazy device
    ``tdev``: padded along it to :func:`width` (``kind``'s, at most
    ``bound``'s bucket) and handed out as its valid region once ``n`` has
    varied at the user's line; else as it is (:func:`columns`' policy). The
    width given to ``n`` is kept: another array of the same count at another
    line takes it (a layer's packed output, as :func:`permutation` does);
    ``given``: the width an input of that count has already (its bucket)."""
    n = host.shape[0]
    b = None
    if n >= 2 and POLICY.varies(("rows", kind, host.shape[1:], host.dtype.str), (n,)):
        b = given or _GIVEN.get(n) or _bounded(n, bound, (kind,))
    if b is None:
        return from_host(torch.from_numpy(np.ascontiguousarray(host)), tdev)
    return _region(host, b, tdev)


def permutation(host: torch.Tensor, tdev):
    """A fallback's 1-d result ``host`` (``randperm(n)``'s draws) as a tensor
    on the lazy device ``tdev``: uploaded padded to ``n``'s bucket, handed out
    as its valid region, once ``n`` has varied at the user's line; else as
    it is (:func:`columns`' policy). Its width is the count's (it draws
    from a count :func:`columns` gave, whose width it reads back: it
    records nothing of its own)."""
    n = host.shape[0]
    b = (_GIVEN.get(n) or width(n)) if n >= 2 and POLICY.varies(("randperm", host.dtype), (n,)) else None
    if b is None:
        return from_host(host, tdev)
    return _region(host.numpy(), b, tdev)


def _region(host: np.ndarray, b: int, tdev):
    """``host`` uploaded to ``tdev`` padded with zeros along its first
    dimension to ``b``, handed out as its valid region (:func:`lazycore.runtime.buckets.cut`)."""
    padded = np.pad(host, [(0, b - host.shape[0])] + [(0, 0)] * (host.ndim - 1))
    handle = upload(torch.from_numpy(padded), lc_device(tdev), scalar=False)
    return wrap(core.LazyTensor(buckets.cut(handle.value.node, host.shape, 0), handle.device))


def padded(node) -> bool:
    """Whether ``node`` is a padded result's valid region (a mask computed in
    a padded program: its values are read cut from the padded result)."""
    return buckets.padded_leaf(node) is not None
