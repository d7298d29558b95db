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

The bucket only grows (:func:`width`): a count is padded to the largest
bucket a varying count on its device has needed so far, not to its own.
Counts that wander across a bucket's edge (a sampler's 3 to 11 positives:
buckets 4, 8 and 16) made a program for every combination of the buckets
of a step's counts (Faster R-CNN: 5-8 compiles every step, issue 39); now
a step's programs change only while the largest count grows. One width for
every count of the device, not one per line: a padded dimension's symbol
is its valid size (:mod:`lazycore.runtime.padding`), so two counts that
happen to be equal (the positives sampled at one line, counted again at
another) must share a bucket to meet in one program.
"""

from __future__ import annotations

import numpy as np
import torch

from lazycore.ir.memo import Memo
from lazycore.runtime import buckets
from lazycore.trace import core
from lazycore.trace.scalar_policy import POLICY

from .tensor import upload


WIDTHS = Memo("torch.count_widths", 16)
"""Device -> the largest bucket a varying count on it has been padded to."""


def width(n: int, device) -> int | None:
    """The size a varying count ``n`` on ``device`` is padded to: its bucket,
    or the largest one an earlier count there needed (see the module); None
    where no bucket holds ``n``."""
    b = buckets.bucket(n)
    if b is None:
        return None
    widest = WIDTHS.get(device, 0)
    if b > widest:
        WIDTHS.put(device, b)
        return b
    return widest


def columns(where: np.ndarray, device, rank: int) -> list:
    """The columns of ``where`` (a mask's ``(n, rank)`` nonzero indices) as
    handles on ``device``: padded to :func:`width` along their one dimension
    once ``n`` has varied at the user's line (see the module)."""
    n = where.shape[0]
    b = width(n, device) if n >= 2 and POLICY.varies(("nonzero", rank), (n,)) else None
    out = []
    for d in range(where.shape[1]):
        column = np.ascontiguousarray(where[:, d])
        if b is None:
            out.append(upload(torch.from_numpy(column), device, scalar=False))
            continue
        handle = upload(torch.from_numpy(np.pad(column, (0, b - n))), device, scalar=False)
        out.append(core.LazyTensor(buckets.cut(handle.value.node, (n,), 0), handle.device))
    return out


def padded(node) -> bool:
    """Whether ``node`` is a padded result's valid region (a mask computed in
    a padded program: its values are read cut from the padded result)."""
    return buckets.padded_leaf(node) is not None
