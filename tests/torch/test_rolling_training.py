"""Loops kept as loops for training steps (lazycore.runtime.rolling): with
``roll_loops`` on, a stack of identical layers trained with torch compiles
its forward, its backward (in reverse order, reading the activations the
forward kept) and the per-layer optimizer updates as loops, with eager
torch's parameters and gradients."""

from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest
import torch
from torch import nn

import lazycore
import lazycore.torch as ltorch
from lazycore.ir.config import override
from lazycore.observe import metrics
from lazycore.runtime import diskcache
from lazycore.observe.testing import capture

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _bits import BY_HAND  # noqa: E402
from isolated import FOUR_DEVICES, run_isolated  # noqa: E402


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


# CI (adamw): test_a_rolled_step_keeps_the_layers_stacked_... and test_a_captured_step_whose_layers_roll_... take the path
@pytest.mark.parametrize("make_opt", [pytest.param(_sgd, id="sgd", marks=BY_HAND),
                                      pytest.param(_adamw, id="adamw", marks=BY_HAND)])
def test_a_training_step_rolls_forward_backward_and_updates(clean_runtime, dev, make_opt):
    layers = 6
    want = _train("cpu", layers, make_opt)
    with override(roll_loops=False), capture(fresh_cache=True):
        unrolled = _train(dev, layers, make_opt)
    unrolled_compiles = metrics.counters()["compiles"]
    metrics.reset()
    with override(roll_loops=True), capture(fresh_cache=True) as cap:
        got = _train(dev, layers, make_opt)
    assert metrics.counters()["compiles"] == unrolled_compiles  # rolling adds no program
    for w, u, r in zip(want, unrolled, got):
        np.testing.assert_allclose(r, w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(r, u, rtol=1e-5, atol=1e-6)
    # the steady step's program: forward, backward and the updates, each a
    # loop holding one layer's ops (tanh counted as the lazy op it was lowered from)
    step = max(cap.graphs, key=lambda g: len(g.stablehlo))
    assert step.stablehlo.count("stablehlo.while") >= 3
    assert step.text("lowered").count("lazy.tanh") == 1
    # the backward reads the forward's kept activations from the stack the
    # forward wrote in place, not from rows stacked again
    assert "stablehlo.dynamic_update_slice" in step.stablehlo


# --- the layers' values kept stacked between steps (lazycore.runtime.stacks) ---
# A rolled step returns each stack of new weights, moments and gradients
# whole, the next step takes it as one argument and writes it back in place,
# and a row becomes a buffer of its own only when something outside a
# program reads it.

LAYERS = 5


class _Run:
    """A model, AdamW and a batch on a device, stepped like a training loop."""

    def __init__(self, device):
        self.device = device
        torch.manual_seed(0)
        self.model = Stack(LAYERS).to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-2)
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(6, 8, generator=g).to(device)
        self.y = torch.randint(0, 3, (6,), generator=g).to(device)

    def step(self, n=1):
        for _ in range(n):
            self.opt.zero_grad()
            nn.functional.cross_entropy(self.model(self.x), self.y).backward()
            self.opt.step()
            if self.device != "cpu":
                ltorch.mark_step()
        return self

    def values(self):
        ps = list(self.model.parameters())
        return [p.detach().cpu().numpy() for p in ps] + [p.grad.detach().cpu().numpy() for p in ps]


def _close(got, want):
    # AdamW's normalised steps carry float32 rounding of the gradients into
    # the parameters: the unrolled lazy step differs from eager by up to
    # 3e-6 after 5 steps here (and the rolled one from it by nothing)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def _row(t):
    """The (stack, row) a tensor's value is, or None."""
    return t.detach().__lazycore_value__()._value.node.row


def test_a_rolled_step_keeps_the_layers_stacked_and_takes_them_back_whole(clean_runtime, dev):
    with override(roll_loops=True), capture(fresh_cache=True) as cap:
        run = _Run(dev).step(3)
        counters = metrics.counters()
        _stacking_counted(roll=True)  # test_counters_say_what_stacking_cost's rolled run: these 3 steps
        _stacking_reported()  # (a report between steps changes nothing the steps then compile or run)
        run.step(2)  # steady steps: the stacks go from one program to the next
        assert metrics.counters()["compiles"] == counters["compiles"] == 2
        assert metrics.counters()["stack_compiles"] == counters["stack_compiles"]
        assert metrics.counters()["executions"] == counters["executions"] + 2
        assert metrics.counters()["stack_executions"] == counters["stack_executions"]  # none stacks or slices rows
    assert all(_row(p) is not None for blk in run.model.blocks for p in blk.parameters())
    programs = [g for g in cap.text("stablehlo").split("// ----- graph") if "func.func" in g]
    step = [g for g in programs if g.count("stablehlo.while") >= 3][-1]  # the steady step's
    at = step.index("func.func")
    signature = step[at:step.index("\n", at)]
    # the layers' fc weights come in as stacks (one argument for a run of
    # layers, not one per layer), donated to the stack of their new values
    assert re.search(r"tensor<[2-5]x16x8xf32> \{tf.aliasing_output", signature)
    # 32 parameter tensors, each with its moments and step counter: 128 values
    assert signature.count("%arg") < 64
    _close(run.values(), _Run("cpu").step(5).values())


