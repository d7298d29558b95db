"""The core API: values in and out, ops, the scalar policy, and a tiny frontend on top."""

import os
import sys

import numpy as np
import pytest

import lazycore as lc
from lazycore.observe import metrics
from lazycore.dialect import ShapeError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from mini_frontend import MiniArray  # noqa: E402  (the example third frontend)


pytestmark = pytest.mark.usefixtures("clean_runtime")


def check(got, want):
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_roundtrip_keeps_values_and_dtype(rng):
    for a in (rng.standard_normal((3, 4)).astype(np.float32), rng.integers(-9, 9, (5,)).astype(np.int64),
              rng.integers(0, 2, (2, 2)).astype(bool)):
        check(lc.to_numpy(lc.from_numpy(a)), a)


def test_frontend_expression_matches_numpy(rng):
    x, y = (rng.standard_normal((4, 5)).astype(np.float32) for _ in range(2))
    a, b = MiniArray.from_numpy(x), MiniArray.from_numpy(y)
    out = (a * b - 2.5 * a + 1) / (b * b + 3.0)
    check(out.numpy(), (x * y - np.float32(2.5) * x + 1) / (y * y + np.float32(3.0)))
    check((-a).numpy(), -x)
    check((7.0 - a).numpy(), np.float32(7.0) - x)


def test_a_frontend_of_the_protocol_gets_the_core_tools(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    a = MiniArray.from_numpy(x)
    y = a * 2.5 + 1
    text = lc.debug.ir_text(y)
    assert "func.func @main(%arg0: tensor<2x3xf32>, %arg1: tensor<1xf32>) -> tensor<2x3xf32>" in text
    assert '"lazy.mul"(%arg0' in text and '"lazy.add"' in text
    assert lc.debug.to_dot([a, y]).startswith("digraph")
    exported = lc.export(lambda m: (m * m - 1.5, -m), a)
    assert [r.type for r in exported.results] == [a.t.type] * 2
    got = exported.call(x)
    check(got[0], x * x - np.float32(1.5))
    check(got[1], -x)
    with pytest.raises(TypeError, match="expected a lazy value .* got list"):
        lc.debug.ir_text([[a]])


def test_a_frontend_module_marked_as_library_is_not_the_users_line(tmp_path):
    import importlib.util

    (tmp_path / "one_module_frontend.py").write_text(
        "import lazycore as lc\n\ndef double(t):\n    return lc.apply('add', t, t)\n")
    (tmp_path / "user_code.py").write_text(
        "import one_module_frontend\n\ndef run(t):\n    return one_module_frontend.double(t)\n")
    modules = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(tmp_path))
        for name in ("one_module_frontend", "user_code"):
            spec = importlib.util.find_spec(name)
            modules[name] = importlib.util.module_from_spec(spec)
            mp.setitem(sys.modules, name, modules[name])
            spec.loader.exec_module(modules[name])
    x = lc.from_numpy(np.ones(2, np.float32))

    def line_of(t):
        file, line = lc.sourceloc.resolve(t.value.node.loc)
        return os.path.basename(file), line

    assert line_of(modules["user_code"].run(x)) == ("one_module_frontend.py", 4)
    lc.sourceloc.skip(modules["one_module_frontend"], folder=False)
    # the frontend's own file only: its neighbour in the folder is user code
    assert line_of(modules["user_code"].run(x)) == ("user_code.py", 4)


def test_integer_ops_keep_integer_dtype(rng):
    x, y = (rng.integers(-50, 50, (6,)).astype(np.int32) for _ in range(2))
    a, b = MiniArray.from_numpy(x), MiniArray.from_numpy(y)
    check((a * b + 5).numpy(), x * y + np.int32(5))


def test_variadic_group_is_a_list(rng):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    starts = [lc.from_numpy(np.array(2, np.int64)), lc.scalar(1, dtype="i64")]
    out = lc.apply("dynamic_slice", lc.from_numpy(x), starts, sizes=(2, 3))
    assert out.shape == (2, 3)
    check(lc.to_numpy(out), x[2:4, 1:4])


