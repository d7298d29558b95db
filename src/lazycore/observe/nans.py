"""NaN and infinity hunting (``LAZYCORE_DEBUG_NANS=1``, ``lazycore.config.debug_nans()``),
as ``jax_debug_nans`` does, for every frontend.

While it is on, every barrier (``mark_step``, a read's, an automatic step's)
waits for its program and looks at its floating results (real and complex):
when one holds a NaN or an infinity, the step's graph is run again as one
program whose outputs are every op's results (each node of the barrier's walk,
in the walk's order, its operands the same values), and
``FloatingPointError`` names the first op, in the walk's order, whose result
is not finite although its floating operands are, on a chain of non-finite
values that reaches the barrier's result: its ``lazy`` op name and the user's
line that recorded it. Where that op is a loop, a branch or a captured
step's call, its bodies run again on its operands (a loop one iteration at
a time) and the op inside is named, with the iteration or branch. A NaN that came in from an input (device data already
holding it, or a parameter) is not blamed on the ops it only passed through:
the error says it came from an input, and names the first op that used it.
A NaN an op made and a later op removed again (``where(isnan(x), 0, x)``) is
no result's, and raises nothing.

The error is raised by the barrier (``mark_step``, or the read that ran it)
after its results were stored: the values hold what the program computed.
While the mode is on, barriers donate no buffer (the check's run needs the
step's inputs) and wait for their program, so it is slow; off (the default)
it costs nothing: entering it swaps :func:`lazycore.runtime.barrier.sync`,
and leaving it puts the plain one back.
"""

from __future__ import annotations

import numpy as np

from lazycore.ir import config
from lazycore.ir.config import settings
from lazycore.ir.context import LOCK
from lazycore.ir.failure import Failure
from lazycore.ir.graph import Data, Scalar, Value, operand_values
from lazycore.ir.regions import RegionNode
from lazycore.ir.remake import body_on
from lazycore.ir.sourceloc import format_location
from lazycore.runtime import barrier, hostcopy

_PLAIN = barrier.sync


def _inexact(dtype: str) -> bool:
    return dtype.startswith(("f", "bf", "c"))


def _bad(host) -> str | None:
    """``"NaN"`` or ``"infinity"`` when a host array of an inexact type holds one, else None."""
    host = np.asarray(host)
    kind = host.dtype.kind
    if kind not in "fc":  # bfloat16, float8 (ml_dtypes)
        host = host.astype(np.float64)
    if bool(np.isfinite(host).all()):
        return None
    return "NaN" if bool(np.isnan(host).any()) else "infinity"


def _leaf_bad(node) -> str | None:
    t = node.types[0]
    if not _inexact(t.dtype):
        return None
    if type(node) is Scalar:
        return _bad(node.value)
    if type(node) is Data and type(node.buffer) is not Failure and node.buffer is not None:
        return _bad(hostcopy.to_host(node.buffer, t, copy=False))
    return None


def checked_sync(device, wait: bool = True) -> int:
    """:func:`lazycore.runtime.barrier.sync` that raises ``FloatingPointError``
    when the program's floating results hold a NaN or an infinity."""
    with LOCK:
        pending = device.arena.pending()
        values = [t._value for t in pending]
        donation, settings.donation = settings.donation, False  # the check's run needs the inputs
        try:
            n = _PLAIN(device, True)
        finally:
            settings.donation = donation
        bad = []
        for t, v in zip(pending, values):
            leaf = t._value.node
            if type(leaf) is not Data or not _inexact(v.type.dtype):
                continue
            if type(leaf.buffer) is Failure or leaf.buffer is None:
                continue
            if _bad(hostcopy.to_host(leaf.buffer, v.type, copy=False)):
                bad.append(v)
        if bad:
            raise FloatingPointError(_diagnose(device, bad))
        return n


def _diagnose(device, bad: list) -> str:
    """Which op made the first NaN or infinity on the way to ``bad`` (the
    barrier's non-finite outputs, as values of the graph it ran)."""
    found = _source(device, bad)
    reached = f"a NaN or infinity reached {len(bad)} of the step's results"
    if found is None:
        return "lazycore debug_nans: the step's results hold a NaN or infinity (no single op found)"
    n, what, user, inside = found
    if not n.is_leaf:
        inside = f",{inside}," if inside else ""
        return f"lazycore debug_nans: {_named(n)}{inside} produced {what} from finite operands; {reached}"
    kind = "a parameter" if type(n) is Scalar else f"an input ({n.types[0]})"
    where = "" if user is None else f"; first used by {_named(user)}"
    return f"lazycore debug_nans: {what} came in from {kind}, not from an op of the step, and reached {len(bad)} " \
           f"of the step's results{where}"


def _named(n) -> str:
    return f"lazy.{n.op} (recorded at {format_location(n.loc)})"


