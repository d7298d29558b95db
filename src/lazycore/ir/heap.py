"""The objects the imports made, kept out of the garbage collector's full passes.

A process that imports torch holds some 350,000 objects that live as long as
it does (modules, functions, classes, docstrings). Python's full collection
walks every one of them whenever enough new objects have survived, and a
first training step makes that many (nodes, recorded lowerings, meta
results): one full collection was 0.19 s of a small GPT's 0.6 s first step in
a new process whose program was on disk. ``gc.freeze()`` moves what is alive
now to a generation the collector never walks; those objects are still freed
by reference counting, only cycles among them stay. A frontend calls
:func:`freeze_imports` once its imports are done; ``LAZYCORE_GC_FREEZE=0``
leaves the collector as it is.
"""

from __future__ import annotations

import gc

from lazycore.ir.config import settings


def freeze_imports() -> None:
    if settings.gc_freeze:
        gc.freeze()
