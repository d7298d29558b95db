"""The eager mode's settle (every op's, ``lazycore.runtime.eager``) and the NaN
check's barrier (``lazycore.observe.nans.checked_sync``) take the handles with
pending work from ``Arena.pending()``, the index, not a walk of every live
handle: with thousands of settled arrays alive, eager mode walked them all at
every op. Each of their ``pending()`` calls is checked here against the walk
they made before (the same handles in the same order), and no walk is left in
them. (``trace/capture.py``'s walks stay: a watch needs every live handle,
settled ones too, and its fresh handles include settled uploads.)
"""

import gc
import sys

import numpy
import pytest

import lazycore
import lazycore.numpy as np
from lazycore.ir.tensor import Arena

CALLERS = ("eager.py", "nans.py")


def _caller():
    return sys._getframe(2).f_code.co_filename


@pytest.fixture(autouse=True)
def fresh():
    gc.collect()
    lazycore.mark_step(wait=True)
    yield
    gc.collect()
    lazycore.mark_step(wait=True)


@pytest.fixture
def watched(monkeypatch):
    """Every ``pending()`` call answers the walk; the callers' ``pending()``
    calls and ``live()`` walks, counted by caller file."""
    index, live = Arena.pending, Arena.live
    seen = {"pending": {}, "live": {}}

    def pending(self):
        got = index(self)
        want = [h for h in live(self) if h.pending]
        assert got == want, f"index {len(got)} vs walk {len(want)}"
        name = _caller().rsplit("/", 1)[-1]
        seen["pending"][name] = seen["pending"].get(name, 0) + 1
        return got

    def counted(self):
        name = _caller().rsplit("/", 1)[-1]
        seen["live"][name] = seen["live"].get(name, 0) + 1
        return live(self)

    monkeypatch.setattr(Arena, "pending", pending)
    monkeypatch.setattr(Arena, "live", counted)
    return seen


def _settled(n=300):
    rng = numpy.random.default_rng(0)
    kept = [np.asarray(rng.normal(size=3)) for _ in range(n)]
    lazycore.mark_step(wait=True)
    return kept


def test_eager_numpy_ops_settle_from_the_index(watched):
    kept = _settled()
    x = numpy.arange(6.0)
    with lazycore.config.eager():
        a = np.asarray(x)
        b = a * 2 + 1
        c = np.sin(b)
        a += c  # in-place: a settled handle given pending work
        a[1] = 7.0  # setitem
        v = a[2:]
        v *= 3  # through a view
        out = np.zeros(6)
        np.add(a, b, out=out)  # out=
        d = (out - b).sum()
        e = np.sqrt(a - 100.0)  # a NaN: settles like any other value
        assert not any(h._storage.handle.pending for h in (a, b, c, out, d, e))
    want = x + numpy.sin(x * 2 + 1)
    want[1] = 7.0
    want[2:] *= 3
    numpy.testing.assert_array_equal(numpy.asarray(a), want)
    numpy.testing.assert_array_equal(numpy.asarray(out), want + x * 2 + 1)
    assert float(d) == pytest.approx(float(want.sum()))
    with numpy.errstate(invalid="ignore"):
        numpy.testing.assert_array_equal(numpy.isnan(numpy.asarray(e)), numpy.isnan(numpy.sqrt(want - 100.0)))
    assert watched["pending"].get("eager.py", 0) >= 8, watched
    assert watched["live"].get("eager.py", 0) == 0, watched  # (one walk of 300+ live handles an op before)
    assert len(kept) == 300


def test_eager_torch_training_steps_settle_from_the_index(watched):
    torch = pytest.importorskip("torch")
    import lazycore.torch as ltorch

    kept = _settled()

    def run(dev):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = torch.randn(5, 4).to(dev)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.detach().cpu())
        return torch.stack(losses), [p.detach().cpu() for p in model.parameters()]

    want_losses, want_params = run("cpu")
    with lazycore.config.eager():
        got_losses, got_params = run(ltorch.device())
    torch.testing.assert_close(got_losses, want_losses, rtol=1e-5, atol=1e-6)
    for g, w in zip(got_params, want_params):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
    assert watched["pending"].get("eager.py", 0) >= 20, watched
    assert watched["live"].get("eager.py", 0) == 0, watched
    assert len(kept) == 300


def test_debug_nans_checks_the_indexed_handles(watched):
    kept = _settled()
    a = np.asarray(numpy.array([1.0, 4.0, 9.0], numpy.float32))
    lazycore.mark_step(wait=True)
    with lazycore.config.debug_nans():
        fine = a * 2.0
        a += 1.0  # a settled handle given pending work: its value is checked too
        lazycore.mark_step()
        b = np.sqrt(a - 5.0)  # a NaN
        c = b * 3.0 + 1.0
        with pytest.raises(FloatingPointError, match="lazy.sqrt"):
            lazycore.mark_step()
    numpy.testing.assert_array_equal(numpy.asarray(fine), [2.0, 8.0, 18.0])
    numpy.testing.assert_array_equal(numpy.asarray(a), [2.0, 5.0, 10.0])
    with numpy.errstate(invalid="ignore"):
        numpy.testing.assert_array_equal(numpy.isnan(numpy.asarray(c)), [True, False, False])
    assert watched["pending"].get("nans.py", 0) >= 2, watched
    assert watched["live"].get("nans.py", 0) == 0, watched
    assert len(kept) == 300
