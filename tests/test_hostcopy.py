"""One device-to-host copy (lazycore.runtime.hostcopy): every read from the
device is one announced transfer, counted once, whoever reads; a read that
fails is retried on the buffer the caller's ``again`` gives, or raises."""

import pathlib

import numpy as np
import pytest

import lazycore as lc
from lazycore.ir import events
from lazycore.runtime import hostcopy

RUNTIME = pathlib.Path(hostcopy.__file__).parent


def _buffer(value):
    return lc.from_numpy(np.asarray(value, np.float32)).value.node.buffer


class _Gone:
    """A buffer that cannot be read (its program failed while running)."""

    is_fully_addressable = True

    def __array__(self, *args, **kwargs):
        raise RuntimeError("its program failed")


def test_a_copy_is_one_announced_counted_transfer():
    seen = []
    buffer = _buffer([1.0, 2.0, 3.0])
    listener = lambda *a: seen.append(a[:2])  # noqa: E731
    events.listen("transfer", listener)
    try:
        before = dict(lc.metrics.counters())
        host = hostcopy.to_host(buffer, "t")
        after = lc.metrics.counters()
    finally:
        events.unlisten("transfer", listener)
    assert host.tolist() == [1.0, 2.0, 3.0] and host.flags.owndata
    assert seen == [("device-to-host", "t")]
    assert after["transfers_to_host"] - before["transfers_to_host"] == 1
    assert after["bytes_to_host"] - before["bytes_to_host"] == 12


def test_a_failed_read_reads_what_again_gives_or_raises():
    good = _buffer([4.0, 5.0])
    before = lc.metrics.counters()["transfers_to_host"]
    assert hostcopy.to_host(_Gone(), "t", again=lambda: good).tolist() == [4.0, 5.0]
    with pytest.raises(RuntimeError, match="its program failed"):
        hostcopy.to_host(_Gone(), "t", again=lambda: None)
    with pytest.raises(RuntimeError, match="its program failed"):
        hostcopy.to_host(_Gone(), "t")
    assert lc.metrics.counters()["transfers_to_host"] - before == 1  # the failed ones are not counted


def test_the_runtime_announces_device_to_host_copies_in_one_place():
    found = sorted(p.name for p in RUNTIME.glob("*.py") if '"device-to-host"' in p.read_text())
    assert found == ["hostcopy.py"]
