"""A read's work does not grow with the number of settled live arrays (issue 39:
scipy's ``integrate.cubature`` keeps a heap of regions, thousands of settled lazy
arrays, and reads one comparison at a time; each read walked every live array
three times: ``reads._read_alone``'s ``_shares`` and ``_cuts`` before its barrier,
and the barrier's ``step.collect``). Those questions are about pending work, which the
device's arena now indexes (:meth:`lazycore.ir.tensor.Arena.pending`); the
barrier itself still walks the live arrays once (the leaves they hold are not
donated)."""

import gc
import sys

import numpy

import lazycore
import lazycore.numpy as np
from lazycore.ir.tensor import Arena


def _arena(a):
    return a._storage.handle.device.arena


def _pending_by_walk(arena):
    return [h for h in arena.live() if h.pending]


def test_the_index_of_pending_handles_is_the_walk_of_live_ones():
    x = np.asarray(numpy.arange(6.0))
    arena = _arena(x)
    a, b = x + 1, x * 2
    assert arena.pending() == _pending_by_walk(arena)
    lazycore.mark_step()
    assert arena.pending() == [] == _pending_by_walk(arena)
    c = a - 1  # a settled array's in-place update makes its handle pending again:
    a += b     # an older handle than c's, and oldest first like the walk
    assert arena.pending() == _pending_by_walk(arena)
    assert arena.pending().index(a._storage.handle) < arena.pending().index(c._storage.handle)
    del c
    gc.collect()
    assert arena.pending() == _pending_by_walk(arena)
    numpy.testing.assert_array_equal(numpy.asarray(a), numpy.arange(6.0) * 3 + 1)
    assert arena.pending() == _pending_by_walk(arena) == []


def test_a_read_among_many_settled_arrays_walks_them_once(monkeypatch):
    rng = numpy.random.default_rng(0)
    kept = [np.asarray(rng.normal(size=3)) for _ in range(400)]  # settled regions
    lazycore.mark_step()
    e = np.asarray(rng.normal(size=3))
    lazycore.mark_step()
    visited = []
    live = Arena.live

    def counted(self):
        out = live(self)
        caller = sys._getframe(1).f_code.co_filename
        if caller.endswith(("reads.py", "step.py")):  # (not an observer that subscribed to barriers)
            visited.append(len(out))
        return out

    monkeypatch.setattr(Arena, "live", counted)
    for _ in range(3):
        assert bool(np.max(np.abs(e)) > 0.0)
    # one walk a read (the barrier's held leaves), not three ([407] * 9 before)
    assert len(visited) == 3, visited
    assert len(kept) == 400
