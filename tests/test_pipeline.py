"""The default pipeline end to end: lazy module text -> StableHLO -> PJRT -> numbers."""

import numpy as np
import pytest

from lazycore.dialect.mlir import ir
from lazycore.runtime import compiler
from lazycore.passes import PassError, run_pipeline

PROGRAM = """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %one = "lazy.constant"() {value = dense<1.0> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %0 = "lazy.mul"(%a, %one) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "lazy.add"(%0, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = "lazy.tanh"(%1) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %2 : tensor<2x3xf32>
}
"""


def test_compile_and_run_matches_numpy(rng):
    a, b = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(2))
    (out,) = compiler.run_module(PROGRAM, [a, b])
    np.testing.assert_allclose(out, np.tanh(a + b), rtol=1e-6)


def test_each_stage_is_visible_and_ends_in_stablehlo():
    seen = []
    module = compiler.lower(PROGRAM, after_each=lambda name, op: seen.append((name, str(op))))
    assert [n for n, _ in seen] == [
        "lazy-canonicalize", "cse", "lazy-update-to-select", "lazy-aliasing", "lazy-to-stablehlo", "canonicalize",
        "lazy-keep-roundings",
    ]
    assert "lazy.mul" not in seen[0][1]  # x * 1 folded by lazy-canonicalize
    assert "lazy." not in str(module) and "stablehlo.tanh" in str(module)


def test_stop_after_a_stage():
    module = compiler.parse(PROGRAM)
    run_pipeline(module, stop_after="lazy-canonicalize")
    assert '"lazy.add"' in str(module) and "stablehlo" not in str(module)


def test_unknown_pass_is_named():
    with pytest.raises(PassError, match="no-such-pass"):
        run_pipeline(compiler.parse(PROGRAM), "lazy-canonicalize,no-such-pass")


def test_serializes_at_the_consumer_version(monkeypatch):
    from lazycore.dialect import mlir
    from lazycore.runtime import pjrt

    seen = []
    real = mlir.serialize_stablehlo_module

    def spy(module, version):
        seen.append(version)
        return real(module, version)

    monkeypatch.setattr(compiler, "serialize_stablehlo_module", spy)
    compiler.compile_module(PROGRAM)
    assert seen == [pjrt.consumer_stablehlo_version()]


@pytest.fixture
def breaking_pass():
    """A pass that leaves the module invalid: it gives lazy.add a third operand."""
    from lazycore.passes import pipeline

    def factory():
        def run(module_op):
            fn = module_op.regions[0].blocks[0].operations[0]
            for op in fn.regions[0].blocks[0].operations:
                if op.operation.name == "lazy.add":
                    a, b = op.operation.operands
                    with ir.InsertionPoint(op), op.location:
                        broken = ir.Operation.create("lazy.add", results=[a.type], operands=[a, b, b])
                    op.result.replace_all_uses_with(broken.result)
                    op.operation.erase()
                    return
        return run

    pipeline.PASSES["test-break-add"] = pipeline.PassInfo("test-break-add", "breaks lazy.add", factory)
    yield "test-break-add"
    del pipeline.PASSES["test-break-add"]


def test_a_pass_that_breaks_the_ir_is_named(breaking_pass):
    with pytest.raises(PassError, match=f"(?s)IR does not verify after '{breaking_pass}'.*expected 2 operands"):
        run_pipeline(compiler.parse(PROGRAM), f"{breaking_pass},lazy-canonicalize")


@pytest.mark.parametrize("then, seen", [
    # an MLIR pass never gets an unverified module: C++ passes assume it verifies
    ("cse", ["test-break-add"]),
    # lazycore's own passes may run first; the end of the pipeline verifies
    ("lazy-update-to-select", ["test-break-add", "lazy-update-to-select"]),
])
def test_without_verify_each_the_module_is_verified_before_mlir_passes_and_at_the_end(breaking_pass, then, seen):
    names = []
    with pytest.raises(PassError, match=f"(?s)IR does not verify after '{seen[-1]}' .*LAZYCORE_VERIFY_EACH=1.*expected 2 operands"):
        run_pipeline(compiler.parse(PROGRAM), f"{breaking_pass},{then}", verify_each=False,
                     after_each=lambda name, op: names.append(name))
    assert names == seen


def test_the_runtime_verifies_each_pass_only_when_asked(monkeypatch):
    from lazycore.ir.config import settings

    calls = []
    real = compiler.run_pipeline
    monkeypatch.setattr(compiler, "run_pipeline", lambda *a, **k: (calls.append(k["verify_each"]), real(*a, **k)))
    import lazycore.numpy as lnp

    for flag in (False, True):
        monkeypatch.setattr(settings, "verify_each", flag)
        x = lnp.asarray(np.arange(6.0 + flag, dtype=np.float32))
        np.testing.assert_allclose(np.asarray(lnp.tanh(x) * 2), np.tanh(np.arange(6.0 + flag)) * 2, rtol=1e-6)
    assert calls == [False, True]
