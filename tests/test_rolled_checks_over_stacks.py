"""A rolled loop's index checks had once over its stacked copies (issue 41's cost).

A chain of identical layers that each index with their own values held on
the device (the copies' stacked inputs) checks those indices before the
loop, one reduction over all copies (per copy along the leading axis), not
a mask and a reduction per iteration in the body
(:mod:`lazycore.passes.rolled_flags`). An index a copy computes from what
the copy before carried is checked in the body, as before. Either way the
program's flags are one ``(copies, checks)`` array, and a failing copy fails
with eager's type, the user's line and its own offending index.
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
from lazycore.observe.testing import capture

from _bits import check_reductions

# stacks of a few layers: rolled from MIN_COPIES, whatever the platform default
pytestmark = pytest.mark.usefixtures("rolling_on")

LAYERS, ROWS, WIDTH, N = 4, 5, 8, 3


def _loop_bodies(text: str) -> list[str]:
    """The text of each ``stablehlo.while``'s body (``do { ... }``), in StableHLO
    or in the lazy module the lowering took (whose loops are ``stablehlo.while`` already)."""
    bodies = []
    for m in re.finditer(r"\} do \{\n", text):
        depth, at = 1, m.end()
        while depth:
            nxt = re.search(r"[{}]", text[at:])
            depth += 1 if nxt.group() == "{" else -1
            at += nxt.end()
        bodies.append(text[m.end():at])
    return bodies


def _check_reductions(text: str) -> list[tuple[str, str]]:
    """``(dims, shape)`` of each index check's reduction (a float sum of a mask)."""
    return check_reductions(text)


@pytest.fixture
def weights(rng):
    Ws = [torch.tensor(rng.standard_normal((WIDTH, WIDTH)).astype(np.float32) * 0.3) for _ in range(LAYERS)]
    table = torch.tensor(rng.standard_normal((ROWS, WIDTH)).astype(np.float32))
    x = torch.tensor(rng.standard_normal((N, WIDTH)).astype(np.float32))
    return x, Ws, table


def _own(x, Ws, table, idx):
    h = x
    for W, i in zip(Ws, idx):
        h = h + torch.tanh(h @ W) + table[i]
    return h


def _carried(x, Ws, table, j):
    h = x
    for W in Ws:
        j = j + 1  # each layer's index from the one before
        h = h + torch.tanh(h @ W) + table[j]
    return h


def _both(x, Ws, table, idx, j):
    h = x
    for W, i in zip(Ws, idx):
        j = j + 1
        h = h + torch.tanh(h @ W) + table[i] * table[j]
    return h


def _to(dev, *args):
    return [[a.to(dev) for a in x] if isinstance(x, list) else x.to(dev) for x in args]


def _idx(bad: dict | None = None):
    idx = [[0, 4, 2], [1, 1, 3], [4, 0, 0], [2, 3, 4]]
    for layer, value in (bad or {}).items():
        idx[layer] = [1, value, 0]
    return [torch.tensor(i) for i in idx]


def _lazy_error(fn, dev, *args):
    with override(index_checks=True), capture() as cap:
        r = fn(*_to(dev, *args))
        beside = (torch.arange(3, device=dev) * 2).sum()  # pending beside it: unaffected
        with pytest.raises(IndexError) as info:
            r.cpu()
    assert isinstance(info.value, BarrierError)
    assert "test_rolled_checks_over_stacks.py" in str(info.value)
    assert beside.item() == 6
    assert "stablehlo.while" in cap.text("stablehlo")
    return str(info.value)


def _eager_error(fn, *args):
    with pytest.raises(IndexError) as info:
        fn(*args)
    return str(info.value)


def test_each_copys_own_index_is_checked_before_the_loop_in_one_reduction(clean_runtime, weights):
    x, Ws, table = weights
    dev = ltorch.device()
    with override(index_checks=True), capture() as cap:
        got = _own(*_to(dev, x, Ws, table, _idx())).cpu()
    torch.testing.assert_close(got, _own(x, Ws, table, _idx()))
    text = cap.text("stablehlo", graph=0)
    bodies = _loop_bodies(text)
    assert len(bodies) == 1 and "lazy.tanh" in _loop_bodies(cap.text("lowered", graph=0))[0]
    assert _check_reductions(bodies[0]) == []  # no check in the body
    assert _check_reductions(text) == [("1", f"{LAYERS}x{N}")]  # one, per copy over the stack
    returned = [line for line in text.splitlines() if "return" in line and "stablehlo.return" not in line]
    assert len(returned) == 1 and returned[0].count(f"tensor<{LAYERS}x1xi1>") == 1, returned


@pytest.mark.parametrize("bad", [{2: 7}, {0: 9}, {3: -6}, {1: 8, 3: 5}])
def test_a_copy_checked_before_the_loop_fails_with_eagers_type_line_and_index(clean_runtime, weights, bad):
    x, Ws, table = weights
    eager = _eager_error(_own, x, Ws, table, _idx(bad))
    assert f"index {bad[min(bad)]} is out of bounds" in eager
    message = _lazy_error(_own, ltorch.device(), x, Ws, table, _idx(bad))
    assert eager in message, (eager, message)


