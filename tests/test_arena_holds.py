"""A barrier's ``held`` (the device data, and stacks, live handles hold: never
donated) answers what a walk of every live handle tells, without that walk
(``Arena.holds``, issue 40).

``step.collect`` walked every live handle at each barrier to find the leaves
they hold: with 2,000 live arrays most of a small step's barrier (scipy's
``integrate.cubature``, eager mode). The arena now keeps who may hold each
leaf (handles entered when placed settled, when they settle, and when device
data replaces device data) and checks those few. A leaf missing there would
be donated while a live handle holds it: a silent wrong value. So every
``id(x) in held`` question a barrier asks is checked here against the walk
made at its collect (the ``walked`` fixture), and a randomized run of every
kind of write asks collect about every leaf and stack it made.
"""

import gc
import random
import sys

import numpy
import pytest

import lazycore
import lazycore.numpy as np
from lazycore.ir.graph import Data, Value
from lazycore.ir.tensor import LazyTensor
from lazycore.runtime import step as step_mod
from lazycore.runtime.stacks import Stack


def _walked(arena) -> set[int]:
    """The walk collect made before: every live handle's device data, and its stack."""
    held = set()
    for t in arena.live():
        node = t._value.node
        if type(node) is Data:
            held.add(id(node))
            if node.row is not None:
                held.add(id(node.row[0]))
    return held


@pytest.fixture(autouse=True)
def walked(monkeypatch):
    """Every membership question a barrier asks its ``held`` answers the walk
    made at its collect; the questions, counted."""
    asked = []
    collect = step_mod.collect

    def checked(device, wait, walker, runner):
        step = collect(device, wait, walker, runner)
        want = _walked(device.arena) | step.held.ids
        real = step_mod.Held.__contains__

        class Checked(step_mod.Held):
            __slots__ = ()

            def __contains__(self, i):
                got = real(self, i)
                asked.append(i)
                assert got == (i in want), f"held says {got} for {i}, the walk {i in want}"
                return got

        held = Checked(device.arena)
        held.ids = step.held.ids
        step.held = held
        return step

    monkeypatch.setattr(step_mod, "collect", checked)
    from lazycore.runtime import barrier

    if getattr(barrier, "collect", None) is collect:
        monkeypatch.setattr(barrier, "collect", checked)
    yield asked


def _handle(a):
    return a._storage.handle


def _stack(rows: int, device) -> Stack:
    """A real stack of ``rows`` rows of 3 float64 (as a rolled program returns):
    the arena's other walkers (the memory ledger's, a placement query's) read
    the stacks of the rows live handles hold."""
    upload = _handle(np.asarray(numpy.arange(rows * 3, dtype=numpy.float64).reshape(rows, 3)))
    return Stack(upload._value.node.buffer, upload.type, device)


@pytest.fixture
def owned():
    """Lists of the handles (and arrays) a test makes by hand in the device's
    arena, emptied when it ends, failed or not: a failure's traceback keeps
    the test's frame, and a later file's barriers would meet them (the few its
    locals name stay: real values, as every handle made here holds)."""
    lists = []
    yield lists
    for found in lists:
        found.clear()
    gc.collect()
    lazycore.mark_step(wait=True)


@pytest.mark.parametrize("ledger", [False, True], ids=["no-memory-question", "memory-ledger-on"])
def test_collect_no_longer_walks_every_live_handle(monkeypatch, ledger):
    """``collect`` walks no live handle (it did: 2,000 live arrays, 2,000 handles
    a barrier). Nothing else on the barrier path does either, until a memory
    question is asked in the process: from then on the memory ledger sums what
    every live handle holds at each barrier (``observe.memory._on_barrier_start``:
    its own walk, ``observe.memory.per_device``'s on a mesh), which the
    holders cannot answer. CI runs files in one process, so the ledger is set
    here both ways instead of left as earlier files left it."""
    from lazycore.ir.tensor import Arena
    from lazycore.observe import memory
    from lazycore.runtime import barrier

    monkeypatch.setattr(memory.LEDGER, "exact", ledger)
    walks = []  # (caller's file, inside collect)
    inside = []
    live = Arena.live

    def counted(self):
        where = sys._getframe(1).f_code.co_filename
        if where != __file__:  # (the fixture's walk, to check against)
            walks.append((where, bool(inside)))
        return live(self)

    outer = barrier.collect

    def entered(*args):
        inside.append(True)
        try:
            return outer(*args)
        finally:
            inside.pop()

    monkeypatch.setattr(Arena, "live", counted)
    monkeypatch.setattr(barrier, "collect", entered)
    kept = [np.asarray(numpy.full(3, float(i))) for i in range(50)]
    for k in kept:
        k += 1.0
    lazycore.mark_step(wait=True)
    x = kept[0] * 2
    lazycore.mark_step(wait=True)
    numpy.testing.assert_array_equal(numpy.asarray(x), [2.0, 2.0, 2.0])
    assert [w for w, collecting in walks if collecting] == []
    if ledger:
        assert walks, "the memory ledger walks (else this case checks nothing the other does not)"
        assert {w.rsplit("/", 1)[-1] for w, _ in walks} <= {"memory.py", "transfer.py"}, walks
    else:
        assert walks == []


