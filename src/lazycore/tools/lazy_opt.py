"""``lazy-opt``: the ``mlir-opt`` of lazycore.

Reads MLIR (a file or stdin), runs a pipeline of lazycore and upstream passes,
prints the IR. Passes come from ``--pass-pipeline=...`` or from per-pass flags
given in order (``--lazy-canonicalize --cse``). Diagnostics print as
``file:line:col: error: ...`` and the exit status is non-zero on any error.
"""

from __future__ import annotations

import argparse
import re
import sys

SPLIT_MARKER = "// -----"


def _format_diagnostic(diag, filename: str, severity="error") -> list[str]:
    loc = str(diag.location)
    m = re.match(r'loc\("(.*)":(\d+):(\d+)\)', loc)
    where = f"{filename}:{m.group(2)}:{m.group(3)}" if m else filename
    lines = [f"{where}: {severity}: {diag.message}"]
    for note in getattr(diag, "notes", []):
        lines.extend(_format_diagnostic(note, filename, "note"))
    return lines


def _report(err, filename: str, line_offset: int = 0) -> None:
    from lazycore.mlir import ir

    if isinstance(err, ir.MLIRError) and err.error_diagnostics:
        for d in err.error_diagnostics:
            for line in _format_diagnostic(d, filename):
                if line_offset:
                    line = re.sub(
                        rf"^{re.escape(filename)}:(\d+):",
                        lambda m: f"{filename}:{int(m.group(1)) + line_offset}:",
                        line,
                    )
                print(line, file=sys.stderr)
    else:
        print(f"{filename}: error: {err}", file=sys.stderr)


PASS_FLAGS_EXTRA = {
    "cse": "upstream common subexpression elimination",
    "canonicalize": "upstream canonicalizer",
    "lazy-default-pipeline": "the default compile pipeline",
}


def take_pass_flags(argv: list[str]) -> tuple[list[str], list[str]]:
    """Pull per-pass flags out of argv, in order, as pipeline elements.

    ``--lazy-aliasing=donate=0:0`` becomes ``lazy-aliasing{donate=0:0}``, as
    mlir-opt spells pass options on its command line.
    """
    from lazycore.passes import DEFAULT_PIPELINE, PASSES

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
    from lazycore.passes import DEFAULT_PIPELINE, PASSES

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
    p.add_argument("--mlir-print-op-generic", action="store_true", help="print ops in generic form")
    p.add_argument("--list-ops", action="store_true", help="list the ops of the lazy dialect and exit")
    # Listed for --help only: take_pass_flags consumes them before parsing.
    group = p.add_argument_group("passes (run in the order given; options as --PASS=key=value)")
    for name, info in sorted(PASSES.items()):
        opts = "; ".join(f"{k}: {v}" for k, v in info.options.items())
        group.add_argument(f"--{name}", action="store_true", help=info.summary + (f" [options: {opts}]" if opts else ""))
    for name, summary in PASS_FLAGS_EXTRA.items():
        group.add_argument(f"--{name}", action="store_true", help=summary)
    return p


def _run_chunk(text: str, pipeline: str | None, generic: bool) -> str:
    from lazycore.mlir import ir, new_context
    from lazycore.passes import run_pipeline

    ctx = new_context()
    with ctx:
        module = ir.Module.parse(text)
        if pipeline:
            run_pipeline(module, pipeline)
        module.operation.verify()
        if generic:
            return module.operation.get_asm(print_generic_op_form=True)
        return str(module)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv, steps = take_pass_flags(sys.argv[1:] if argv is None else list(argv))
    args = parser.parse_args(argv)
    if args.list_ops:
        from lazycore.dialect import OPS

        for name, spec in OPS.items():
            print(f"{name:28s} {spec.doc}")
        return 0
    if args.pass_pipeline and steps:
        parser.error("use either --pass-pipeline or per-pass flags, not both")
    pipeline = args.pass_pipeline or ",".join(steps)

    filename = args.input
    text = sys.stdin.read() if filename == "-" else open(filename).read()
    if filename == "-":
        filename = "<stdin>"
    chunks = text.split(SPLIT_MARKER) if args.split_input_file else [text]

    from lazycore.mlir import ir
    from lazycore.passes import LoweringError, PassError

    outputs, failed, offset = [], False, 0
    for chunk in chunks:
        try:
            outputs.append(_run_chunk(chunk, pipeline, args.mlir_print_op_generic))
        except (ir.MLIRError, PassError, LoweringError, ValueError, KeyError) as e:
            _report(e, filename, offset)
            failed = True
        offset += chunk.count("\n")
    out = ("\n" + SPLIT_MARKER + "\n").join(o.rstrip("\n") for o in outputs) + "\n"
    if args.output == "-":
        sys.stdout.write(out)
    else:
        with open(args.output, "w") as f:
            f.write(out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