def test_an_index_made_of_a_carried_value_is_checked_in_the_body(clean_runtime, weights):
    x, Ws, table = weights
    dev = ltorch.device()
    j = torch.tensor([0, 0, -5])
    with override(index_checks=True), capture() as cap:
        got = _carried(*_to(dev, x, Ws, table, j)).cpu()
    torch.testing.assert_close(got, _carried(x, Ws, table, j))
    bodies = _loop_bodies(cap.text("stablehlo", graph=0))
    assert len(bodies) == 1 and _check_reductions(bodies[0]) == [("0", f"{N}")]


@pytest.mark.parametrize("start", [ROWS - 3, ROWS - 1, -ROWS - 4])
def test_a_carried_index_out_of_range_fails_with_eagers_type_line_and_index(clean_runtime, weights, start):
    x, Ws, table = weights
    j = torch.tensor([0, start, 1])
    eager = _eager_error(_carried, x, Ws, table, j)
    message = _lazy_error(_carried, ltorch.device(), x, Ws, table, j)
    assert eager in message, (eager, message)


@pytest.mark.parametrize("bad,start", [(None, 0), ({2: 6}, 0), (None, ROWS - 3), ({3: 6}, ROWS - 3),
                                       ({1: 6}, ROWS - 3)])
def test_checks_before_the_loop_and_in_its_body_are_one_flag_array(clean_runtime, weights, bad, start):
    # copy c's own index and its carried one, one of them failing first (or both)
    x, Ws, table = weights
    dev = ltorch.device()
    idx, j = _idx(bad), torch.tensor([start, 0, -5])
    if bad is None and start == 0:
        with override(index_checks=True), capture() as cap:
            got = _both(*_to(dev, x, Ws, table, idx, j)).cpu()
        torch.testing.assert_close(got, _both(x, Ws, table, idx, j))
        text = cap.text("stablehlo", graph=0)
        bodies = _loop_bodies(text)
        assert len(bodies) == 1
        assert _check_reductions(bodies[0]) == [("0", f"{N}")]  # the carried index's
        assert ("1", f"{LAYERS}x{N}") in _check_reductions(text)  # the own indices', before the loop
        returned = [line for line in text.splitlines() if "return" in line and "stablehlo.return" not in line]
        assert len(returned) == 1 and returned[0].count(f"tensor<{LAYERS}x2xi1>") == 1, returned
        return
    eager = _eager_error(_both, x, Ws, table, idx, j)
    message = _lazy_error(_both, dev, x, Ws, table, idx, j)
    assert eager in message, (eager, message)


def _reversed_rows(x, Ws, table, j):
    # one chain makes an index per copy, the next reads them last first: its
    # copies' indices are the rows of the first loop's stack, backwards
    ids = []
    for _ in range(LAYERS):
        j = (j * 3 + 1) % (ROWS + 2)
        j = (j + 2) % (ROWS + 2)
        ids.append(j)
    h = x
    for c in range(LAYERS):
        h = h + torch.tanh(h @ Ws[c]) + table[ids[LAYERS - 1 - c]]
    return h


@pytest.mark.parametrize("j0,bad", [([2, 2, 2], None), ([0, 0, 0], 5), ([5, 5, 5], 6), ([1, 0, 2], 5)])
def test_indices_read_backwards_from_another_loops_stack_are_checked_in_copy_order(clean_runtime, weights, j0, bad):
    # (bad: the first offending index in the reading order, eager's)
    x, Ws, table = weights
    dev = ltorch.device()
    j = torch.tensor(j0)
    with override(index_checks=True), capture() as cap:
        r = _reversed_rows(*_to(dev, x, Ws, table, j))
        if bad is None:
            torch.testing.assert_close(r.cpu(), _reversed_rows(x, Ws, table, j))
        else:
            eager = _eager_error(_reversed_rows, x, Ws, table, j)
            assert f"index {bad} is out of bounds" in eager
            with pytest.raises(IndexError) as info:
                r.cpu()
            assert isinstance(info.value, BarrierError)
            assert eager in str(info.value), (eager, str(info.value))
            assert "test_rolled_checks_over_stacks.py" in str(info.value)
    text = cap.text("stablehlo", graph=0)
    assert "stablehlo.reverse" in text  # (the rows, in the reading chain's copy order)
    bodies, lowered = _loop_bodies(text), _loop_bodies(cap.text("lowered", graph=0))
    assert len(bodies) == len(lowered)  # the same loops, in the same order
    reading = [b for b, lb in zip(bodies, lowered) if "lazy.tanh" in lb]
    assert len(reading) == 1 and _check_reductions(reading[0]) == []


def test_the_flags_stay_one_per_check_for_inspection(clean_runtime, weights):
    # (an exported program's results name each check: build_module keeps a flag per copy)
    from lazycore.ir.walk import Walk
    from lazycore.runtime import checks, compiler

    x, Ws, table = weights
    with override(index_checks=True):
        r = _both(*_to(ltorch.device(), x, Ws, table, _idx(), torch.tensor([0, 1, 2])))
        walk = Walk([r.__lazycore_value__()._value])
        assert len(checks.nodes(walk)) == 2 * LAYERS
        module = compiler.build_module(walk)
        with module.context:
            text = module.operation.get_asm()
    assert "stablehlo.while" in text
    ret = [line for line in text.splitlines() if "return" in line and "stablehlo.return" not in line]
    assert len(ret) == 1 and ret[0].count("tensor<i1>") == 2 * LAYERS, ret
    lazycore.mark_step(wait=True)
