"""``Arena.pending()``, the index of the live handles that hold pending work, is
the walk of every live handle, after every kind of op and write.

A read of one array among thousands of settled ones (scipy's
``integrate.cubature`` keeps a heap of regions and reads one comparison at a
time, issue 39) walked every live array three times: ``reads._read_alone``'s
``_shares`` and ``_cuts`` and the barrier's ``step.collect``. Those ask the
index now. The index is kept without work when a handle is made (every op
makes one): the arena places the handles made since its last call when
asked, and the writers that give a made handle pending work
(``LazyTensor.assign`` and ``LazyTensor.take``) enter it. A handle missing
from it would be left out of a barrier: a silent wrong answer. So every test
here checks each ``pending()`` call, the runtime's own included, against the
walk (the ``checked`` fixture), and after each step of its own.
"""

import copy
import gc
import sys

import numpy
import pytest

import lazycore
import lazycore.numpy as np
from lazycore.ir.tensor import Arena


def _walk(arena):
    return [h for h in arena.live() if h.pending]


@pytest.fixture(autouse=True)
def checked(monkeypatch):
    """Every ``Arena.pending()`` call (the reads' and barriers' too) answers the walk."""
    index = Arena.pending
    calls = []

    def pending(self):
        got = index(self)
        want = _walk(self)
        calls.append(len(got))
        assert got == want, (
            f"index {len(got)} vs walk {len(want)}: missing {[repr(h) for h in want if h not in got]}, "
            f"extra {[repr(h) for h in got if h not in want]}"
        )
        return got

    monkeypatch.setattr(Arena, "pending", pending)
    yield calls


def _arena(a):
    return a._storage.handle.device.arena


def _same(arena):
    got = arena.pending()  # (the fixture compares)
    return len(got)


def test_numpy_every_kind_of_write(checked):
    x = np.asarray(numpy.arange(6.0))
    arena = _arena(x)
    a, b = x + 1, x * 2
    assert _same(arena) >= 2
    lazycore.mark_step()
    assert _same(arena) == 0
    c = a - 1  # a settled array's in-place update makes its handle pending again:
    a += b  # older than c's, and oldest first like the walk
    assert arena.pending().index(a._storage.handle) < arena.pending().index(c._storage.handle)
    lazycore.mark_step()
    a[1] = 7.0  # setitem
    _same(arena)
    v = a[2:]  # a view, then an in-place op through it
    v *= 3
    _same(arena)
    out = np.zeros(6)
    lazycore.mark_step()
    np.add(a, b, out=out)  # out=
    _same(arena)
    assert float(out[1]) == 9.0  # reads: a scalar, an array, an item
    _same(arena)
    want = numpy.arange(6.0) * 3 + 1
    want[1] = 7.0
    want[2:] *= 3
    numpy.testing.assert_array_equal(numpy.asarray(a), want)
    _same(arena)
    assert (b + a).sum().item() == float((want + numpy.arange(6.0) * 2).sum())
    _same(arena)
    assert bool((c > 100).any()) is False  # a boolean read mid-step (reads._read_alone's question)
    _same(arena)
    del c, v
    gc.collect()
    _same(arena)
    lazycore.mark_step()
    assert _same(arena) == 0
    assert checked and len(checked) > 10


def test_numpy_handles_made_unread_and_collected(checked):
    x = np.asarray(numpy.arange(4.0))
    arena = _arena(x)
    made = [x + i for i in range(50)]
    del made[::2]
    gc.collect()
    _same(arena)  # the unread ones placed, the collected ones gone
    more = [m * 2 for m in made[:10]]
    made[3] += 1
    del made[5:]
    gc.collect()
    _same(arena)
    numpy.testing.assert_array_equal(numpy.asarray(more[9]), (numpy.arange(4.0) + 19) * 2)
    _same(arena)
    lazycore.mark_step()
    assert _same(arena) == 0


def test_numpy_a_failed_value_and_the_step_after(checked):
    from lazycore.passes import register_lowering
    from lazycore.passes.lowering import registry
    from lazycore.runtime.failures import BarrierError
    from lazycore.dialect.mlir import ir

    def no_such_target(op, rewriter):
        x = op.operands[0]
        attrs = {
            "call_target_name": ir.StringAttr.get("lazycore_test_no_such_target"),
            "api_version": ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 4),
        }
        return ir.Operation.create("stablehlo.custom_call", results=[x.type], operands=[x], attributes=attrs).result

    user = dict(registry.USER)
    register_lowering("sign", no_such_target)
    try:
        a = np.asarray(numpy.array([1.0, -2.0, 3.0], numpy.float32))
        arena = _arena(a)
        b = np.sign(a)
        c = a * 2
        c += 1
        with pytest.raises(BarrierError):
            numpy.asarray(b)
        _same(arena)
        numpy.testing.assert_array_equal(numpy.asarray(c), numpy.array([3.0, -3.0, 7.0], numpy.float32))
        _same(arena)
    finally:
        registry.USER.clear()
        registry.USER.update(user)
    d = np.sign(a) + c
    _same(arena)
    numpy.testing.assert_array_equal(numpy.asarray(d), numpy.array([4.0, -4.0, 8.0], numpy.float32))
    assert _same(arena) == 0


