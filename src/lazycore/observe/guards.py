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

* ``compiles``: a compile after the first barrier inside the region (the
  first barrier may compile: warm-up). It is checked before compiling, so an
  error leaves the pending work pending; a program the persistent compile
  cache would load counts too (the check comes before the lookup), so a
  guarded run behaves the same whatever the disk holds.
* ``implicit_barriers``: observing a value (``core.to_numpy``, ``.item()``,
  ``.cpu()``, ``np.asarray``, a frontend fallback materializing its inputs)
  that has to run pending work first. ``lazycore.mark_step()`` is explicit
  and always allowed.
* ``transfers``: a host <-> device copy of an array (``core.from_numpy``,
  ``core.to_numpy``: ``x.to(dev)``, ``.cpu()``, ``np.asarray``, uploads).
  Scalar parameters packed at a barrier are not counted.

The settings ``guard_compiles``, ``guard_implicit_barriers`` and
``guard_transfers`` (environment ``LAZYCORE_GUARD_COMPILES=error`` and so on)
apply globally, the whole process being the region (warm-up: its first barrier
since the last ``metrics.reset()``); :func:`guard` overrides them inside a
``with`` block, and an argument left at None keeps the current mode.
"""

from __future__ import annotations

import contextlib
import logging

from lazycore.ir import events, sourceloc
from lazycore.ir.config import GUARD_MODES, override, settings

__all__ = ["GuardError", "guard"]

logger = logging.getLogger("lazycore")

KINDS = ("compiles", "implicit_barriers", "transfers")

# Barriers (metrics' "executions") before the innermost guarded region began;
# compiles are checked once more barriers than this have run.
_baseline: list[int] = [0]


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
    _baseline.append(events.EVENTS.counters["executions"])
    try:
        with override(**changes):
            yield
    finally:
        _baseline.pop()


def violation(kind: str, what: str) -> None:
    """Report ``what`` (a ``kind`` event at the user's line) by the current mode."""
    mode = getattr(settings, f"guard_{kind}")
    if mode == "allow":
        return
    msg = f"lazycore guard ({kind}={mode!r}): {what} at {sourceloc.user_location()}"
    if mode == "error":
        raise GuardError(msg)
    logger.warning(msg)


def on_compile(nodes: int) -> None:
    """A barrier is about to compile a graph of ``nodes`` nodes (a cache miss)."""
    done = events.EVENTS.counters["executions"]
    base = _baseline[-1]
    if done < base:  # metrics.reset() inside the region: count from there
        _baseline[-1] = base = 0
    if done > base:
        violation("compiles", f"compile after warm-up ({done - base} barriers already ran), a graph of {nodes} nodes")


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
