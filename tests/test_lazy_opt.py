"""lazy-opt in-process: errors as diagnostics and never tracebacks, the
expected-* matching of --verify-diagnostics, plugins that leave the process's
registries as they were. (The command line itself is tested in lit_tests/tools.)"""

from pathlib import Path

import pytest

from lazycore.passes import PASSES, IRPrinting, PassError, run_pipeline
from lazycore.passes.aliasing import apply_plan
from lazycore.passes.lowering import registry
from lazycore.runtime import compiler
from lazycore.passes.tools import dialect_doc, lazy_opt
from lazycore.passes.tools.diagnostics import Diagnostic, position
from lazycore.passes.tools.expected import parse_expectations, verify

INPUTS = Path(__file__).resolve().parent.parent / "lit_tests" / "Inputs"

ADD = """
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


def run(tmp_path, text: str, *flags: str) -> int:
    path = tmp_path / "in.mlir"
    path.write_text(text)
    return lazy_opt.main([*flags, str(path)])


# --- --verify-diagnostics: the annotations, as mlir-opt reads them ---------------------


def expectations(text: str):
    expected, errors = parse_expectations(text, "t.mlir")
    assert errors == []
    return expected


def test_designators_name_lines():
    expected = expectations(
        "a\n"  # 1
        "// expected-error @+2 {{two below}}\n"  # 2 -> 4
        "// expected-error @-1 {{one above}}\n"  # 3 -> 2
        "b\n"  # 4
        "// expected-error @above {{closest plain line above}}\n"  # 5 -> 4
        "// expected-warning @below {{closest plain line below}}\n"  # 6 -> 8
        "// expected-remark @unknown {{no position}}\n"  # 7 -> None
        "c\n"  # 8
        "d // expected-note {{its own line}}\n"  # 9 -> 9
    )
    assert [(e.severity, e.line, e.text) for e in expected] == [
        ("error", 4, "two below"),
        ("error", 2, "one above"),
        ("error", 4, "closest plain line above"),
        ("warning", 8, "closest plain line below"),
        ("remark", None, "no position"),
        ("note", 9, "its own line"),
    ]


def test_below_skips_annotation_lines():
    expected = expectations("// expected-error @below {{x}}\n// expected-note @+1 {{y}}\nop\n")
    assert [e.line for e in expected] == [3, 3]


def test_matching_by_line_severity_and_substring():
    expected = expectations("// expected-error @+1 {{same type}}\nop\n// expected-warning {{careful}}\n")
    problems = verify(
        [
            Diagnostic("error", ("t.mlir", 2, 5), "'lazy.add' op operands must have the same type, got x"),
            Diagnostic("error", ("t.mlir", 3, 1), "careful"),  # the right line, the wrong severity
        ],
        expected,
        "t.mlir",
    )
    assert [p.message for p in problems] == [
        "'error' diagnostic emitted when expecting a 'warning'",
        'expected warning "careful" was not produced',
    ]
    assert problems[0].position == ("t.mlir", 3, 4)  # at the annotation


def test_unexpected_and_unmet():
    expected = expectations("// expected-error @+1 {{foo}}\nop\n")
    problems = verify([Diagnostic("error", ("t.mlir", 3, 1), "foo")], expected, "t.mlir")
    assert [p.message for p in problems] == ["unexpected error: foo", 'expected error "foo" was not produced']


def test_notes_must_be_expected_but_not_the_op_printout():
    diag = Diagnostic("error", ("t.mlir", 2, 1), "bad", [
        Diagnostic("note", ("t.mlir", 1, 1), "prior use here"),
        Diagnostic("note", ("t.mlir", 2, 1), "see current operation: %0 = ..."),
    ])
    assert verify([diag], expectations("x\n// expected-error @-0 {{bad}}\n"), "t.mlir")[0].message == (
        "unexpected note: prior use here"
    )
    ok = expectations("// expected-note {{prior use}}\n// expected-error {{bad}}\n")
    assert verify([diag], ok, "t.mlir") == []


def test_unknown_positions_and_other_files_match_at_unknown():
    expected = expectations("// expected-error @unknown {{somewhere}}\n// expected-error @unknown {{model.py}}\n")
    diags = [Diagnostic("error", None, "somewhere"), Diagnostic("error", ("model.py", 3, 1), "in model.py")]
    assert verify(diags, expected, "t.mlir") == []


def test_regex_annotations():
    expected = expectations("// expected-error-re @+1 {{dims [0, {{[0-9]+}}] out of range}}\nop\n")
    assert verify([Diagnostic("error", ("t.mlir", 2, 1), "'x' op dims [0, 2] out of range")], expected, "t.mlir") == []
    _, errors = parse_expectations("// expected-error-re {{a {{[}} b}}\n", "t.mlir")
    assert errors[0].position == ("t.mlir", 1, 4) and errors[0].message.startswith("invalid regex")


# --- errors are diagnostics, never tracebacks --------------------------------------------


def test_dialect_doc_flag_prints_the_reference(capsys):
    assert lazy_opt.main(["--dialect-doc"]) == 0
    assert capsys.readouterr().out == dialect_doc.render()


def test_missing_file(capsys):
    assert lazy_opt.main(["/no/such/dir/x.mlir"]) == 1
    assert capsys.readouterr().err == (
        "lazy-opt: error: could not open input file '/no/such/dir/x.mlir': No such file or directory\n"
    )


def test_a_pass_raising_a_python_error_is_reported_with_its_line(tmp_path, capsys):
    plugin = tmp_path / "raising_plugin.py"
    plugin.write_text(
        "from lazycore.passes import register_pass\n"
        "@register_pass('test-raises', 'raises')\n"
        "def factory():\n"
        "    def run(module_op):\n"
        "        return {}['missing']\n"
        "    return run\n"
    )
    assert run(tmp_path, ADD, "--load-python-module", str(plugin), "--test-raises") == 1
    err = capsys.readouterr().err
    assert "in.mlir:2:1: error: pass 'test-raises' failed: KeyError: 'missing' (raised at " in err
    assert f"{plugin}:5)" in err and "Traceback" not in err


def test_plugins_leave_the_registries_as_they_were(tmp_path, capsys):
    passes, user = dict(PASSES), dict(registry.USER)
    for _ in range(2):  # loading twice in one process registers twice, without clashing
        assert run(tmp_path, ADD, "--load-python-module", str(INPUTS / "lazy_plugin.py"), "--plugin-count-ops") == 0
        assert "plugin.lazy_ops = 1 : i64" in capsys.readouterr().out
    assert PASSES == passes and registry.USER == user


def test_pdl_patterns_loaded_by_lazy_opt_do_not_stay(tmp_path, capsys):
    sources = list(registry.PDL_SOURCES)
    assert run(tmp_path, ADD, "--load-pdl-patterns", str(INPUTS / "pdl_lowerings.mlir"), "--lazy-apply-pdl") == 0
    assert registry.PDL_SOURCES == sources


def test_pipeline_errors_are_reported_once_before_any_input(tmp_path, capsys):
    text = ADD + "// -----\n" + ADD
    assert run(tmp_path, text, "--split-input-file", "--lazy-aliasing=donate=0-0") == 1
    assert capsys.readouterr() == (
        "", "lazy-opt: error: lazy-aliasing: bad plan entry '0-0' (expected ARG:RESULT)\n"
    )


# --- the pieces the passes gained for it --------------------------------------------------


def test_aliasing_errors_carry_the_function_location():
    module = compiler.parse(ADD.replace("@f", "@forward"))
    with pytest.raises(PassError, match=r"result 3 out of range \(@forward has 1\)") as info:
        apply_plan(module.operation, {0: 3})
    assert position(info.value.location) == ("-", 2, 1)


def test_ir_printing_of_python_passes(capsys):
    module = compiler.parse(ADD)
    run_pipeline(module, "lazy-canonicalize", print_ir=IRPrinting(before=True, after=True))
    err = capsys.readouterr().err
    assert err.index("// -----// IR Dump Before lazy-canonicalize //----- //\nmodule {") < err.index(
        "// -----// IR Dump After lazy-canonicalize //----- //\nmodule {"
    )


def test_a_closed_pipe_ends_quietly():
    """`lazy-opt --list-ops | head -1`: the reader goes away; no traceback, SIGPIPE's status."""
    import os
    import subprocess
    import sys

    r, w = os.pipe()
    os.close(r)  # every write fails with EPIPE, as once head has read its line
    try:
        done = subprocess.run([sys.executable, "-m", "lazycore.passes.tools.lazy_opt", "--list-ops"], stdout=w,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == 141
