"""Host-to-device uploads: pjrt.to_device's direct path keeps every dtype's
values exact and copies, and the scalar packs of a decoding call hit in the
next call (issue 40: a replayed token's valid sizes are new every token)."""

import ml_dtypes
import numpy as np
import pytest

import lazycore
from lazycore.runtime import pjrt
from lazycore.runtime.cache import PACKS, PackCache
from lazycore.runtime.device import default_device

EXACT = [
    np.array([2**40 + 1, -(2**62) - 3], np.int64),  # beyond 32 bits
    np.array([2**64 - 1, 2**63 + 5], np.uint64),
    np.array([1 + 2**-40, -np.pi], np.float64),  # beyond float32's mantissa
    np.array([1 + 2**-10, 65504], np.float16),
    np.array([1.0078125, -3.5], ml_dtypes.bfloat16),
    np.array([True, False]),
    np.array([1 + 2**-40 + 3j], np.complex128),
    np.array(7, np.int32),  # rank 0
    np.arange(12, dtype=np.float32).reshape(3, 4).T,  # not C-contiguous
    np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3)),
]


@pytest.mark.parametrize("host", EXACT, ids=lambda a: f"{a.dtype}{list(a.shape)}")
def test_upload_keeps_dtype_shape_and_values(host):
    buf = pjrt.to_device(host, pjrt.default_device())
    assert buf.dtype == host.dtype and buf.shape == host.shape
    back = pjrt.to_host(buf)
    assert back.dtype == host.dtype
    np.testing.assert_array_equal(back, host)


def test_upload_is_a_copy_the_host_array_cannot_reach():
    for dtype in (np.float16, np.float32, np.int64):  # (float16 was wrapped in place by device_put)
        host = np.arange(4, dtype=dtype)
        buf = pjrt.to_device(host, pjrt.default_device())
        host[:] = 9
        np.testing.assert_array_equal(pjrt.to_host(buf), np.arange(4, dtype=dtype))


def test_a_decoding_calls_packs_hit_in_the_next_call(clean_runtime):
    # a 64-token call: per token, a pack holding that token's valid size, and
    # the two packs whose numbers never change; the next call finds them all
    device = default_device()
    packs = PackCache()
    fixed = [np.array([0.5], np.float32), np.array([3], np.int64)]
    call = [[np.array([8 + t, 16], np.int32)] + fixed for t in range(67)]

    def run():
        before = lazycore.metrics.counters()["transfers_to_device"]
        for token in call:
            for host in token:
                np.testing.assert_array_equal(pjrt.to_host(packs.get(host, device)), host)
        return lazycore.metrics.counters()["transfers_to_device"] - before

    assert run() == 67 + 2
    assert run() == 0
    assert len(packs.entries) <= packs.size


def test_the_runtimes_packs_are_bounded():
    assert PACKS.size >= 67 + 2  # one 64-token call's packs
    device = default_device()
    for n in range(PACKS.size + 10):
        PACKS.get(np.array([n, -1], np.int32), device)
    assert len(PACKS.entries) == PACKS.size
    PACKS.clear()
    assert not PACKS.entries
