"""A value whose computation failed.

A barrier whose program fails to lower, compile or run puts a
:class:`Failure` where the buffer of each failed output's device-data leaf
would be (:mod:`lazycore.runtime.failures` decides which outputs failed).
Reading such a value raises :class:`BarrierError`.
"""

from __future__ import annotations

import traceback

import numpy as np


class BarrierError(RuntimeError):
    """Reading a value whose computation failed at a barrier.

    ``op`` is the ``lazy`` op named (``"lazy.sign"``), ``location`` the
    user's ``file:line`` that recorded it (None: unknown), ``stage`` where it
    failed: ``"lower"``, ``"compile"`` or ``"run"``."""

    def __init__(self, message: str, op: str | None = None, location: str | None = None, stage: str | None = None):
        super().__init__(message)
        self.op = op
        self.location = location
        self.stage = stage


EAGER_ERRORS = {e.__name__: e for e in (RuntimeError, ValueError, IndexError, FloatingPointError,
                                         np.linalg.LinAlgError, ZeroDivisionError)}
"""The exception types a value check may raise as well, by name: eager's for
the error it stands for (torch's integer division by zero is a RuntimeError,
NumPy's negative integer power a ValueError, a singular matrix NumPy's
LinAlgError, ``np.average``'s weights summing to zero a ZeroDivisionError)."""

_AS: dict[str, type] = {"RuntimeError": BarrierError}


def barrier_error_type(eager: str) -> type:
    """:class:`BarrierError` that is also the builtin exception ``eager`` names,
    so ``except ValueError`` catches a failed check standing for one."""
    t = _AS.get(eager)
    if t is None:
        t = _AS[eager] = type(f"Barrier{eager}", (BarrierError, EAGER_ERRORS[eager]),
                              {"__module__": __name__, "__doc__": f"A :class:`BarrierError` that is a {eager}."})
    return t


class Failure:
    """Stands where the buffer of a :class:`~lazycore.ir.graph.Data` leaf would
    be, for a value whose computation failed. ``eager``: the builtin exception
    type a read raises too (a name from :data:`EAGER_ERRORS`)."""

    __slots__ = ("message", "op", "location", "stage", "cause", "eager")

    def __init__(self, message: str, op, location, stage, cause, eager: str = "RuntimeError"):
        self.message = message
        self.op = op
        self.location = location
        self.stage = stage
        self.cause = _detached(cause)
        self.eager = eager

    def error(self) -> BarrierError:
        """A new error for one read (raising one object again would grow its traceback)."""
        e = barrier_error_type(self.eager)(self.message, self.op, self.location, self.stage)
        e.__cause__ = self.cause
        return e

    def __repr__(self) -> str:
        return f"<Failure {self.message!r}>"


def _detached(error: BaseException | None) -> BaseException | None:
    """``error`` with the tracebacks of its chain kept as text (a note). A
    failure lives as long as its tensor, and a traceback holds its frames,
    and through them every caller's frame: the failed barrier's handles and
    the user's locals would stay alive with it."""
    todo, done = [error], set()
    while todo:
        e = todo.pop()
        if e is None or id(e) in done:
            continue
        done.add(id(e))
        tb = e.__traceback__
        if tb is not None:
            e.add_note("Traceback (kept as text):\n" + "".join(traceback.format_tb(tb)).rstrip())
            e.__traceback__ = None
        todo += (e.__cause__, e.__context__)
    return error
