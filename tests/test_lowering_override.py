"""The user-lowering API: Python overrides, PDL patterns, and ops with no lowering."""

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from lazycore.runtime import compiler
from lazycore.dialect import OpSpec, define
from lazycore.dialect.mlir import ir
from lazycore.passes import (
    Decline,
    LoweringError,
    PassError,
    builtin_lowering,
    load_pdl_patterns,
    register_lowering,
    unregister_lowering,
)
from lazycore.passes.lowering import hlo, registry

PDL_FILE = Path(__file__).parent.parent / "lit_tests" / "Inputs" / "pdl_lowerings.mlir"

TANH = """
func.func @main(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "lazy.tanh"(%a) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}"""

# neg and abs at the type the PDL file's neg pattern matches, and neg at another.
NEG_ABS = """
func.func @main(%a: tensor<4xf32>, %b: tensor<3xf64>) -> (tensor<4xf32>, tensor<3xf64>, tensor<4xf32>) {
  %0 = "lazy.neg"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "lazy.neg"(%b) : (tensor<3xf64>) -> tensor<3xf64>
  %2 = "lazy.abs"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2 : tensor<4xf32>, tensor<3xf64>, tensor<4xf32>
}"""


pytestmark = pytest.mark.usefixtures("restore_lowerings")  # overrides are process-wide


def stablehlo_text(program: str) -> str:
    """The IR right after lazy-to-stablehlo (the later canonicalize may rewrite it)."""
    return str(compiler.lower(program, "lazy-to-stablehlo"))


def tanh_via_logistic(op, rewriter):
    """tanh(x) = 2 * logistic(2x) - 1."""
    x = op.operands[0]
    two = hlo.splat_like(2.0, x)
    s = hlo.unary("logistic", hlo.binary("multiply", two, x))
    return hlo.binary("subtract", hlo.binary("multiply", two, s), hlo.splat_like(1.0, x))


# --- Python overrides ------------------------------------------------------------


def test_override_replaces_the_builtin_lowering_until_unregistered(rng):
    a = rng.standard_normal((2, 3)).astype(np.float32) * 3
    register_lowering("tanh", tanh_via_logistic)
    text = stablehlo_text(TANH)
    assert "stablehlo.logistic" in text and "stablehlo.tanh" not in text
    (out,) = compiler.run_module(TANH, [a])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.tanh(a), rtol=1e-5, atol=1e-6)

    unregister_lowering("lazy.tanh")  # either spelling of the name works
    text = stablehlo_text(TANH)
    assert "stablehlo.tanh" in text and "stablehlo.logistic" not in text
    (out,) = compiler.run_module(TANH, [a])
    np.testing.assert_allclose(out, np.tanh(a), rtol=1e-6)


def test_register_for_an_unknown_op_names_it():
    with pytest.raises(KeyError, match="unknown lazy op 'lazy.no_such_op'"):
        register_lowering("no_such_op", tanh_via_logistic)


# --- declining, the built-in lowering, and results of the wrong type -------------


def test_a_declining_lowering_leaves_the_op_to_the_builtin_one(rng):
    built = []

    def declines_after_building(op, rewriter):
        built.append(hlo.unary("exponential", op.operands[0]))  # dropped: it declines
        raise Decline("not this one")

    register_lowering("tanh", lambda op, rewriter: None)
    register_lowering("tanh", declines_after_building)
    text = stablehlo_text(TANH)
    assert built and "stablehlo.exponential" not in text and "stablehlo.tanh" in text
    a = rng.standard_normal((2, 3)).astype(np.float32)
    (out,) = compiler.run_module(TANH, [a])
    np.testing.assert_allclose(out, np.tanh(a), rtol=1e-6)


def test_user_lowerings_are_tried_newest_first_until_one_accepts():
    tried = []

    def accepts(op, rewriter):
        tried.append("older")
        return tanh_via_logistic(op, rewriter)

    def declines(op, rewriter):
        tried.append("newer")
        return None

    register_lowering("tanh", accepts)
    register_lowering("tanh", declines)
    text = stablehlo_text(TANH)
    assert tried == ["newer", "older"]
    assert "stablehlo.logistic" in text and "stablehlo.tanh" not in text
    # dropping the accepting one alone leaves the declining one, then the built-in
    unregister_lowering("tanh", accepts)
    assert [r.fn for r in registry.USER["lazy.tanh"]] == [declines]
    assert "stablehlo.tanh" in stablehlo_text(TANH)
    # registering a function again moves it first instead of adding it twice
    register_lowering("tanh", accepts)
    register_lowering("tanh", declines)
    assert [r.fn for r in registry.USER["lazy.tanh"]] == [accepts, declines]


