"""The default pipeline end to end: lazy module text -> StableHLO -> PJRT -> numbers."""

import numpy as np
import pytest

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
        "lazy-canonicalize", "cse", "lazy-update-to-select", "lazy-aliasing", "lazy-to-stablehlo", "canonicalize"
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
    from lazycore import mlir
    from lazycore.runtime import pjrt

    seen = []
    real = mlir.serialize_stablehlo

    def spy(text, version):
        seen.append(version)
        return real(text, version)

    monkeypatch.setattr(compiler, "serialize_stablehlo", spy)
    compiler.compile_module(PROGRAM)
    assert seen == [pjrt.consumer_stablehlo_version()]
