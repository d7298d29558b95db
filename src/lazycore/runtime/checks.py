"""Value checks: eager's errors that only the values can tell, raised at the barrier.

Eager torch raises at the call when an integer is divided by zero; a lazy
program learns its values only when it runs. A frontend records such a test
as a ``lazy.check`` node (:func:`lazycore.trace.core.check`): its result is
the checked value, its ``failed`` operand an i1 scalar, its ``message``
eager's error text. How a check reaches the user:

1. The barrier's program returns, after its outputs, the ``failed`` flag of
   every check node of its walk, in walk order (:func:`nodes`;
   ``compiler.build_module`` adds them before any pass runs, and the op
   itself lowers to its operand). A recalled walk runs the program of an
   identical graph, so its flags line up the same way.
2. When the program has finished (``barrier._Launch``, ``barrier.run_alone``),
   :func:`failed` reads the flags. For each true one, every output computed
   from that check's result fails as a failing program's outputs do
   (:mod:`lazycore.runtime.failures`): its leaf holds a ``Failure`` of stage
   ``"check"``, and every read raises :class:`lazycore.BarrierError` with
   the message and the line that recorded the check, as do values computed
   from it later; the error is also an instance of the builtin exception the
   check's ``error`` names (eager's type: ``except ValueError`` catches
   NumPy's negative integer power). The other outputs keep their values.
3. A program with checks is waited for before the next barrier starts one
   (the values it failed must not feed the next program) and before any
   read returns a value.

A check whose ``error`` is ``RuntimeWarning`` (NumPy's floating-point
warnings under ``np.errstate``) fails nothing: when its flag is true the
warning is emitted, attributed to the line that recorded the check, and the
values stand.

Nothing else is special: check nodes hash, replay, capture and cache like any
other node, and a check whose result nothing live uses is not computed,
as it is no part of any output.
"""

from __future__ import annotations

import warnings

import numpy as np

from lazycore.ir.graph import Node, Value
from lazycore.ir.sourceloc import resolve
from lazycore.runtime import failures

WARNING = "RuntimeWarning"

_REGISTRIES: dict[str, dict] = {}
"""File name -> the warnings registry of its lines (the "default" action's
once per line, as a module's ``__warningregistry__`` gives it)."""


def nodes(walk) -> list[Node]:
    """The check nodes of a barrier's walk, in the order of their flags."""
    return [node for node in walk.order if node.op == "check"]


def flag_values(walk) -> list[Value]:
    """The ``failed`` operand of each of :func:`nodes`: the program's extra outputs."""
    return [node.operands[1] for node in nodes(walk)]


def failed(values: list[Value], flags: list) -> list | None:
    """Per value of a program that computed ``values`` and returned ``flags``
    after them, the :class:`~lazycore.runtime.failures.Failure` of a check
    that failed and that the value depends on, or None; None instead of the
    list when no check failed. Reads the flags (waits for the program)."""
    tripped = [i for i, flag in enumerate(flags) if np.asarray(flag)]
    if not tripped:
        return None
    from lazycore.runtime.barrier import Walk  # the barrier builds on this module

    walk = Walk(values)
    checked = nodes(walk)
    seeds = {}
    for i in tripped:
        node = checked[i]
        if node.attrs["error"] == WARNING:
            _warn(node)
            continue
        seeds[id(node)] = failures.node_failure(node, node.attrs["message"], "check", None, node.attrs["error"])
    if not seeds:
        return None
    bad = failures.spread(walk, seeds)
    return [bad.get(id(v[0])) for v in values]


def _warn(node: Node) -> None:
    where = resolve(node.loc) or ("<lazycore>", 0)
    if len(_REGISTRIES) > 1024:
        _REGISTRIES.clear()
    warnings.warn_explicit(node.attrs["message"], RuntimeWarning, where[0], where[1],
                           registry=_REGISTRIES.setdefault(where[0], {}))