def test_a_lowering_may_call_the_builtin_one(rng):
    assert builtin_lowering("lazy.tanh") is builtin_lowering("tanh")

    @register_lowering("tanh")  # the decorator form
    def clipped(op, rewriter):
        t = builtin_lowering("tanh")(op, rewriter)
        return hlo.binary("minimum", t, hlo.splat_like(0.5, t))

    a = rng.standard_normal((2, 3)).astype(np.float32) * 3
    (out,) = compiler.run_module(TANH, [a])
    np.testing.assert_allclose(out, np.minimum(np.tanh(a), np.float32(0.5)), rtol=1e-6)
    with pytest.raises(KeyError, match="'lazy.test_override_twice' has no built-in lowering"):
        builtin_lowering(TWICE.name)


def test_results_of_the_wrong_type_name_the_lowering_and_both_types():
    def widens(op, rewriter):
        return hlo.convert(op.operands[0], "f64")

    register_lowering("tanh", widens)
    line = widens.__code__.co_firstlineno + 3  # the register_lowering call
    where = rf"{re.escape(__file__)}:{line}"
    with pytest.raises(LoweringError, match=rf"lowering of lazy.tanh registered at {where} "
                       r"returned tensor<2x3xf64>, expected tensor<2x3xf32>$") as e:
        compiler.lower(TANH)
    assert "unresolved materialization" not in str(e.value)
    assert e.value.op.name == "lazy.tanh" and e.value.op.location == ("-", 3)

    register_lowering("tanh", lambda op, rewriter: [op.operands[0], op.operands[0]])
    with pytest.raises(LoweringError, match=r"returned \(tensor<2x3xf32>, tensor<2x3xf32>\), expected tensor<2x3xf32>"):
        compiler.lower(TANH)
    register_lowering("tanh", lambda op, rewriter: [])
    with pytest.raises(LoweringError, match=r"returned nothing, expected tensor<2x3xf32>"):
        compiler.lower(TANH)


def test_a_wrong_result_type_fails_the_barrier_with_the_users_line(rng):
    import lazycore as lc

    register_lowering("tanh", lambda op, rewriter: hlo.convert(op.operands[0], "f64"))
    x = lc.from_numpy(rng.standard_normal(3).astype(np.float32))
    y = lc.apply("tanh", x); line = sys._getframe().f_lineno  # noqa: E702
    z = lc.apply("neg", x)
    lc.mark_step()
    with pytest.raises(lc.BarrierError, match=rf"lazy.tanh \(recorded at .*test_lowering_override.py:{line}\).*"
                       r"lowering of lazy.tanh registered at .* returned tensor<3xf64>, expected tensor<3xf32>"):
        lc.to_numpy(y)
    np.testing.assert_array_equal(lc.to_numpy(z), -lc.to_numpy(x))


# A row added for this test only: the op table is process-wide and append-only.
TWICE = define(OpSpec("test_override_twice", ("operand",), lambda x: x, summary="2x, defined by a test"))


def test_an_op_every_lowering_declines_fails_naming_each_and_why():
    program = TANH.replace("lazy.tanh", TWICE.full_name)
    register_lowering(TWICE.name, lambda op, rewriter: None)
    register_lowering(TWICE.name, lambda op, rewriter: (_ for _ in ()).throw(Decline("only on Tuesdays")))
    with pytest.raises(LoweringError, match=r"lazy.test_override_twice at -:3: every lowering declined it: "
                       r"the lowering registered at .*test_lowering_override.py:\d+: only on Tuesdays; "
                       r"the lowering registered at .*test_lowering_override.py:\d+$"):
        compiler.lower(program)


def test_new_op_needs_a_lowering_and_takes_a_user_one(rng):
    program = TANH.replace("lazy.tanh", TWICE.full_name)
    with pytest.raises(LoweringError, match="no lowering registered for 'lazy.test_override_twice'"):
        compiler.lower(program)
    register_lowering(TWICE.name, lambda op, rewriter: hlo.binary("add", op.operands[0], op.operands[0]))
    a = rng.standard_normal((2, 3)).astype(np.float32)
    (out,) = compiler.run_module(program, [a])
    np.testing.assert_array_equal(out, 2 * a)


# --- PDL patterns ----------------------------------------------------------------