def test_multi_result_op_gives_one_handle_per_result():
    state = lc.from_numpy(np.array([7, 42], np.uint64))
    new_state, bits = lc.apply("rng_bit_generator", state, algorithm="three_fry", shape=(4, 3), dtype="ui32")
    assert new_state.value.node is bits.value.node and (new_state.value.index, bits.value.index) == (0, 1)
    got = lc.to_numpy(bits)
    assert got.dtype == np.uint32 and got.shape == (4, 3)
    assert metrics.counters()["executions"] == 1  # both results came from one program
    assert not np.array_equal(lc.to_numpy(new_state), np.array([7, 42], np.uint64))
    # same state, same bits: the state really is the generator's input
    _, again = lc.apply("rng_bit_generator", lc.from_numpy(np.array([7, 42], np.uint64)),
                        algorithm="three_fry", shape=(4, 3), dtype="ui32")
    np.testing.assert_array_equal(lc.to_numpy(again), got)


def test_a_replayed_recording_uses_the_recorded_result_of_a_multi_result_op():
    # the recording reads result 1 (the bits) of a node it made: its replay
    # (generated code, lazycore.recipes) must wire that result, not result 0
    from lazycore.trace import recipes
    from lazycore.ir.config import override

    def draw(state):
        _, bits = lc.apply("rng_bit_generator", state, algorithm="three_fry", shape=(4, 3), dtype="ui32")
        return lc.apply("add", bits, bits)

    def state(seed):
        return lc.from_numpy(np.array([seed, 42], np.uint64))

    with override(replay=False):
        traced = [draw(state(s)) for s in (7, 8, 9)]
    digests = [t.value.node.digest for t in traced]  # (a barrier makes them data)
    s0 = state(7)
    _, recipe = recipes.record(draw, (s0,), s0)
    assert recipe is not None
    for seed, t, d in zip((7, 8, 9), traced, digests):  # the second replay per state runs the generated code
        for _ in range(2):
            got = recipe.replay((state(seed),))
            assert got.value.node.digest == d
            assert got.value.node.operands[0].index == 1
            np.testing.assert_array_equal(lc.to_numpy(got), lc.to_numpy(t))


def test_bad_call_raises_shape_error_at_the_users_line():
    a = lc.from_numpy(np.zeros((2, 3), np.float32))
    b = lc.from_numpy(np.zeros((3, 2), np.float32))
    with pytest.raises(ShapeError, match="same type") as info:
        lc.apply("add", a, b)
    frames = [entry.frame.code.name for entry in info.traceback]
    assert frames[0] == "test_bad_call_raises_shape_error_at_the_users_line"
    assert "apply" in frames
    with pytest.raises(ShapeError, match="out of range"):
        lc.apply("broadcast_in_dim", a, dims=(0, 5), shape=(2, 3))
    assert metrics.counters()["executions"] == 0


def test_bad_operands_and_unknown_ops_are_named():
    a = lc.from_numpy(np.zeros((2,), np.float32))
    with pytest.raises(TypeError, match="lazycore.scalar"):
        lc.apply("add", a, 2.0)
    with pytest.raises(KeyError, match="lazy.no_such_op"):
        lc.apply("no_such_op", a)


def test_per_op_path_does_no_mlir_work(monkeypatch):
    import lazycore.dialect
    import lazycore.dialect.build

    def boom(*a, **k):
        raise AssertionError("MLIR used on the per-op path")

    monkeypatch.setattr(lazycore.dialect.build, "new_context", boom)
    monkeypatch.setattr(lazycore.dialect, "create", boom)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = MiniArray.from_numpy(x)
    for _ in range(50):
        a = a * 0.5 + 1.5
    ref = x
    for _ in range(50):
        ref = ref * np.float32(0.5) + np.float32(1.5)
    assert metrics.timings()["lowering"] == []
    monkeypatch.undo()
    check(a.numpy(), ref)


def test_scalar_policy_bakes_only_zero_and_one():
    assert lc.scalar(1.0).value.node.op == "constant"
    assert lc.scalar(0, dtype="i32").value.node.op == "constant"
    two, three = lc.scalar(2.0), lc.scalar(3.0)
    assert two.value.node.op == three.value.node.op == "scalar"
    assert two.value.node.digest == three.value.node.digest
    assert lc.scalar(2.0, dtype="f64").value.node.digest != two.value.node.digest
    assert lc.scalar(1.0).value.node.digest != lc.scalar(0.0).value.node.digest
    with pytest.raises(OverflowError):
        lc.scalar(300, dtype="ui8")


