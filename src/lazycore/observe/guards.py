"""Guards: make recompiles, implicit barriers or host transfers an error (or a warning).

In the spirit of JAX's ``transfer_guard``: inside a marked region, things
that quietly cost time in a lazy system are refused or reported, naming the
user's line that caused them::

    with lazycore.guards.guard(compiles="error", implicit_barriers="error", transfers="warn"):
        for x, y in batches:
            step(x, y)                 # the first step may compile (warm-up) ...
            lazycore.mark_step()       # ... any compile after the first barrier raises GuardError

Three kinds, each ``"allow"``, ``"warn"`` (a WARNING on the ``lazycore``
logger) or ``"error"`` (:class:`GuardError`):

* ``compiles``: a compile after warm-up. It is checked before compiling, so
  an error leaves the pending work pending; a program the persistent compile
  cache would load counts too (the check comes before the lookup), so a
  guarded run behaves the same whatever the disk holds.

  Warm-up is the region's first barrier, and then every program that
  reads more *state* than any program compiled in the region before it. A
  barrier's state is what its graph reads and no live tensor holds any
  longer: values a tensor held that an in-place update replaces (a
  parameter before ``opt.step()``, a momentum buffer), or that only the
  graph keeps (a running sum rebound, ``total = total + loss``). That is how
  a training loop's state appears: the first ``opt.step()`` creates SGD's
  momentum buffers or Adam's moments, so the second step's program reads
  (and updates) values the first step's did not have and compiles once
  more; from then on the steps read the same state, and a compile counts.
  A value merely read (``c = a * b``, ``b`` still held), a new batch, or an
  input whose shape changes (a history kept with ``torch.cat``: one value
  each step) brings no new state. With a read in the middle of a step
  (``loss.item()`` before ``opt.step()``), each of the step's programs is
  allowed as above. The program that *creates* state after the region's
  first barrier counts (it reads nothing new); a region whose first barrier
  compiled nothing (its programs were cached) has no warm-up.
* ``implicit_barriers``: observing a value (``core.to_numpy``, ``.item()``,
  ``.cpu()``, ``np.asarray``, a frontend fallback materializing its inputs)
  that has to run pending work first. ``lazycore.mark_step()`` is explicit
  and always allowed.
* ``transfers``: a host <-> device copy of an array (``core.from_numpy``,
  ``core.to_numpy``: ``x.to(dev)``, ``.cpu()``, ``np.asarray``, uploads).
  Scalar parameters packed at a barrier are not counted.

The settings ``guard_compiles``, ``guard_implicit_barriers`` and
``guard_transfers`` (environment ``LAZYCORE_GUARD_COMPILES=error`` and so on)
apply globally, the whole process being the region (warm-up starts again at
its first barrier since the last ``metrics.reset()``); :func:`guard`
overrides them inside a ``with`` block, and an argument left at None keeps
the current mode.
"""

from __future__ import annotations

import contextlib
import logging

from lazycore.ir import events, sourceloc
from lazycore.ir.config import GUARD_MODES, override, settings

__all__ = ["GuardError", "guard"]

logger = logging.getLogger("lazycore")

KINDS = ("compiles", "implicit_barriers", "transfers")


class _Region:
    """A guarded region's warm-up (the bottom one: the whole process)."""

    __slots__ = ("base", "last", "most")

    def __init__(self, base: int):
        self.base = base
        """Barriers (metrics' "executions") before the region began."""
        self.last = base
        """The count at the region's last barrier (a smaller count: ``metrics.reset()``)."""
        self.most: dict = {}
        """device -> the most state a program compiled in the region read
        (infinite: its first barrier compiled nothing, so it has no warm-up)."""

    def current(self, done: int) -> "_Region":
        if done < self.last or done < self.base:  # metrics.reset() inside the region: warm-up again from there
            self.base = self.last = 0
            self.most = {}
        return self


_regions: list[_Region] = [_Region(0)]
"""The process, then each guarded region, innermost last."""

_device: list = [None]
"""The device of the barrier under way."""


class GuardError(RuntimeError):
    """A guarded event (compile after warm-up, implicit barrier, transfer) in an "error" region."""


@contextlib.contextmanager
def guard(compiles: str | None = None, implicit_barriers: str | None = None, transfers: str | None = None):
    """Within the block, guard the given kinds (``"allow"``, ``"warn"`` or ``"error"``)."""
    changes = {}
    for kind, mode in (("compiles", compiles), ("implicit_barriers", implicit_barriers), ("transfers", transfers)):
        if mode is None:
            continue
        if mode not in GUARD_MODES:
            raise ValueError(f"guard {kind}= must be one of {', '.join(GUARD_MODES)}, got {mode!r}")
        changes[f"guard_{kind}"] = mode
    _regions.append(_Region(events.EVENTS.counters["executions"]))
    try:
        with override(**changes):
            yield
    finally:
        _regions.pop()


def violation(kind: str, what: str) -> None:
    """Report ``what`` (a ``kind`` event at the user's line) by the current mode."""
    mode = getattr(settings, f"guard_{kind}")
    if mode == "allow":
        return
    msg = f"lazycore guard ({kind}={mode!r}): {what} at {sourceloc.user_location()}"
    if mode == "error":
        raise GuardError(msg)
    logger.warning(msg)


def _on_barrier_start(device) -> None:
    _device[0] = device


def state_read(walk, device) -> int:
    """How many of the graph's inputs (device data) no live handle on
    ``device`` holds: the state the program carries on from earlier ones."""
    held = {id(t._value.node) for t in device.arena.live() if not t.pending}
    return sum(1 for leaf in walk.data if id(leaf) not in held)


def on_compile(nodes: int, walk=None) -> None:
    """A barrier is about to compile a graph of ``nodes`` nodes (a cache
    miss), ``walk`` (:class:`lazycore.runtime.walk.Walk`; None: not known)."""
    if settings.guard_compiles == "allow" and len(_regions) == 1:
        return
    done = events.EVENTS.counters["executions"]
    region = _regions[-1].current(done)
    device = _device[0]
    state = state_read(walk, device) if walk is not None and device is not None else None
    if done == region.base:  # the region's first barrier: warm-up
        if state is not None:
            region.most[device] = max(state, region.most.get(device, -1))
        return
    most = region.most.get(device, float("inf"))
    if state is not None and state > most:  # it reads state no program before it did: warm-up
        region.most[device] = state
        return
    violation("compiles", f"compile after warm-up ({done - region.base} barriers already ran), a graph of {nodes} nodes")


def _on_barrier(walk, device, hit, donate, pipeline, loaded) -> None:
    done = events.EVENTS.counters["executions"]
    for region in _regions:
        region.current(done)
        if done == region.base + 1:
            region.most.setdefault(device, float("inf"))  # its first barrier compiled nothing: no warm-up
        region.last = done


def _on_transfer(direction: str, t, nbytes) -> None:
    if settings.guard_transfers != "allow":  # the message is made only for a guard
        size = "" if nbytes is None else f" ({nbytes} bytes)"
        violation("transfers", f"{direction} copy of a {t}{size}")


def _on_implicit_barrier(t) -> None:
    if settings.guard_implicit_barriers != "allow":
        violation("implicit_barriers", f"observing a pending {t} runs an implicit barrier")


events.listen("transfer", _on_transfer)
events.listen("implicit_barrier", _on_implicit_barrier)
events.listen("compile", on_compile)
events.listen("barrier_start", _on_barrier_start)
events.listen("barrier", _on_barrier)
