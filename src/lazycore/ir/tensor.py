"""Lazy tensor handles and the registry of live ones.

A :class:`LazyTensor` is what a frontend holds: a device and the value
(:class:`~lazycore.ir.graph.Value`) currently behind it, either pending
computation or device data. An in-place update swaps the value behind the
handle (:meth:`LazyTensor.assign`); graphs that used the old value keep it.

Every handle registers, in creation order, with its device's :class:`Arena`
through a weak reference that removes itself when the handle is collected.
A barrier takes all live handles with pending values on a device as the
outputs of one program, which is what makes buffer donation safe (the
LazyTensor paper's DeviceContextArena).
"""

from __future__ import annotations

import weakref

from lazycore.dialect.types import ShapeError
from lazycore.ir.context import LOCK, TRACE
from lazycore.ir.failure import Failure
from lazycore.ir.graph import Data, Value

_ref = weakref.ref


class Arena:
    """Live handles of one device, oldest first."""

    __slots__ = ("_live", "_drop")

    def __init__(self):
        # Keys are weak references; insertion order is creation order, so the
        # outputs of a barrier (and thus its cache key) are deterministic.
        self._live: dict[weakref.ref, None] = {}
        live = self._live

        def drop(ref, live=live):
            live.pop(ref, None)

        self._drop = drop

    def live(self) -> list["LazyTensor"]:
        out = []
        for ref in list(self._live):
            t = ref()
            if t is not None:
                out.append(t)
        return out

    def __len__(self) -> int:
        return len(self._live)


class LazyTensor:
    """A handle on a lazy value. Build them with :mod:`lazycore.core`."""

    __slots__ = ("_value", "device", "_held", "__weakref__")
    # ``_held`` (set by the runtime, unset until then): id() of the device data
    # a barrier or an upload last gave this handle, so the next barrier can
    # donate that buffer to the handle's own new value (see barrier.plan_donation)

    def __init__(self, value: Value, device):
        self._value = value
        self.device = device
        arena = device.arena
        arena._live[_ref(self, arena._drop)] = None  # registered until collected

    @property
    def value(self) -> Value:
        return self._value

    @property
    def type(self):
        return self._value.node.types[self._value.index]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self) -> str:
        return self.type.dtype

    @property
    def pending(self) -> bool:
        """True while the value is a computation not yet run (no device data).
        A computation that failed is not pending: reading it raises
        (:mod:`lazycore.runtime.failures`)."""
        return not isinstance(self._value.node, Data)

    def assign(self, new: "LazyTensor") -> "LazyTensor":
        """In-place update: this handle now stands for ``new``'s value.

        The type and device stay those of the handle, as for an in-place op.
        """
        if not isinstance(new, LazyTensor):
            raise TypeError(f"assign expects a LazyTensor, got {type(new).__name__}")
        if new.device is not self.device:
            raise ValueError(f"assign: value is on {new.device.name}, the handle on {self.device.name}")
        if new.type != self.type:
            raise ShapeError(f"an in-place update keeps the type: handle is {self.type}, new value is {new.type}")
        with LOCK:  # one step of the shared graph: the automatic barriers' watch reads the step log (docs/threads.md)
            TRACE.assigning(self)  # a recorded lowering that assigns to a handle it did not make cannot be replayed
            watch = TRACE.updates
            if watch is not None:
                watch(self, new._value)
            self._value = new._value
        return self

    def numpy(self):
        """The value on the host (a barrier on its device when pending)."""
        return self.device.read(self)

    def __repr__(self) -> str:
        node = self._value.node
        if not isinstance(node, Data):
            state = "pending"
        else:
            state = "failed" if type(node.storage) is Failure else "data"
        return f"<LazyTensor {self.type} on {self.device.name}, {state}>"