def test_an_outer_array_updated_in_a_traced_body_is_indexed_in_its_own_arena(checked):
    o = np.asarray(numpy.zeros(2))
    arena = _arena(o)
    lazycore.mark_step()
    seen = []

    def body(i, v):
        body_arena = o._storage.handle.device.arena
        assert body_arena is not arena  # (the body's handles live in an arena of their own)
        o[...] = o + 1.0  # an outer handle given the body's pending work
        seen.append(o._storage.handle in body_arena.pending())
        return v + 1.0

    r = lazycore.fori_loop(0, 2, body, np.ones(2))
    assert seen == [False]
    assert o._storage.handle in arena.pending()  # its own arena's index has it, as the walk does
    numpy.testing.assert_array_equal(numpy.asarray(r), [3.0, 3.0])
    _same(arena)


def test_a_copied_handle_is_in_no_arena():
    # copy.copy makes a handle without __init__: it was registered nowhere, and
    # still is (its pending value is not indexed; writing one raises nothing)
    a = np.asarray(numpy.arange(3.0)) + 1
    c = copy.copy(a._storage.handle)
    c.take((a + 2)._storage.handle._value)
    assert c.pending and c not in _arena(a).pending()


def test_torch_every_kind_of_write(checked):
    torch = pytest.importorskip("torch")
    import lazycore.torch as ltorch

    dev = ltorch.device()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(5, 4).to(dev)
    arena = x._storage.handle.device.arena
    for _ in range(3):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()  # gradients (accumulated or replayed into their handles)
        _same(arena)
        opt.step()  # in-place updates of every parameter
        _same(arena)
        assert loss.item() > 0  # a read mid-step
        _same(arena)
        ltorch.mark_step()
        assert _same(arena) == 0
    a = torch.arange(6.0).to(dev)
    b = a * 2
    a[1] = 9.0  # setitem
    a[2:].mul_(3)  # a view's in-place op writes through its base
    c = torch.empty(6).to(dev)
    torch.add(a, b, out=c)  # out=
    _same(arena)
    want = torch.arange(6.0)
    want[1] = 9.0
    want[2:] *= 3
    torch.testing.assert_close(c.cpu(), want + torch.arange(6.0) * 2)
    assert _same(arena) == 0


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
        if caller.endswith(("reads.py", "step.py")):  # (not the fixture's walk, nor an observer's)
            visited.append(len(out))
        return out

    monkeypatch.setattr(Arena, "live", counted)
    for _ in range(3):
        assert bool(np.max(np.abs(e)) > 0.0)
    # no walk of every live handle ([40x] * 9 before the index; one a read, the
    # barrier's held leaves, before Arena.holds)
    assert visited == [], visited
    assert len(kept) == 400


def _validate(v):
    if not (v > 0).all():  # a step check (lazycore.frontends.torch.step_checks): no read
        raise ValueError("v must be positive")
    return v


def test_torch_a_step_check_gives_a_settled_handle_its_select(checked):
    torch = pytest.importorskip("torch")
    import lazycore.torch as ltorch

    dev = ltorch.device()
    p = torch.ones(3).to(dev)
    arena = p._storage.handle.device.arena
    ltorch.mark_step()
    _validate(p * 2)
    p.copy_(torch.full((3,), 5.0))  # an upload after the check: device data, no pending work
    assert not p._storage.handle.pending
    _same(arena)
    ltorch.mark_step()  # the check's gate gives p select(failed, 1, 5): pending work the barrier computes
    torch.testing.assert_close(p.cpu(), torch.full((3,), 5.0))
    assert _same(arena) == 0


def test_torch_a_replayed_backward_writes_its_gradients(checked, monkeypatch):
    torch = pytest.importorskip("torch")
    import lazycore.torch as ltorch
    from lazycore.frontends.torch import backward_replay as br

    monkeypatch.setattr(br.SWITCH, "on", True)
    monkeypatch.setattr(br.SWITCH, "choose", False)
    br._BACKOFF.clear()
    monkeypatch.setattr(br.STATE, "pushes_seen", br.STATE.pushes)
    monkeypatch.setattr(br.STATE, "node_hooks", [])
    monkeypatch.setattr(br.Stats, "replays", 0)
    dev = ltorch.device()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(5, 4).to(dev)
    arena = x._storage.handle.device.arena
    for _ in range(5):
        opt.zero_grad(set_to_none=False)  # settled gradients, zeroed and then written by the replay
        ltorch.mark_step()
        model(x).pow(2).mean().backward()
        _same(arena)
        opt.step()
        _same(arena)
        ltorch.mark_step()
    assert br.Stats.replays > 0
    assert _same(arena) == 0
