"""Lazy tensor handles and the registry of live ones.

A :class:`LazyTensor` is what a frontend holds: a device and the value
(:class:`~lazycore.ir.graph.Value`) currently behind it, either pending
computation or device data. An in-place update swaps the value behind the
handle (:meth:`LazyTensor.assign`); graphs that used the old value keep it.

Every handle registers, in creation order, with its device's :class:`Arena`
through a weak reference that removes itself when the handle is collected.
A barrier takes all live handles with pending values on a device as the
outputs of one program, which is what makes buffer donation safe (the
LazyTensor paper's DeviceContextArena). The arena also answers which live
handles hold pending work without a walk of them all (:meth:`Arena.pending`):
a read among thousands of settled arrays (scipy's ``integrate.cubature``)
asks it several times. And it answers whether a live handle holds a given
leaf (or a row of a given stack) without that walk either
(:meth:`Arena.holds`): a barrier never donates such a buffer.
"""

from __future__ import annotations

import weakref

from lazycore.dialect.types import ShapeError
from lazycore.ir.context import LOCK, TRACE
from lazycore.ir.failure import Failure
from lazycore.ir.graph import Data, Value

_ref = weakref.ref
_refs_of = weakref.getweakrefs


class Arena:
    """Live handles of one device, oldest first, and which of them may hold
    pending work (:meth:`pending`)."""

    __slots__ = ("_live", "_drop", "_index", "_placed", "_holders")

    def __init__(self):
        # Keys are weak references; insertion order is creation order, so the
        # outputs of a barrier (and thus its cache key) are deterministic.
        # A key's value is its handle's place in that order, written by
        # pending() (None until then: making a handle, every op's, writes
        # nothing more than its key)
        self._live: dict[weakref.ref, int | None] = {}
        # the placed handles that may hold pending work: those placed pending
        # and those a writer gave pending work since (LazyTensor.take, assign),
        # each under a weak reference to it (its key here, or another: equal
        # while it lives); pending() drops the settled and the collected. So
        # every placed handle with pending work is here, and a writer that
        # replaces pending work (an in-place op's second update) enters nothing
        self._index: dict[weakref.ref, None] = {}
        self._placed = 0
        # id() of device data (or of a stack, leaf.row's) -> weak references
        # to the placed handles that held it when last seen, a superset of
        # the placed live handles that hold it now: pending() enters a handle
        # placed settled, and one that settled since (it leaves the index);
        # a writer that swaps one device data for another enters it too
        # (take, assign, _held_anew). holds() checks each entry's handle.
        self._holders = _Holders()
        live = self._live

        def drop(ref, live=live):
            live.pop(ref, None)

        drop.arena_index = self._index  # (a writer finds a handle's arena from its key's callback: _given)
        drop.arena_holders = self._holders
        self._drop = drop

    def live(self) -> list["LazyTensor"]:
        out = []
        for ref in list(self._live):
            t = ref()
            if t is not None:
                out.append(t)
        return out

    def pending(self) -> list["LazyTensor"]:
        """The live handles whose value is not device data (pending work, or a
        padded result's region), oldest first: those of :meth:`live`, in its
        order, that are pending. Costs the handles made or given pending work
        since the last call and the pending ones, not every live one."""
        live, index = self._live, self._index
        while True:  # the handles made since the last call: the registry's unplaced tail
            made = []
            try:
                for ref, at in reversed(live.items()):
                    if at is not None:
                        break
                    made.append(ref)
            except RuntimeError:  # (a handle collected, or made by another thread, meanwhile)
                continue
            break
        n = self._placed
        holders = self._holders
        for ref in reversed(made):
            live[ref] = n
            n += 1
            t = ref()
            if t is None:
                live.pop(ref, None)  # (collected meanwhile: its drop may have run before the place was written)
            elif type(t._value[0]) is not Data:
                index[ref] = None
            else:
                holders.enter(ref, t._value[0])
        self._placed = n
        found = []
        for ref in list(index):
            t = ref()
            if t is None:
                index.pop(ref, None)
                continue
            if type(t._value[0]) is Data:
                index.pop(ref, None)
                leaf = t._value[0]
                if type(leaf) is Data:  # settled since: it holds its leaf
                    self._holders.enter(ref, leaf)
                    continue
                index[ref] = None  # (given pending work meanwhile: it stays)
            at = live.get(ref)
            if at is not None:  # (None: made by another thread after the placing; placed next time)
                found.append((at, t))
        found.sort(key=_first)
        return [t for _, t in found]

    def holds(self, i: int) -> bool:
        """Whether a live handle of this arena holds the device data whose
        id() is ``i``, or a row of the stack whose id() is ``i``: what a walk
        of :meth:`live` tells (the barrier's ``held``, never donated). Exact
        after a :meth:`pending` call, for an object that is alive; costs the
        handles that held it, not every live one."""
        return self._holders.holds(i)

    def restacked(self, leaf: Data) -> None:
        """``leaf`` was made a row of a stack (``leaf.row`` set): the handles
        holding it hold that stack's row (:func:`lazycore.runtime.stacks.arguments`)."""
        self._holders.restacked(leaf)

    def __len__(self) -> int:
        return len(self._live)


