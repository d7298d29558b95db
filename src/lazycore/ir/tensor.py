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

import itertools
import weakref

from lazycore.dialect.types import ShapeError
from lazycore.ir.context import LOCK, TRACE
from lazycore.ir.failure import Failure
from lazycore.ir.graph import Data, Value

_ref = weakref.ref
_set = object.__setattr__


class Arena:
    """Live handles of one device, oldest first, and an index of those whose
    value may be pending work (:meth:`pending`)."""

    __slots__ = ("_live", "_drop", "_pending", "_made")

    def __init__(self):
        # Keys are weak references; insertion order is creation order, so the
        # outputs of a barrier (and thus its cache key) are deterministic.
        # The value is the handle's place in that order (:meth:`pending` sorts by it).
        self._live: dict[weakref.ref, int] = {}
        # handles given pending work (made, or assigned a computation) and not
        # yet seen settled by :meth:`pending`: every pending handle is among
        # them, so a read or barrier asks these, not every live handle (scipy's
        # cubature holds thousands of settled regions and reads one at a time)
        self._pending: dict[weakref.ref, None] = {}
        self._made = itertools.count()
        live, pending = self._live, self._pending

        def drop(ref, live=live, pending=pending):
            live.pop(ref, None)
            pending.pop(ref, None)

        self._drop = drop

    def live(self) -> list["LazyTensor"]:
        out = []
        for ref in list(self._live):
            t = ref()
            if t is not None:
                out.append(t)
        return out

    def pending(self) -> list["LazyTensor"]:
        """The live handles whose value is pending work (not device data), oldest
        first: the same handles, in the same order, as those of :meth:`live`
        that are pending. Costs the handles given pending work since the last
        call, not every live one; the settled ones it meets leave the index."""
        live, index = self._live, self._pending
        found = []
        for ref in list(index):
            t = ref()
            if t is None:
                continue
            if isinstance(t._value[0], Data):
                index.pop(ref, None)
                if isinstance(t._value[0], Data):
                    continue
                index[ref] = None  # (given pending work meanwhile: it stays)
            at = live.get(ref)
            if at is not None:
                found.append((at, t))
        found.sort(key=_first)
        return [t for _, t in found]

    def __len__(self) -> int:
        return len(self._live)


def _first(pair):
    return pair[0]


class LazyTensor:
    """A handle on a lazy value. Build them with :mod:`lazycore.core`."""

    __slots__ = ("_value", "device", "_held", "_key", "_arena", "__weakref__")
    # ``_held`` (set by the runtime, unset until then): id() of the device data
    # a barrier or an upload last gave this handle, so the next barrier can
    # donate that buffer to the handle's own new value (see barrier.plan_donation).
    # ``_key``, ``_arena``: its registration in the arena it was made in (a traced
    # body's handles are in an arena of their own, lazycore.trace.control)

    def __init__(self, value: Value, device):
        _set(self, "_value", value)
        _set(self, "device", device)
        arena = device.arena
        key = _ref(self, arena._drop)
        _set(self, "_key", key)
        _set(self, "_arena", arena)
        arena._live[key] = next(arena._made)  # registered until collected
        if not isinstance(value[0], Data):
            arena._pending[key] = None

    def __setattr__(self, name, value):
        # every write of a pending value enters the arena's index of pending
        # handles (Arena.pending): assign, a barrier's containment, a check's
        # restored value, a read's own answer
        _set(self, name, value)
        if name == "_value" and not isinstance(value[0], Data):
            self._arena._pending[self._key] = None

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
