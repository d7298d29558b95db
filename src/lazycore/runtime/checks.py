"""Value checks: eager's errors that only the values can tell, raised at the barrier.

Eager torch raises at the call when an integer is divided by zero; a lazy
program learns its values only when it runs. A frontend records such a test
as a ``lazy.check`` node (:func:`lazycore.trace.core.check`): its result is
the checked value, its ``failed`` operand an i1 scalar, its ``message``
eager's error text. How a check reaches the user:

1. The barrier's program returns, after its outputs, the ``failed`` flag of
   every check node of its walk, in walk order (:func:`nodes`;
   ``compiler.build_module`` adds them before any pass runs, and the op
   itself lowers to its operand): as few i1 arrays as that order allows
   (a rolled loop's checks, :mod:`lazycore.passes.rolled_chains`, as the
   array of its copies' flags it returns; the others' as one vector), which
   flattened one after the other are one flag per check. A recalled walk
   runs the program of an identical graph, so its flags line up the same way.
2. When the program has finished (``launches.Launch``, ``standalone.run_alone``),
   :func:`failed` reads the flags. For each true one, every output computed
   from that check's result fails as a failing program's outputs do
   (:mod:`lazycore.runtime.failures`): its leaf holds a ``Failure`` of stage
   ``"check"``, and every read raises :class:`lazycore.BarrierError` with
   the message and the line that recorded the check, as do values computed
   from it later; the error is also an instance of the builtin exception the
   check's ``error`` names (eager's type: ``except ValueError`` catches
   NumPy's negative integer power). The other outputs keep their values.
3. A program with checks is waited for before any read returns a value.
   The next barrier starts its program meanwhile, and waits for this one
   after: the outputs of that program computed from values a check failed
   fail too, with the check's error (``launches.Launch.poison``), as if it
   had started after the wait.

The frontends record checks for torch's integer division by zero, NumPy's
negative integer powers and floating-point errors under ``np.errstate``, and
every index held on the device (``x[i]``, gather, scatter, index_select,
embedding, nll_loss's targets, one_hot, NumPy's fancy indexing and take, ...:
eager's range, eager's exception type; ``settings.index_checks`` off records
none of those, and an out-of-range index is clamped or its update dropped).

An index check's message holds ``{index}`` where eager names the offending
index (``index {index} is out of bounds for dimension 0 with size 5``): the
program computes only the flag, and once it is true :func:`text` runs the
check's index and mask as a program of their own (``failed``'s ``run``) and
names the first offending entry; without a runner, the placeholder goes.

A check whose ``error`` is ``RuntimeWarning`` (NumPy's floating-point
warnings under ``np.errstate``) fails nothing: when its flag is true the
warning is emitted, attributed to the line that recorded the check, and the
values stand.

A captured step replayed as one ``call`` node (:mod:`lazycore.trace.capture`)
keeps its checks in its body and yields their flags after its results: each
such flag counts as the check's, and a true one fails every result of the
call (eager would have raised inside the step, before any of it was done).

Nothing else is special: check nodes hash, replay, capture and cache like any
other node, and a check whose result nothing live uses is not computed,
as it is no part of any output.
"""

from __future__ import annotations

import warnings

import numpy as np

from lazycore.ir.graph import Node, Value
from lazycore.ir.memo import Memo
from lazycore.ir.sourceloc import resolve
from lazycore.ir.walk import Walk
from lazycore.runtime import failures

WARNING = "RuntimeWarning"

_REGISTRIES: dict[str, dict] = {}
"""File name -> the warnings registry of its lines (the "default" action's
once per line, as a module's ``__warningregistry__`` gives it)."""


_CALLS = Memo("runtime.check_calls", 1024)
"""``id(body)`` -> (body, [(check node, result index of its flag)]) of a
``call`` body (the body is kept: an id is only unique while it lives)."""


def _in_call(node) -> list:
    body = node.bodies[0]
    known = _CALLS.get(id(body))
    if known is None or known[0] is not body:
        where = {(id(v[0]), v[1]): i for i, v in enumerate(body.results)}
        found = []
        for inner in body.order:
            if inner.op == "check":
                flag = inner.operands[1]
                i = where.get((id(flag[0]), flag[1]))
                if i is not None:
                    found.append((inner, i))
        known = _CALLS.put(id(body), (body, found))
    return known[1]