class _Holders:
    """Who may hold each device data (and stack) an arena's handles held:
    :meth:`Arena.holds` without a walk of every live handle. Bounded: a
    sweep drops the handles that moved on once the entries made since the
    last one outnumber those it kept."""

    __slots__ = ("_of", "_made", "_bound")

    def __init__(self):
        self._of: dict[int, list] = {}
        self._made = 0
        self._bound = 1024

    def enter(self, ref, leaf: Data) -> None:
        """The handle of ``ref`` holds ``leaf`` now."""
        of = self._of
        refs = of.get(id(leaf))
        if refs is None:
            of[id(leaf)] = [ref]
        else:
            refs.append(ref)
        row = leaf.row
        if row is not None:
            refs = of.get(id(row[0]))
            if refs is None:
                of[id(row[0])] = [ref]
            else:
                refs.append(ref)
        self._made += 1
        if self._made > self._bound:
            self._sweep()

    def restacked(self, leaf: Data) -> None:
        refs = self._of.get(id(leaf))
        if refs:
            self._of.setdefault(id(leaf.row[0]), []).extend(refs)

    def holds(self, i: int) -> bool:
        refs = self._of.get(i)
        if not refs:
            return False
        kept = [ref for ref in refs if _holding(ref, i)]
        if len(kept) < len(refs):
            if kept:
                self._of[i] = kept
            else:
                del self._of[i]
        return bool(kept)

    def _sweep(self) -> None:
        of = self._of
        kept = 0
        for i, refs in list(of.items()):
            held = [ref for ref in refs if _holding(ref, i)]
            if held:
                of[i] = held
                kept += len(held)
            else:
                del of[i]
        self._made = 0
        self._bound = max(1024, kept)


def _holding(ref, i: int) -> bool:
    """Whether the handle of ``ref`` lives and holds the object whose id() is
    ``i`` (its device data, or the stack its data is a row of). Both are
    alive then, so an id() names one object: a leaf dead since its entry was
    made, its id() taken by another, is answered for that other."""
    t = ref()
    if t is None:
        return False
    leaf = t._value[0]
    if type(leaf) is not Data:
        return False  # (given pending work since: it re-enters when it settles)
    if id(leaf) == i:
        return True
    row = leaf.row
    return row is not None and id(row[0]) == i


def _held_anew(t: "LazyTensor") -> None:
    """``t``, which held device data, holds other device data now: it enters
    the holders of the arena that registered it (:meth:`Arena.holds`)."""
    ref = t.__weakref__
    if ref is None:
        return  # (a handle of no arena: copy.copy's)
    arena = t.device.arena
    if ref in arena._live:
        arena._holders.enter(ref, t._value[0])
        return
    for ref in _refs_of(t):  # (registered in another arena: see _given)
        holders = getattr(ref.__callback__, "arena_holders", None)
        if holders is not None:
            holders.enter(ref, t._value[0])
            return


def _first(pair):
    return pair[0]


def _given(t: "LazyTensor") -> None:
    """``t`` was given pending work: it enters the index of the arena that
    registered it (:meth:`Arena.pending`). A handle of no arena (one
    ``copy.copy`` made, without ``__init__``) stays in none."""
    ref = t.__weakref__  # (the first weak reference to t: equal to its arena's key while t lives)
    if ref is None:
        return
    arena = t.device.arena
    if ref in arena._live:
        arena._index[ref] = None
        return
    # registered in another arena than its device's now: an outer handle updated
    # while a loop's body is traced in an arena of its own (lazycore.trace.control)
    for ref in _refs_of(t):
        index = getattr(ref.__callback__, "arena_index", None)
        if index is not None:
            index[ref] = None
            return


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
        arena._live[_ref(self, arena._drop)] = None  # registered until collected (placed by Arena.pending)

    def take(self, value: Value) -> None:
        """This handle now holds ``value``: the runtime's and the tracers' own
        write of a handle's value (no checks, no in-place hooks: :meth:`assign`
        is the user's). The one way a value that is not device data is
        written into a made handle, so that :meth:`Arena.pending` knows it,
        and the one way device data replaces device data, so that
        :meth:`Arena.holds` knows it; device data may be written directly
        (``t._value = ...``) into a handle with pending work."""
        settled = type(self._value[0]) is Data
        self._value = value
        if settled:
            if type(value[0]) is not Data:
                _given(self)
            else:
                _held_anew(self)

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
            settled = type(self._value[0]) is Data
            value = self._value = new._value
            if settled:
                if type(value[0]) is not Data:  # into its arena's index (Arena.pending): _given, inlined
                    ref, arena = self.__weakref__, self.device.arena
                    if ref is not None and ref in arena._live:
                        arena._index[ref] = None
                    else:
                        _given(self)
                else:  # other device data: its holders (Arena.holds)
                    _held_anew(self)
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