def _at(region) -> str:
    return f"lazy.{region.op} at {format_location(region.loc)}"


def _source(device, bad: list):
    """``(node, "a NaN" / "an infinity", first user of a leaf, where inside)`` for
    the first node on a chain of non-finite values to ``bad`` whose operands
    are all finite: an op (a loop, branch or captured step looked into:
    :func:`_inside`), else a leaf; None when there is none."""
    walk = barrier.Walk(list(dict.fromkeys(bad)))
    order = walk.order
    nodes = [n for n in order if not n.is_leaf]
    every = [Value(n, i) for n in nodes for i in range(len(n.types))]
    results = barrier.run_alone(device, every) if every else []
    nonfinite: dict[int, str | None] = {}  # id(node) -> "NaN" / "infinity" in its inexact results, else None
    k = 0
    for n in nodes:
        flag = None
        for t in n.types:
            r = results[k]
            k += 1
            if _inexact(t.dtype) and type(r) is not Failure:
                flag = flag or _bad(hostcopy.to_host(r, t, copy=False))
        nonfinite[id(n)] = flag
    for n in walk.params:
        nonfinite[id(n)] = _leaf_bad(n)
    # the non-finite values a non-finite output is computed from, through non-finite values
    on_chain = {id(v.node) for v in bad}
    users: dict[int, object] = {}  # id(leaf) -> the first op using it
    for n in reversed(order):
        if n.is_leaf:
            continue
        for o in operand_values(n):
            users[id(o.node)] = n
            if id(n) in on_chain and nonfinite.get(id(o.node)):
                on_chain.add(id(o.node))
    sources = [n for n in order if id(n) in on_chain and nonfinite.get(id(n))
               and not any(nonfinite.get(id(o.node)) for o in operand_values(n))]  # (a leaf has none)
    for n in sources:  # an op that made one from finite operands first
        if not n.is_leaf:
            what = "a NaN" if nonfinite[id(n)] == "NaN" else "an infinity"
            try:
                inner = _inside(device, n) if type(n) is RegionNode else None
            except Exception:  # noqa: BLE001 (looking inside is a refinement: the region itself is still named)
                inner = None
            if inner is not None:
                return inner
            return n, what, None, ""
    for n in sources:
        return n, "a NaN" if nonfinite[id(n)] == "NaN" else "an infinity", users.get(id(n)), ""
    return None


# a loop looked into one iteration at a time: one small program a step, and at most this many
MAX_ITERATIONS = 10_000


def _inside(device, region):
    """:func:`_source` inside a loop, branch or captured step whose results
    hold a NaN or infinity its operands do not: its bodies run again on its
    operands, a loop's one iteration at a time (each iteration's carried
    values kept as device data), as ``jax_debug_nans`` runs a jitted
    function's primitives one by one. None where no op inside is found."""
    if region.op == "call":
        return _first_bad(device, body_on(region.bodies[0], region.operands[0]), f" inside the captured step {_at(region)}")
    if region.op == "case":
        index, operands = region.operands
        (buffer,) = barrier.run_alone(device, [index])
        branch = int(np.asarray(hostcopy.to_host(buffer, index.type, copy=False)))
        if not 0 <= branch < len(region.bodies):  # stablehlo.case: an index out of range takes the last branch
            branch = len(region.bodies) - 1
        return _first_bad(device, body_on(region.bodies[branch], operands), f" in branch {branch} of {_at(region)}")
    cond, body = region.bodies
    carried = tuple(region.operands[0])
    for k in range(MAX_ITERATIONS):
        (flag,) = body_on(cond, carried)
        (buffer,) = barrier.run_alone(device, [flag])
        if not bool(np.asarray(hostcopy.to_host(buffer, flag.type, copy=False))):
            return None
        ys = body_on(body, carried)
        found = _first_bad(device, ys, f" in iteration {k} of {_at(region)}")
        if found is not None:
            return found
        carried = tuple(Value(Data(b, y.type, owned=True), 0) for b, y in zip(barrier.run_alone(device, ys), ys))
    return None


def _first_bad(device, ys: list, where: str):
    """:func:`_source` of those of ``ys`` that hold a NaN or infinity, ``where`` said of its op."""
    buffers = barrier.run_alone(device, list(ys))
    bad = [y for y, b in zip(ys, buffers)
           if _inexact(y.type.dtype) and type(b) is not Failure and _bad(hostcopy.to_host(b, y.type, copy=False))]
    found = _source(device, bad) if bad else None
    if found is None or found[0].is_leaf:
        return None
    node, what, _, inner = found
    return node, what, None, (inner + "," if inner else "") + where  # the innermost region first


def _switch(on: bool) -> None:
    barrier.sync = checked_sync if on else _PLAIN


config.watch("debug_nans", _switch)
