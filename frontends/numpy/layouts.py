"""NumPy's memory orders (``order="C"``, ``"F"``, ``"A"``, ``"K"``) for lazy arrays.

A lazy value has no memory, but NumPy's answers depend on the layout the array
would have: ``strides`` and ``flags``, and the values of ``ravel("K")``,
``reshape(..., order="A")`` and ``tobytes(order="A")``. A storage carries its
base's physical strides (:class:`lazycore.trace.views.Storage`), so an array made
in another order is the same value with other strides: nothing is added to the
graph. The host copies NumPy is handed (fallbacks, ``numpy.asarray``) are laid
out in the array's memory order, so what NumPy reads from memory is what it
would read from its own array.

This module is plain NumPy over shapes and strides (in elements); :mod:`.array`
applies it to arrays.
"""

from __future__ import annotations

import numpy as np

_ORDERS = ("C", "F", "A", "K")


def check(order, allowed=_ORDERS) -> str:
    """``order`` as NumPy takes it (None is "K"), or NumPy's ValueError."""
    if order is None:
        order = "K"
    if not isinstance(order, str) or order.upper() not in _ORDERS:
        raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")
    order = order.upper()
    if order not in allowed:
        raise ValueError("only 'C' or 'F' order is permitted")
    return order


def fortran(shape) -> tuple[int, ...]:
    """Column-major strides, in elements, of an array of ``shape``."""
    strides, acc = [], 1
    for n in shape:
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(strides)


def strides(shape, order: str, proto=None, c_strides=None) -> tuple[int, ...] | None:
    """Element strides NumPy gives a new array of ``shape`` made in ``order``
    (``"A"`` and ``"K"`` follow ``proto``, a NumPy array of that shape: a
    stand-in or a host array); None where that is row-major (``c_strides``)."""
    if order == "C" or proto is None and order in "AK" or len(shape) < 2:
        return None
    if order == "F" or proto.flags.f_contiguous and not proto.flags.c_contiguous:
        return fortran(shape)
    if order == "A" or proto.flags.c_contiguous:
        return None
    # NumPy's K: the prototype's axes sorted by their strides, laid out densely
    # (itemsize 1: the stand-ins' strides are elements)
    got = np.empty_like(proto, dtype=np.int8, order="K").strides
    return None if got == c_strides else tuple(got)
