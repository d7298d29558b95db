"""lazy-aliasing: a donation plan becomes tf.aliasing_output, bad plans are refused,
and on PJRT the donated input buffer really is consumed by the executable.
"""

import io
from contextlib import redirect_stdout

import numpy as np
import pytest

from lazycore.runtime import compiler, pjrt
from lazycore.passes import PassError, run_pipeline
from lazycore.passes.aliasing import ALIAS_ATTR, apply_plan, parse_plan
from lazycore.passes.tools import lazy_opt

# Two results of the arguments' type, and one argument (%n) of another type.
PROGRAM = """
func.func @main(%a: tensor<4xf32>, %n: tensor<2xi32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "lazy.add"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "lazy.mul"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}
"""


def aliases(module) -> dict[int, int]:
    """Argument index -> tf.aliasing_output of the entry function."""
    from lazycore.dialect.mlir import ir

    fn = next(iter(module.body.operations))
    if "arg_attrs" not in fn.attributes:
        return {}
    out = {}
    for i, d in enumerate(ir.ArrayAttr(fn.attributes["arg_attrs"])):
        d = ir.DictAttr(d)
        if ALIAS_ATTR in d:
            out[i] = ir.IntegerAttr(d[ALIAS_ATTR]).value
    return out


def plan_applied(pipeline: str = "lazy-aliasing", donate=None):
    module = compiler.parse(PROGRAM)
    overrides = {"lazy-aliasing": {"donate": donate}} if donate is not None else None
    run_pipeline(module, pipeline, overrides=overrides)
    return module


def test_parse_plan():
    assert parse_plan("0:1, 2:0") == {0: 1, 2: 0}
    assert parse_plan("") == {}


@pytest.mark.parametrize("text, message", [
    ("0:0,0:1", "argument 0 is donated twice"),
    ("0", r"bad plan entry '0' \(expected ARG:RESULT\)"),
    ("a:b", "bad plan entry 'a:b'"),
    ("0:1:2", "bad plan entry '0:1:2'"),
])
def test_parse_plan_refuses(text, message):
    with pytest.raises(PassError, match=message):
        parse_plan(text)


def test_plan_sets_aliasing_output():
    module = plan_applied("lazy-aliasing{donate=0:1,2:0}")
    assert aliases(module) == {0: 1, 2: 0}
    assert f"{ALIAS_ATTR} = 1 : i32" in str(module)


def test_python_plan_overrides_text_option():
    module = plan_applied("lazy-aliasing{donate=0:1}", donate={2: 1})
    assert aliases(module) == {2: 1}


def test_replanning_replaces_the_old_plan():
    module = plan_applied("lazy-aliasing{donate=0:1},lazy-aliasing{donate=2:0}")
    assert aliases(module) == {2: 0}


def test_empty_plan_changes_nothing():
    module = plan_applied()
    assert aliases(module) == {} and ALIAS_ATTR not in str(module)


def test_other_argument_attributes_are_kept():
    module = compiler.parse(PROGRAM.replace("%n: tensor<2xi32>", '%n: tensor<2xi32> {lazy.note = "kept"}'))
    run_pipeline(module, "lazy-aliasing{donate=0:0}")
    assert aliases(module) == {0: 0} and 'lazy.note = "kept"' in str(module)


@pytest.mark.parametrize("plan, message", [
    ({1: 0}, r"cannot donate argument 1 \(tensor<2xi32>\) to result 0 \(tensor<4xf32>\): types differ"),
    ({0: 1, 2: 1}, "result 1 is the target of arguments 0 and 2"),
    ({3: 0}, r"argument 3 out of range \(@main has 3\)"),
    ({-1: 0}, "argument -1 out of range"),
    ({0: 2}, r"result 2 out of range \(@main has 2\)"),
])
def test_bad_plans_are_refused(plan, message):
    module = compiler.parse(PROGRAM)
    with pytest.raises(PassError, match="lazy-aliasing: " + message):
        apply_plan(module.operation, plan)
    assert aliases(module) == {}  # refused before touching anything


def test_missing_entry_function():
    with pytest.raises(PassError, match="no entry function @forward"):
        run_pipeline(compiler.parse(PROGRAM), "lazy-aliasing{donate=0:0 entry=forward}")


def test_lazy_opt_flag(tmp_path):
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    out = io.StringIO()
    with redirect_stdout(out):
        assert lazy_opt.main(["--lazy-aliasing=donate=2:1", str(path)]) == 0
    assert f"%arg2: tensor<4xf32> {{{ALIAS_ATTR} = 1 : i32}}" in out.getvalue()


def test_alias_survives_lowering():
    module = compiler.lower(PROGRAM, donate={0: 0})
    assert aliases(module) == {0: 0} and "stablehlo.add" in str(module)


# --- PJRT: donation really happens ----------------------------------------------------


def test_donated_buffer_is_consumed_on_pjrt(rng):
    a, n, b = rng.standard_normal(4).astype(np.float32), np.arange(2, dtype=np.int32), rng.standard_normal(4).astype(np.float32)
    exe = compiler.compile_module(PROGRAM, donate={0: 1})
    bufs = [pjrt.to_device(x) for x in (a, n, b)]
    outs = exe(bufs)
    assert bufs[0].is_deleted()  # its memory now holds result 1
    assert not bufs[1].is_deleted() and not bufs[2].is_deleted()
    np.testing.assert_array_equal(pjrt.to_host(outs[0]), a + b)
    np.testing.assert_array_equal(pjrt.to_host(outs[1]), a * b)
    np.testing.assert_array_equal(pjrt.to_host(bufs[2]), b)  # the others stay readable


def test_without_a_plan_nothing_is_consumed(rng):
    a, n, b = rng.standard_normal(4).astype(np.float32), np.arange(2, dtype=np.int32), rng.standard_normal(4).astype(np.float32)
    exe = compiler.compile_module(PROGRAM)
    bufs = [pjrt.to_device(x) for x in (a, n, b)]
    exe(bufs)
    assert not any(buf.is_deleted() for buf in bufs)


# --- the runtime's plan: each buffer to its own handle's new value ---------------------------


def test_a_barrier_donates_each_buffer_to_its_handles_new_value(clean_runtime):
    import lazycore as lc
    from lazycore.observe import testing

    a = lc.from_numpy(np.ones((4, 4), np.float32))
    b = lc.from_numpy(np.full((4, 4), 2.0, np.float32))
    # a's new value reads b first (b is the program's first argument, a its second); the outputs
    # come in handle order (a's, then b's). The first buffer of the type going to the first output
    # would overwrite b's buffer with a's new value while b's update still reads it: XLA copies then.
    a.assign(lc.apply("add", b, a))
    b.assign(lc.apply("mul", b, b))
    with testing.capture() as cap:
        lc.mark_step(wait=True)
    np.testing.assert_array_equal(lc.to_numpy(a), np.full((4, 4), 3.0, np.float32))
    np.testing.assert_array_equal(lc.to_numpy(b), np.full((4, 4), 4.0, np.float32))
    text = cap.graphs[-1].stablehlo
    assert "%arg0: tensor<4x4xf32> {tf.aliasing_output = 1 : i32}" in text, text[:600]
    assert "%arg1: tensor<4x4xf32> {tf.aliasing_output = 0 : i32}" in text, text[:600]
