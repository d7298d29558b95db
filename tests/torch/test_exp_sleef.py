"""Eager's float32 vectorized exp (SLEEF's ``expf_u10``) as one node.

``lazy.exp_sleef`` (and float32 ``lazy.logistic`` on CPU) lower to SLEEF's
steps; the torch frontend's silu/mish kernels record one node where they
recorded SLEEF's ~40 steps (F.silu forward + backward: 137 nodes on the
first call, 79 replayed; now 20 and 14), and ``torch.sigmoid`` and
BCE-with-logits' gradient take eager's bits (XLA's exp left 13 and 5 of
4,096 float32 values off). Sizes are multiples of 32: eager's scalar tail
(the last elements short of two vectors) calls glibc's exp instead."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lazycore.dialect import folds
from lazycore.ir import graph
from lazycore.runtime import compiler


def _bits_off(got: torch.Tensor, want: torch.Tensor) -> int:
    same = (got == want) | (got.isnan() & want.isnan())
    return int((~same).sum())


def _normal(n=4096, seed=0, scale=6.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=g, dtype=torch.float64) * scale


# Not -104 <= x < -87.34: there exp is subnormal, which XLA's CPU loops flush.
_SPECIAL = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 88.0, 88.7, 88.72283935546875,
                       88.72284, 89.0, 1e4, -1e4, -104.5, -150.0, -87.0, 3e38, -3e38, 1e-30, 2.0**-20,
                       -86.0, 40.0, -40.0, 20.0, -20.0, 0.25, 7.5, -7.5, 64.0, -64.0])


def test_fold_is_eagers_sigmoid_exp():
    """The fold's steps are eager's: ``1 / (1 + exp(-x))`` with them is eager's float32 sigmoid bit for bit."""
    x = np.concatenate([_normal(8192).numpy().astype(np.float32), -_SPECIAL])  # (one thread: under 32,768)
    with np.errstate(all="ignore"):
        mine = (np.float32(1) / (np.float32(1) + folds.exp_sleef(-x))).astype(np.float32)
    assert _bits_off(torch.from_numpy(mine), torch.sigmoid(torch.from_numpy(x))) == 0


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_lowering_is_the_fold_bitwise(dtype):
    """float32 (the narrower types in it): the lowering's bits are the fold's."""
    x = np.concatenate([_normal(4096, seed=1).numpy().astype(np.float32), _SPECIAL])
    np_dtype = {"f32": np.float32, "f16": np.float16, "bf16": __import__("ml_dtypes").bfloat16}[dtype]
    x = x.astype(np_dtype)
    t = f"tensor<{len(x)}x{dtype}>"
    text = (f'func.func @main(%a: {t}) -> {t} {{\n  %r = "lazy.exp_sleef"(%a) : ({t}) -> {t}\n'
            f"  return %r : {t}\n}}")
    (got,) = compiler.run_module(text, [x])
    with np.errstate(all="ignore"):
        want = folds.exp_sleef(x)
    got, want = got.astype(np.float32), want.astype(np.float32)
    assert np.array_equal(got, want, equal_nan=True), (x[got != want][:8], got[got != want][:8], want[got != want][:8])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_sigmoid_is_eagers_bits(dev, no_fallback, dtype):
    x = torch.cat([_normal(4096), torch.from_numpy(_SPECIAL.astype(np.float64))]).to(dtype)
    assert _bits_off(torch.sigmoid(x.to(dev)).cpu(), torch.sigmoid(x)) == 0


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_bce_with_logits_gradient_is_eagers_bits(dev, no_fallback, reduction):
    """Eager's gradient is ``(sigmoid(x) - t) * g`` (/ numel): its sigmoid's exp is SLEEF's."""
    x = _normal(4096, seed=2).float()
    t = torch.rand(4096, generator=torch.Generator().manual_seed(4))
    grads = []
    for d in ("cpu", dev):
        v = x.detach().to(d).requires_grad_()
        loss = F.binary_cross_entropy_with_logits(v, t.to(d), reduction=reduction)
        loss.backward(torch.ones_like(loss))
        grads.append(v.grad.cpu())
    assert _bits_off(grads[1], grads[0]) == 0


@pytest.fixture
def node_count(monkeypatch):
    """Counts ``graph.Node`` creations (leaves included) while the test runs."""
    count = [0]
    made = graph.Node.__init__

    def counting(self, *args, **kwargs):
        count[0] += 1
        made(self, *args, **kwargs)

    monkeypatch.setattr(graph.Node, "__init__", counting)
    return count


@pytest.mark.parametrize("fn, most", [(F.silu, 24), (F.mish, 40)])
def test_activation_gradient_records_no_exp_steps(dev, node_count, fn, most):
    """F.silu/F.mish forward + backward (with the input, the sum and its
    gradient): SLEEF's exp is one node, not its ~40 steps (silu 137 nodes on
    the first call and 79 replayed before, mish 152 and 92)."""
    x = torch.randn(64, 32).to(dev).requires_grad_()
    node_count[0] = 0
    fn(x).sum().backward()
    assert node_count[0] <= most
