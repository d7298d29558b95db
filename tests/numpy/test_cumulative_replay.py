"""``lnp.cumsum`` and its family are recorded lowerings: the float scan on the
CPU is a loop (lazycore.trace.scans.one_by_one), and a later call of the same
signature replays the recording, loop node and bodies included, without
tracing the loop's body again (three bodies a call before: about 0.4 ms of
host time), as torch's cumsum does (tests/torch/test_cumsum_replay.py). The
values stay NumPy's bits, and a replay makes the graph a traced call makes."""

import os
import sys

import numpy as np
import pytest

import lazycore.numpy as lnp
from lazycore.frontends.numpy.array import value
from lazycore.ir.config import override
from lazycore.trace import control

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _bits import bits_equal  # noqa: E402


@pytest.fixture
def traces(monkeypatch):
    """How many loop bodies were traced (lazycore.trace.control's one entry for it)."""
    count = [0]
    inner = control._trace

    def counting(*args, **kwargs):
        count[0] += 1
        return inner(*args, **kwargs)

    monkeypatch.setattr(control, "_trace", counting)
    return count


def _data(seed, shape=(23, 6), dtype=np.float32):
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype(dtype)


OPS = {
    "cumsum": lambda m, x: m.cumsum(x, axis=0),
    "cumsum_none": lambda m, x: m.cumsum(x),
    "cumprod": lambda m, x: m.cumprod(x * 0.25 + 1, axis=1),
    "nancumsum": lambda m, x: m.nancumsum(m.where(x > 2, np.nan, x), axis=0),
    "cumsum_f64": lambda m, x: m.cumsum(x, axis=1, dtype=np.float64),
}


@pytest.mark.parametrize("name", list(OPS))
def test_a_second_call_replays_without_tracing_the_loop(traces, name):
    op = OPS[name]
    x = _data(100)
    bits_equal(np.asarray(op(lnp, lnp.asarray(x))), op(np, x))  # records (or finds the recording)
    before = traces[0]
    for seed in range(3):
        x = _data(seed)
        bits_equal(np.asarray(op(lnp, lnp.asarray(x))), op(np, x))
    assert traces[0] == before


def test_a_replay_makes_the_graph_a_traced_call_makes(traces):
    lnp.cumsum(lnp.asarray(_data(7)), axis=0)  # the recording
    x = lnp.asarray(_data(8))
    with override(replay=False):
        traced = lnp.cumsum(x, axis=0)
    assert traces[0] > 0
    before = traces[0]
    replayed = lnp.cumsum(x, axis=0)
    assert traces[0] == before
    assert value(replayed)._value[0].digest == value(traced)._value[0].digest
    bits_equal(np.asarray(replayed), np.asarray(traced))


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.bool_])
def test_other_types_keep_numpys_values(dtype):
    for seed in range(2):
        x = _data(seed, (9, 5)).astype(dtype) if dtype is not np.bool_ else _data(seed, (9, 5)) > 0
        for axis in (0, 1, None):
            want = np.cumsum(x, axis=axis)
            got = np.asarray(lnp.cumsum(lnp.asarray(x), axis=axis))
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_out_and_include_initial_still_hold():
    x = _data(3, (6, 4))
    out = lnp.zeros((6, 4), dtype=np.float32)
    for _ in range(2):
        r = lnp.cumsum(lnp.asarray(x), axis=1, out=out)
        assert r is out
        bits_equal(np.asarray(out), np.cumsum(x, axis=1))
    if hasattr(np, "cumulative_sum"):
        for _ in range(2):
            bits_equal(np.asarray(lnp.cumulative_sum(lnp.asarray(x), axis=0, include_initial=True)),
                       np.cumulative_sum(x, axis=0, include_initial=True))
