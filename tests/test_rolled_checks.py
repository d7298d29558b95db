"""Value checks inside rolled layers (issue 41, item 2: what index checks cost).

A run of identical layers that each index with values held on the device
still rolls into one loop with the checks on: the loop writes each copy's
flags into one i1 array the program returns whole (one result for all its
checks), and a failing copy still fails with eager's exception type, the
user's line and the offending index of that copy, as unrolled.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from lazycore import BarrierError
from lazycore.ir.config import override
from lazycore.ir.walk import Walk
from lazycore.observe import metrics
from lazycore.observe.testing import capture
from lazycore.runtime import checks, compiler

# stacks of a few layers: rolled from MIN_COPIES, whatever the platform default
pytestmark = pytest.mark.usefixtures("rolling_on")

LAYERS, ROWS, WIDTH = 4, 5, 8


def _weights(rng):
    Ws = [torch.tensor(rng.standard_normal((WIDTH, WIDTH)).astype(np.float32) * 0.3) for _ in range(LAYERS)]
    tables = [torch.tensor(rng.standard_normal((ROWS, WIDTH)).astype(np.float32)) for _ in range(LAYERS)]
    x = torch.tensor(rng.standard_normal((3, WIDTH)).astype(np.float32))
    return x, Ws, tables


def _layers(x, Ws, tables, idx):
    h = x
    for W, t, i in zip(Ws, tables, idx):
        h = h + torch.tanh(h @ W) + t[i]  # the indexing line
    return h


_LINE = "h = h + torch.tanh(h @ W) + t[i]"


def _on(dev, x, Ws, tables, idx):
    return (x.to(dev), [w.to(dev) for w in Ws], [t.to(dev) for t in tables],
            [torch.tensor(i, device=dev) for i in idx])


def _eager_error(x, Ws, tables, idx):
    with pytest.raises(IndexError) as info:
        _layers(x, Ws, tables, [torch.tensor(i) for i in idx])
    return str(info.value)


def test_layers_that_index_roll_with_the_checks_on_and_return_one_flag_array(clean_runtime, rng):
    dev = ltorch.device()
    x, Ws, tables = _weights(rng)
    idx = [[0, 4, 2], [1, 1, 3], [4, 0, 0], [2, 3, 4]]
    want = _layers(x, Ws, tables, [torch.tensor(i) for i in idx])
    with override(index_checks=True), capture() as cap:
        got = _layers(*_on(dev, x, Ws, tables, idx)).cpu()
    torch.testing.assert_close(got, want)
    rolled = [g for g in cap.graphs if "stablehlo.while" in g.stablehlo]
    assert len(rolled) == 1
    text = rolled[0].stablehlo
    assert text.count("stablehlo.while") == 1
    assert rolled[0].text("lowered").count("lazy.tanh") == 1  # the layer once, its check in it
    # the four copies' flags: one (copies, checks) array, the program's one flag result
    returned = [line for line in text.splitlines() if "return" in line and "stablehlo.return" not in line]
    assert len(returned) == 1 and returned[0].count(f"tensor<{LAYERS}x1xi1>") == 1, returned
    assert metrics.counters()["compiles"] == 1


@pytest.mark.parametrize("bad_layers", [(2,), (0,), (3,), (1, 3)])
def test_a_failing_copy_fails_with_eagers_type_line_and_its_own_index(clean_runtime, rng, bad_layers):
    dev = ltorch.device()
    x, Ws, tables = _weights(rng)
    idx = [[0, 4, 2], [1, 1, 3], [4, 0, 0], [2, 3, 4]]
    for n, layer in enumerate(bad_layers):
        idx[layer] = [1, 7 + 2 * n + layer, 0]  # each failing copy its own offending index
    eager = _eager_error(x, Ws, tables, idx)  # the first failing layer's, as eager raises there
    assert re.search(r"index \d+ is out of bounds", eager)
    with override(index_checks=True), capture() as cap:
        r = _layers(*_on(dev, x, Ws, tables, idx))
        beside = (torch.arange(3, device=dev) * 2).sum()  # pending beside it: unaffected
        with pytest.raises(IndexError) as info:
            r.cpu()
    assert "stablehlo.while" in cap.text("stablehlo")
    assert isinstance(info.value, BarrierError)
    message = str(info.value)
    assert eager in message, (eager, message)
    assert "test_rolled_checks.py" in message
    assert beside.item() == 6


def test_the_unrolled_program_fails_the_same_way(clean_runtime, rng):
    dev = ltorch.device()
    x, Ws, tables = _weights(rng)
    idx = [[0, 4, 2], [1, 1, 3], [4, 9, 0], [2, 3, 4]]
    messages = []
    for roll in (True, False):
        with override(index_checks=True, roll_loops=roll), capture() as cap:
            r = _layers(*_on(dev, x, Ws, tables, idx))
            with pytest.raises(IndexError) as info:
                r.cpu()
        assert ("stablehlo.while" in cap.text("stablehlo")) == roll
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert _eager_error(x, Ws, tables, idx) in messages[0]


def test_a_module_built_for_inspection_returns_one_flag_per_check(clean_runtime, rng):
    # (an exported program's results name each check: build_module keeps a flag per copy)
    dev = ltorch.device()
    x, Ws, tables = _weights(rng)
    idx = [[0, 4, 2], [1, 1, 3], [4, 0, 0], [2, 3, 4]]
    with override(index_checks=True):
        r = _layers(*_on(dev, x, Ws, tables, idx))
        walk = Walk([r.__lazycore_value__()._value])
        assert len(checks.nodes(walk)) == LAYERS
        module = compiler.build_module(walk)
        with module.context:
            text = module.operation.get_asm()
    assert "stablehlo.while" in text
    ret = [line for line in text.splitlines() if "return" in line and "stablehlo.return" not in line]
    assert len(ret) == 1 and ret[0].count("tensor<i1>") == LAYERS, ret
    lazycore.mark_step(wait=True)


def test_a_captured_step_of_indexing_layers_rolls_and_fails_with_eagers_type_and_line(clean_runtime, rng):
    # (its replay is one call node: the loop is rolled from its body put in place, lazycore.runtime.rolling)
    dev = ltorch.device()
    x, Ws, tables = _weights(rng)
    idx = [[0, 4, 2], [1, 1, 3], [4, 0, 0], [2, 3, 4]]
    want = _layers(x, Ws, tables, [torch.tensor(i) for i in idx])
    step = ltorch.capture(lambda x, Ws, ts, idx: _layers(x, Ws, ts, idx))
    with override(index_checks=True):
        for _ in range(4):
            with capture() as cap:
                got = step(*_on(dev, x, Ws, tables, idx)).cpu()
            torch.testing.assert_close(got, want)
            assert "stablehlo.while" in cap.text("stablehlo")
        idx[2] = [1, 9, 0]
        eager = _eager_error(x, Ws, tables, idx)
        with pytest.raises(IndexError) as info:
            step(*_on(dev, x, Ws, tables, idx)).cpu()
    assert isinstance(info.value, BarrierError)
    assert "test_rolled_checks.py" in str(info.value)
    assert eager == "index 9 is out of bounds for dimension 0 with size 5"
    # (a captured step's flag is its call's: the text may go without the index)
    assert re.search(r"index( 9)? is out of bounds for dimension 0 with size 5", str(info.value))