def test_training_donates_and_keeps_exactly(walked):
    """In-place updates of settled arrays among many live ones: donated where
    nothing else holds the old buffer, kept where an alias still does."""
    gc.collect()
    lazycore.mark_step(wait=True)
    live = [np.asarray(numpy.full(4, float(i), numpy.float32)) for i in range(200)]
    w = np.asarray(numpy.ones(4, numpy.float32))
    alias = LazyTensor(_handle(w)._value, _handle(w).device)  # a second handle on w's buffer
    for step in range(4):
        w -= 0.5 * (w * live[step])
        lazycore.mark_step(wait=True)
        if step == 1:
            alias = None
    want = numpy.ones(4, numpy.float32)
    for step in range(4):
        want = want - 0.5 * (want * numpy.float32(step))
    numpy.testing.assert_allclose(numpy.asarray(w), want)
    assert alias is None
    assert walked, "the barriers asked their held"


def test_randomized_against_the_walk(walked, owned):
    """A random run of uploads, ops, in-place updates, device data swapped for
    device data (assign, take), stacked rows, restacked leaves, reads,
    barriers and collected handles: collect's ``held`` answers the walk for
    every leaf and stack ever made, and for objects no handle holds."""
    gc.collect()
    lazycore.mark_step(wait=True)
    rng = random.Random(40)
    device = _handle(np.asarray(numpy.zeros(3))).device
    arena = device.arena
    arrays = [np.asarray(numpy.full(3, float(i))) for i in range(30)]
    raw = []  # handles made here, settled, some holding rows of stacks
    owned += [arrays, raw]
    seen = {}  # id -> object, every leaf and stack met (kept alive: ids stay theirs)
    stacks_made = []
    t3 = _handle(arrays[0]).type

    def note():
        for a in arrays:
            leaf = _handle(a)._value.node
            if type(leaf) is Data:
                seen[id(leaf)] = leaf
        for h in raw:
            leaf = h._value.node
            seen[id(leaf)] = leaf
            if leaf.row is not None:
                seen[id(leaf.row[0])] = leaf.row[0]

    def check():
        got = step_mod.collect(device, False, None, None)
        want = _walked(arena) | got.held.ids
        for i in list(seen) + [id(o) for o in others]:
            assert (i in got.held) == (i in want), (i, type(seen.get(i)).__name__)
        return got

    others = [object() for _ in range(5)]
    for _ in range(400):
        op = rng.randrange(12)
        i, j = rng.randrange(len(arrays)), rng.randrange(len(arrays))
        if op == 0:
            arrays[i] = np.asarray(numpy.full(3, rng.random()))  # an upload
        elif op == 1:
            arrays[i] = arrays[j] * 2.0 + 1.0  # pending work
        elif op == 2:
            arrays[i] += arrays[j]  # in-place: settled -> pending
        elif op == 3:
            lazycore.mark_step(wait=rng.random() < 0.5)
        elif op == 4:
            float(arrays[i][0])  # a read
        elif op == 5 and type(_handle(arrays[j])._value.node) is Data and type(_handle(arrays[i])._value.node) is Data:
            _handle(arrays[i]).assign(_handle(arrays[j]))  # device data for device data
        elif op == 6 and type(_handle(arrays[j])._value.node) is Data:
            _handle(arrays[i]).take(_handle(arrays[j])._value)
        elif op == 7:  # handles holding rows of a stack, as a rolled program's results
            rows = rng.randrange(1, 4)
            stack = _stack(rows, device)
            stacks_made.append(stack)
            for r in range(rows):
                raw.append(LazyTensor(Value(Data(None, t3, owned=True, row=(stack, r)), 0), device))
        elif op == 8 and raw:  # a held leaf made a row of a new stack (stacks.arguments)
            leaf = rng.choice(raw)._value.node
            stack = _stack(1, device)
            stacks_made.append(stack)
            leaf.row = (stack, 0)
            arena.restacked(leaf)
        elif op == 9 and raw:
            del raw[rng.randrange(len(raw))]
            gc.collect()
        elif op == 10 and raw:  # a raw handle given another's leaf, or a fresh one
            h = rng.choice(raw)
            other = rng.choice(raw)._value if rng.random() < 0.5 else _handle(np.asarray(numpy.full(3, rng.random())))._value
            h.take(other)
        elif op == 11:
            LazyTensor(_handle(arrays[i])._value, device)  # a handle made and dropped at once
        note()
        if rng.random() < 0.3:
            check()
    check()
    gc.collect()
    check()
    numpy.testing.assert_array_equal(numpy.asarray(arrays[0]).shape, (3,))
    raw.clear()
    gc.collect()
    lazycore.mark_step(wait=True)
    check()
