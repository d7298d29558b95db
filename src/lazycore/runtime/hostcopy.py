"""The one device-to-host copy: a buffer's value read into host memory, as
one announced transfer (its ``transfer`` event, which a transfer guard sees,
its timing and its counters).

A read (:mod:`lazycore.runtime.reads`), a small result kept on the host for
later reads, and a marked input padded through the host
(:mod:`lazycore.runtime.buckets`) copy here. A buffer whose program failed
while running cannot be read; what that means is the caller's: ``again``
gives the buffer to read instead (the read waits, so that the failure
settles into the value's leaf, and reads that: it raises the failure
naming the user's line), and without it the error reaches the caller (which
falls back, or declines to pad).
"""

from __future__ import annotations

import numpy as np

from lazycore.ir import events
from lazycore.runtime import pjrt


def to_host(buffer, t, again=None, copy: bool = True, cut=None) -> np.ndarray:
    """The value of the device ``buffer`` (of type ``t``) on the host.

    ``copy``: a copy of its own (a CPU buffer's host view shares its memory,
    and the buffer may later be donated and overwritten); False where the
    caller copies anyway. ``again``: where reading fails, called for the
    buffer to read instead, or None to raise the error; without ``again``
    the error is raised. ``cut``: the part of the value that was asked for
    (a padded result's valid region: :meth:`lazycore.runtime.buckets.Region.host`),
    which the byte counter counts."""
    read = np.array if copy else np.asarray
    events.emit("transfer", "device-to-host", t, None)
    with events.timed("transfer"):
        try:
            host = read(pjrt.to_host(buffer))
        except Exception:
            buffer = None if again is None else again()
            if buffer is None:
                raise
            host = read(pjrt.to_host(buffer))
        if cut is not None:
            host = cut(host)
    events.bump("transfers_to_host")
    events.bump("bytes_to_host", host.nbytes)
    return host
