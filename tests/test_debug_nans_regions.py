"""NaN hunting looks inside loops, branches and captured steps (issue 43
item 4: "name the first op and the user's line, as jax_debug_nans does"):
before, the op named was the ``lazy.while``, ``lazy.case`` or ``lazy.call``
holding it, at the line of the ``fori_loop``/``cond``/captured call, and a
loop's body op was never named; now the region's bodies run again on its
operands (a loop one iteration at a time) and the op inside is named, with
the iteration or branch."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch
from markers import markers

HERE, line_of, at = markers(__file__)


@pytest.fixture(autouse=True)
def fresh():
    gc.collect()
    lazycore.mark_step(wait=True)
    yield
    gc.collect()
    lazycore.mark_step(wait=True)


def _body(i, v):
    root = lnp.sqrt(v)  # the loop body's sqrt
    return v - 1.0 + root * 0.0


def test_a_loop_bodys_op_is_named_with_its_iteration():
    start = lnp.asarray(np.array([2.0, 5.0], np.float32))
    with lazycore.config.debug_nans():
        out = lazycore.fori_loop(0, 5, _body, start)  # the loop
        with pytest.raises(FloatingPointError) as info:
            lazycore.mark_step()
    msg = str(info.value)
    # 2, 1, 0, -1: the sqrt of iteration 3 is the first NaN
    assert f"lazy.sqrt (recorded at {at('the loop body' + chr(39) + 's sqrt')})" in msg, msg
    assert f"in iteration 3 of lazy.while at {at('the loop')}" in msg, msg
    with np.errstate(invalid="ignore"):
        assert np.isnan(np.asarray(out)[0]) and np.asarray(out)[1] == 0.0


def test_a_finite_loop_still_passes():
    with lazycore.config.debug_nans():
        out = lazycore.fori_loop(0, 5, _body, lnp.asarray(np.array([9.0], np.float32)))
        lazycore.mark_step()
    assert np.asarray(out).tolist() == [4.0]


def test_a_branchs_op_is_named():
    x = lnp.asarray(np.array([-1.0, 4.0], np.float32))
    with lazycore.config.debug_nans():
        out = lazycore.cond(lnp.asarray(np.float32(1.0)) > 0,
                            lambda v: lnp.log(v),  # the taken branch's log
                            lambda v: v * 2.0, x)
        with pytest.raises(FloatingPointError) as info:
            lazycore.mark_step()
    msg = str(info.value)
    assert f"lazy.log (recorded at {at('the taken branch' + chr(39) + 's log')})" in msg, msg
    assert "in branch" in msg and "of lazy.case at" in msg, msg
    del out


def test_a_captured_steps_op_is_named():
    dev = ltorch.device()

    @ltorch.capture
    def step(a):
        b = a - 2.0
        return torch.log(b) * 3.0  # the captured step's log

    msgs = []
    with lazycore.config.debug_nans():
        for _ in range(3):  # traced, traced, replayed: the third is one lazy.call
            out = step(torch.ones(2).to(dev))
            try:
                ltorch.mark_step()
            except FloatingPointError as e:
                msgs.append(str(e))
    assert (step.traces, step.replays) == (2, 1), step.why
    assert len(msgs) == 3, msgs
    msg = msgs[-1]
    assert torch.isnan(out.cpu()).all()
    assert f"lazy.log (recorded at {at('the captured step' + chr(39) + 's log')})" in msg, msg
    assert "inside the captured step lazy.call at" in msg, msg


def test_a_failure_looking_inside_still_names_the_region(monkeypatch):
    from lazycore.observe import nans

    def broken(device, region):
        raise RuntimeError("looking inside failed")

    monkeypatch.setattr(nans, "_inside", broken)
    start = lnp.asarray(np.array([2.0, 5.0], np.float32))
    with lazycore.config.debug_nans():
        out = lazycore.fori_loop(0, 5, _body, start)  # the loop, named when looking inside fails
        with pytest.raises(FloatingPointError) as info:
            lazycore.mark_step()
    assert f"lazy.while (recorded at {at('the loop, named when looking inside fails')})" in str(info.value)
    del out
