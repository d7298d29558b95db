"""Loops kept as loops (first step): a run of identical layers, each with its
own weights, compiles as one stablehlo.while over the stacked weights when
``roll_loops`` is on (lazycore.runtime.rolling), with the unrolled program's
results; on by default for runs as long as the platform's entry asks (16 on
the CPU; ``LAZYCORE_ROLL_LOOPS=0`` turns it off, ``1`` on from 3 copies),
and part of the compile key."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import lazycore as lc
import lazycore.numpy as lnp
from lazycore.ir.config import override, settings
from lazycore.observe import metrics
from lazycore.observe.testing import capture
from lazycore.runtime import rolling
from lazycore.runtime.device import default_device


def compiles() -> int:
    return metrics.counters()["compiles"]


def _stack(rng, layers=6, width=8):
    Ws = [rng.standard_normal((width, width)).astype(np.float32) * 0.3 for _ in range(layers)]
    bs = [rng.standard_normal(width).astype(np.float32) for _ in range(layers)]
    x = rng.standard_normal((4, width)).astype(np.float32)
    return x, Ws, bs


def _forward(np_, x, Ws, bs, keep=None):
    h = x
    for i, (W, b) in enumerate(zip(Ws, bs)):
        h = h + np_.tanh(h @ W + b)
        if keep is not None and i == 2:
            keep.append(h * 2)
    return h


def test_on_by_default_for_long_runs_and_the_switch_turns_it_off(clean_runtime, rng):
    # the setting's default defers to the platform's entry: the CPU rolls a
    # run of 16 identical layers or more (benchmark 11's sweep), not 4
    assert settings.roll_loops == "auto" and rolling.least_copies(default_device()) == 16
    for layers, loops in ((4, 0), (16, 1)):
        x, Ws, bs = _stack(rng, layers=layers)
        args = (lnp.asarray(x), [lnp.asarray(w) for w in Ws], [lnp.asarray(b) for b in bs])
        with capture() as cap:
            got = np.asarray(_forward(np, *args))
        assert cap.text("stablehlo").count("stablehlo.while") == loops, layers
        np.testing.assert_allclose(got, _forward(np, x, Ws, bs), rtol=1e-5, atol=1e-5)
    env = {k: v for k, v in os.environ.items() if k != "LAZYCORE_ROLL_LOOPS"}
    code = "from lazycore.ir.config import settings; print(settings.roll_loops)"
    out = subprocess.run([sys.executable, "-c", code], env={**env, "LAZYCORE_ROLL_LOOPS": "0"},
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.split() == ["False"]


@pytest.mark.parametrize("layers", [3, 6])
def test_a_stack_of_layers_becomes_one_loop_with_the_same_results(clean_runtime, rng, layers):
    x, Ws, bs = _stack(rng, layers)
    want = _forward(np, x, Ws, bs)
    args = (lnp.asarray(x), [lnp.asarray(w) for w in Ws], [lnp.asarray(b) for b in bs])
    with override(roll_loops=True), capture() as cap:
        got = np.asarray(_forward(np, *args))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    text = cap.text("stablehlo")
    assert text.count("stablehlo.while") == 1
    # the layer once, not once per layer (counted as lazy ops: float32 tanh's exact lowering is many)
    assert cap.text("lowered").count("lazy.tanh") == 1
    assert compiles() == 1
    # the same graph unrolled is another program
    with override(roll_loops=False), capture(fresh_cache=False) as cap:
        unrolled = np.asarray(_forward(np, *args))
    np.testing.assert_allclose(unrolled, got, rtol=1e-6, atol=1e-6)
    assert cap.text("lowered").count("lazy.tanh") == layers
    assert compiles() == 2


def test_activations_read_elsewhere_leave_the_loop_stacked(clean_runtime, rng):
    # every layer's output is read after the stack (as a backward pass reads
    # the activations): the loop writes them into one stack in place
    x, Ws, bs = _stack(rng, 6)

    def forward(np_, x, Ws, bs):
        h, kept = x, []
        for W, b in zip(Ws, bs):
            h = h + np_.tanh(h @ W + b)
            kept.append(h)
        return h, sum(k * (i + 1) for i, k in enumerate(kept))

    want = forward(np, x, Ws, bs)
    args = (lnp.asarray(x), [lnp.asarray(w) for w in Ws], [lnp.asarray(b) for b in bs])
    with override(roll_loops=True), capture() as cap:
        got = [np.asarray(v) for v in forward(np, *args)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    text = cap.text("stablehlo")
    assert text.count("stablehlo.while") == 1
    assert cap.text("lowered").count("lazy.tanh") == 1
    assert "stablehlo.dynamic_update_slice" in text
    assert compiles() == 1


def test_runs_split_by_an_outside_reader_become_two_loops(clean_runtime, rng):
    x, Ws, bs = _stack(rng, 6)
    kept = []
    want = _forward(np, x, Ws, bs, kept)
    args = (lnp.asarray(x), [lnp.asarray(w) for w in Ws], [lnp.asarray(b) for b in bs])
    got_kept = []
    with override(roll_loops=True), capture() as cap:
        got = _forward(np, *args, got_kept)
        got = np.asarray(got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(got_kept[0]), kept[0], rtol=1e-5, atol=1e-5)
    # the op reading layer 3's output sits between layers 3 and 4 in the walk
    assert cap.text("stablehlo").count("stablehlo.while") == 2


def test_layers_that_differ_in_a_constant_are_not_one_loop(clean_runtime, rng):
    x, Ws, _ = _stack(rng, 5)
    scales = [np.full((4, 8), k, np.float32) for k in range(2, 7)]  # baked dense constants, one per layer
    want = x
    for W, s in zip(Ws, scales):
        want = np.tanh(want @ W) * s
    with override(roll_loops=True), capture() as cap:
        h = lc.from_numpy(x)
        for W, s in zip(Ws, scales):
            d = lc.apply("dot_general", h, lc.from_numpy(W), lhs_batch=(), rhs_batch=(), lhs_contract=(1,),
                         rhs_contract=(0,))
            h = lc.apply("mul", lc.apply("tanh", d), lc.apply("constant", value=s))
        got = lc.to_numpy(h)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert "stablehlo.while" not in cap.text("stablehlo")


def _layers_module(layers: int) -> str:
    """@main(h, w_0, b_0, ...): layers of h + tanh(h @ w_i + b_i), returning h
    and the product of the first two layers' tanh (read outside the run)."""
    dot = ('{lhs_batch = array<i64>, lhs_contract = array<i64: 1>, rhs_batch = array<i64>, '
           'rhs_contract = array<i64: 0>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>')
    t = "(tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>"
    args = ", ".join(f"%w{i}: tensor<4x4xf32>, %b{i}: tensor<2x4xf32>" for i in range(layers))
    lines = [f"func.func @main(%h: tensor<2x4xf32>, {args}) -> (tensor<2x4xf32>, tensor<2x4xf32>) {{"]
    h, n = "%h", 0
    for i in range(layers):
        lines += [f'  %{n} = "lazy.dot_general"({h}, %w{i}) {dot}', f'  %{n + 1} = "lazy.add"(%{n}, %b{i}) : {t}',
                  f'  %{n + 2} = "lazy.tanh"(%{n + 1}) : (tensor<2x4xf32>) -> tensor<2x4xf32>',
                  f'  %{n + 3} = "lazy.add"({h}, %{n + 2}) : {t}']
        h, n = f"%{n + 3}", n + 4
    lines += [f'  %{n} = "lazy.mul"(%2, %6) : {t}', f"  return {h}, %{n} : tensor<2x4xf32>, tensor<2x4xf32>", "}"]
    return "\n".join(lines)


