"""Loops and branches in the graph: lazycore.fori_loop, while_loop, cond, scan.

Results are checked against jax.lax (the semantics these follow) or NumPy,
compile counts are asserted, and the compiled StableHLO is looked at: a loop
of a thousand iterations is one ``stablehlo.while`` holding its body once.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lazycore as lc
import lazycore.numpy as lnp
from lazycore.observe import metrics
from lazycore.observe.testing import capture

jax.config.update("jax_enable_x64", True)


def compiles() -> int:
    return metrics.counters()["compiles"]


def host(x):
    return np.asarray(lc.to_numpy(x) if isinstance(x, lc.LazyTensor) else x)


def test_fori_loop_of_1000_iterations_is_one_loop_compiled_once(clean_runtime, rng):
    a = rng.standard_normal(4).astype(np.float32)
    w = rng.standard_normal(4).astype(np.float32) * 0.01
    x, wl = lnp.asarray(a), lnp.asarray(w)
    with capture() as cap:
        out = lc.fori_loop(0, 1000, lambda i, v: v * 0.999 + wl, x)
        got = np.asarray(out)
    want = jax.lax.fori_loop(0, 1000, lambda i, v: v * np.float32(0.999) + w, jnp.asarray(a))
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5)
    assert compiles() == 1
    text = cap.text("stablehlo")
    assert text.count("stablehlo.while") == 1
    assert text.count("stablehlo.multiply") == 1  # the body once, not 1000 copies
    # a new trip count and a new number in the body are program inputs
    out = lc.fori_loop(0, 10, lambda i, v: v * 0.5 + wl, x)
    want = jax.lax.fori_loop(0, 10, lambda i, v: v * np.float32(0.5) + w, jnp.asarray(a))
    np.testing.assert_allclose(np.asarray(out), np.asarray(want), rtol=1e-5)
    assert compiles() == 1


def test_fori_loop_index_and_pytree_carry(clean_runtime):
    init = {"acc": lnp.zeros(3, dtype=np.int64), "n": lnp.asarray(np.int64(0))}

    def body(i, c):
        return {"acc": c["acc"] + i * i, "n": c["n"] + 1}

    out = lc.fori_loop(2, 7, body, init)
    assert isinstance(out, dict) and isinstance(out["acc"], lnp.ndarray)
    want = jax.lax.fori_loop(2, 7, lambda i, c: {"acc": c["acc"] + i * i, "n": c["n"] + 1},
                             {"acc": jnp.zeros(3, jnp.int64), "n": jnp.int64(0)})
    np.testing.assert_array_equal(np.asarray(out["acc"]), np.asarray(want["acc"]))
    assert int(out["n"]) == int(want["n"]) == 5
    # an empty range runs no iteration
    out = lc.fori_loop(5, 2, body, init)
    np.testing.assert_array_equal(np.asarray(out["acc"]), np.zeros(3))


def test_while_loop_closes_over_pending_outer_values(clean_runtime, rng):
    a = rng.standard_normal(5).astype(np.float32)
    x = lnp.asarray(a)
    scale = lnp.asarray(np.float32(1.5)) * 1.0  # a pending computation, read by the body

    def cond_fun(s):
        return (s[0] < 20) & (lnp.abs(s[1]).sum() < 1000.0)

    def body_fun(s):
        return s[0] + 1, s[1] * scale

    n, y = lc.while_loop(cond_fun, body_fun, (lnp.asarray(np.int64(0)), x))
    jn, jy = jax.lax.while_loop(lambda s: (s[0] < 20) & (jnp.abs(s[1]).sum() < 1000.0),
                                lambda s: (s[0] + 1, s[1] * np.float32(1.5)), (jnp.int64(0), jnp.asarray(a)))
    assert int(n) == int(jn)
    np.testing.assert_allclose(np.asarray(y), np.asarray(jy), rtol=1e-6)
    assert compiles() == 1


def test_cond_takes_one_branch_at_run_time_with_one_program(clean_runtime, rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    x = lnp.asarray(a)
    w = lnp.asarray(np.float32(3.0))
    for threshold in (-100.0, 100.0):
        out = lc.cond(x.sum() < threshold, lambda v: v * w, lambda v: v - 1.0, x)
        want = jax.lax.cond(a.sum() < threshold, lambda v: v * 3.0, lambda v: v - 1.0, jnp.asarray(a))
        np.testing.assert_allclose(np.asarray(out), np.asarray(want), rtol=1e-6)
    assert compiles() == 1
    # integer predicates: nonzero is true; Python bools work too
    for p in (lnp.asarray(np.int32(7)), lnp.asarray(np.int32(0)), True, False):
        out = lc.cond(p, lambda v: v + 1.0, lambda v: v, x)
        np.testing.assert_allclose(np.asarray(out), a + (1.0 if (p if isinstance(p, bool) else int(p)) else 0.0))


def test_cond_with_several_operands_and_pytree_results(clean_runtime):
    x, y = lnp.arange(4.0, dtype=np.float32), lnp.asarray(np.float32(2.0))
    out = lc.cond(y > 1, lambda a, b: (a * b, {"s": a.sum()}), lambda a, b: (a + b, {"s": b * 0}), x, y)
    assert isinstance(out, tuple) and set(out[1]) == {"s"}
    np.testing.assert_allclose(np.asarray(out[0]), np.arange(4.0) * 2)
    assert float(out[1]["s"]) == 6.0


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_matches_jax(clean_runtime, rng, reverse):
    xs = rng.standard_normal((6, 3)).astype(np.float32)
    bs = rng.standard_normal(6).astype(np.float32)

    def f(c, x):
        row, b = x
        tanh = jnp.tanh if isinstance(row, jax.Array) else lnp.tanh
        h = tanh(c["h"] + row * b)
        return {"h": h, "t": c["t"] + 1}, (h.sum(), h * 2)

    init = {"h": lnp.zeros(3, dtype=np.float32), "t": lnp.asarray(np.int64(0))}
    c, (s, hs) = lc.scan(f, init, (lnp.asarray(xs), lnp.asarray(bs)), reverse=reverse)
    jc, (js, jhs) = jax.lax.scan(f, {"h": jnp.zeros(3, jnp.float32), "t": jnp.int64(0)},
                                 (jnp.asarray(xs), jnp.asarray(bs)), reverse=reverse)
    np.testing.assert_allclose(np.asarray(c["h"]), np.asarray(jc["h"]), rtol=1e-5)
    assert int(c["t"]) == 6
    np.testing.assert_allclose(np.asarray(s), np.asarray(js), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(hs), np.asarray(jhs), rtol=1e-5)
    assert hs.shape == (6, 3)
    assert compiles() == 1


def test_scan_with_length_only(clean_runtime):
    c, ys = lc.scan(lambda c, _: (c * 2, c), lnp.asarray(np.int64(1)), None, length=5)
    assert int(c) == 32
    np.testing.assert_array_equal(np.asarray(ys), [1, 2, 4, 8, 16])


def test_nested_loops(clean_runtime):
    def outer(i, acc):
        return lc.fori_loop(0, i, lambda j, a: a + j, acc)

    out = lc.fori_loop(0, 5, outer, lnp.asarray(np.int64(0)))
    assert int(out) == sum(j for i in range(5) for j in range(i))


def test_the_body_is_part_of_the_program_key(clean_runtime):
    x = lnp.asarray(np.ones(3, np.float32))
    a = lc.fori_loop(0, 3, lambda i, v: v * 2.0, x)
    np.testing.assert_allclose(np.asarray(a), np.full(3, 8.0))
    b = lc.fori_loop(0, 3, lambda i, v: v + 2.0, x)  # same types and trip count, another body
    np.testing.assert_allclose(np.asarray(b), np.full(3, 7.0))
    assert compiles() == 2
    c = lc.fori_loop(0, 4, lambda i, v: v * 3.0, x)  # the first body again, other numbers
    np.testing.assert_allclose(np.asarray(c), np.full(3, 81.0))
    assert compiles() == 2


def test_core_handles_work_too(clean_runtime):
    x = lc.from_numpy(np.arange(3, dtype=np.float32))
    out = lc.while_loop(lambda v: lc.apply("compare", lc.apply("reduce_sum", v, dims=(0,)), lc.scalar(50.0),
                                          direction="LT"),
                        lambda v: lc.apply("add", v, v), x)
    assert isinstance(out, lc.LazyTensor)
    np.testing.assert_allclose(lc.to_numpy(out), np.arange(3) * 32)


# --- errors, at the call, as jax raises them ---------------------------------------


def test_body_type_mismatch_raises_type_error_at_the_call(clean_runtime):
    x = lnp.zeros(3, dtype=np.float32)
    with pytest.raises(TypeError, match="body_fun output and input must have identical types"):
        lc.while_loop(lambda v: v.sum() < 1, lambda v: v.astype(np.float64), x)
    with pytest.raises(TypeError, match="body_fun output and input must have identical types"):
        lc.fori_loop(0, 3, lambda i, v: v[:2], x)
    with pytest.raises(TypeError, match="body_fun output and input must have identical types"):
        lc.fori_loop(0, 3, lambda i, v: (v, v), (x,))
    with pytest.raises(TypeError, match="cond_fun must return a boolean scalar"):
        lc.while_loop(lambda v: v < 1, lambda v: v, x)
    with pytest.raises(TypeError, match="true_fun and false_fun output must have identical types"):
        lc.cond(True, lambda v: v, lambda v: v.sum(), x)
    with pytest.raises(TypeError, match="Pred must be a scalar"):
        lc.cond(x < 1, lambda v: v, lambda v: v, x)
    with pytest.raises(TypeError, match="carry input and carry output must have equal types"):
        lc.scan(lambda c, r: (c.sum(), r), x, lnp.zeros((2, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="different leading axis sizes"):
        lc.scan(lambda c, r: (c, r), x, (lnp.zeros(2), lnp.zeros(3)))
    with pytest.raises(TypeError, match="lower and upper arguments to fori_loop must have equal types"):
        lc.fori_loop(lnp.asarray(np.int32(0)), 3, lambda i, v: v, x)
    assert compiles() == 0


def test_a_value_read_inside_a_body_raises_a_type_error(clean_runtime):
    def body(i, v):
        if float(v.sum()) > 0:  # Python control flow on a traced value
            return v
        return v + 1

    with pytest.raises(TypeError, match="has no value until the program runs"):
        lc.fori_loop(0, 3, body, lnp.zeros(3))


def test_a_value_kept_out_of_a_body_fails_when_read(clean_runtime):
    kept = []

    def body(i, v):
        kept.append(v * 2)
        return v + 1

    out = lc.fori_loop(0, 3, body, lnp.zeros(3))
    np.testing.assert_allclose(np.asarray(out), np.full(3, 3.0))
    with pytest.raises(lc.BarrierError, match="made inside the body of fori_loop"):
        np.asarray(kept[0])


def test_irdl_binds_one_type_to_a_variadic_group():
    """Why the region ops are StableHLO's (lazycore.runtime.compiler._emit_region):
    an IRDL op's variadic group takes values of one type only, and a loop
    carries many. When the bindings lift this, a ``lazy.while`` can be declared
    in the op table and this test says so."""
    from collections.abc import Sequence

    from lazycore.dialect.mlir import ext, ir

    class Probe(ext.Dialect, name="cflow_probe"):
        pass

    # (as dialect/build.py makes op classes: this file's annotations are strings)
    type("Carry", (Probe.Operation,), {"__annotations__": {"values": Sequence[ext.Operand[ir.RankedTensorType]]}},
         name="carry")

    def module(types):
        args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(types))
        uses = ", ".join(f"%a{i}" for i in range(len(types)))
        return (f'func.func @f({args}) {{ "cflow_probe.carry"({uses}) '
                f'{{operandSegmentSizes = array<i32: {len(types)}>}} : ({", ".join(types)}) -> () \n return }}')

    with ir.Context(), ir.Location.unknown():
        Probe.load()
        ir.Module.parse(module(["tensor<3xf32>", "tensor<3xf32>"]))  # one type: fine
        with pytest.raises(ir.MLIRError, match="expected 'tensor<i64>' but got 'tensor<3xf32>'"):
            ir.Module.parse(module(["tensor<i64>", "tensor<3xf32>"]))
