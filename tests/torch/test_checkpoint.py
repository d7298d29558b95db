"""torch.utils.checkpoint on lazy tensors recomputes in backward.

The recomputation takes the region's inputs through one
``lazy.optimization_barrier``, so its ops are new nodes (not the forward's,
which the hash-consed graph and CSE would otherwise merge them with) and the
StableHLO holds each checkpointed op twice; gradients are eager's.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from torch.utils.checkpoint import checkpoint

import lazycore.numpy as lnp
from lazycore.dialect import ShapeError, infer
from lazycore.dialect.types import TensorType
from lazycore.observe.testing import capture
from lazycore.trace import core

# Blocks of different widths: no two are alike, so no run of layers is rolled
# into a loop and every op appears in the StableHLO once per use. Every
# product contracts over more than 16 features, so each is a dot_general (a
# float32 product over 16 or fewer is eager's FMA chain: eager_loops.gemm_chain).
WIDTHS = (32, 24, 8)


@pytest.fixture(autouse=True)
def _plain_dots(monkeypatch):
    """The products as plain dots: the float32 GEMM-order lowering
    (``eager_loops.ordered_dot``) fences its operands with barriers of its own,
    and these tests count the checkpoint's. (The recordings made either way
    are dropped before and after.)"""
    from lazycore.frontends.torch import dispatch
    from lazycore.frontends.torch.ops import eager_loops

    dispatch.forget()
    monkeypatch.setattr(eager_loops, "ordered_dot", lambda *args, **kwargs: None)
    yield
    dispatch.forget()


class Block(torch.nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.linear = torch.nn.Linear(n_in, n_out)

    def forward(self, x):
        return torch.tanh(self.linear(x))


class MLP(torch.nn.Module):
    def __init__(self, reentrant):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(a, b) for a, b in zip(WIDTHS, WIDTHS[1:]))
        self.reentrant = reentrant  # None: no checkpointing

    def forward(self, x):
        for block in self.blocks:
            x = block(x) if self.reentrant is None else checkpoint(block, x, use_reentrant=self.reentrant)
        return (x * x).sum()


def _step(model, x):
    """The loss and the gradients of the parameters and of ``x``, on the host."""
    x = x.detach().clone().requires_grad_()
    loss = model(x)
    loss.backward()
    grads = [p.grad for p in model.parameters()] + [x.grad]
    return loss.detach().cpu(), [g.cpu() for g in grads]


def _models(dev, reentrant):
    torch.manual_seed(0)
    eager = MLP(reentrant)
    lazy = MLP(reentrant).to(dev)
    lazy.load_state_dict(eager.state_dict())
    return eager, lazy


@pytest.mark.parametrize("reentrant", [False, True], ids=["non_reentrant", "reentrant"])
def test_checkpointed_mlp_recomputes_with_eager_gradients(dev, reentrant):
    x = torch.randn(4, WIDTHS[0], generator=torch.Generator().manual_seed(1))
    eager, lazy = _models(dev, reentrant)
    want_loss, want = _step(eager, x)
    with capture() as cap:
        loss, got = _step(lazy, x.to(dev))
    text = cap.text("stablehlo")

    plain = _models(dev, None)[1]
    with capture() as plain_cap:
        plain_loss, plain_grads = _step(plain, x.to(dev))
    plain_text = plain_cap.text("stablehlo")

    torch.testing.assert_close(loss, want_loss, rtol=1e-6, atol=0)
    for g, w, p in zip(got, want, plain_grads):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(g, p, rtol=1e-6, atol=1e-7)  # the same math as without checkpointing

    blocks = len(WIDTHS) - 1
    # without checkpointing: one tanh per block and no barrier
    assert plain_cap.text("lowered").count("lazy.tanh") == blocks
    assert "optimization_barrier" not in plain_text
    # with it: each block's forward once more in backward, behind one barrier per block
    assert cap.text("lowered").count("lazy.tanh") == 2 * blocks
    assert text.count("stablehlo.dot_general") == plain_text.count("stablehlo.dot_general") + blocks
    barriers = re.findall(r"= stablehlo\.optimization_barrier (.*) : (.*)", text)
    assert len(barriers) == blocks
    for (operands, types), n_in in zip(barriers, reversed(WIDTHS[:-1])):  # backward: the last block first
        # the block's input; reentrant: and the gradient of its output, so the
        # recomputation waits for backward to reach the block
        want_types = [f"tensor<4x{n_in}xf32>"]
        if reentrant:
            want_types.append(f"tensor<4x{WIDTHS[WIDTHS.index(n_in) + 1]}xf32>")
        assert [t.strip() for t in types.split(",")] == want_types, (operands, types)
    # every recomputed tanh reads a value computed from the barrier's results
    recomputed = re.findall(r'"lazy\.tanh"\((%[^)]+)\)', cap.text("lowered"))
    assert len(set(recomputed)) == 2 * blocks


def test_checkpoint_without_grad_records_no_barrier(dev):
    """Under no_grad nothing is saved or recomputed: no barrier either."""
    _, lazy = _models(dev, False)
    x = torch.randn(4, WIDTHS[0]).to(dev)
    with capture() as cap, torch.no_grad():
        lazy(x).cpu()
    assert "optimization_barrier" not in cap.text("stablehlo")
    assert cap.text("lowered").count("lazy.tanh") == len(WIDTHS) - 1


def test_optimization_barrier_passes_values_of_any_types():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([-1, 2**40], dtype=np.int64)
    c = np.array([True, False])
    x, y, z = core.apply("optimization_barrier", [lnp.asarray(v).__lazycore_value__() for v in (a, b, c)])
    with capture() as cap:
        got = [core.to_numpy(v) for v in (x, y, z)]
    for g, w in zip(got, (a, b, c)):
        np.testing.assert_array_equal(g, w)
        assert g.dtype == w.dtype
    assert "stablehlo.optimization_barrier" in cap.text("stablehlo")


def test_optimization_barrier_rule():
    f32, i64 = TensorType((2, 3), "f32"), TensorType((4,), "i64")
    assert infer("optimization_barrier", [f32, i64]) == (f32, i64)
    assert infer("optimization_barrier", [i64]) == (i64,)
    with pytest.raises(ShapeError, match="takes 1 to 16 operands, got 0"):
        infer("optimization_barrier", [])
    with pytest.raises(ShapeError, match="takes 1 to 16 operands, got 17"):
        infer("optimization_barrier", [f32] * 17)


class DropoutBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return torch.tanh(self.drop(self.linear(x)))


@pytest.mark.parametrize("reentrant", [False, True], ids=["non_reentrant", "reentrant"])
def test_recomputation_draws_the_forwards_dropout_mask(dev, reentrant):
    """The recomputation behind the barrier replays the forward's random state:
    the gradients are those of the same step without checkpointing."""

    def grads(mode):
        torch.manual_seed(0)
        block = DropoutBlock().to(dev)
        x = torch.randn(8, 16).to(dev).requires_grad_()
        torch.manual_seed(123)
        y = block(x) if mode is None else checkpoint(block, x, use_reentrant=mode)
        with capture() as cap:
            (y * y).sum().backward()
            out = [p.grad.cpu() for p in block.parameters()] + [x.grad.cpu()]
        return out, cap.text("stablehlo")

    plain, _ = grads(None)
    got, text = grads(reentrant)
    assert "stablehlo.optimization_barrier" in text
    for g, p in zip(got, plain):
        torch.testing.assert_close(g, p, rtol=1e-6, atol=1e-7)


def test_a_region_of_many_inputs_takes_several_barriers(dev):
    """More tensors than one barrier takes (16): consecutive barriers of at most 16."""
    xs = [torch.full((3,), float(i + 1)).to(dev).requires_grad_() for i in range(20)]

    def region(*ts):
        return torch.stack([torch.tanh(t) for t in ts]).sum()

    with capture() as cap:
        checkpoint(region, *xs, use_reentrant=False).backward()
        grads = [x.grad.cpu() for x in xs]
    text = cap.text("stablehlo")
    sizes = [len(types.split(",")) for types in re.findall(r"= stablehlo\.optimization_barrier .* : (.*)", text)]
    assert sorted(sizes) == [4, 16]
    eager = [torch.full((3,), float(i + 1)).requires_grad_() for i in range(20)]
    checkpoint(region, *eager, use_reentrant=False).backward()
    for g, e in zip(grads, eager):
        torch.testing.assert_close(g, e.grad, rtol=1e-5, atol=1e-6)
