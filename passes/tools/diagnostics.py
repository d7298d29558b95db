"""Diagnostics as ``lazy-opt`` reports them: ``file:line:col: severity: message``.

MLIR's diagnostics are collected in the context, with their locations, by a
handler (:class:`Collector`); errors raised on the Python side (a pass
refusing its input, a lowering that failed, a pass plugin that raised) become
the same records. ``--verify-diagnostics`` then checks them against the
input's annotations (:mod:`lazycore.passes.tools.expected`), otherwise they print.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field

from lazycore.dialect.mlir import ir
from lazycore.passes import LoweringError, PassError

Position = tuple[str, int, int]
"""(file, line, column), as MLIR counts them (from 1)."""

_SEVERITY = {
    ir.DiagnosticSeverity.ERROR: "error",
    ir.DiagnosticSeverity.WARNING: "warning",
    ir.DiagnosticSeverity.NOTE: "note",
    ir.DiagnosticSeverity.REMARK: "remark",
}


@dataclass
class Diagnostic:
    severity: str
    """``error``, ``warning``, ``note`` or ``remark``."""
    position: Position | None
    """None: the location names no file position (``loc(unknown)``)."""
    message: str
    notes: list["Diagnostic"] = field(default_factory=list)

    def lines(self, fallback: Position) -> list[str]:
        """The diagnostic and its notes as printed; ``fallback`` stands in for
        an unknown position (lazy-opt passes the start of the input chunk)."""
        file, line, col = self.position or fallback
        out = [f"{file}:{line}:{col}: {self.severity}: {self.message}"]
        for note in self.notes:
            out.extend(note.lines(fallback))
        return out


def position(loc) -> Position | None:
    """The file position a location points at: the first one inside a fused,
    named or call-site location; None where there is none."""
    if isinstance(loc, ir.FileLineColLoc):
        return loc.filename, loc.start_line, loc.start_col
    if isinstance(loc, ir.NameLoc):
        return position(loc.child_loc)
    if isinstance(loc, ir.CallSiteLoc):
        return position(loc.callee)
    if isinstance(loc, ir.FusedLoc):
        for inner in loc.locations:
            found = position(inner)
            if found is not None:
                return found
    return None


def from_mlir(diag) -> Diagnostic:
    return Diagnostic(
        _SEVERITY.get(diag.severity, "error"),
        position(diag.location),
        diag.message,
        [from_mlir(note) for note in diag.notes],
    )


class Collector:
    """Keeps every diagnostic emitted in ``ctx``, errors included.

    By default the bindings capture errors into the ``MLIRError`` an API call
    raises, where lazy-opt would have to dig them out call by call; with
    ``emit_error_diagnostics`` they reach this handler like warnings do.
    """

    def __init__(self, ctx: ir.Context):
        self.diagnostics: list[Diagnostic] = []
        ctx.emit_error_diagnostics = True
        ctx.attach_diagnostic_handler(self._handle)

    def _handle(self, diag) -> bool:
        # Runs inside MLIR: a Python error here would be lost, so the
        # conversion must not raise (it only reads the diagnostic).
        self.diagnostics.append(from_mlir(diag))
        return True

    def mark(self) -> int:
        return len(self.diagnostics)

    def errors_since(self, mark: int) -> bool:
        return any(d.severity == "error" for d in self.diagnostics[mark:])


def raised_at(error: BaseException) -> str:
    """``file:line`` of the innermost frame of ``error``'s traceback."""
    frames = traceback.extract_tb(error.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"


def from_exception(error: BaseException, doing: str) -> Diagnostic:
    """A Python error as a diagnostic at the ``location`` it carries, if any.

    Errors of lazycore's passes (PassError, LoweringError) say what went wrong
    themselves; anything else is a bug in some pass or plugin, so its type
    and the line that raised it are part of the message.
    """
    loc = getattr(error, "location", None)
    where = position(loc) if loc is not None else None
    if isinstance(error, (PassError, LoweringError)):
        return Diagnostic("error", where, str(error))
    return Diagnostic("error", where, f"{doing}: {type(error).__name__}: {error} (raised at {raised_at(error)})")
