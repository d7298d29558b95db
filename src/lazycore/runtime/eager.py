"""Eager debug mode (``LAZYCORE_EAGER=1``, ``lazycore.config.eager()``): every
frontend op runs at once.

Each op is recorded as always (the same lowerings, recorded and replayed as
in lazy mode), and when the outermost frontend call returns, the device's
pending values (the op's results) run as a program of their own, which is
waited for. So the answers are lazy mode's, each op is its own program, and
an error a value check finds (integer division by zero held on the device,
an index out of range) is raised at the op's own call, not at a later
barrier: a problem can be bisected op by op. Together with
``debug_nans`` it names a NaN's op at its call.

A frontend takes part by wrapping its entry points with :func:`op` while the
mode is on (:func:`lazycore.ir.config.watch`); off, nothing is wrapped and
the lazy path reads no setting. Nothing runs inside a recording (a capture's
first call, ``torch.compile``, a lowering's recording): those keep their
programs (:attr:`lazycore.runtime.autostep.StepCutter.held`). A recorded
whole (a replayed optimizer step) runs at the next op or barrier.
"""

from __future__ import annotations

import functools

from lazycore.ir.context import LOCK, TRACE
from lazycore.ir.failure import Failure
from lazycore.ir.graph import Data
from lazycore.runtime import barrier
from lazycore.runtime import device as _device
from lazycore.runtime import autostep  # noqa: F401  (gives TRACE its cutter)

DEPTH = [0]
"""Frontend calls in progress (under ``LOCK``): only the outermost one runs its results."""


def settle() -> None:
    """Run every pending live value of every device now, wait for it, and
    raise the first failure among them (``BarrierError``, eager's type)."""
    with LOCK:
        for dev in _device.known_devices():
            pending = dev.arena.pending()  # (every op's: not a walk of every live handle)
            if not pending:
                continue
            barrier.sync(dev, True)
            for t in pending:
                leaf = t._value.node
                if type(leaf) is Data and type(leaf.buffer) is Failure:
                    raise leaf.buffer.error()


def op(fn):
    """``fn`` (a frontend's entry point) that runs its results before it returns."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with LOCK:
            DEPTH[0] += 1
            try:
                out = fn(*args, **kwargs)
            finally:
                DEPTH[0] -= 1
            if DEPTH[0] == 0 and TRACE.recorder is None and not TRACE.cutter.held:
                settle()
            return out

    run.__lazycore_eager__ = fn
    return run


class Swaps:
    """Attributes of classes and modules replaced by :func:`op` wrappers while
    the mode is on, and put back when it is left."""

    def __init__(self, targets):
        self.targets = targets
        """A function returning ``(owner, name)`` pairs to wrap."""
        self.saved: list = []

    def __call__(self, on: bool) -> None:
        if on and not self.saved:
            for owner, name in self.targets():
                raw = owner.__dict__[name]
                if isinstance(raw, classmethod):
                    new = classmethod(op(raw.__func__))
                elif isinstance(raw, staticmethod):
                    new = staticmethod(op(raw.__func__))
                else:
                    new = op(raw)
                self.saved.append((owner, name, raw))
                setattr(owner, name, new)
        elif not on:
            for owner, name, raw in reversed(self.saved):
                setattr(owner, name, raw)
            self.saved.clear()
