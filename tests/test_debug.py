"""LAZYCORE_DEBUG: a line per barrier, recompile reasons with the user's line; source locations."""

import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

import lazycore as lc
from lazycore.runtime import barrier, compiler
from lazycore.trace import core
from lazycore.observe import debug, metrics
from lazycore.ir import sourceloc
from lazycore.ir.config import configure, override
from lazycore.dialect import ShapeError
from markers import markers

pytestmark = pytest.mark.usefixtures("clean_runtime")

HERE, line_of, at = markers(__file__)


@pytest.fixture
def debugging(capsys):
    """debug=1 with fresh step numbers; yields a function returning the new stderr lines."""
    debug.reset()
    capsys.readouterr()
    with override(debug=1):
        yield lambda: [ln for ln in capsys.readouterr().err.splitlines()
                       if ln.startswith("[lazycore]") and ": implicit barrier: " not in ln]
    debug.reset()


def read_in_a_function():
    x = lc.from_numpy(np.ones((2, 3), np.float32))
    return lc.to_numpy(lc.apply("mul", x, x))  # the read


def test_a_barrier_run_by_a_read_names_the_line_and_function_that_read(capsys):
    debug.reset()
    capsys.readouterr()
    with override(debug=1):
        read_in_a_function()
        x = lc.from_numpy(np.ones((2, 3), np.float32))
        y = lc.apply("add", x, x)
        lc.mark_step(wait=True)  # not a read: no such line
    debug.reset()
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("[lazycore]")]
    reads = [ln for ln in lines if ": implicit barrier: " in ln]
    assert len(reads) == 1, lines
    assert reads[0].startswith("[lazycore] step 1 cpu:0: implicit barrier: a read of a pending"), reads
    assert f" at {at('the read')} in read_in_a_function " in reads[0], reads
    del y


def square_sum(n: int, dims=(1,)):
    x = lc.from_numpy(np.ones((n, 4), np.float32))
    y = lc.apply("mul", x, x)  # square-sum mul
    return lc.to_numpy(lc.apply("reduce_sum", y, dims=list(dims)))  # square-sum reduce


# --- the per-barrier line --------------------------------------------------------------


def test_line_per_barrier_says_compile_then_cache_hit(debugging):
    square_sum(8)
    square_sum(8)
    lines = debugging()
    assert len(lines) == 2, lines  # one line each, no reason for the first compile or the hit
    first, second = lines
    assert re.fullmatch(
        r"\[lazycore\] step 1 cpu:0: 3 nodes \(1 input\), 2 outputs, compile: "
        r"trace [\d.]+ ms, lowering [\d.]+ ms, compile [\d.]+ ms, execute [\d.]+ ms",
        first,
    ), first
    assert re.fullmatch(
        r"\[lazycore\] step 2 cpu:0: 3 nodes \(1 input\), 2 outputs, cache hit: trace [\d.]+ ms, execute [\d.]+ ms",
        second,
    ), second
    assert metrics.counters()["compiles"] == 1


def test_nothing_is_printed_with_debug_off(capsys):
    debug.reset()
    with override(debug=0):
        square_sum(8)
    assert "[lazycore]" not in capsys.readouterr().err
    assert not debug._devices  # no signatures kept either


def test_debug_setting_is_checked():
    with pytest.raises(ValueError, match="debug must be 0, 1 or 2"):
        configure(debug=3)


def test_level_two_prints_the_graph_with_locations(capsys):
    debug.reset()
    capsys.readouterr()
    with override(debug=2):
        square_sum(8)
    err = capsys.readouterr().err
    assert "[lazycore] step 1 cpu:0: graph:" in err
    assert '"lazy.mul"' in err and '"lazy.reduce_sum"' in err
    assert f'loc("{HERE}":{line_of("square-sum mul")}:0)' in err
    assert f'loc("{HERE}":{line_of("square-sum reduce")}:0)' in err


def test_environment_variable_turns_it_on():
    program = (
        "import numpy as np, lazycore as lc\n"
        "x = lc.from_numpy(np.ones((2, 3), np.float32))\n"
        "lc.to_numpy(lc.apply('add', x, x))\n"
    )
    env = dict(os.environ, LAZYCORE_DEBUG="1")
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert re.search(r"^\[lazycore\] step 1 cpu:0: 2 nodes \(1 input\), 1 output, compile: ", out.stderr, re.M)
    env["LAZYCORE_DEBUG"] = "yes"
    bad = subprocess.run(
        [sys.executable, "-c", "import lazycore.ir.config"], env=env, capture_output=True, text=True, timeout=300
    )
    assert bad.returncode != 0 and "LAZYCORE_DEBUG must be 0, 1 or 2" in bad.stderr


# --- recompile reasons -------------------------------------------------------------------


