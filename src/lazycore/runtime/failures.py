"""A barrier whose program fails stays contained.

When lowering, compiling or running a barrier's program fails, the barrier
does not raise and leaves nothing pending: :func:`settle` finds which outputs
the failure belongs to and computes the others, and every output that failed
gets a :class:`Failure` where its buffer would be. Reading such a tensor
raises :class:`BarrierError` naming the failing ``lazy`` op and the user's
line that recorded it (every read, with the original error as its
``__cause__``); an op applied to it later fails the same way at its own
barrier. Nothing of the failure stays behind: the tensors are no longer
pending, so later barriers do not include them, and only programs that
compiled enter the compile cache.

Which outputs failed:

* a lowering failure names its op (:class:`lazycore.passes.to_stablehlo.
  FailedOp`: name, line, result types); the outputs that depend on a node
  like it fail, and the rest runs as one program;
* an error with no op (XLA refusing to compile the program, or an error while
  it runs) is narrowed by splitting the outputs into halves, each run as a
  program of its own, down to single outputs; an output that still fails
  names its own op. At most :data:`PROGRAMS_TRIED` programs are tried per
  failure; the outputs left then fail together;
* an input buffer that was donated to a program that then failed to run is
  gone: the outputs that need it fail, naming their own op (a failed
  execution may have consumed its donated inputs).

The retries donate nothing and wait for each program, so their own errors
surface at once.
"""

from __future__ import annotations

from lazycore.ir.failure import BarrierError, Failure  # noqa: F401  (BarrierError: the error users see)
from lazycore.ir.graph import Data, Node, Value, operand_values
from lazycore.ir.sourceloc import format_location, resolve
from lazycore.ir.walk import Walk

PROGRAMS_TRIED = 16
"""Programs run to contain one barrier's failure, at most."""

_STAGES = {
    "lower": "its program could not be lowered to StableHLO",
    "compile": "XLA could not compile its program",
    "run": "its program failed while running",
}


class ProgramError(Exception):
    """A barrier's program failed at ``stage`` (lazycore-internal: users see
    :class:`BarrierError`)."""

    def __init__(self, stage: str, cause: BaseException):
        super().__init__(f"{stage}: {cause}")
        self.stage = stage
        self.cause = cause

    @property
    def op(self):
        """The failing op, when the lowering named one."""
        return getattr(self.cause, "op", None)


seen = [False]
"""True once any value has failed: barriers then check their inputs for
failed leaves (until then they skip the check)."""


def mark(leaf: Data, failure: Failure) -> None:
    """``leaf`` failed: reads raise, later graphs using it fail, it is never donated."""
    seen[0] = True
    leaf.buffer = failure
    leaf.owned = False


def summary(error: BaseException) -> str:
    """An error's message without MLIR's notes (they print IR), on one line."""
    lines = [ln.strip() for ln in str(error).splitlines()]
    text = " ".join(ln for ln in lines if ln and not ln.startswith("note:"))
    return text if len(text) <= 600 else text[:597] + "..."


def node_failure(node: Node, message: str, stage: str, cause, eager: str = "RuntimeError") -> Failure:
    """``node`` failed: the failure names its op and the user's line that recorded it."""
    where = format_location(node.loc) if node.loc is not None else None
    name = f"lazy.{node.op}"
    text = f"{name} (recorded at {where}): {message}" if where else f"{name} (no recorded line): {message}"
    return Failure(text, name, where, stage, cause, eager)


def _matches(node: Node, failed_op) -> bool:
    if node.is_leaf or f"lazy.{node.op}" != failed_op.name:
        return False
    if failed_op.types is not None and tuple(node.types) != tuple(failed_op.types):
        return False
    return failed_op.location is None or resolve(node.loc) == failed_op.location


def _seeds(walk, error) -> dict[int, Failure]:
    """Nodes known to fail, by id: failed input leaves, inputs a failed run
    consumed (marked failed here: never passed again), the op a lowering named."""
    seeds: dict[int, Failure] = {}
    for leaf in walk.data:
        buf = leaf.storage
        if type(buf) is not Failure and error is not None and error.stage == "run" and buf.is_deleted():
            reason = f"an input buffer it needs was donated to a program that then failed while running: " \
                     f"{summary(error.cause)}"
            mark(leaf, Failure(reason, None, None, "run", error.cause))
        if type(leaf.storage) is Failure:
            seeds[id(leaf)] = leaf.storage
    failed_op = error.op if error is not None else None
    if failed_op is not None:
        for node in walk.order:
            if _matches(node, failed_op):
                seeds[id(node)] = node_failure(node, failed_op.reason, error.stage, error.cause)
    return seeds


def spread(walk, seeds: dict[int, Failure]) -> dict[int, Failure]:
    """Every node of the walk that depends on a seed (node ids), with its seed's failure."""
    bad = dict(seeds)
    for node in walk.order:  # operands come first
        if id(node) in bad:
            continue
        for v in operand_values(node):
            found = bad.get(id(v[0]))
            if found is not None:
                bad[id(node)] = found
                break
    return bad


def _unknown(value: Value, error: ProgramError) -> Failure:
    return node_failure(value.node, f"{_STAGES[error.stage]}: {summary(error.cause)}", error.stage, error.cause)


def settle(device, values: list[Value], error: ProgramError | None, run_alone, budget: list[int] | None = None,
           whole: bool = False) -> list:
    """Per value, its buffer, or the :class:`Failure` it holds: the values
    of a program that failed with ``error`` (None: nothing failed, but some
    inputs are failed leaves). ``run_alone(device, values)`` runs a retry
    (:func:`lazycore.runtime.standalone.run_alone`, as the barrier hands it on).

    ``whole``: try all of them as one program first. A program that failed
    after it started may have failed only because an input was the result
    of an earlier program that failed too: that one's results are settled
    in place since, so running it again may succeed."""
    if budget is None:
        budget = [PROGRAMS_TRIED]
    out: list = [None] * len(values)
    walk = Walk(values)
    bad = spread(walk, _seeds(walk, error))
    for i, v in enumerate(values):
        found = bad.get(id(v[0]))
        if found is not None:
            # a failed leaf names no op: the value names its own
            out[i] = found if found.op is not None else node_failure(v[0], found.message, found.stage, found.cause,
                                                                         found.eager)
    rest = [i for i, r in enumerate(out) if r is None]
    if not rest:
        return out
    if bad or whole or error is None:  # what failed is out: the rest may run as it is
        groups = [rest]
    elif len(rest) > 1 and budget[0] > 0 and error is not None:
        half = len(rest) // 2
        groups = [rest[:half], rest[half:]]
    else:
        for i in rest:
            out[i] = _unknown(values[i], error)
        return out
    for group in groups:
        sub = [values[i] for i in group]
        if budget[0] <= 0:
            got = [_unknown(v, error) for v in sub]
        else:
            budget[0] -= 1
            try:
                got = run_alone(device, sub)
            except ProgramError as e:
                got = settle(device, sub, e, run_alone, budget)
        for i, r in zip(group, got):
            out[i] = r
    return out