def test_node_digests_are_structural():
    x = np.ones((2, 2), np.float32)
    a, b = lc.from_numpy(x), lc.from_numpy(2 * x)
    d = lambda t: t.value.node.digest
    assert d(lc.apply("add", a, b)) == d(lc.apply("add", b, a)) == d(lc.apply("add", a, a))
    assert d(lc.apply("add", a, b)) != d(lc.apply("mul", a, b))
    assert d(lc.apply("compare", a, b, direction="LT")) != d(lc.apply("compare", a, b, direction="GT"))
    assert d(lc.apply("convert", a, dtype="f64")) != d(lc.apply("convert", a, dtype="i32"))
    assert len(d(a)) == 16


def test_assign_is_an_in_place_update_of_the_handle():
    a = lc.from_numpy(np.ones((2,), np.float32))
    before = a.value
    a.assign(lc.apply("neg", a))
    assert a.value is not before and a.pending
    check(lc.to_numpy(a), -np.ones((2,), np.float32))
    with pytest.raises(ShapeError, match="keeps the type"):
        a.assign(lc.from_numpy(np.ones((3,), np.float32)))


def test_to_numpy_returns_a_private_copy():
    a = lc.from_numpy(np.ones((3,), np.float32))
    host = lc.to_numpy(a)
    host[0] = 5
    check(lc.to_numpy(a), np.ones((3,), np.float32))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int64, np.bool_])
def test_uploaded_data_is_a_copy_the_host_array_cannot_change(dtype):
    host = np.arange(6).astype(dtype)
    want = host.copy()
    t = lc.from_numpy(host)
    host[...] = 0  # on the CPU, device_put may wrap host memory: lazycore must not
    np.testing.assert_array_equal(lc.to_numpy(t), want)


# --- lc.replayed: the per-op fast path for any frontend ------------------------------------


def test_replayed_lowering_records_once_per_signature_and_compiles_as_traced(rng):
    calls = []

    @lc.replayed
    def axpy(a, x, y):
        calls.append(a)
        s = lc.broadcast_to(lc.scalar(a, dtype=x.dtype), x.shape)
        return lc.apply("add", lc.apply("mul", s, x), y)

    xs, ys = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2))
    x, y = lc.from_numpy(xs), lc.from_numpy(ys)
    metrics.reset()
    # a float is a program parameter: one program; one recording per sign (a lowering may branch on it)
    for a in (2.5, 3.5, 4.75, -4.25, -1.5):
        check(lc.to_numpy(axpy(a, x, y)), np.float32(a) * xs + ys)
    assert calls == [2.5, -4.25]
    assert metrics.counters()["compiles"] == 1 and metrics.counters()["cache_hits"] == 4
    # the replayed graph is the traced one: the unrecorded lowering finds its program
    check(lc.to_numpy(axpy.__wrapped__(5.5, x, y)), np.float32(5.5) * xs + ys)
    assert metrics.counters()["compiles"] == 1
    assert calls == [2.5, -4.25, 5.5]
    # another shape, another recording; one made with one input twice serves only calls alike
    z = lc.from_numpy(xs[:2])
    check(lc.to_numpy(axpy(2.5, z, z)), np.float32(2.5) * xs[:2] + xs[:2])
    check(lc.to_numpy(axpy(2.5, z, lc.from_numpy(ys[:2]))), np.float32(2.5) * xs[:2] + ys[:2])
    check(lc.to_numpy(axpy(2.5, x, x)), np.float32(2.5) * xs + xs)  # the (x, y) recording serves (x, x)
    assert calls == [2.5, -4.25, 5.5, 2.5, 2.5]
    with lc.config.override(replay=False):
        axpy(2.5, x, y)
    assert len(calls) == 6


def test_replayed_runs_what_it_cannot_record_every_time():
    calls = []

    @lc.replayed
    def plus_host(x, values):  # an upload: not replayable
        calls.append(1)
        return lc.apply("add", x, lc.from_numpy(np.asarray(values, np.float32)))

    x = lc.from_numpy(np.ones(2, np.float32))
    check(lc.to_numpy(plus_host(x, (1.0, 2.0))), np.array([2, 3], np.float32))
    check(lc.to_numpy(plus_host(x, (1.0, 2.0))), np.array([2, 3], np.float32))
    check(lc.to_numpy(plus_host(x, [3.0, 4.0])), np.array([4, 5], np.float32))  # unhashable: no key
    assert len(calls) == 3
    with pytest.raises(ShapeError):  # the lowering's own errors reach the caller
        plus_host(x, (1.0, 2.0, 3.0))