def test_torch_batch_size_change_names_the_shape_and_line(debugging):
    torch = pytest.importorskip("torch")
    import lazycore.torch as ltorch

    dev = ltorch.device("cpu")
    w = torch.full((4, 3), 0.5).to(dev)
    for batch in (8, 8, 16):
        x = torch.ones(batch, 4).to(dev)
        loss = (x @ w).relu().sum()  # torch matmul
        assert loss.item() == batch * 4 * 0.5 * 3
    lines = debugging()
    reasons = [ln for ln in lines if ": recompile: " in ln]
    assert len(reasons) == 1, lines
    assert re.search(r"input \d+ shape \(16, 4\) vs \(8, 4\)", reasons[0]), reasons[0]
    assert f"first used by lazy.dot_general at {at('torch matmul')}" in reasons[0], reasons[0]
    assert "compiled at step 1" in reasons[0]
    assert "step 3 " in reasons[0]
    assert sum(", cache hit:" in ln for ln in lines) == 1, lines


def test_numpy_op_change_names_the_op_and_line(debugging):
    import lazycore.numpy as lnp

    for i in range(3):
        a = lnp.asarray(np.full((4, 4), 2.0, np.float32))
        if i < 2:
            y = a * 2.5  # numpy mul
        else:
            y = a + 2.5  # numpy add
        float(y.sum())
    lines = debugging()
    reasons = [ln for ln in lines if ": recompile: " in ln]
    assert len(reasons) == 1, lines
    assert f"op lazy.add vs lazy.mul at {at('numpy add')}" in reasons[0], reasons[0]
    assert "step 3 " in reasons[0]


def test_attribute_change_names_the_attribute(debugging):
    square_sum(8, dims=(1,))
    square_sum(8, dims=(0,))
    (reason,) = [ln for ln in debugging() if ": recompile: " in ln]
    assert f"attribute dims (0,) vs (1,) of lazy.reduce_sum at {at('square-sum reduce')}" in reason, reason


def test_dtype_change_and_graph_size_change(debugging):
    for dtype in (np.float32, np.float16):
        x = lc.from_numpy(np.ones((3,), dtype))
        lc.to_numpy(lc.apply("neg", x))
    y = lc.from_numpy(np.ones((3,), np.float16))
    lc.to_numpy(lc.apply("exp", lc.apply("neg", y)))  # longer graph
    reasons = [ln for ln in debugging() if ": recompile: " in ln]
    assert len(reasons) == 2, reasons
    assert "input 0 dtype f16 vs f32" in reasons[0], reasons[0]
    assert "graph has 3 nodes vs 2" in reasons[1], reasons[1]
    assert f"lazy.exp at {at('longer graph')}" in reasons[1], reasons[1]


def test_operand_wiring_change(debugging):
    a = lc.from_numpy(np.ones((3,), np.float32))
    b = lc.from_numpy(np.ones((3,), np.float32))
    lc.to_numpy(lc.apply("sub", a, b))
    lc.to_numpy(lc.apply("sub", b, a))  # same graph: b and a swap places in the walk
    lc.to_numpy(lc.apply("sub", a, a))  # wiring
    lines = debugging()
    reasons = [ln for ln in lines if ": recompile: " in ln]
    assert len(reasons) == 1, lines
    assert "graph has 2 nodes vs 3" in reasons[0] or "operands of lazy.sub" in reasons[0], reasons[0]
    assert at("wiring") in reasons[0], reasons[0]


def test_donation_change_is_a_reason():
    from lazycore.observe.debug import Signature, reason

    nodes = [("data", (), (((3,), "f32"),), ()), ("neg", (), (((3,), "f32"),), ((0, 0),))]
    a = Signature(nodes, [None, ("f.py", 3)], ((1, 0),), {0: 0}, "p", step=2)
    b = Signature(list(nodes), [None, ("f.py", 9)], ((1, 0),), {}, "p", step=1)
    assert "donated inputs (input: output) {0: 0} vs {}" in reason(a, b)
    b.donate = {0: 0}
    assert "same graph as an earlier compile" in reason(a, b)  # locations are not compared


def test_no_reason_on_cache_hits_and_warning_when_compiles_keep_happening(debugging):
    square_sum(4)
    square_sum(4)
    square_sum(4)
    lines = debugging()
    assert not [ln for ln in lines if "recompile" in ln or "warning" in ln], lines
    for n in (5, 6, 7, 8, 9):
        square_sum(n)
    lines = debugging()
    assert len([ln for ln in lines if ": recompile: " in ln]) == 5
    warnings = [ln for ln in lines if ln.startswith("[lazycore] warning:")]
    assert len(warnings) == 1, lines  # once per window, not at every compile
    assert re.search(r"3 of the last 4 barriers on cpu:0 compiled", warnings[0]), warnings[0]


def test_nearest_earlier_graph_is_compared():
    # Shapes 8, 16, then 8 with another reduction: the nearest graph is 8's, so
    # the reason is the attribute, not the input shape.
    debug.reset()
    with override(debug=1):
        square_sum(8, dims=(1,))
        square_sum(16, dims=(1,))
        square_sum(8, dims=(0,))
    (state,) = debug._devices.values()
    new, first, second = state.history[2], state.history[0], state.history[1]
    assert debug.nearest(new, [first, second]) is first
    assert debug.reason(new, first).startswith("attribute dims (0,) vs (1,)")
    debug.reset()


