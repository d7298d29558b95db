"""Rolling's default per platform (issue 43 item 10): with
``settings.roll_loops`` at ``"auto"`` (its default) the platform's entry in
``lazycore.runtime.rolling.DEFAULTS`` decides from how many identical layers
a device's programs roll a run of them (None: never; the CPU's entry is set
by benchmark 11's sweep); ``LAZYCORE_ROLL_LOOPS=0``/``1`` (or
``override(roll_loops=False/True)``) forces it off, or on from
``MIN_COPIES`` layers, on every platform; the compile key holds the
decision, not the setting."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import lazycore.numpy as lnp
from lazycore.ir.config import configure, override, settings
from lazycore.observe.testing import capture
from lazycore.runtime import programs, rolling
from lazycore.runtime.device import Device, default_device


def _layers(rng, layers=4, width=8):
    x = lnp.asarray(rng.standard_normal((4, width)).astype(np.float32))
    Ws = [lnp.asarray(rng.standard_normal((width, width)).astype(np.float32) * 0.3) for _ in range(layers)]
    h = x
    for W in Ws:
        h = h + np.tanh(h @ W)
    return h


def _loops(rng) -> int:
    with capture() as cap:
        np.asarray(_layers(rng))
    return cap.text("stablehlo").count("stablehlo.while")


@pytest.fixture
def table(monkeypatch):
    """``rolling.DEFAULTS``, changed by the test and put back after."""
    monkeypatch.setattr(rolling, "DEFAULTS", dict(rolling.DEFAULTS))
    return rolling.DEFAULTS


def test_the_default_is_auto_and_every_platform_has_an_entry():
    env = {k: v for k, v in os.environ.items() if k != "LAZYCORE_ROLL_LOOPS"}
    code = "from lazycore.ir.config import settings; print(settings.roll_loops)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert out.split() == ["auto"]
    assert set(rolling.DEFAULTS) >= {"cpu", "gpu", "tpu"}
    assert all(v is None or (type(v) is int and v >= rolling.MIN_COPIES) for v in rolling.DEFAULTS.values())


def test_the_cpu_rolls_only_long_runs_by_default():
    # benchmark 11's quiet sweep: on this CPU rolling pays over 1000 steps
    # from 16 layers of a GPT training step, not at 4, 8 or 12
    assert rolling.DEFAULTS["cpu"] == 16


@pytest.mark.parametrize("platform", ["cpu", "gpu", "tpu"])
@pytest.mark.parametrize("entry", [3, 7, None])
def test_auto_takes_the_platforms_entry(table, platform, entry):
    table[platform] = entry
    other = "tpu" if platform != "tpu" else "cpu"
    table[other] = 5 if entry is None else None
    with override(roll_loops="auto"):
        assert rolling.least_copies(Device(platform, 0)) == entry
        assert rolling.rolls_on(Device(platform, 0)) is (entry is not None)
        assert rolling.least_copies(Device(other, 0)) == table[other]
    with override(roll_loops=True):
        assert rolling.least_copies(Device(platform, 0)) == rolling.MIN_COPIES
    with override(roll_loops=False):
        assert rolling.least_copies(Device(platform, 0)) is None
        assert rolling.rolls_on(Device(platform, 0)) is False


def test_an_unlisted_platform_takes_the_unlisted_default(table):
    with override(roll_loops="auto"):
        assert rolling.least_copies(Device("someaccelerator", 0)) == rolling.UNLISTED


@pytest.mark.parametrize("entry", [3, 4, 5, None])
def test_the_cpu_entry_decides_what_a_cpu_program_rolls(clean_runtime, rng, table, entry):
    # _layers makes a run of 4 identical layers: rolled where the entry asks
    # for at most 4
    assert default_device().platform == "cpu"
    table["cpu"] = entry
    rolls = entry is not None and entry <= 4
    with override(roll_loops="auto"):
        assert _loops(rng) == (1 if rolls else 0)
    # forced, the entry is not asked
    with override(roll_loops=True):
        assert _loops(rng) == 1
    with override(roll_loops=False):
        assert _loops(rng) == 0


@pytest.mark.parametrize("forced", ["0", "1"])
def test_the_environment_variable_forces_it_against_the_table(forced):
    env = {k: v for k, v in os.environ.items() if k != "LAZYCORE_ROLL_LOOPS"}
    code = ("from lazycore.ir.config import settings; from lazycore.runtime import rolling; "
            "from lazycore.runtime.device import Device; "
            f"rolling.DEFAULTS.update(dict.fromkeys(rolling.DEFAULTS, {'None' if forced == '1' else '3'})); "
            "print(settings.roll_loops, *(rolling.rolls_on(Device(p, 0)) for p in ('cpu', 'gpu', 'tpu')))")
    out = subprocess.run([sys.executable, "-c", code], env={**env, "LAZYCORE_ROLL_LOOPS": forced},
                         capture_output=True, text=True, timeout=120, check=True).stdout
    want = str(forced == "1")
    assert out.split() == [want] * 4


def test_the_compile_keys_hold_the_decision_not_the_setting(table):
    device = default_device()
    args = (b"a walk", device, {0: 0}, None)

    def keys():
        return programs.make_key(*args), programs.portable_key(*args)

    table["cpu"] = rolling.MIN_COPIES
    with override(roll_loops="auto"):
        auto_on = keys()
    with override(roll_loops=True):
        forced_on = keys()
    table["cpu"] = None
    with override(roll_loops="auto"):
        auto_off = keys()
    with override(roll_loops=False):
        forced_off = keys()
    table["cpu"] = 16
    with override(roll_loops="auto"):
        auto_long = keys()
    assert auto_on == forced_on
    assert auto_off == forced_off
    assert len({auto_on[0], auto_off[0], auto_long[0]}) == 3
    if auto_on[1] is not None:
        assert len({auto_on[1], auto_off[1], auto_long[1]}) == 3


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_configure_refuses_other_values(bad):
    before = settings.roll_loops
    with pytest.raises(ValueError, match="roll_loops must be True, False or 'auto'"):
        configure(roll_loops=bad)
    assert settings.roll_loops == before