def test_pdl_patterns_win_where_they_match(rng):
    before = stablehlo_text(NEG_ABS)
    assert "stablehlo.subtract" not in before and "stablehlo.abs" in before
    load_pdl_patterns(PDL_FILE)
    text = stablehlo_text(NEG_ABS)
    # neg on tensor<4xf32>: 0 - x; neg on f64: the built-in negate; abs: max(x, -x).
    assert "stablehlo.constant dense<0.000000e+00> : tensor<4xf32>" in text
    assert "stablehlo.subtract %cst, %arg0 : tensor<4xf32>" in text
    assert "stablehlo.negate %arg1 : tensor<3xf64>" in text
    assert "stablehlo.abs" not in text and "stablehlo.maximum" in text

    a = rng.standard_normal(4).astype(np.float32)
    b = rng.standard_normal(3)
    neg_a, neg_b, abs_a = compiler.run_module(NEG_ABS, [a, b])
    assert (neg_a.dtype, neg_b.dtype, abs_a.dtype) == (np.float32, np.float64, np.float32)
    np.testing.assert_array_equal(neg_a, -a)
    np.testing.assert_array_equal(neg_b, -b)
    np.testing.assert_array_equal(abs_a, np.abs(a))


def test_pdl_runs_before_python_overrides():
    def triple_negate(op, rewriter):
        return hlo.unary("negate", hlo.unary("negate", hlo.unary("negate", op.operands[0])))

    register_lowering("neg", triple_negate)
    load_pdl_patterns(str(PDL_FILE))
    text = stablehlo_text(NEG_ABS)
    assert "stablehlo.subtract %cst, %arg0 : tensor<4xf32>" in text
    # The f64 neg, which PDL leaves alone, takes the Python override.
    assert text.count("stablehlo.negate") == 3


def test_pdl_patterns_from_a_file_name_of_any_suffix(tmp_path):
    # lazy-opt --load-pdl-patterns reads neg.pdl; the Python call reads the same name
    pdl = tmp_path / "neg.pdl"
    pdl.write_text(PDL_FILE.read_text())
    load_pdl_patterns(str(pdl))
    assert "stablehlo.maximum" in stablehlo_text(NEG_ABS)
    with pytest.raises(FileNotFoundError):
        load_pdl_patterns(str(tmp_path / "missing.pdl"))


def test_pdl_patterns_from_text_without_a_module():
    text = PDL_FILE.read_text()
    body = text[text.index("module {") + len("module {") : text.rindex("}")]
    load_pdl_patterns(body)
    assert "stablehlo.maximum" in stablehlo_text(NEG_ABS)


def test_bad_pdl_fails_at_load_time():
    loaded = list(registry.PDL_SOURCES)
    with pytest.raises(ValueError, match="expected pdl.pattern ops, found func.func"):
        load_pdl_patterns(TANH)
    with pytest.raises(ir.MLIRError):
        load_pdl_patterns("pdl.pattern : benefit(1) {\n  %t = pdl.typo\n}")
    assert registry.PDL_SOURCES == loaded


def test_an_op_lowered_by_pdl_needs_no_python_lowering(rng):
    load_pdl_patterns(f"""
pdl.pattern @twice_as_add : benefit(1) {{
  %t = pdl.type
  %x = pdl.operand
  %op = pdl.operation "{TWICE.full_name}"(%x : !pdl.value) -> (%t : !pdl.type)
  pdl.rewrite %op {{
    %add = pdl.operation "stablehlo.add"(%x, %x : !pdl.value, !pdl.value) -> (%t : !pdl.type)
    pdl.replace %op with %add
  }}
}}""")
    a = rng.standard_normal((2, 3)).astype(np.float32)
    (out,) = compiler.run_module(TANH.replace("lazy.tanh", TWICE.full_name), [a])
    np.testing.assert_array_equal(out, 2 * a)



def test_a_pdl_pattern_matching_its_own_output_stops_with_an_error():
    # neg(x) -> neg(x) rewrites forever; the bound on rewrites ends it with the
    # pattern's name, at the neg (line 3 of NEG_ABS), instead of a hang
    load_pdl_patterns(PDL_FILE.parent / "pdl_self_matching.mlir")
    with pytest.raises(PassError, match=r"did not converge .* still matching: @neg_forever \(rooted at lazy.neg\)") as e:
        compiler.lower(NEG_ABS)
    assert (e.value.location.filename, e.value.location.start_line) == ("-", 3)