# --- source locations -----------------------------------------------------------------------


def test_location_is_not_part_of_the_cache_key(debugging):
    outs = []
    for i in range(2):
        x = lc.from_numpy(np.ones((3,), np.float32))
        if i == 0:
            y = lc.apply("exp", x)  # first line
        else:
            y = lc.apply("exp", x)  # second line
        outs.append(y.value.node.loc)
        lc.to_numpy(y)
    assert sourceloc.format_location(outs[0]) == at("first line")
    assert sourceloc.format_location(outs[1]) == at("second line")
    assert metrics.counters()["compiles"] == 1
    assert metrics.counters()["cache_hits"] == 1
    assert [", cache hit:" in ln for ln in debugging()] == [False, True]


def test_locations_survive_the_pipeline():
    x = lc.from_numpy(np.ones((4,), np.float32))
    y = lc.apply("add", x, x)  # pipeline add
    z = lc.apply("reduce_sum", lc.apply("mul", y, x), dims=[0])  # pipeline reduce
    module = compiler.build_module(barrier.Walk([z.value]))
    compiler.lower(module)
    text = module.operation.get_asm(enable_debug_info=True)
    assert "stablehlo.add" in text and "stablehlo.reduce" in text
    add_loc = f'loc("{HERE}":{line_of("pipeline add")}:0)'
    reduce_loc = f'loc("{HERE}":{line_of("pipeline reduce")}:0)'
    assert add_loc in text and reduce_loc in text
    # each StableHLO op points at the line that recorded it
    aliases = dict(re.findall(r"^(#loc\d*) = (loc\(.*\))$", text, re.M))
    add_line = next(ln for ln in text.splitlines() if "stablehlo.add %" in ln)
    assert aliases[re.search(r"loc\((#loc\d*)\)$", add_line).group(1)] == add_loc
    lc.to_numpy(z)


def test_shape_error_points_at_the_users_line():
    a = lc.from_numpy(np.ones((4,), np.float32))
    b = lc.from_numpy(np.ones((5,), np.float32))
    with pytest.raises(ShapeError) as info:
        lc.apply("add", a, b)  # bad add
    entry = next(e for e in reversed(info.traceback) if str(e.path) == HERE)
    assert entry.lineno + 1 == line_of("bad add")  # pytest counts from 0


def test_library_frames_are_skipped_and_the_cache_follows_skip(tmp_path):
    lib = tmp_path / "fakelib"
    lib.mkdir()
    (lib / "__init__.py").write_text(
        "import lazycore as lc\n"
        "def double(x):\n"
        "    return lc.apply('add', x, x)\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import fakelib

        x = lc.from_numpy(np.ones((2,), np.float32))
        inside = fakelib.double(x)  # not skipped yet
        assert sourceloc.format_location(inside.value.node.loc) == f"{lib / '__init__.py'}:3"
        sourceloc.skip(fakelib)
        outside = fakelib.double(x)  # skipped
        assert sourceloc.format_location(outside.value.node.loc) == at("skipped")
    finally:
        sys.path.remove(str(tmp_path))
        sourceloc._SKIP.remove(str(lib) + os.sep)
        sourceloc._LIBRARY.clear()
        sys.modules.pop("fakelib", None)


def test_per_op_cost_of_recording_locations(capsys):
    """Measured, not asserted: a 16x16 add through lazycore.apply, with and without the frame walk."""
    x = lc.from_numpy(np.ones((16, 16), np.float32))
    y = lc.from_numpy(np.ones((16, 16), np.float32))

    def loop(n):
        a = x
        for _ in range(n):
            a = lc.apply("add", a, y)

    real = core._user_frame
    best = {"with location": [], "without": []}
    try:
        loop(500)
        for i in range(10):
            for mode in ("with location", "without") if i % 2 else ("without", "with location"):
                core._user_frame = real if mode == "with location" else (lambda *a, **k: None)
                start = time.perf_counter()
                loop(2000)
                best[mode].append((time.perf_counter() - start) / 2000)
    finally:
        core._user_frame = real
    with capsys.disabled():
        print(
            "\nper-op lazycore.apply (16x16 add): "
            + ", ".join(f"{k} {min(v) * 1e6:.2f} us" for k, v in best.items())
        )


def test_a_baked_number_that_becomes_a_parameter_points_at_its_user(debugging):
    # 1 is baked in as lazy.constant at first; the place then takes 2.5 and the
    # learned scalar policy makes it a parameter (lazycore.trace.scalar_policy)
    for value in (1.0, 2.5):
        x = lc.from_numpy(np.ones((), np.float32))
        lc.to_numpy(lc.apply("mul", x, lc.scalar(value, "f32")))  # scaled
    (reason,) = [ln for ln in debugging() if ": recompile: " in ln]
    assert "scalar parameter 0 vs lazy.constant" in reason, reason
    assert f"first used by lazy.mul at {at('scaled')}" in reason, reason
