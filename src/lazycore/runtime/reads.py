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
def _materialize(t: LazyTensor, cut: bool = False) -> Data:
    """The device data behind ``t`` after a barrier; ``cut``: a padded
    result's slice (:class:`lazycore.runtime.buckets.Cut`) may be returned
    instead (the caller slices on the host), else its own barrier computes it."""
    if not isinstance(t, LazyTensor):
        raise TypeError(f"expected a LazyTensor, got {type(t).__name__}")
    TRACE.taint()  # a lowering that observes values cannot be replayed
    if t.pending and type(t._value.node) is not buckets.Cut:
        events.emit("implicit_barrier", t.type)
        barrier.sync(t.device)
    running = t.device.running
    if running is not None and running.flags:
        t.device.wait()  # its value checks may fail this value (lazycore.runtime.checks)
    leaf = t._value.node
    padded = leaf.source if type(leaf) is buckets.Cut else leaf
    if type(padded.buffer) is Failure:  # its computation failed (lazycore.runtime.failures)
        raise padded.buffer.error()
    if not cut and type(leaf) is buckets.Cut:  # the slice, as a program of its own
        t.device.wait()
        leaf = Data(barrier.run_alone(t.device, [t._value])[0], t.type, True)
        t._value = Value(leaf, 0)
    return leaf


@_locked
def to_numpy(t: LazyTensor) -> np.ndarray:
    """The value on the host: an implicit barrier for ``t``'s device.

    Raises :class:`~lazycore.ir.failure.BarrierError` when computing it failed."""
    leaf = _materialize(t, cut=True)
    cut = None
    if type(leaf) is buckets.Cut:  # a padded result: the valid part is cut here
        cut, leaf = leaf, leaf.source
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
            host = np.array(pjrt.to_host(_materialize(t).buffer))
        if cut is not None:
            host = cut.host(host)
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