def entries(walk) -> list[tuple[Node, Value, Node]]:
    """Per value check of a barrier's walk, in the order of their flags:
    ``(check node, its flag's value, the node whose results it fails)`` (the
    check itself, or the ``call`` node whose body holds it)."""
    out = []
    for node in walk.order:
        op = node.op
        if op == "check":
            out.append((node, node.operands[1], node))
        elif op == "call":
            out.extend((inner, Value(node, i), node) for inner, i in _in_call(node))
    return out


def nodes(walk) -> list[Node]:
    """The check nodes of a barrier's walk, in the order of their flags."""
    return [e[0] for e in entries(walk)]


def flag_values(walk) -> list[Value]:
    """The flag of each of :func:`nodes`: the program's extra outputs. A flag
    ``m != 0`` of a scalar ``m`` is returned as ``m`` (as true, and one
    kernel fewer: the frontends' index checks reduce their mask as floats)."""
    return [_tested(e[1]) for e in entries(walk)]


def _tested(flag: Value) -> Value:
    node = flag[0]
    if node.op != "compare" or node.attrs["direction"] != "NE":
        return flag
    m, zero = node.operands
    if m[0].types[m[1]].shape != () or zero[0].op != "constant":
        return flag
    value = zero[0].attrs["value"]
    return m if value.shape == () and value == 0 else flag


def text(node: Node, run=None) -> str:
    """A failed check's message. ``{index}`` in it (an index check's) is the
    first entry of the checked value that its flag's mask holds true, as
    eager names the offending index: ``run`` computes the two (a runner of
    values as a program of their own, given by whoever ran the program), so
    an in-range program computes nothing more than its flags. Where it
    cannot be had (no runner, a loop's or captured step's carried flag, an
    input gone) the placeholder goes: ``index is out of bounds ...``."""
    message = node.attrs["message"]
    if "{index}" not in message:
        return message
    found = _first_offending(node, run)
    if found is None:
        return message.replace(" {index}", "").replace("{index}", "")
    return message.replace("{index}", str(found))


def _mask(flag: Value) -> Value | None:
    """The i1 mask a flag reduces (``any(mask)``, or ``sum(f32(mask)) != 0``:
    :func:`flag_values`); None for another flag (a body's, carried out of it)."""
    v = _tested(flag)
    if v[0].op not in ("reduce_max", "reduce_sum"):
        return None
    v = v[0].operands[0]
    if v[0].op == "convert":
        v = v[0].operands[0]
    return v if v[0].types[v[1]].dtype == "i1" else None


def _first_offending(node: Node, run) -> int | None:
    if run is None:
        return None
    index, mask = node.operands[0], _mask(node.operands[1])
    if mask is None:
        return None
    if mask[0].types[mask[1]].shape != index[0].types[index[1]].shape:
        return None
    try:
        got = run([index, mask])
    except Exception:  # noqa: BLE001 - the message loses its number, the error stands
        return None
    if any(type(g) is failures.Failure for g in got):
        return None
    entries_, bad = np.asarray(got[0]).reshape(-1), np.asarray(got[1]).reshape(-1)
    at = int(np.argmax(bad))
    return int(entries_[at]) if bad.size and bad[at] else None


def failed(values: list[Value], flags: list, poisoned: dict | None = None, run=None) -> list | None:
    """Per value of a program that computed ``values`` and returned ``flags``
    after them (arrays whose elements, in order, are one flag per check), the :class:`~lazycore.runtime.failures.Failure` of a check
    that failed and that the value depends on, or None; None instead of the
    list when no check failed. Reads the flags (waits for the program).
    ``poisoned``: ids of nodes computed from inputs that failed after the
    program started (:meth:`lazycore.runtime.launches.Launch.poison`): their
    checks read garbage, and neither fail nor warn. ``run``: computes a
    list of values as a program of their own (:func:`text`), or None."""
    if not len(flags):
        return None
    # (a rolled loop returns the flags of its copies' checks as one stack)
    tripped = np.flatnonzero(np.concatenate([np.asarray(flag).reshape(-1) for flag in flags])).tolist()
    if not tripped:
        return None
    walk = Walk(values)
    checked = entries(walk)
    seeds = {}
    for i in tripped:
        node, _, owner = checked[i]
        if poisoned and id(owner) in poisoned:
            continue
        if node.attrs["error"] == WARNING:
            _warn(node)
            continue
        if id(owner) not in seeds:  # (a call's first failed check names it)
            message = text(node, run)
            seeds[id(owner)] = failures.node_failure(node, message, "check", None, node.attrs["error"])
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
