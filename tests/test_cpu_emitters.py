"""Which of XLA's CPU kernel emitters compiles a program
(lazycore.runtime.pjrt.SMALL_PROGRAM_BYTES): a small program's kernels come
from XLA's elemental IR emitter (half the compile time of its MLIR fusion
emitters there), a large program's and any float8 program's from the fusion
emitters; each gives eager's bits."""

import numpy as np
import pytest
import torch

import lazycore.torch as ltorch
from lazycore.runtime import pjrt

ELEMENTAL = [("xla_cpu_use_fusion_emitters", False)]


@pytest.fixture
def overrides(monkeypatch, clean_runtime):
    """The option overrides of every program compiled, in order."""
    seen = []
    options = pjrt._compile_options

    def spy(device):
        made = options(device)
        seen.append(made)
        return made

    monkeypatch.setattr(pjrt, "_compile_options", spy)
    return lambda: [list(o.env_option_overrides) for o in seen]


def _bits(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().contiguous().view(torch.uint8).numpy()


def _run(fn, x):
    return fn(x.to(ltorch.device())).cpu(), fn(x)


def _step(x):
    return (x * 0.3 + 1.7) / (x.abs() + 2.0) - x * x


def test_a_small_program_compiles_with_the_elemental_emitter(overrides):
    x = torch.randn(37, generator=torch.Generator().manual_seed(0))
    got, want = _run(_step, x)
    assert overrides() == [ELEMENTAL]
    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_a_large_program_compiles_with_the_fusion_emitters(overrides, monkeypatch):
    monkeypatch.setattr(pjrt, "SMALL_PROGRAM_BYTES", 64)  # this program's artifact is larger
    x = torch.randn(37, generator=torch.Generator().manual_seed(0))
    got, want = _run(_step, x)
    assert overrides() == [[]]
    np.testing.assert_array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("source,target", [(torch.float8_e5m2fnuz, torch.float8_e5m2),
                                           (torch.float8_e5m2, torch.float8_e4m3fnuz)])
def test_a_float8_program_compiles_with_the_fusion_emitters(overrides, source, target):
    """The elemental emitter converts some float8 values (of all 256 bit
    patterns) to another float8 type otherwise than eager."""
    x = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(source)
    got, want = _run(lambda v: v.to(target), x)
    assert overrides() == [[]]
    np.testing.assert_array_equal(_bits(got), _bits(want))
