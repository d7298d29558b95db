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
line that recorded it. A NaN that came in from an input (device data already
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
        pending = [t for t in device.arena.live() if t.pending]
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
            return (f"lazycore debug_nans: lazy.{n.op} (recorded at {format_location(n.loc)}) produced {what} "
                    f"from finite operands; a NaN or infinity reached {len(bad)} of the step's results")
    for n in sources:
        user = users.get(id(n))
        kind = "a parameter" if type(n) is Scalar else f"an input ({n.types[0]})"
        where = "" if user is None else f"; first used by lazy.{user.op} at {format_location(user.loc)}"
        what = "a NaN" if nonfinite[id(n)] == "NaN" else "an infinity"
        return (f"lazycore debug_nans: {what} came in from {kind}, not from an op of the step, and reached "
                f"{len(bad)} of the step's results{where}")
    return "lazycore debug_nans: the step's results hold a NaN or infinity (no single op found)"


def _switch(on: bool) -> None:
    barrier.sync = checked_sync if on else _PLAIN


config.watch("debug_nans", _switch)