def test_the_lazy_roll_loops_pass_keeps_the_results(rng):
    from lazycore.passes import DEFAULT_PIPELINE
    from lazycore.runtime.compiler import lower, run_module

    text = _layers_module(4)
    inputs = [rng.standard_normal((2, 4)).astype(np.float32)]
    for _ in range(4):
        inputs += [rng.standard_normal((4, 4)).astype(np.float32) * 0.5, rng.standard_normal((2, 4)).astype(np.float32)]
    want = run_module(text, inputs)
    rolled = run_module(text, inputs, pipeline="lazy-roll-loops," + DEFAULT_PIPELINE)
    for r, w in zip(rolled, want):
        np.testing.assert_allclose(r, w, rtol=1e-6, atol=1e-6)
    hlo = str(lower(text, "lazy-roll-loops," + DEFAULT_PIPELINE))
    assert hlo.count("stablehlo.while") == 1 and hlo.count("stablehlo.tanh") == 1


def test_layers_with_their_own_scalars_roll_and_read_their_own(clean_runtime, rng):
    # a Python number per layer is a runtime scalar, not a constant: the
    # body makes each layer's broadcast of it again from the stacked scalars
    x, Ws, _ = _stack(rng, 5)
    scales = [0.5, 1.5, -0.25, 2.0, 0.75]

    def forward(np_, h, Ws):
        for W, s in zip(Ws, scales):
            h = h + s * np_.tanh(h @ W)
        return h

    want = forward(np, x, Ws)
    with override(roll_loops=True), capture() as cap:
        got = np.asarray(forward(np, lnp.asarray(x), [lnp.asarray(w) for w in Ws]))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    text = cap.text("stablehlo")
    assert text.count("stablehlo.while") == 1 and cap.text("lowered").count("lazy.tanh") == 1


