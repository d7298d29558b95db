"""Devices: listing them, placing values, and no implicit transfer between them."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lazycore as lc
from lazycore.runtime.device import Device


def test_cpu_is_listed_and_default():
    names = [d.name for d in lc.devices()]
    assert "cpu:0" in names
    assert lc.default_device().name == "cpu:0"
    assert lc.from_numpy(np.ones(2, np.float32)).device is lc.default_device()
    assert lc.device.get("cpu:0") is lc.default_device()
    with pytest.raises(ValueError, match="no device 'cpu:99'"):
        lc.device.get("cpu:99")


def test_mixing_devices_raises_at_the_call():
    other = Device("fakepu", 0)  # a device of another platform; it can hold scalars only
    here = lc.scalar(2.0)
    there = lc.scalar(3.0, device=other)
    assert there.device is other and other.kind == "fakepu/none"
    with pytest.raises(ValueError, match="operand 1 is on fakepu:0 but the operands before it are on cpu:0"):
        lc.apply("add", here, there)
    with pytest.raises(ValueError, match="never moves values between devices"):
        lc.apply("mul", there, here)
    with pytest.raises(RuntimeError, match="cannot hold data"):
        lc.from_numpy(np.ones(2, np.float32), device=other)


# jax makes several CPU devices only if told before it starts, hence a fresh process.
TWO_CPUS = textwrap.dedent("""
    import numpy as np, lazycore as lc
    cpus = [d for d in lc.devices() if d.platform == "cpu"]
    assert [d.name for d in cpus] == ["cpu:0", "cpu:1"], cpus
    x = np.arange(4, dtype=np.float32)
    a = lc.from_numpy(x, cpus[0])
    b = lc.from_numpy(x, "cpu:1")
    try:
        lc.apply("add", a, b)
        raise SystemExit("mixing cpu:0 and cpu:1 did not raise")
    except ValueError as e:
        assert "cpu:1" in str(e) and "cpu:0" in str(e), e
    c = lc.apply("add", b, b)
    lc.mark_step()
    buf = c.value.node.buffer
    assert buf.devices() == {cpus[1].pjrt}, buf.devices()
    np.testing.assert_array_equal(lc.to_numpy(c), 2 * x)
    moved = lc.to_device(c, "cpu:0")
    np.testing.assert_array_equal(lc.to_numpy(lc.apply("add", a, moved)), 3 * x)
    print("ok")
""")


def test_two_cpu_devices_keep_values_apart():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    out = subprocess.run([sys.executable, "-c", TWO_CPUS], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")