def test_reading_a_row_or_an_eval_step_between_steps_gives_eager_values(clean_runtime, dev):
    with override(roll_loops=True), capture(fresh_cache=True):
        run, want = _Run(dev).step(2), _Run("cpu").step(2)
        w = run.model.blocks[2].fc.weight
        assert _row(w) is not None
        # a read outside any program: the row as a buffer of its own
        _close([w.detach().cpu().numpy()], [want.model.blocks[2].fc.weight.detach().numpy()])
        with torch.no_grad():  # a program of its own that reads the stacks
            _close([run.model(run.x).cpu().numpy()], [want.model(want.x).numpy()])
        run.step(2)
        want.step(2)
    _close(run.values(), want.values())


def test_a_stacked_program_is_loaded_from_disk_with_its_plan(clean_runtime, dev, tmp_path):
    want = _Run("cpu").step(3).values()
    with override(roll_loops=True, cache_dir=str(tmp_path)):
        lazycore.cache.clear()
        _close(_Run(dev).step(3).values(), want)
        assert metrics.counters()["disk_cache_writes"] >= 2
        plans = [diskcache.unpack_entry(e.read_bytes(), bytes.fromhex(e.stem))[3] for e in tmp_path.glob("*.lcx")]
        assert any(arguments is not None and rows is not None and not keeps for arguments, rows, keeps in plans)
        lazycore.cache.clear()  # the in-memory cache only: the programs come back from disk
        metrics.reset()
        _close(_Run(dev).step(3).values(), want)
        assert metrics.counters()["compiles"] == 0
        assert metrics.counters()["disk_cache_hits"] >= 2


def _stacking_counted(roll):
    """After 3 steps of a fresh :class:`_Run` (counters zeroed before): the
    first step's uploaded weights and the second's new step counters are
    stacked by programs of their own, counted apart from the user's graphs."""
    assert (metrics.counters()["stack_compiles"] > 0) == roll
    assert (metrics.counters()["stack_executions"] > 0) == roll
    assert metrics.counters()["executions"] == 3
    assert len(metrics.graph_sizes()) == 3  # the steps' graphs only


def _stacking_reported():
    assert "stack_compiles" in metrics.report()
    assert "stack_executions" in metrics.report()


def test_counters_say_what_stacking_cost(clean_runtime, dev):
    # unrolled: no stacking counted; the rolled run's counts are checked in
    # test_a_rolled_step_keeps_the_layers_stacked_and_takes_them_back_whole,
    # whose first 3 steps are the same run
    with override(roll_loops=False), capture(fresh_cache=True):
        _Run(dev).step(3)
    _stacking_counted(roll=False)
    _stacking_reported()


def _captured(device, captured=True):
    """Five calls of a training step of :class:`_Run`'s model, captured;
    (the run, the step, the losses, each call's barrier's (nodes, outputs, parameters))."""
    r = _Run(device)

    def step(x, y):
        r.opt.zero_grad()
        loss = nn.functional.cross_entropy(r.model(x), y)
        loss.backward()
        r.opt.step()
        return loss

    fn = ltorch.capture(step) if captured else step
    losses, sizes = [], []
    for _ in range(5):
        losses.append(fn(r.x, r.y).detach())
        if device != "cpu":
            ltorch.mark_step()
            sizes.append(metrics.graph_sizes()[-1])
    return r, fn, [float(v.cpu()) for v in losses], sizes


def test_a_captured_step_whose_layers_roll_replays_one_call_node_whose_program_rolls_them(clean_runtime, rolling_on, dev):
    """A captured step's replay is one call node, whose body hides its
    layers from a walk: the compiler looks for them with the body in place,
    so the replays stay one node and their program rolls the layers (as a
    trace of the step's would); on a mesh, whose programs do not roll, the
    call node stays too (below)."""
    want, _, want_losses, _ = _captured("cpu", False)
    with capture(fresh_cache=True) as cap:
        got, fn, losses, sizes = _captured(dev)
    assert fn.replays == 3
    _close(got.values(), want.values())
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    step = max(cap.graphs, key=lambda g: len(g.stablehlo))  # the first step's, which the replays share
    assert step.stablehlo.count("stablehlo.while") >= 3 and step.text("lowered").count("lazy.tanh") == 1
    assert all(nodes <= 1 + params for nodes, _, params in sizes[2:]), sizes  # one call node and its inputs


def _captured_on_a_mesh():
    mesh = lazycore.Mesh((2,), ("data",), devices=["cpu:0", "cpu:1"])
    want, _, want_losses, _ = _captured("cpu", False)
    got, fn, losses, sizes = _captured(ltorch.device(mesh))
    assert fn.replays == 3
    _close(got.values(), want.values())
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    assert all(nodes <= 1 + params for nodes, _, params in sizes[2:]), sizes  # one call node and its inputs


def test_a_captured_step_on_a_mesh_keeps_its_call_node():
    run_isolated(__file__, "_captured_on_a_mesh", env=FOUR_DEVICES)
