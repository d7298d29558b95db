"""Every cache has one owner and a bound, and lazycore.cache.clear() empties them all (issue 42).

The registry is lazycore.ir.memo; the one replayer (lazycore.trace.replayer)
is a registered memo from key to recordings behind guards.
"""

import gc

import numpy as np
import pytest

import lazycore as lc
from lazycore.ir import memo
from lazycore.ir.memo import MEMOS, Family, Memo
from lazycore.trace.replayer import GUARDED, Replayer


def _workload():
    """Enough work to fill the caches of every layer: per-op torch tracing with a
    float parameter, a captured step with an optimizer, autocast, the NumPy shim
    and a frontend's own lc.replayed lowering."""
    import torch

    import lazycore.numpy as lnp
    import lazycore.torch as ltorch

    dev = ltorch.device()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    @ltorch.capture
    def step(x):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    for i in range(4):
        step(torch.full((3, 4), float(i), device=dev))
        ltorch.mark_step()
    for i in range(4):  # an optimizer stepped outside capture: optimizer replay
        opt.zero_grad()
        model(torch.ones(3, 4, device=dev)).sum().backward()
        opt.step()
        ltorch.mark_step()
    x = torch.ones(4, 4, device=dev)
    (x.t() * 2.5 + 1).cpu()
    with torch.autocast("lazy", dtype=torch.bfloat16):
        (x @ x).float().cpu()

    @lc.replayed
    def scaled(a, s):
        return lc.apply("mul", a, lc.broadcast_to(lc.scalar(s, a.dtype), a.shape))

    h = lc.from_numpy(np.ones(3, np.float32))
    for s in (0.5, 0.25, 0.125):
        scaled(h, s)
    lc.mark_step()
    a = lnp.asarray(np.arange(6, dtype=np.float32))
    np.asarray(lnp.sin(a) * 2.0)
    return step, opt


def test_every_registered_cache_has_a_bound_and_clear_empties_all_of_them():
    step, opt = _workload()
    sizes = memo.sizes()
    for name in ("runtime.programs", "runtime.scalar_packs", "runtime.step_plans", "trace.replayed",
                 "ir.generated_code", "torch.meta", "torch.capture_plans",
                 "torch.autocast_plans", "trace.user_files"):
        assert sizes[name][0] > 0, (name, sizes[name])
    for name, cache in MEMOS.items():
        bound = cache.limit
        assert type(bound) is int and bound > 0, (name, bound)
        assert len(cache) <= bound, (name, len(cache), bound)
    assert step.replays > 0
    report = lc.metrics.report()
    assert "runtime.programs" in report and "torch.capture_plans" in report
    lc.cache.clear()
    assert {name: n for name, (n, _) in memo.sizes().items() if n} == {}
    del step, opt


def test_a_replayer_tries_a_keys_recordings_in_order_and_keeps_per_key_of_them():
    class Rec:
        def __init__(self, name, holds):
            self.name, self.holds, self.calls = name, holds, 0

        def attempt(self, x):
            self.calls += 1
            return (self.name, x) if self.holds(x) else GUARDED

    r = Replayer("test.replayer", 3, per_key=2)
    try:
        a, b, c = Rec("a", lambda x: x > 0), Rec("b", lambda x: True), Rec("c", lambda x: x < 0)
        r.add("k", a)
        r.add("k", b)
        assert r.replay("k", 1) == ("a", 1)
        assert r.replay("k", -1) == ("b", -1)  # a's guard failed, b's held
        r.add("k", c)  # two per key: a goes
        assert r.get("k") == (b, c) and r.find("k") is c
        assert r.replay("missing", 1) is GUARDED
        r.add("k2", a)
        r.add("k3", a)
        r.add("k", a)  # a known key is replaced in place, not counted against the bound
        assert len(r) == 3
        r.add("k4", a)  # a fourth key: emptied whole, as every memo
        assert list(r) == ["k4"]
    finally:
        del MEMOS["test.replayer"]


def test_a_family_counts_and_clears_its_live_members():
    fam = Family("test.family", 2)
    try:
        m1, m2 = Memo("m", 2, fam), Memo("m", 2, fam)
        m1.put(1, 1)
        m2.put(1, 1)
        m2.put(2, 2)
        assert len(fam) == 3 and fam.limit == 4
        with pytest.raises(ValueError):
            Memo("m", 3, fam)  # members share the family's bound
        del m2
        gc.collect()
        assert len(fam) == 1
        fam.clear()
        assert len(m1) == 0
    finally:
        del MEMOS["test.family"]
