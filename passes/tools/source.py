"""Input for ``lazy-opt``: chunks of a file, parsed with the file's positions.

MLIR names locations after the buffer it parses: ``ir.Operation.parse`` takes
the file name, ``ir.Module.parse`` does not. A chunk of ``--split-input-file``
is parsed behind as many empty lines as precede it, so every location and
diagnostic carries the line of the whole file, as mlir-opt reports them.
Files holding several top-level ops get the implicit ``module {`` mlir-opt
gives them, written on the chunk's first line when that line holds no op
(a comment, a blank, the split marker) so no position moves; the module's
location is its first op's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lazycore.dialect import OPS
from lazycore.dialect.mlir import ir

from .diagnostics import Collector, Diagnostic

SPLIT_MARKER = "// -----"
_WRAPPER = "module {"


@dataclass
class Chunk:
    text: str
    """The chunk behind ``first_line - 1`` newlines: positions are the file's."""
    first_line: int


def split(text: str, enabled: bool) -> list[Chunk]:
    if not enabled:
        return [Chunk(text, 1)]
    chunks, line = [], 1
    for part in text.split(SPLIT_MARKER):
        chunks.append(Chunk("\n" * (line - 1) + part, line))
        line += part.count("\n")
    return chunks


class ParseFailure(Exception):
    """The chunk did not parse; its diagnostics are in the collector."""


def _holds_no_op(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("//")


def _single_op_error(diag: Diagnostic) -> bool:
    return diag.message.startswith("source must contain a single top-level operation")


def parse(chunk: Chunk, filename: str, collector: Collector):
    """The chunk as a ``builtin.module`` op (an explicit module, or the
    implicit one around its top-level ops). Raises ParseFailure."""
    lines = chunk.text.split("\n")
    head = chunk.first_line - 1
    shift = 0
    if not _holds_no_op(lines[head]):
        # Try the text as it is first: a module written out parses without
        # a wrapper, positions untouched.
        mark = collector.mark()
        try:
            op = ir.Operation.parse(chunk.text, source_name=filename)
        except ir.MLIRError:
            op = None
        found = collector.diagnostics[mark:]
        if op is not None and op.operation.name == "builtin.module":
            return op
        if op is None and not (found and all(_single_op_error(d) for d in found if d.severity == "error")):
            raise ParseFailure()
        del collector.diagnostics[mark:]
        # The wrapper has to share a line with an op: its columns move.
        shift = len(_WRAPPER)
    lines[head] = _WRAPPER + lines[head]
    mark = collector.mark()
    try:
        wrapper = ir.Operation.parse("\n".join(lines) + "\n}", source_name=filename)
    except ir.MLIRError:
        _unshift_diagnostics(collector, mark, filename, chunk.first_line, shift)
        raise ParseFailure() from None
    if shift:
        _unshift_diagnostics(collector, mark, filename, chunk.first_line, shift)
        _unshift_ops(wrapper, filename, chunk.first_line, shift)
    body = list(wrapper.regions[0].blocks[0].operations)
    if len(body) == 1 and body[0].operation.name == "builtin.module":
        body[0].operation.detach_from_parent()
        return body[0]
    # Errors about the whole module point at its first op, which a test can
    # annotate, rather than at the wrapper's place on a comment line.
    wrapper.operation.location = body[0].location if body else ir.Location.file(filename, chunk.first_line, 1)
    return wrapper


def _unshift_diagnostics(collector: Collector, mark: int, filename: str, line: int, shift: int) -> None:
    """Move what the wrapper pushed right on its line back where the file has it."""
    for d in collector.diagnostics[mark:]:
        for x in [d, *d.notes]:
            if x.position and x.position[0] == filename and x.position[1] == line:
                x.position = (filename, line, max(1, x.position[2] - shift))


def _unshift_ops(wrapper, filename: str, line: int, shift: int) -> None:
    """The same for the locations of the ops and block arguments on that line."""

    def moved(loc):
        if isinstance(loc, ir.FileLineColLoc) and loc.start_line == line and loc.start_col > shift:
            return ir.Location.file(filename, line, loc.start_col - shift)
        return None

    def fix(op):
        loc = moved(op.location)
        if loc is not None:
            op.location = loc
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    loc = moved(arg.location)
                    if loc is not None:
                        arg.set_location(loc)
        return ir.WalkResult.ADVANCE

    wrapper.operation.walk(fix)


# An op in custom form: its name first on the line, or after `%results =`.
_CUSTOM_OP = re.compile(r"(?:^\s*|=\s*)(lazy\.[A-Za-z_]\w*)")


def explain_silent_failure(chunk: Chunk, filename: str) -> Diagnostic:
    """Why a chunk MLIR refused without a diagnostic failed to parse.

    The ``lazy`` ops are IRDL-defined and have no custom assembly: their
    parser fails without a word. So the first ``lazy`` op written in custom
    form is named at its position.
    """
    for number, line in enumerate(chunk.text.split("\n"), start=1):
        code = line.split("//", 1)[0]
        m = _CUSTOM_OP.search(code)
        if m is None:
            continue
        name, col = m.group(1), m.start(1) + 1
        if name in OPS:
            message = (
                f"custom assembly is not supported for '{name}': the lazy dialect's ops have only the generic "
                f'form, e.g. %0 = "{name}"(%a) {{attr = ...}} : (tensor<...>) -> tensor<...>'
            )
        else:
            message = f"unknown op '{name}' (lazy-opt --list-ops lists the lazy dialect)"
        return Diagnostic("error", (filename, number, col), message)
    return Diagnostic("error", (filename, chunk.first_line, 1), "could not parse the input (MLIR gave no reason)")