def test_the_pass_keeps_values_a_region_reads(rng):
    # a stablehlo.case reading two layers' tanh inside its branches reads
    # them as much as an operand would: they leave the loop stacked
    from lazycore.passes import DEFAULT_PIPELINE
    from lazycore.runtime.compiler import lower, run_module

    lines = _layers_module(3).splitlines()
    lines[-3:-2] = ['  %12 = "stablehlo.case"(%p) ({', "    stablehlo.return %2 : tensor<2x4xf32>", "  }, {",
                    "    stablehlo.return %6 : tensor<2x4xf32>", "  }) : (tensor<i32>) -> tensor<2x4xf32>"]
    text = "\n".join(lines)
    text = text.replace("%b2: tensor<2x4xf32>)", "%b2: tensor<2x4xf32>, %p: tensor<i32>)")
    inputs = [rng.standard_normal((2, 4)).astype(np.float32)]
    for _ in range(3):
        inputs += [rng.standard_normal((4, 4)).astype(np.float32) * 0.5, rng.standard_normal((2, 4)).astype(np.float32)]
    for branch in (0, 1):
        args = inputs + [np.array(branch, np.int32)]
        want = run_module(text, args)
        got = run_module(text, args, pipeline="lazy-roll-loops," + DEFAULT_PIPELINE)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    assert str(lower(text, "lazy-roll-loops")).count("lazy.tanh") == 1


def _update_layers(np_, Ws, steps, kept=None):
    """Each layer's weights updated by the same small graph, step after step:
    the updates roll into one loop whose new weights come back as one stack
    (lazycore.runtime.stacks), which the next step takes back whole."""
    for s in range(steps):
        if kept is not None and s == 1:
            kept.extend(Ws)  # the user keeps this step's inputs alive
        Ws = [W * 0.9 + np_.tanh(W @ W) * 0.1 for W in Ws]
        if np_ is lnp:
            lc.mark_step()
    return Ws


