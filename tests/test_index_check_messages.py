"""The offending index in an index check's message (issue 41, item 2).

Eager names the index it found out of range (``index 7 is out of bounds for
dimension 0 with size 5``, NumPy's ``... for axis 0 ...``, ``Target 7 is out
of bounds.``). A lazy program computes only each check's flag; once a flag
is true, lazycore.runtime.checks.text runs the check's index and mask as a
program of their own and names the first offending entry in eager's words.
Every op of tests/test_index_checks.py whose eager message names the value
is checked here against eager's own text; the rest keep eager's text as it is.
"""

from __future__ import annotations

import re

import numpy
import pytest
import torch

import lazycore
import lazycore.numpy as lnp
from lazycore.ir import memo
from lazycore.ir.walk import Walk
from lazycore.runtime import checks, standalone
from test_index_checks import NUMPY, TORCH

DEV = lazycore.torch.device()
NAMED = re.compile(r"-?\d+ (is out of bounds|on a tensor)")


def _handle(result):
    return result.__lazycore_value__() if hasattr(result, "__lazycore_value__") else result


def _texts(result) -> list[str]:
    h = _handle(result)
    walk = Walk([h._value])
    run = lambda values: standalone.run_alone(h.device, values)  # noqa: E731
    return [checks.text(node, run) for node in checks.nodes(walk)]


def _eager_message(fn, lib, bad) -> str:
    with pytest.raises(Exception) as info:
        fn(lib, bad)
    return str(info.value)


@pytest.mark.parametrize("name", sorted(TORCH))
def test_torch_messages_name_the_offending_index_as_eager_does(name):
    fn, bad, _, _, _ = TORCH[name]
    eager = _eager_message(fn, "cpu", bad)
    texts = _texts(fn(DEV, bad))
    lazycore.mark_step(wait=True)
    if NAMED.search(eager):
        assert any(t.endswith(eager) for t in texts), (eager, texts)
    else:  # (eager names no index: its text as it is)
        assert not any(NAMED.search(t) for t in texts), texts


@pytest.mark.parametrize("name", sorted(NUMPY))
def test_numpy_messages_name_the_offending_index_as_numpy_does(name):
    fn, bad, _, _, _ = NUMPY[name]
    eager = _eager_message(fn, numpy, bad)
    assert NAMED.search(eager)
    texts = _texts(fn(lnp, bad))
    lazycore.mark_step(wait=True)
    assert any(t.endswith(eager) for t in texts), (eager, texts)


def test_the_first_offending_index_is_named_and_negative_ones_too():
    x = torch.arange(5.0, device=DEV)
    r = x[torch.tensor([1, -9, 7, 6], device=DEV)]
    assert _texts(r) == ["index -9 is out of bounds for dimension 0 with size 5"]
    with pytest.raises(IndexError):
        r.tolist()


def test_searchsorted_results_used_as_indices_name_the_index():
    x = torch.arange(5.0, device=DEV)
    r = x[torch.searchsorted(x, torch.tensor([9.0], device=DEV))]
    eager = _eager_message(lambda d, _: torch.arange(5.0)[torch.searchsorted(torch.arange(5.0), torch.tensor([9.0]))],
                           "cpu", None)
    assert _texts(r) == [eager] == ["index 5 is out of bounds for dimension 0 with size 5"]
    with pytest.raises(IndexError):
        r.tolist()


def test_without_a_runner_the_message_leaves_the_index_out():
    r = torch.arange(5.0, device=DEV)[torch.tensor([7], device=DEV)]
    (node,) = checks.nodes(Walk([_handle(r)._value]))
    assert checks.text(node) == "index is out of bounds for dimension 0 with size 5"
    assert checks.text(node, lambda values: 1 / 0) == "index is out of bounds for dimension 0 with size 5"


def test_a_call_bodys_check_cache_is_a_registered_memo_that_clear_empties():
    import lazycore.torch as ltorch

    table = torch.arange(6.0, device=DEV)

    @ltorch.capture
    def step(i):
        return table[i] * 2

    for k in range(4):
        step(torch.tensor([k], device=DEV)).tolist()
    assert step.replays > 0
    assert memo.sizes()["runtime.check_calls"][0] > 0
    assert memo.MEMOS["runtime.check_calls"].limit == 1024
    lazycore.cache.clear()
    assert memo.sizes()["runtime.check_calls"][0] == 0


def test_an_index_checks_flag_is_its_masks_float_sum_returned_as_it_is():
    """XLA's CPU backend reduces floats in one kernel and booleans in a tree of
    them: the mask is reduced as f32, and the program returns the sum itself
    (the flag ``m != 0`` costs no kernel of its own; a sum so that on a mesh its
    all-reduce joins the gradients': tests/test_index_check_collectives.py)."""
    r = torch.arange(5.0, device=DEV)[torch.tensor([1, 2], device=DEV)]
    walk = Walk([_handle(r)._value])
    (node,) = checks.nodes(walk)
    (out,) = checks.flag_values(walk)
    assert node.operands[1][0].op == "compare"
    assert out[0].op == "reduce_sum" and out[0].types[out[1]].dtype == "f32"
    assert r.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("m, fails", [(0, False), (-2, True), (3, True)])
def test_a_flag_tested_against_zero_is_returned_untested_and_still_decides(m, fails):
    import numpy as np

    x = lazycore.from_numpy(np.arange(3, dtype=np.float32))
    s = lazycore.from_numpy(np.asarray(m, np.int32))
    zero = lazycore.apply("constant", value=np.zeros((), np.int32), device=s.device)
    y = lazycore.check(x, lazycore.apply("compare", s, zero, direction="NE"), "m is not zero", "ValueError")
    (out,) = checks.flag_values(Walk([y._value]))
    assert out[0] is s._value[0]  # the value tested, not the compare
    if fails:
        with pytest.raises(ValueError, match="m is not zero"):
            lazycore.to_numpy(y)
    else:
        assert lazycore.to_numpy(y).tolist() == [0.0, 1.0, 2.0]


def test_numpy_searchsorted_results_used_as_indices_name_the_index():
    a = numpy.arange(5.0)
    with pytest.raises(IndexError) as info:
        a[numpy.searchsorted(a, numpy.array([9.0, 1.0]))]
    la = lnp.asarray(a)
    r = la[lnp.searchsorted(la, lnp.asarray(numpy.array([9.0, 1.0])))]
    assert [t.split(": ", 1)[1] for t in _texts(r)] == [str(info.value)]
    with pytest.raises(IndexError):
        numpy.asarray(r)
