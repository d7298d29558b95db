"""``lazy-opt``: the ``mlir-opt`` of lazycore.

Reads MLIR (a file or stdin), runs a pipeline of lazycore and upstream passes,
prints the IR. Passes come from ``--pass-pipeline=...`` or from per-pass flags
given in order (``--lazy-canonicalize --cse``). Every error is reported as
``file:line:col: error: ...`` on stderr with a non-zero exit status, never as
a Python traceback; ``--verify-diagnostics`` checks the diagnostics against
``expected-error`` annotations in the input instead (:mod:`.expected`).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from lazycore.dialect import OPS
from lazycore.dialect.mlir import ir
from lazycore.dialect.build import new_context
from lazycore.passes import (
    DEFAULT_PIPELINE,
    PASSES,
    IRPrinting,
    LoweringError,
    PassError,
    load_pdl_patterns,
    run_pipeline,
)
from lazycore.passes.pipeline import make_stage, split_elements

from . import plugins, source
from .dialect_doc import render as render_dialect_doc
from .diagnostics import Collector, Diagnostic, from_exception, position
from .expected import parse_expectations, verify
from .source import SPLIT_MARKER

PASS_FLAGS_EXTRA = {
    "cse": "upstream common subexpression elimination",
    "canonicalize": "upstream canonicalizer",
    "lazy-default-pipeline": "the default compile pipeline",
}

# Passes that apply the patterns --load-pdl-patterns loads.
_PDL_APPLIERS = {"lazy-apply-pdl", "lazy-to-stablehlo"}


def take_pass_flags(argv: list[str]) -> tuple[list[str], list[str]]:
    """Pull per-pass flags out of argv, in order, as pipeline elements.

    ``--lazy-aliasing=donate=0:0`` becomes ``lazy-aliasing{donate=0:0}``, as
    mlir-opt spells pass options on its command line.
    """
    rest, steps = [], []
    for arg in argv:
        name, eq, opts = arg[2:].partition("=") if arg.startswith("--") else ("", "", "")
        if name in PASSES:
            steps.append(name + (f"{{{opts}}}" if eq else ""))
        elif name == "lazy-default-pipeline":
            steps.append(DEFAULT_PIPELINE)
        elif name in PASS_FLAGS_EXTRA:
            steps.append(name)
        else:
            rest.append(arg)
    return rest, steps


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lazy-opt",
        description="Run lazycore passes over lazy-dialect MLIR and print the result.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"default pipeline (--lazy-default-pipeline):\n  {DEFAULT_PIPELINE}\n\n"
        "Upstream MLIR passes (cse, canonicalize, ...) work in --pass-pipeline too.",
    )
    p.add_argument("input", nargs="?", default="-", help="input file (default: stdin)")
    p.add_argument("-o", dest="output", default="-", help="output file (default: stdout)")
    p.add_argument("--pass-pipeline", default=None, help='e.g. "builtin.module(lazy-canonicalize,cse)"')
    p.add_argument("--split-input-file", action="store_true", help=f"process chunks separated by '{SPLIT_MARKER}' independently")
    p.add_argument("--verify-diagnostics", action="store_true",
                   help="check diagnostics against expected-error/-warning/-note/-remark annotations in the input")
    p.add_argument("--mlir-print-op-generic", action="store_true", help="print ops in generic form")
    p.add_argument("--mlir-print-debuginfo", action="store_true", help="print locations")
    p.add_argument("--mlir-print-ir-before-all", action="store_true", help="print the IR before every pass (stderr)")
    p.add_argument("--mlir-print-ir-after-all", action="store_true", help="print the IR after every pass (stderr)")
    p.add_argument("--load-pdl-patterns", action="append", default=[], metavar="FILE",
                   help="load PDL patterns (a module of pdl.pattern ops); lazy-to-stablehlo applies them before "
                        "its lowerings, lazy-apply-pdl applies them alone")
    p.add_argument(plugins.FLAG, action="append", default=[], metavar="FILE_OR_MODULE",
                   help="import a Python file or module that registers passes or lowerings")
    p.add_argument("--list-ops", action="store_true", help="list the ops of the lazy dialect and exit")
    p.add_argument("--dialect-doc", action="store_true", help="print the lazy dialect's reference (Markdown) and exit")
    # Listed for --help only: take_pass_flags consumes them before parsing.
    group = p.add_argument_group("passes (run in the order given; options as --PASS=key=value)")
    for name, info in sorted(PASSES.items()):
        opts = "; ".join(f"{k}: {v}" for k, v in info.options.items())
        group.add_argument(f"--{name}", action="store_true", help=info.summary + (f" [options: {opts}]" if opts else ""))
    for name, summary in PASS_FLAGS_EXTRA.items():
        group.add_argument(f"--{name}", action="store_true", help=summary)
    return p


class Reporter:
    """Prints diagnostics to stderr and remembers whether any was an error."""

    def __init__(self):
        self.failed = False

    def emit(self, diag, fallback=None) -> None:
        if diag.severity == "error":
            self.failed = True
        if diag.position is None and fallback is None:
            print(f"lazy-opt: {diag.severity}: {diag.message}", file=sys.stderr)
            return
        for line in diag.lines(fallback):
            print(line, file=sys.stderr)

    def error(self, message: str, position=None) -> None:
        self.emit(Diagnostic("error", position, message))


def _check_pipeline(pipeline: str, from_text: bool, report: Reporter) -> bool:
    """Build every stage once, before any input is read, so a bad pipeline is
    one error (at its column in --pass-pipeline) rather than one per chunk."""
    pos = 0
    with new_context():
        for element in split_elements(pipeline):
            at = pipeline.find(element, pos)
            pos = at + len(element) if at >= 0 else pos
            try:
                make_stage(element)
            except Exception as e:  # a plugin's factory may raise anything
                message = str(e) if isinstance(e, PassError) else f"{element}: {type(e).__name__}: {e}"
                report.error(message, ("<pass-pipeline>", 1, at + 1) if from_text and at >= 0 else None)
                return False
    return True


def _read(path: str, report: Reporter) -> str | None:
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        report.error(f"could not open input file '{path}': {reason}")
        return None


def _load_pdl(path: str, report: Reporter) -> bool:
    """Parse the file here first, so its errors carry its positions."""
    text = _read(path, report)
    if text is None:
        return False
    chunk = source.Chunk(text, 1)
    ctx = new_context()
    collector = Collector(ctx)
    with ctx:
        try:
            module = source.parse(chunk, path, collector)
        except source.ParseFailure:
            if not collector.errors_since(0):
                collector.diagnostics.append(source.explain_silent_failure(chunk, path))
            for d in collector.diagnostics:
                report.emit(d, (path, 1, 1))
            return False
        others = [op for op in module.regions[0].blocks[0].operations if op.operation.name != "pdl.pattern"]
        where = position(others[0].location) if others else (path, 1, 1)
    try:
        load_pdl_patterns(text)
    except Exception as e:
        report.error(str(e), where)
        return False
    return True


def _process(chunk: source.Chunk, filename: str, pipeline: str, args, printing):
    """Parse and transform one chunk: (its output IR or None, its diagnostics,
    where to print those that have no position)."""
    ctx = new_context()
    collector = Collector(ctx)
    diags = collector.diagnostics
    fallback = (filename, chunk.first_line, 1)
    with ctx:
        try:
            module = source.parse(chunk, filename, collector).operation
        except source.ParseFailure:
            if not collector.errors_since(0):
                diags.append(source.explain_silent_failure(chunk, filename))
            return None, diags, fallback
        except Exception as e:  # a verifier that raised: reported, not a traceback
            diags.append(from_exception(e, "while parsing"))
            return None, diags, fallback
        fallback = position(module.location) or fallback

        stage = {"name": None, "mark": collector.mark()}

        def before(name, _op):
            stage.update(name=name, mark=collector.mark())

        try:
            if pipeline:
                run_pipeline(module, pipeline, before_each=before, print_ir=printing)
            stage.update(name="the final verification", mark=collector.mark())
            module.verify()
        except Exception as e:
            _stage_failed(e, stage["name"], collector, stage["mark"])
            return None, diags, fallback
        text = module.get_asm(
            print_generic_op_form=args.mlir_print_op_generic, enable_debug_info=args.mlir_print_debuginfo
        )
        return text, diags, fallback


def _stage_failed(error: Exception, stage: str, collector: Collector, mark: int) -> None:
    """Add what a failed stage says to the diagnostics MLIR gave during it.

    MLIR's errors come first; a bare "it failed" from the Python side adds
    nothing to them. A lowering's own error (it raised, or built invalid
    StableHLO) says more than the conversion's verdict "failed to legalize
    operation", which is then dropped.
    """
    diags = collector.diagnostics
    mlir_said_it = collector.errors_since(mark)
    if isinstance(error, ir.MLIRError) or (isinstance(error, LoweringError) and error.__cause__ is None):
        if not mlir_said_it:
            loc = getattr(error, "location", None)
            diags.append(Diagnostic("error", position(loc) if loc is not None else None, f"{stage}: {error}"))
        return
    if isinstance(error, LoweringError):
        diags[mark:] = [d for d in diags[mark:] if not d.message.startswith("failed to legalize operation")]
    diags.append(from_exception(error, f"pass '{stage}' failed"))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        with plugins.scoped_registrations():
            return _main(argv)
    except BrokenPipeError:
        # the reader went away (`lazy-opt --list-ops | head -1`): stop quietly as
        # other command-line tools do, and keep Python's exit-time flush of the
        # closed pipe from printing a second error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def _main(argv: list[str]) -> int:
    report = Reporter()
    for name in plugins.requested(argv):
        try:
            plugins.load(name)
        except plugins.PluginError as e:
            report.emit(e.diagnostic)
            return 1
    parser = build_parser()
    argv, steps = take_pass_flags(argv)
    args = parser.parse_args(argv)
    if args.list_ops:
        for name, spec in OPS.items():
            print(f"{name:28s} {spec.doc}")
        return 0
    if args.dialect_doc:
        sys.stdout.write(render_dialect_doc())
        return 0
    if args.pass_pipeline and steps:
        parser.error("use either --pass-pipeline or per-pass flags, not both")
    pipeline = args.pass_pipeline or ",".join(steps)
    if pipeline and not _check_pipeline(pipeline, bool(args.pass_pipeline), report):
        return 1
    for path in args.load_pdl_patterns:
        if not _load_pdl(path, report):
            return 1
    if args.load_pdl_patterns:
        used = {e.partition("{")[0].strip() for e in split_elements(pipeline)} if pipeline else set()
        if not used & _PDL_APPLIERS:
            report.emit(Diagnostic("warning", None, "PDL patterns are loaded but the pipeline has neither "
                                   "lazy-apply-pdl nor lazy-to-stablehlo, which apply them"))

    text = _read(args.input, report)
    if text is None:
        return 1
    filename = "<stdin>" if args.input == "-" else args.input

    printing = None
    if args.mlir_print_ir_before_all or args.mlir_print_ir_after_all:
        printing = IRPrinting(
            before=args.mlir_print_ir_before_all,
            after=args.mlir_print_ir_after_all,
            debug_info=args.mlir_print_debuginfo,
            generic=args.mlir_print_op_generic,
        )

    outputs, mismatched = [], False
    for chunk in source.split(text, args.split_input_file):
        output, diags, chunk_start = _process(chunk, filename, pipeline, args, printing)
        if output is not None:
            outputs.append(output)
        if args.verify_diagnostics:
            expected, problems = parse_expectations(chunk.text, filename)
            problems += verify(diags, expected, filename)
            for p in problems:
                report.emit(p, chunk_start)
            mismatched |= bool(problems)
        else:
            for d in diags:
                report.emit(d, chunk_start)
            if output is None:
                report.failed = True

    out = ("\n" + SPLIT_MARKER + "\n").join(o.rstrip("\n") for o in outputs) + "\n" if outputs else ""
    if args.output == "-":
        sys.stdout.write(out)
    else:
        try:
            with open(args.output, "w") as f:
                f.write(out)
        except OSError as e:
            report.error(f"could not open output file '{args.output}': {e.strerror or e}")
            return 1
    if args.verify_diagnostics:
        return 1 if mismatched else 0
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
