"""``lazy-to-stablehlo``: a dialect conversion from ``lazy`` to StableHLO.

One rewrite pattern per op, made of the op's lowerings in the registry (user
lowerings first, newest first, then the built-in one: the first that does
not decline lowers the op). The ``lazy`` dialect is illegal: after the pass
no ``lazy`` op is left, and an op with no lowering, or whose every lowering
declined it, fails the pass with its name.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

from lazycore.dialect import from_mlir_type
from lazycore.dialect.mlir import ir, rewrite

from .catalog import register_pass
from .lowering import registry
from .lowering import Decline, load_builtin_lowerings
from .lowering.elementwise import EXACT_ATTR
from .pdl import apply_pdl_patterns


class LoweringError(RuntimeError):
    """The conversion to StableHLO could not lower some op.

    ``op`` is the op whose lowering failed, when one is known (a barrier
    turns it back into the graph node the user recorded); ``location`` is
    its ``ir.Location`` (lazy-opt prints it as file:line:col)."""

    op: "FailedOp | None" = None
    location: "ir.Location | None" = None


class FailedOp(NamedTuple):
    name: str
    """The op's full name (``"lazy.sign"``)."""
    location: tuple[str, int] | None
    """The ``(file, line)`` of its MLIR location; None: unknown."""
    types: tuple | None
    """Its result types (:class:`~lazycore.dialect.TensorType`); None: any."""
    reason: str
    """What went wrong, without IR text."""


def diagnostics(error: ir.MLIRError) -> str:
    """The error messages of an MLIR error without their locations and notes
    (the notes print IR)."""
    messages = [d.message for d in error.error_diagnostics]
    return "; ".join(messages) if messages else str(error)


def _file_line(loc) -> tuple[str, int] | None:
    if isinstance(loc, ir.FileLineColLoc):
        return loc.filename, loc.start_line
    if isinstance(loc, ir.FusedLoc):  # ops merged by cse: any one of the lines
        for inner in loc.locations:
            found = _file_line(inner)
            if found is not None:
                return found
    return None


def _failed(op, reason: str) -> FailedOp:
    try:
        types = tuple(from_mlir_type(r.type) for r in op.results)
    except (ValueError, KeyError, TypeError):  # a type the dialect has no name for
        types = None
    return FailedOp(op.name, _file_line(op.location), types, reason)


class ResultTypeError(TypeError):
    """A lowering returned values of other types than its op's results (the
    conversion would only say "failed to legalize unresolved materialization")."""


def _types_text(types) -> str:
    texts = [str(t) for t in types]
    return texts[0] if len(texts) == 1 else "(" + ", ".join(texts) + ")"


def _candidate(lowering, op, rewriter, ip):
    """Run one lowering at ``ip``: its replacement values, or None when it
    declines (then the reason is the second item). Raises what it raised, an
    ``ir.MLIRError`` for an op it built that does not verify, or a
    :class:`ResultTypeError`."""
    try:
        with ip, op.location:
            out = lowering.fn(op, rewriter)
    except Decline as d:
        return None, str(d)
    if out is None or out is NotImplemented:
        return None, ""
    out = [out] if isinstance(out, ir.Value) else list(out)
    got, want = [v.type for v in out], [r.type for r in op.results]
    if got != want:
        raise ResultTypeError(
            f"lowering of {op.name} registered at {lowering.where} returned {_types_text(got) if got else 'nothing'}, "
            f"expected {_types_text(want)}"
        )
    for v in out:
        owner = v.owner
        if isinstance(owner, ir.OpView) and not owner.operation.name.startswith("lazy."):
            owner.operation.verify()
    return out, None


