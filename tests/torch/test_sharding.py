"""Torch training over a mesh: ``mark_sharding``, data and parameter parallelism.

The training runs on 4 forced CPU devices in a child process
(tests/isolated.py) and must match eager PyTorch on the CPU step by step,
compiling one program for the steady step; the errors are checked here
(one device) where one device shows them.
"""

from __future__ import annotations

import os
import re
import sys

import pytest
import torch
from torch import nn

import lazycore as lc
import lazycore.torch as ltorch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _bits import BY_HAND  # noqa: E402
from isolated import FOUR_DEVICES, run_isolated  # noqa: E402

STEPS = 10
RTOL = 1e-5


def mlp():
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 6))


def data(n=48):
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 20, generator=g), torch.randint(0, 6, (n,), generator=g)


def train(device, mesh=None, parameter_specs=None, steps=STEPS):
    """Losses of ``steps`` SGD steps (momentum, weight decay) and the compile
    count after each; the batch is uploaded every step and, on a mesh, split
    along ``data``; ``parameter_specs``: layer index -> its weight's spec."""
    torch.manual_seed(0)
    model = mlp().to(device)
    for i, spec in (parameter_specs or {}).items():
        ltorch.mark_sharding(model[i].weight, mesh, spec)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    x_host, y_host = data()
    return _steps(model, opt, [(x_host, y_host)] * steps, device, mesh)


def _steps(model, opt, batches, device, mesh):
    """Losses of one cross-entropy step per batch and the compile count after
    each; each batch is uploaded and, on a mesh, split along ``data``."""
    from lazycore.observe import metrics

    losses, compiles = [], []
    for x_host, y_host in batches:
        x, y = x_host.to(device), y_host.to(device)
        if mesh is not None:
            ltorch.mark_sharding(x, mesh, ("data",) + (None,) * (x.dim() - 1))
            ltorch.mark_sharding(y, mesh, ("data",) + (None,) * (y.dim() - 1))
        opt.zero_grad()
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.flatten(0, -2), y.flatten())
        loss.backward()
        if device == "cpu":
            opt.step()
        else:
            ltorch.optimizer_step(opt)
        losses.append(loss.item())
        compiles.append(metrics.counters()["compiles"])
    return losses, compiles, model


def _check_against_eager(mesh, parameter_specs=None):
    from lazycore.observe import metrics

    eager, _, _ = train("cpu")
    metrics.reset()
    with lc.testing.capture() as cap:
        lazy, compiles, model = train(ltorch.device(mesh), mesh, parameter_specs)
    for step, (e, l) in enumerate(zip(eager, lazy)):
        assert abs(e - l) <= RTOL * abs(e), (step, eager, lazy)
    # the first step makes the optimizer's momentum; every later step is one program, compiled once
    assert compiles[1] - compiles[0] == 1 and compiles[-1] == compiles[1], compiles
    assert metrics.fallbacks() == {}
    step = cap.graphs[-1].stablehlo
    assert "mhlo.num_partitions = 4" in step, step[:400]
    assert re.search(r'xla\.sdy\.sharding = "#sdy\.sharding<@mesh_\w+, \[\{\\22a0\\22\}', step)  # the batch's blocks
    # the loss's mean sums the per-example losses in eager's order of pieces
    # (lazy.cascade_sum): gathered once, not a collective per piece crossing a block
    collectives = metrics.programs()[-1].collectives
    assert "collective-permute" not in collectives, collectives  # (before: 24 on the data axis, 10 on two axes)
    return model


def _data_parallel():
    import jax

    assert len(jax.devices()) == 4
    mesh = lc.Mesh((4,), ("data",))
    model = _check_against_eager(mesh)
    from lazycore.observe import metrics

    assert metrics.programs()[-1].collectives.get("all-gather", 0) <= 1  # the losses, gathered once
    # nothing marked them: the parameters stay whole on every device
    for m in model:
        if isinstance(m, nn.Linear):
            assert ltorch.sharding_of(m.weight) == (None, None), ltorch.sharding_of(m.weight)


def test_data_parallel_mlp_matches_eager():
    run_isolated(__file__, "_data_parallel", env=FOUR_DEVICES)


