"""NaN/Inf hunting (lazycore.observe.nans): LAZYCORE_DEBUG_NANS /
lazycore.config.debug_nans() names the op that first made a NaN or infinity
in a barrier's results, and the user's line that recorded it."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.runtime import barrier
from markers import markers

HERE, line_of, at = markers(__file__)


@pytest.fixture(autouse=True)
def fresh():
    gc.collect()
    lazycore.mark_step(wait=True)
    yield
    gc.collect()
    lazycore.mark_step(wait=True)


class Block(nn.Module):
    def __init__(self, bad: str):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.bad = bad

    def forward(self, x):
        h = torch.tanh(self.lin(x))
        if self.bad == "log":
            h = torch.log(h - 2.0)  # log of a negative
        elif self.bad == "div":
            z = h * 0.0
            h = h + z / z  # zero by zero
        return h * 2


def _model(bad):
    torch.manual_seed(0)
    return nn.Sequential(Block("none"), Block(bad), Block("none"), nn.Linear(4, 1))


@pytest.mark.parametrize("bad,op,marker", [("log", "lazy.log", "log of a negative"),
                                           ("div", "lazy.div", "zero by zero")])
def test_torch_names_the_op_and_the_models_line(bad, op, marker):
    dev = ltorch.device()
    model = _model(bad).to(dev)
    x = torch.randn(5, 4).to(dev)
    with lazycore.config.debug_nans():
        loss = model(x).sum()
        with pytest.raises(FloatingPointError) as info:
            ltorch.mark_step()
    msg = str(info.value)
    assert f"{op} (recorded at" in msg and "produced a NaN from finite operands" in msg
    assert at(marker) in msg
    # eager agrees there is a NaN; the values are what the program computed
    eager = _model(bad)(x.cpu()).sum()
    assert torch.isnan(eager) and torch.isnan(loss.cpu())


def test_torch_backward_step_through_a_read():
    dev = ltorch.device()
    model = _model("log").to(dev)
    x = torch.randn(5, 4).to(dev)
    with lazycore.config.debug_nans():
        loss = model(x).sum()
        loss.backward()
        with pytest.raises(FloatingPointError, match="lazy.log") as info:
            model[3].weight.grad.cpu()  # a read's barrier
    assert at("log of a negative") in str(info.value)


def test_numpy():
    a = lnp.asarray(np.array([1.0, 4.0, 9.0], np.float32))
    with lazycore.config.debug_nans():
        b = lnp.sqrt(a - 5.0)  # numpy sqrt of a negative
        c = b * 3.0 + 1.0
        with pytest.raises(FloatingPointError, match="lazy.sqrt") as info:
            lazycore.mark_step()
    assert at("numpy sqrt of a negative") in str(info.value)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(np.isnan(np.asarray(c)), np.isnan(np.sqrt(np.array([1.0, 4, 9]) - 5)))


def test_nan_from_an_input_is_not_blamed_on_an_op():
    a = lnp.asarray(np.array([1.0, np.nan, 3.0], np.float32))
    b = lnp.asarray(np.array([0.0, -1.0, 1.0], np.float32))
    with lazycore.config.debug_nans():
        c = lnp.exp(a) * 2.0 + lnp.sqrt(b)  # input used here
        with pytest.raises(FloatingPointError) as info:
            lazycore.mark_step()
    msg = str(info.value)
    # the sqrt of -1 made a NaN of its own: the op is named, not the input
    assert "lazy.sqrt" in msg and at("input used here") in msg
    d = lnp.asarray(np.array([1.0, np.nan], np.float32))
    with lazycore.config.debug_nans():
        e = lnp.exp(d) + 1.0  # only the input's NaN
        with pytest.raises(FloatingPointError, match="a NaN came in from an input") as info:
            lazycore.mark_step()
    assert "lazy.exp" in str(info.value) and at("only the input's NaN") in str(info.value)
    del c, e


def test_a_nan_removed_again_raises_nothing_and_finite_steps_pass():
    a = lnp.asarray(np.array([-1.0, 4.0], np.float32))
    with lazycore.config.debug_nans():
        s = lnp.sqrt(a)
        clean = lnp.where(lnp.isnan(s), 0.0, s)
        del s
        lazycore.mark_step()
        np.testing.assert_array_equal(np.asarray(clean), [0.0, 2.0])
        ok = lnp.asarray(np.ones(3, np.float32)) * 2
        lazycore.mark_step()
        np.testing.assert_array_equal(np.asarray(ok), [2.0, 2.0, 2.0])


def test_an_infinity_is_named_as_one():
    a = lnp.asarray(np.array([1.0, 0.0], np.float32))
    with lazycore.config.debug_nans():
        b = 1.0 / a  # one by zero
        c = lnp.minimum(b, 5.0) - 1.0
        with pytest.raises(FloatingPointError, match="produced an infinity from finite operands") as info:
            lazycore.mark_step()
    assert "lazy.div" in str(info.value) and at("one by zero") in str(info.value)
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(np.asarray(b), 1.0 / np.array([1.0, 0.0], np.float32))
    del c


def test_off_by_default_and_swapped_back():
    plain = barrier.sync
    assert not lazycore.config.settings.debug_nans
    assert plain.__module__ == "lazycore.runtime.barrier"
    a = lnp.asarray(np.array([-1.0], np.float32))
    b = lnp.log(a)
    lazycore.mark_step()  # no check: no error
    with np.errstate(invalid="ignore"):
        assert np.isnan(np.asarray(b)).all()
    with lazycore.config.debug_nans():
        assert barrier.sync is not plain
    assert barrier.sync is plain


def test_environment_variable():
    code = (
        "import numpy as np, lazycore, lazycore.numpy as lnp\n"
        "x = lnp.asarray(np.array([0.0], np.float32))\n"
        "y = x / x\n"
        "try:\n"
        "    lazycore.mark_step()\n"
        "except FloatingPointError as e:\n"
        "    print('RAISED', e)\n"
    )
    env = dict(os.environ, LAZYCORE_DEBUG_NANS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert "RAISED" in out.stdout and "lazy.div" in out.stdout and "<string>:3" in out.stdout, out.stderr
