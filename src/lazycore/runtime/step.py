"""One barrier's step record, and its first stage: collecting the pending handles.

A barrier (:func:`lazycore.runtime.barrier.sync`) is a fixed sequence of
stages over one :class:`Step`: collect (here) -> plan (recall | walk,
:mod:`lazycore.runtime.planning`) -> transforms
(:mod:`lazycore.runtime.transforms`) -> key -> program (memory | disk |
compile, :mod:`lazycore.runtime.programs`) -> launch -> settle
(:mod:`lazycore.runtime.launches`), or containment when its program fails
(:mod:`lazycore.runtime.containment`). Each stage reads and fills the
record's fields; none reaches back into the barrier.
"""

from __future__ import annotations

from lazycore.ir.graph import Data
from lazycore.runtime import buckets, stacks


class Step:
    """What a barrier knows about its step, filled in stage by stage."""

    __slots__ = ("device", "wait", "walker", "runner", "pending", "held", "slots", "walk", "encoding", "data",
                 "packs", "out_types", "counts", "donate", "key", "pipeline", "fp", "exe", "hit", "loaded", "stacked",
                 "padded", "flags", "walked")

    def __init__(self, device, wait: bool, walker, runner):
        self.device = device
        self.wait = wait
        """Return once the program has finished (else once it has started)."""
        self.walker = walker
        """The walk class (:class:`lazycore.ir.walk.Walk`, as the barrier names it)."""
        self.runner = runner
        """Runs values as a program of their own (:func:`lazycore.runtime.standalone.run_alone`,
        as the barrier names it): a failure's retries."""
        self.pending: list = []
        """The live handles whose values are computations, in registry order."""
        self.held: Held | set[int] = set()
        """ids of the device data (and stacks) live handles hold: never donated
        (``id(x) in held``; a :class:`Held` once collected)."""
        self.slots: list[int] = []
        """For each pending handle, its output index."""
        self.walk = None
        """The walk of the outputs (the padded one when padded); None when recalled."""
        self.walked = None
        """The walk of the outputs before any transform rewrote it; None when recalled."""
        self.encoding: bytes | None = None
        self.data: list[Data] = []
        """The device-data parameters, in argument order."""
        self.packs: list = []
        """``(dtype, scalar leaves)``, one pack per dtype."""
        self.out_types: list = []
        self.counts: tuple = ()
        """(nodes, outputs, parameters), for :func:`lazycore.ir.events.record_graph`."""
        self.donate: dict[int, int] = {}
        """Parameter index -> output index (:func:`lazycore.runtime.planning.plan_donation`)."""
        self.key: bytes | None = None
        self.pipeline = None
        self.fp = None
        """The step log's encoding (:func:`lazycore.runtime.stepplans.fingerprint`), or None."""
        self.exe = None
        self.hit = False
        """The program was in the in-memory cache."""
        self.loaded = False
        """The program came from the persistent cache."""
        self.stacked: list | None = None
        """The device-data arguments of a program that takes stacks (:mod:`lazycore.runtime.stacks`)."""
        self.padded = None
        """The :class:`~lazycore.runtime.buckets.Bucketed` program it runs, or None."""
        self.flags: list = []
        """The value checks' flags the program returns after its outputs."""

    def outputs(self) -> list:
        """The values of the step's outputs, in output order."""
        values: list = [None] * len(self.out_types)
        for t, k in zip(self.pending, self.slots):
            values[k] = t._value
        return values


class Held:
    """The ids of the device data (and stacks) live handles hold, asked one
    at a time (``id(x) in held``): the arena answers for settled handles
    (:meth:`lazycore.ir.tensor.Arena.holds`), without a walk of every live
    one (2,000 live arrays: most of a small step's barrier); the padded
    results' regions pending handles hold are added by :func:`collect`.
    Asked for the step's parameters and their stacks, during its barrier."""

    __slots__ = ("ids", "arena")

    def __init__(self, arena):
        self.ids: set[int] = set()
        self.arena = arena

    def add(self, i: int) -> None:
        self.ids.add(i)

    def __contains__(self, i: int) -> bool:
        return i in self.ids or self.arena.holds(i)

    def __bool__(self) -> bool:
        return True  # (may hold some: only a shortcut's question, stacks.keeps)


def collect(device, wait: bool, walker, runner) -> Step:
    """The step of ``device``: its pending handles, and the leaves live handles hold."""
    step = Step(device, wait, walker, runner)
    arena = device.arena
    pending, held = step.pending, Held(arena)
    step.held = held
    for t in arena.pending():  # (first: the arena's holders are exact after it)
        padded = buckets.padded_leaf(t._value.node)
        if padded is None:
            pending.append(t)
        else:  # a padded result's valid region: no work (lazycore.runtime.buckets)
            held.add(id(padded))
            stacks.held_stack(padded, held)
    return step
