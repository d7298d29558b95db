"""Which host work a lazy run of NumPy's own Python code may not do.

:mod:`.pycode` runs NumPy's Python functions on lazy arrays. The run is
worth it only if it stays lazy: where NumPy's code reads a value (an
``asarray`` to the host, ``item()``, ``if x.any():``, a data-dependent
shape), reaches a function lazycore runs on the host (a fallback), or writes
into an argument, the run stops *before* doing it (:class:`NeedsHost`) and
the call is the counted fallback instead, as it was before the run: nothing
it did is seen (its lazy results are dropped; an argument is never written
by a run that may still stop). The readers and writers of the frontend ask
here (:func:`refuse_read`, :func:`refuse_write`): one thread-local flag,
off outside a run.
"""

from __future__ import annotations

import threading


class NeedsHost(BaseException):
    """NumPy's code, run lazily, asked for host work (a BaseException: NumPy's own
    ``except Exception``/``except ValueError`` clauses must not swallow it)."""


class _Run(threading.local):
    depth = 0
    """How many lazy runs of NumPy's code this thread is inside (one runs another's inner calls)."""
    inputs: frozenset = frozenset()
    """ids of the outermost run's lazy arguments' storages: what the caller can see."""
    lazy_new = True
    """Whether the outermost run's constructors make lazy arrays (pycode.MODES)."""
    running: tuple = ()
    """(NumPy function, id of its first argument) for each call whose code is running."""


RUN = _Run()


def refuse_read(what: str = "a value") -> None:
    """Stop a lazy run about to bring a value to the host (no-op outside one)."""
    if RUN.depth:
        raise NeedsHost(what)


def refuse_write(storage) -> None:
    """Stop a lazy run about to write into memory an argument of the outermost call
    shares (its storage): a run that stops later must leave its arguments untouched."""
    if RUN.depth and id(storage) in RUN.inputs:
        raise NeedsHost("a write into an argument")