def test_weights_still_held_keep_their_values_when_their_stack_is_taken_again(clean_runtime, rng):
    _, Ws, _ = _stack(rng, layers=5)
    kept_want: list = []
    want = _update_layers(np, Ws, 4, kept=kept_want)
    with override(roll_loops=True), capture():
        got = _update_layers(lnp, [lnp.asarray(w) for w in Ws], 4)
    # 4 steps, and one program that stacks the uploaded weights for the
    # first: each later step takes the stack the one before returned
    assert metrics.counters()["executions"] == 4
    assert metrics.counters()["stack_executions"] == 1
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)
    kept: list = []
    metrics.reset()
    with override(roll_loops=True), capture():
        got = _update_layers(lnp, [lnp.asarray(w) for w in Ws], 4, kept=kept)
    # the second step's weights are still held: that step passes the stack
    # they are rows of to a variant of its program that leaves its stacks
    # alone (one more compile), instead of donating it
    assert metrics.counters()["executions"] == 4
    assert metrics.counters()["stack_executions"] == 1
    assert metrics.counters()["compiles"] == 2
    assert all(k.__lazycore_value__()._value.node.row is not None for k in kept)
    for k, w in zip(kept, kept_want):
        np.testing.assert_allclose(np.asarray(k), w, rtol=1e-5, atol=1e-5)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)


def test_a_failing_op_beside_rolled_layers_fails_alone(clean_runtime, rng):
    from lazycore.ir.failure import BarrierError
    from lazycore.passes import register_lowering
    from lazycore.passes.lowering import registry

    def raising(op, rewriter):
        raise ValueError("this lowering is broken on purpose")

    _, Ws, _ = _stack(rng, layers=5)
    want = _update_layers(np, Ws, 3)
    user = dict(registry.USER)
    with override(roll_loops=True), capture():
        got = _update_layers(lnp, [lnp.asarray(w) for w in Ws], 2)
        assert all(w.__lazycore_value__()._value.node.row is not None for w in got)
        register_lowering("sign", raising)
        try:
            bad = np.sign(got[0])
            # the step's program fails to lower: each output is computed
            # apart, from the rows of the stacks the step would have taken
            got = _update_layers(lnp, got, 1)
        finally:
            registry.USER.clear()
            registry.USER.update(user)
    with pytest.raises(BarrierError, match="broken on purpose"):
        np.asarray(bad)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)


def test_with_donation_off_no_stack_is_donated(clean_runtime, rng):
    _, Ws, _ = _stack(rng, layers=5)
    want = _update_layers(np, Ws, 3)
    with override(roll_loops=True, donation=False), capture() as cap:
        got = _update_layers(lnp, [lnp.asarray(w) for w in Ws], 3)
    assert "tf.aliasing_output" not in cap.text("stablehlo") and "jax.buffer_donor" not in cap.text("stablehlo")
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)


def test_a_scalar_parameter_the_layers_share_is_read_inside_the_loop(clean_runtime, rng):
    # a number that changes between calls becomes a program parameter, one
    # element of the scalar pack: the loop carries the pack and slices the
    # element in its body, where XLA fuses it into the layer's own kernels
    # (sliced before the loop, each such scalar was a kernel of its own)
    x, Ws, _ = _stack(rng, 4)
    lx, lWs = lnp.asarray(x), [lnp.asarray(w) for w in Ws]

    def forward(np_, x, Ws, s):
        h = x
        for W in Ws:
            h = h + np_.tanh(h @ W) * s
        return h

    with override(roll_loops=True), capture() as cap:
        for s in (0.5, 0.25, 0.125):
            np.testing.assert_allclose(np.asarray(forward(lnp, lx, lWs, s)), forward(np, x, Ws, np.float32(s)),
                                       rtol=1e-5, atol=1e-5)
    rolled = [g.stablehlo for g in cap.graphs if "stablehlo.while" in g.stablehlo]
    assert rolled
    text = rolled[-1]
    entry, body = text.split("stablehlo.while", 1)
    assert "tensor<1xf32>) -> tensor<" in text.splitlines()[1]  # the pack is an argument
    assert "stablehlo.slice" not in entry
    assert "stablehlo.slice %iterArg" in body
