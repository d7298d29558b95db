"""Loops kept as loops for training steps (lazycore.runtime.rolling): with
``roll_loops`` on, a stack of identical layers trained with torch compiles
its forward, its backward (in reverse order, reading the activations the
forward kept) and the per-layer optimizer updates as loops, with eager
torch's parameters and gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import lazycore.torch as ltorch
from lazycore.ir.config import override
from lazycore.observe import metrics
from lazycore.testing import capture


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.ln = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 2 * width)
        self.out = nn.Linear(2 * width, width)

    def forward(self, h):
        return h + self.out(torch.tanh(self.fc(self.ln(h))))


class Stack(nn.Module):
    def __init__(self, layers, width=8):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(layers))
        self.head = nn.Linear(width, 3)

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


def _train(device, layers, make_opt, steps=2):
    torch.manual_seed(0)
    model = Stack(layers).to(device)
    opt = make_opt(model.parameters())
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(6, 8, generator=g).to(device), torch.randint(0, 3, (6,), generator=g).to(device)
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if device != "cpu":
            ltorch.mark_step()
    return ([p.detach().cpu().numpy() for p in model.parameters()]
            + [p.grad.detach().cpu().numpy() for p in model.parameters()])


def _sgd(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def _adamw(params):
    return torch.optim.AdamW(params, lr=1e-3)


@pytest.mark.parametrize("make_opt", [_sgd, _adamw], ids=["sgd", "adamw"])
def test_a_training_step_rolls_forward_backward_and_updates(clean_runtime, dev, make_opt):
    layers = 6
    want = _train("cpu", layers, make_opt)
    with capture(fresh_cache=True):
        unrolled = _train(dev, layers, make_opt)
    unrolled_compiles = metrics.counters()["compiles"]
    metrics.reset()
    with override(roll_loops=True), capture(fresh_cache=True) as cap:
        got = _train(dev, layers, make_opt)
    assert metrics.counters()["compiles"] == unrolled_compiles  # rolling adds no program
    for w, u, r in zip(want, unrolled, got):
        np.testing.assert_allclose(r, w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(r, u, rtol=1e-5, atol=1e-6)
    text = cap.text("stablehlo")
    # the steady step's program: forward, backward and the updates, each a
    # loop holding one layer's ops
    step = max(text.split("// ----- graph"), key=len)
    assert step.count("stablehlo.while") >= 3
    assert step.count("stablehlo.tanh") == 1
    # the backward reads the forward's kept activations from the stack the
    # forward wrote in place, not from rows stacked again
    assert "stablehlo.dynamic_update_slice" in step