def _two_axes():
    mesh = lc.Mesh((2, 2), ("data", "model"))
    specs = {0: ("model", None), 2: ("model", None), 4: (None, "model")}
    model = _check_against_eager(mesh, specs)
    # the updated parameters keep the layout they were given
    for i, spec in specs.items():
        assert ltorch.sharding_of(model[i].weight) == spec, (i, ltorch.sharding_of(model[i].weight))
    # a dimension the axis does not divide is refused at the call
    w = torch.zeros(5, 4).to(ltorch.device(mesh))
    with pytest.raises(ValueError, match="dimension 0 of size 5 cannot be split evenly along mesh axis 'model'"):
        ltorch.mark_sharding(w, mesh, ("model", None))


def test_parameters_sharded_on_a_second_axis_match_eager():
    run_isolated(__file__, "_two_axes", env=FOUR_DEVICES)


# --- errors (one device) ---------------------------------------------------------------------


def test_mark_sharding_errors_at_the_call():
    mesh = lc.Mesh((1,), ("data",))
    dev = ltorch.device(mesh)
    x = torch.ones(4, 3).to(dev)
    with pytest.raises(ValueError, match="has 3 entries, more than the 2 dimensions"):
        ltorch.mark_sharding(x, mesh, ("data", None, None))
    with pytest.raises(ValueError, match="'model' is not an axis of mesh"):
        ltorch.mark_sharding(x, mesh, ("model", None))
    with pytest.raises(ValueError, match="not on the mesh's device"):
        ltorch.mark_sharding(torch.ones(4, 3).to(ltorch.device()), mesh, ("data", None))
    with pytest.raises(RuntimeError, match="is a view"):
        ltorch.mark_sharding(x[1:], mesh, ("data", None))
    with pytest.raises(TypeError, match="on a lazy device"):
        ltorch.mark_sharding(torch.ones(4, 3), mesh, ("data", None))
    other = lc.Mesh((1,), ("batch",))
    y = torch.ones(4, 3).to(ltorch.device(other))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):  # eager's error
        x + y
    ltorch.mark_sharding(x, mesh, ("data", None))
    assert torch.equal((x * 2).cpu(), torch.full((4, 3), 2.0))


# --- a small transformer, data-parallel and with its weights split on a second axis ---------------


class TinyTransformer(nn.Module):
    """Token and position embeddings, one pre-LayerNorm block (causal attention, GELU MLP), a head."""

    def __init__(self, vocab=32, context=8, width=16, heads=2):
        super().__init__()
        self.heads = heads
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.ln1, self.ln2, self.ln = nn.LayerNorm(width), nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, x):
        b, t = x.shape
        h = self.tok(x) + self.pos(torch.arange(t, device=x.device))
        d = h.shape[-1]
        q, k, v = self.qkv(self.ln1(h)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = h + self.proj(a.transpose(1, 2).reshape(b, t, d))
        h = h + self.out(nn.functional.gelu(self.fc(self.ln2(h))))
        return self.head(self.ln(h))


def train_transformer(device, mesh=None, specs=None, steps=STEPS):
    torch.manual_seed(0)
    model = TinyTransformer().to(device)
    for name, spec in (specs or {}).items():
        ltorch.mark_sharding(model.get_parameter(name), mesh, spec)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(2)
    seqs = torch.randint(0, 32, (steps, 8, 9), generator=g)
    return _steps(model, opt, [(s[:, :-1].contiguous(), s[:, 1:].contiguous()) for s in seqs], device, mesh)


def _transformer(shape, names, specs):
    from lazycore.observe import metrics

    eager, _, _ = train_transformer("cpu")
    mesh = lc.Mesh(shape, names)
    metrics.reset()
    lazy, compiles, model = train_transformer(ltorch.device(mesh), mesh, specs)
    for step, (e, l) in enumerate(zip(eager, lazy)):
        assert abs(e - l) <= RTOL * abs(e), (step, eager, lazy)
    assert compiles[1] - compiles[0] == 1 and compiles[-1] == compiles[1], compiles
    assert metrics.fallbacks() == {}
    for name, spec in specs.items():
        assert ltorch.sharding_of(model.get_parameter(name)) == spec, name


def _transformer_data_parallel():
    _transformer((4,), ("data",), {})


def _transformer_two_axes():
    _transformer((2, 2), ("data", "model"), {"qkv.weight": ("model", None), "fc.weight": ("model", None),
                                            "out.weight": (None, "model")})


def test_data_parallel_transformer_matches_eager():
    run_isolated(__file__, "_transformer_data_parallel", env=FOUR_DEVICES)


@BY_HAND  # data parallel: the transformer above; a second axis: the MLP's parameters above (24 s of a CI worker)
def test_transformer_with_weights_split_on_a_second_axis_matches_eager():
    run_isolated(__file__, "_transformer_two_axes", env=FOUR_DEVICES)
