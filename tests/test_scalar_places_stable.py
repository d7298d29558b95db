"""A scalar policy place's key does not move when an earlier place is
promoted (lazycore.trace.scalar_policy): the promoted form makes other nodes
before the later place (a parameter where a constant was, a dynamic slice of
one where a static slice was), which moved the later place to a new key,
where its number was baked once more and promoted a step later: a compile
more per later place after every promotion."""

import numpy
import pytest

import lazycore as lc
from lazycore.observe import metrics
from lazycore.trace.views import Slice, Storage, read

pytestmark = pytest.mark.usefixtures("clean_runtime")


def _steps(make, values):
    x = lc.from_numpy(numpy.arange(6, dtype=numpy.float32))
    lc.mark_step(wait=True)
    compiles = []
    for v in values:
        c0 = metrics.counters()["compiles"]
        y, want = make(x, *v)
        numpy.testing.assert_array_equal(lc.to_numpy(y), want)
        compiles.append(metrics.counters()["compiles"] - c0)
    return compiles


def _two_numbers(x, a, b):
    # b's node follows a's: a 'constant' while a is baked, a 'scalar' once promoted
    sa, sb = lc.scalar(a, "f32"), lc.scalar(b, "f32")
    both = lc.apply("add", sa, sb)
    y = lc.apply("mul", x, lc.apply("broadcast_in_dim", both, dims=(), shape=x.shape))
    return y, numpy.arange(6, dtype=numpy.float32) * numpy.float32(a + b)


def test_a_promoted_number_keeps_the_next_numbers_place():
    # a promoted at step 1 (0 then 1), b too (0 then 1): from then on both parameters.
    # Before: b's key held the op before it, 'scalar' after a's promotion, so b was new
    # at step 1, baked 1 again and promoted at step 2 (compiles [1, 1, 1, 0])
    assert _steps(_two_numbers, [(0.0, 0.0), (1.0, 1.0), (2.0, 0.0), (3.0, 1.0)]) == [1, 1, 0, 0]


def _window_then_number(x, start, b):
    # a window's start (a number of the policy: a static slice while baked, a
    # parameter and a dynamic slice, one node more, once promoted), then a number
    win = read(Storage(x, (1,)), (Slice(0, start, 2, 1, True),))
    y = lc.apply("mul", win, lc.apply("broadcast_in_dim", lc.scalar(b, "f32"), dims=(), shape=(2,)))
    return y, numpy.arange(start, start + 2, dtype=numpy.float32) * numpy.float32(b)


def test_a_promoted_slice_start_keeps_the_next_numbers_place():
    # b promoted at step 1; the start at step 2, which moves b one node on and
    # makes the node before it a dynamic slice. Before: b was new there, baked
    # 0 again, and promoted at step 3 (compiles [1, 1, 1, 1, 0])
    values = [(0, 0.0), (0, 1.0), (1, 0.0), (2, 1.0), (3, 0.0)]
    assert _steps(_window_then_number, values) == [1, 1, 1, 0, 0]
