"""Reads: a lazy value's device data or host copy, after the barrier that computes it.

:class:`~lazycore.runtime.device.Device` reads through here
(:meth:`lazycore.ir.tensor.LazyTensor.numpy`), so nothing here knows devices
beyond the handle's own; :mod:`lazycore.runtime.transfer` hands these on
with the uploads.
"""

from __future__ import annotations

import numpy as np

from lazycore.ir import events
from lazycore.ir.context import TRACE, locked
from lazycore.ir.failure import Failure
from lazycore.ir.graph import Data, Value
from lazycore.ir.tensor import LazyTensor
from lazycore.runtime import barrier, buckets, pjrt

# a read's barrier and copy are one step that no other thread's barrier
# splits (it could donate the buffer being read): docs/threads.md
_locked = locked


@_locked
def _materialize(t: LazyTensor) -> Data:
    """The device data behind ``t`` after a barrier (a padded result's
    valid region computed by a program of its own)."""
    return _settled(t)[0]


def _settled(t: LazyTensor, cut: bool = False) -> tuple[Data, object]:
    """The device data behind ``t`` after a barrier, and None; ``cut``: for
    a padded result's valid region (:func:`lazycore.runtime.buckets.padded_leaf`)
    the padded result and its region instead (the caller cuts it on the
    host), else that region's own barrier computes it."""
    if not isinstance(t, LazyTensor):
        raise TypeError(f"expected a LazyTensor, got {type(t).__name__}")
    TRACE.taint()  # a lowering that observes values cannot be replayed
    if t.pending and buckets.padded_leaf(t._value.node) is None:
        events.emit("implicit_barrier", t.type)
        barrier.sync(t.device)
    running = t.device.running
    if running is not None and running.flags:
        t.device.wait()  # its value checks may fail this value (lazycore.runtime.checks)
    leaf = t._value.node
    padded = None if type(leaf) is Data else buckets.padded_leaf(leaf)
    if padded is not None:
        leaf = padded
    if type(leaf.buffer) is Failure:  # its computation failed (lazycore.runtime.failures)
        raise leaf.buffer.error()
    if padded is None:
        return leaf, None
    if cut:
        return leaf, leaf.valid
    t.device.wait()  # the slice, as a program of its own
    leaf = Data(barrier.run_alone(t.device, [t._value])[0], t.type, True)
    t._value = Value(leaf, 0)
    return leaf, None


@_locked
def to_numpy(t: LazyTensor) -> np.ndarray:
    """The value on the host: an implicit barrier for ``t``'s device.

    Raises :class:`~lazycore.ir.failure.BarrierError` when computing it failed."""
    leaf, region = _settled(t, cut=True)  # a padded result: its valid region is cut here
    # A copy: the host view of a CPU buffer shares its memory, and the buffer
    # may later be donated and overwritten.
    events.emit("transfer", "device-to-host", leaf.types[0], None)
    with events.timed("transfer"):
        try:
            host = np.array(pjrt.to_host(leaf.buffer))
        except Exception:
            if t.device.running is None:
                raise
            host = None
        if host is None:
            # the program still running failed: waiting settles its results
            # in their leaves (lazycore.runtime.launches.Launch); read again
            t.device.wait()
            host = np.array(pjrt.to_host(_settled(t, cut=True)[0].buffer))  # a region: its padded result again
        if region is not None:
            host = region.host(host)
    events.bump("transfers_to_host")
    events.bump("bytes_to_host", host.nbytes)
    return host


@_locked
def to_buffer(t: LazyTensor):
    """The device buffer behind ``t`` (a barrier); it is never donated afterwards.

    Raises :class:`~lazycore.ir.failure.BarrierError` when computing it failed."""
    leaf = _materialize(t)
    leaf.owned = False
    return leaf.buffer
