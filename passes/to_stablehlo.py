"""``lazy-to-stablehlo``: a dialect conversion from ``lazy`` to StableHLO.

One rewrite pattern per op, taken from the lowering registry (user overrides
first). The ``lazy`` dialect is illegal: after the pass no ``lazy`` op is
left, and an op with no lowering fails the pass with its name.
"""

from __future__ import annotations

from typing import NamedTuple

from lazycore.dialect import from_mlir_type
from lazycore.mlir import ir, rewrite

from .lowering import registry
from .lowering import load_builtin_lowerings
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


def _as_pattern(fn, failures: list):
    """``fn`` as a rewrite pattern. A lowering that raises, declines or builds
    an op that does not verify fails the match instead, and the op and why go
    to ``failures`` (an exception never unwinds through the C++ driver, and
    the failure names the ``lazy`` op rather than the StableHLO it became)."""

    def pattern(op, rewriter):
        try:
            with rewriter.ip, op.location:
                out = fn(op, rewriter)
            if out is None:
                failures.append((_failed(op, "its lowering declined it"), None, op.location))
                return True  # the conversion reports the op as illegal
            if isinstance(out, ir.Value):
                out = [out]
            out = list(out)
            for v in out:
                owner = v.owner
                if isinstance(owner, ir.OpView) and not owner.operation.name.startswith("lazy."):
                    owner.operation.verify()
        except ir.MLIRError as e:
            failures.append((_failed(op, f"its lowering built invalid StableHLO: {diagnostics(e)}"), e, op.location))
            return True
        except Exception as e:
            failures.append((_failed(op, f"its lowering raised {type(e).__name__}: {e}"), e, op.location))
            return True
        rewriter.replace_op(op, out)
        return False

    return pattern


def run(module_op: ir.Operation, pass_=None) -> None:
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
    for n in sorted(names):
        fn = registry.lowering_for(n)
        if fn is not None:
            patterns.add(n, _as_pattern(fn, failures))
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
        if cause is None:  # declined: MLIR's message says it already
            error = LoweringError(f"lazy-to-stablehlo failed: {e}")
        else:
            error = LoweringError(f"lazy-to-stablehlo: {failed.name}{where}: {failed.reason}")
        error.op, error.location = failed, location
        raise error from cause


from .pipeline import register_pass  # noqa: E402


@register_pass(
    "lazy-to-stablehlo",
    "Convert every lazy op to StableHLO with the registered lowering patterns",
)
def _factory():
    return run
