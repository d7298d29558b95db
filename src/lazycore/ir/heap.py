"""The objects the imports made, kept out of the garbage collector's full passes.

A process that imports torch holds some 350,000 objects that live as long as
it does (modules, functions, classes, docstrings). Python's full collection
walks every one of them whenever enough new objects have survived, and a
first training step makes that many (nodes, recorded lowerings, meta
results): one full collection was 0.19 s of a small GPT's 0.6 s first step in
a new process whose program was on disk. ``gc.freeze()`` moves what is alive
now to a generation the collector never walks; those objects are still freed
by reference counting, only cycles among them stay. A frontend calls
:func:`freeze_imports` once its imports are done. Then a barrier calls
:func:`freeze_at_barrier` twice in a process's life:

- at the first barrier: moving a module to the device and making its
  optimizer import about as much again as the frontend did (torch's
  ``torch.distributed.tensor`` with sympy, and ``torch._dynamo``: 130,000
  objects for a small GPT), and the first step's trace then walked them all
  in one collection of the second generation, 120 ms of a 650 ms trace in a
  process whose program was on disk;
- after the first barrier that ran a program: the first step imports more
  (torch's meta kernels, the compiler), and a training loop then paid a full
  collection of ~100 ms every 15 to 20 steps of a 27 ms GPT step.

Garbage cycles alive at those two points stay too: the setup's and one
step's, once. ``LAZYCORE_GC_FREEZE=0`` leaves the collector as it is.

The young generation: a step's pending graph is some thousands of nodes and
values, alive until its barrier and then freed by reference counting (a
graph holds no cycles). With CPython's first threshold of 700 allocations the
collector ran five times in every step of a small GPT and walked each node
about twice, 4-9 ms of each step's CPU. With the threshold above a step's
peak, the count falls back at every barrier and a steady loop hardly
collects. ``LAZYCORE_GC_THRESHOLD`` sets it (20,000; 0 leaves it), only when
it is still CPython's: a user's own setting stays.
"""

from __future__ import annotations

import contextlib
import gc

from lazycore.ir.config import settings


_CPYTHON_THRESHOLD = 700


def freeze_imports() -> None:
    """Freeze what is alive, and raise the first threshold (module doc)."""
    if settings.gc_freeze:
        gc.freeze()
    first, *rest = gc.get_threshold()
    if settings.gc_threshold and first == _CPYTHON_THRESHOLD:
        gc.set_threshold(settings.gc_threshold, *rest)


_frozen_at: set[str] = set()


def freeze_at_barrier(ran_program: bool) -> None:
    """At the first barrier, and after the first that ran a program: what
    the setup and then the first step imported and made stays (module doc)."""
    when = "program" if ran_program else "barrier"
    if when not in _frozen_at:
        _frozen_at.update(("barrier", when))
        freeze_imports()


@contextlib.contextmanager
def collector_paused():
    """No collection inside (a compile's lowering): it allocates many
    short-lived objects, and the collector walked them ~40 times in one
    12-layer step's lowering, ~10% of it. What it leaves is collected later."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
