"""Rolled layers read over different windows (lazycore.runtime.rolling.groups).

Which copies a chain of identical layers verifies differs at its ends: a
stem with a layer's shapes joins the optimizer's per-layer updates but not
the forward, and the backward's last copy reads the stem's gradient. The
chains then read one set of layers over overlapping windows. A program took
a stack per window and returned the new values as one of them, so every
later step stacked the others again by a program of its own (a stack
compile at step 3 and two programs a step; torchvision's shufflenet_v2_x0_5
and regnet_y_400mf). The windows are now one stack, their union."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

import lazycore.torch as ltorch
from _bits import BY_HAND  # (tests/ is on the path)
from lazycore.ir.config import override
from lazycore.observe import metrics
from lazycore.observe.testing import capture
from lazycore.runtime import rolling

WARMUP = 2
"""Steps that may compile: the first traces the model, the second the
optimizer once its state exists."""


def _plan(windows):
    """``rolling.groups`` of chains reading ``windows`` (lists of leaf numbers) stacked, in order."""
    leaves = [SimpleNamespace() for _ in range(1 + max(i for w in windows for i in w))]
    chains = [SimpleNamespace(last_position=p, stacked=[[(leaves[i], 0) for i in w]]) for p, w in enumerate(windows)]
    return rolling.groups(SimpleNamespace(data=leaves), chains)


def test_windows_of_one_set_of_layers_are_one_stack():
    # the forward over layers 2-6, the backward over 6-1, the updates over 0-5
    assert _plan([[2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1], [0, 1, 2, 3, 4, 5]]) == [(0, 1, 2, 3, 4, 5, 6)]
    # a window of a run, either way, is read from it
    assert _plan([[0, 1, 2, 3], [2, 1], [1, 2, 3]]) == [(0, 1, 2, 3)]
    # a read that holds a run takes its place, in the run's direction
    assert _plan([[2, 3], [0, 1, 2, 3, 4]]) == [(0, 1, 2, 3, 4)]
    assert _plan([[3, 2], [0, 1, 2, 3, 4]]) == [(4, 3, 2, 1, 0)]
    # a run that grows until it reaches another one takes it in
    assert _plan([[0, 1, 2], [5, 6, 7], [2, 3, 4, 5]]) == [(0, 1, 2, 3, 4, 5, 6, 7)]


def test_reads_that_are_no_window_of_a_run_stay_stacks_of_their_own():
    assert _plan([[0, 1, 2], [3, 4, 5]]) == [(0, 1, 2), (3, 4, 5)]
    assert _plan([[0, 1, 2], [0, 2, 3]]) == [(0, 1, 2), (0, 2, 3)]  # overlapping out of order
    assert _plan([[0, 1, 2], [0, 1, 0]]) == [(0, 1, 2), (0, 1, 0)]  # a layer read twice


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, h):
        return h + torch.tanh(self.fc(h))


class Net(nn.Module):
    """Identical blocks after a stem with a block's shapes (as a ShuffleNet
    stage's stride-2 block has its stride-1 blocks' weights)."""

    def __init__(self, layers=4, width=8):
        super().__init__()
        self.stem = nn.Linear(width, width)
        self.blocks = nn.Sequential(*[Block(width) for _ in range(layers)])
        self.head = nn.Linear(width, 3)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


def _sgd(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def _adamw(params):
    return torch.optim.AdamW(params, lr=1e-2)


def _train(device, make_opt, steps=5):
    """Per step (compiles, programs run), rolling's own included; and the parameters."""
    torch.manual_seed(0)
    model = Net().to(device)
    opt = make_opt(model.parameters())
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(6, 8, generator=g).to(device), torch.randint(0, 3, (6,), generator=g).to(device)
    counts = []

    def count():
        c = metrics.counters()
        return (c.get("compiles", 0) + c.get("stack_compiles", 0),
                c.get("executions", 0) + c.get("stack_executions", 0))

    for _ in range(steps):
        before = count()
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if device != "cpu":
            ltorch.mark_step()
        after = count()
        counts.append((after[0] - before[0], after[1] - before[1]))
    return counts, [p.detach().cpu().numpy() for p in model.parameters()]


# CI (sgd): [adamw] takes the same path (its moments and counters stacked beside the layers)
@pytest.mark.parametrize("make_opt", [pytest.param(_sgd, marks=BY_HAND), _adamw], ids=["sgd", "adamw"])
def test_layers_read_over_different_windows_cost_no_program_or_compile_after_warm_up(clean_runtime, dev,
                                                                                     make_opt):
    _, want = _train("cpu", make_opt)
    with override(roll_loops=True), capture(fresh_cache=True) as cap:
        counts, got = _train(dev, make_opt)
    assert counts[WARMUP:] == [(0, 1)] * (len(counts) - WARMUP), counts
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    # still rolled: the steady step's forward, backward and updates are loops,
    # the blocks' tanh one op in a loop's body
    step = max(cap.graphs, key=lambda g: len(g.stablehlo))
    assert step.stablehlo.count("stablehlo.while") >= 3
    assert step.text("lowered").count("lazy.tanh") == 1


def test_rows_a_program_takes_on_their_own_are_sliced_by_one_program(clean_runtime):
    """A step's stacks read outside the next step's loops (a first step's,
    whose optimizer had no state yet, chained other windows): its rows are
    sliced out by one program, not one a row."""
    import lazycore
    import lazycore.numpy as lnp
    from lazycore.dialect.types import TensorType
    from lazycore.ir.graph import Data
    from lazycore.runtime import stacks
    from lazycore.runtime.device import default_device

    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = lnp.asarray(values)
    lazycore.mark_step()
    device = default_device()
    stack = stacks.Stack(x.__lazycore_value__()._value.node.buffer, TensorType((3, 4), "f32"), device)
    rows = [Data(None, TensorType((4,), "f32"), True, row=(stack, r)) for r in (2, 0)]
    metrics.reset()
    args, keep = stacks.arguments((0, 1), rows, set(), device)
    assert metrics.counters()["stack_executions"] == 1
    assert not keep
    np.testing.assert_array_equal(np.asarray(args[0]), values[2])
    np.testing.assert_array_equal(np.asarray(args[1]), values[0])
    assert [r.row[1] for r in rows] == [2, 0]  # still rows: a later stacked program takes them whole
