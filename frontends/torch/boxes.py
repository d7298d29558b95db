"""A box copied between two arrays of one shape, written under a mask.

CutMix (timm's ``Mixup``, torchvision's ``v2.CutMix``) pastes a random box of
the batch, flipped or rolled by one, into the batch, a new box every step::

    x[:, :, y0:y1, x0:x1] = x.flip(0)[:, :, y0:y1, x0:x1]

Written through the views (a slice of the source, a ``dynamic_update_slice``
into the destination), the box's size is a shape of the program, so every
new box compiled one more program. Where the destination and the source are
the same slices (step 1, one per dimension) of two storages of one shape and
type, the copy is ``select(inside, source, destination)`` over the whole
storages, ``inside`` the box (an iota per sliced dimension compared with its
bounds): eager's values bit for bit, no shape of the box in the program, its
bounds program parameters. The scalar policy says when
(:meth:`~lazycore.trace.scalar_policy.ScalarPolicy.varies`): while the box
at the user's line repeats, the views' static slices stay; from the first
other box on, the mask is written and later boxes compile nothing.
"""

from __future__ import annotations

from lazycore.trace import core, views
from lazycore.trace.scalar_policy import POLICY

from .dtypes import CHALF, lazy_dtype
from .lowering import apply, broadcast
from .tensor import Tensor

_Slice = views.Slice


def copy_box(dst, src) -> bool:
    """Write ``src`` into ``dst`` as a masked box where they are one (see the
    module) whose bounds have varied at the user's line; False, with nothing
    done, otherwise (the caller copies through the views)."""
    steps = dst._steps
    if not steps or type(src) is not Tensor or len(src._steps) != len(steps):
        return False
    bounds, dims = [], set()
    for a, b in zip(steps, src._steps):
        if type(a) is not _Slice or type(b) is not _Slice or a.step != 1 or b.step != 1:
            return False
        if a.dim != b.dim or a.start != b.start or a.count != b.count or a.dim in dims:
            return False  # (two slices of one dimension: the second counts from the first's start)
        dims.add(a.dim)
        bounds.append((a.dim, a.start, a.start + a.count))
    to, source = dst._storage.handle, src._storage.handle
    if (to.type != source.type or to.device != source.device or dst.dtype != src.dtype or dst.dtype is CHALF
            or lazy_dtype(dst.dtype) != to.dtype):
        return False
    if not POLICY.varies(("box", to.type), tuple(bounds)):
        return False
    dev, shape = to.device, to.shape
    inside = None
    for d, lo, hi in bounds:
        n = (shape[d],)
        at = apply("iota", dim=0, shape=n, dtype="i64", device=dev)
        low = broadcast(core.scalar(lo, "i64", dev, fold=False), n)
        high = broadcast(core.scalar(hi, "i64", dev, fold=False), n)
        along = apply("and", apply("compare", at, low, direction="GE"), apply("compare", at, high, direction="LT"))
        along = apply("broadcast_in_dim", along, dims=(d,), shape=shape)
        inside = along if inside is None else apply("and", inside, along)
    views.write(dst._storage, (), apply("select", inside, source, to))
    return True
