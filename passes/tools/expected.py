"""``--verify-diagnostics``: the input says which diagnostics it expects.

The annotations and their matching are mlir-opt's (MLIR's
``SourceMgrDiagnosticVerifierHandler``), so tests move between the tools:

    // expected-error @+1 {{op operands must have the same type}}
    %0 = "lazy.add"(%a, %b) : ...

``expected-error``, ``-warning``, ``-note``, ``-remark``, each optionally
``-re`` (then ``{{regex}}`` parts inside the text are regular expressions).
The line is the annotation's own, or ``@+N``/``@-N`` from it, ``@above`` (the
closest line above without an annotation), ``@below`` (the closest below), or
``@unknown`` for a diagnostic with no position in the input. A diagnostic
matches an expectation of its severity on its line whose text it contains.
Every diagnostic must be expected (notes too) and every expectation met.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .diagnostics import Diagnostic

_ANNOTATION = re.compile(
    r"expected-(error|note|remark|warning)(-re)? *(@([+-][0-9]+|above|below|unknown))? *\{\{(.*)\}\}$"
)


@dataclass
class Expectation:
    severity: str
    line: int | None
    """The line the diagnostic must be on; None: at an unknown position."""
    text: str
    at: tuple[int, int]
    """Where the annotation is (line, column), for "was not produced"."""
    pattern: re.Pattern | None = None
    matched: bool = False

    def matches(self, message: str) -> bool:
        if self.pattern is not None:
            return self.pattern.search(message) is not None
        return self.text in message


def _regex(text: str) -> re.Pattern:
    """``-re`` text: literal except ``{{...}}`` parts, which are regexes."""
    parts, pos = [], 0
    for m in re.finditer(r"\{\{(.*?)\}\}", text):
        parts.append(re.escape(text[pos : m.start()]))
        parts.append(f"(?:{m.group(1)})")
        pos = m.end()
    parts.append(re.escape(text[pos:]))
    return re.compile("".join(parts))


def parse_expectations(text: str, filename: str) -> tuple[list[Expectation], list[Diagnostic]]:
    """The annotations of ``text`` (lines counted from 1), and errors in them."""
    lines = text.split("\n")
    expected: list[Expectation] = []
    errors: list[Diagnostic] = []
    for_next_line: list[Expectation] = []
    last_plain_line = 0
    for number, line in enumerate(lines, start=1):
        m = _ANNOTATION.search(line.rstrip())
        if m is None:
            for e in for_next_line:
                e.line = number
            for_next_line.clear()
            last_plain_line = number
            continue
        severity, is_re, designator, body = m.group(1), m.group(2), m.group(4), m.group(5)
        e = Expectation(severity, number, body, (number, m.start() + 1))
        if is_re:
            try:
                e.pattern = _regex(body)
            except re.error as err:
                errors.append(Diagnostic("error", (filename, number, m.start() + 1), f"invalid regex: {err}"))
                continue
        if designator is None:
            pass
        elif designator[0] in "+-":
            e.line = number + int(designator)
        elif designator == "above":
            e.line = last_plain_line
        elif designator == "below":
            e.line = len(lines) + 1  # until a line below claims it: never met
            for_next_line.append(e)
        else:
            e.line = None
        expected.append(e)
    return expected, errors


def verify(diagnostics: list[Diagnostic], expected: list[Expectation], filename: str) -> list[Diagnostic]:
    """What does not agree, as errors: diagnostics nobody expected (or of
    another severity than expected) and expectations no diagnostic met."""
    problems: list[Diagnostic] = []

    def check(d: Diagnostic) -> None:
        here = d.position[1] if d.position is not None and d.position[0] == filename else None
        near_miss = None
        for e in expected:
            if e.line == here and e.matches(d.message):
                if e.severity == d.severity:
                    e.matched = True
                    return
                near_miss = e
        if near_miss is not None:
            problems.append(Diagnostic(
                "error", (filename, *near_miss.at),
                f"'{d.severity}' diagnostic emitted when expecting a '{near_miss.severity}'",
            ))
        else:
            problems.append(Diagnostic("error", d.position, f"unexpected {d.severity}: {d.message}"))

    for d in diagnostics:
        check(d)
        for note in d.notes:
            # MLIR adds the failing op's text to some errors; mlir-opt turns
            # that off when verifying diagnostics, so no test expects it.
            if not note.message.startswith("see current operation"):
                check(note)
    for e in expected:
        if not e.matched:
            problems.append(Diagnostic(
                "error", (filename, *e.at), f'expected {e.severity} "{e.text}" was not produced'
            ))
    return problems