def _as_pattern(lowerings, failures: list, scratch):
    """An op's lowerings (in the order tried) as one rewrite pattern. A
    lowering that declines leaves the op to the next one; the ops it built are
    dropped (every lowering but the last builds in ``scratch``, a detached
    block, and what the one that accepts built moves before the op). A
    lowering that raises, builds an op that does not verify or results of
    other types, or the op every lowering declined, fails the match instead,
    and the op and why go to ``failures`` (an exception never unwinds through
    the C++ driver, and the failure names the ``lazy`` op rather than the
    StableHLO it became)."""
    last = len(lowerings) - 1

    def pattern(op, rewriter):
        declined = []
        for i, lowering in enumerate(lowerings):
            ip = rewriter.ip if i == last else ir.InsertionPoint(scratch)
            try:
                out, why = _candidate(lowering, op, rewriter, ip)
            except ir.MLIRError as e:
                _clear(scratch)
                failures.append((_failed(op, f"its lowering built invalid StableHLO: {diagnostics(e)}"), e, op.location))
                return True
            except ResultTypeError as e:
                _clear(scratch)
                failures.append((_failed(op, str(e)), e, op.location))
                return True
            except Exception as e:
                _clear(scratch)
                failures.append((_failed(op, f"its lowering raised {type(e).__name__}: {e}"), e, op.location))
                return True
            if out is None:
                _clear(scratch)
                declined.append(lowering.describe() + (f": {why}" if why else ""))
                continue
            if i != last:
                for built in list(scratch.operations):
                    built.operation.move_before(op)
            rewriter.replace_op(op, out)
            return False
        reason = "every lowering declined it: " + "; ".join(declined)
        failures.append((_failed(op, reason), Decline(reason), op.location))
        return True

    return pattern


def _clear(block) -> None:
    for built in reversed(list(block.operations)):
        built.operation.erase()


DIVISIONS = ("xla", "exact")


def run(module_op: ir.Operation, pass_=None, division: str = "xla") -> None:
    if division not in DIVISIONS:
        raise LoweringError(f"lazy-to-stablehlo: division={division!r}: expected one of {', '.join(DIVISIONS)}")
    if division == "exact":
        module_op.attributes[EXACT_ATTR] = ir.UnitAttr.get(module_op.context)
    try:
        _convert(module_op)
    finally:
        if EXACT_ATTR in module_op.attributes:
            del module_op.attributes[EXACT_ATTR]


def _convert(module_op: ir.Operation) -> None:
    load_builtin_lowerings()
    # PDL patterns go first and win; they may also leave new lazy ops behind,
    # so the ops to lower are collected after them.
    apply_pdl_patterns(module_op)
    names: dict[str, ir.Location] = {}  # op name -> where it first occurs

    def collect(o):
        if o.name.startswith("lazy."):
            names.setdefault(o.name, o.location)
        return ir.WalkResult.ADVANCE

    module_op.walk(collect)
    missing = sorted(n for n in names if registry.lowering_for(n) is None)
    if missing:
        error = LoweringError("lazy-to-stablehlo: no lowering registered for " + ", ".join(f"'{n}'" for n in missing))
        error.op = FailedOp(missing[0], None, None, "no lowering is registered for it")
        error.location = names[missing[0]]
        raise error

    failures: list = []
    patterns = rewrite.RewritePatternSet()
    scratch_op = ir.Operation.create("builtin.module", regions=1, loc=ir.Location.unknown(module_op.context))
    scratch = scratch_op.regions[0].blocks.append()
    for n in sorted(names):
        lowerings = registry.lowerings_for(n)
        if lowerings:
            patterns.add(n, _as_pattern(lowerings, failures, scratch))
    target = rewrite.ConversionTarget()
    target.add_legal_dialect("stablehlo")
    target.add_legal_dialect("func")
    target.add_legal_dialect("builtin")
    target.add_illegal_dialect("lazy")
    try:
        rewrite.apply_full_conversion(module_op, target, patterns.freeze())
    except ir.MLIRError as e:
        if not failures:
            raise LoweringError(f"lazy-to-stablehlo failed: {e}") from None
        failed, cause, location = failures[0]
        where = "" if failed.location is None else f" at {failed.location[0]}:{failed.location[1]}"
        error = LoweringError(f"lazy-to-stablehlo: {failed.name}{where}: {failed.reason}")
        error.op, error.location = failed, location
        raise error from cause


@register_pass(
    "lazy-to-stablehlo",
    "Convert every lazy op to StableHLO with the registered lowering patterns",
    options={
        "division": "xla (default): float divides and functions are StableHLO's, which XLA's CPU backend "
        "rounds its own way (a divide by a broadcast as a multiply by the reciprocal, rsqrt as an estimate); "
        "exact: eager CPU torch's and NumPy's rounding: such a divide of float16/bfloat16/float32 goes "
        "through float64, so it is correctly rounded, a float64 one is corrected by its remainder, "
        "rsqrt is 1/sqrt(x) rounded twice, and tanh, expm1 "
        "and atan2 are computed in float64",
    },
)
def _factory(division="xla"):
    return partial(run, division=division)
