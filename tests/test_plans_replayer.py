"""The barrier's plans are the one replayer's recordings (issue 42): step
plans (lazycore.runtime.stepplans) and bucket plans (lazycore.runtime.buckets)
are kept by registered Replayers, each recording recalled through its
attempt(); the memo report lists them and lazycore.cache.clear() empties them."""

import numpy as np
import pytest

import lazycore as lc
import lazycore.numpy as lnp
from lazycore.ir import memo
from lazycore.ir.memo import MEMOS
from lazycore.ir.replayer import Replayer
from lazycore.runtime import stepplans

pytestmark = pytest.mark.usefixtures("clean_runtime")


def _step(h):
    x = lnp.dynamic(lnp.asarray(h), 0)  # padded to its bucket at the barrier
    return np.asarray((x * 2 + 1) * x)


def _steps(h, n, counted) -> list[tuple[int, int]]:
    """``n`` steps on ``h``; per step, whether it walked and whether it padded its graph."""
    out = []
    for _ in range(n):
        before = dict(counted)
        np.testing.assert_allclose(_step(h), (h * 2 + 1) * h, rtol=1e-6)
        out.append((counted["walks"] - before["walks"], counted["padded"] - before["padded"]))
    return out


def test_step_and_bucket_plans_are_recordings_of_registered_replayers(rng, counted):
    h = rng.standard_normal((5, 3)).astype(np.float32)
    first = _steps(h, 4, counted)
    assert first[0] == (1, 1) and first[-2:] == [(0, 0), (0, 0)]  # padded once, then recalled
    for name in ("runtime.step_plans", "runtime.bucket_plans"):
        kept = MEMOS[name]
        assert isinstance(kept, Replayer) and len(kept) > 0, name
        assert all(callable(r.attempt) for recordings in kept.values() for r in recordings), name
        assert memo.sizes()[name][0] == len(kept)
    report = lc.metrics.report()
    assert "runtime.bucket_plans" in report and "runtime.step_plans" in report

    lc.cache.clear()
    assert len(MEMOS["runtime.step_plans"]) == 0 and len(MEMOS["runtime.bucket_plans"]) == 0
    again = _steps(h, 4, counted)
    assert again[0] == (1, 1) and again[-2:] == [(0, 0), (0, 0)]  # forgotten: walked and padded anew


def test_a_walked_step_recalls_its_bucket_plan_without_a_step_plan(rng, counted):
    h = rng.standard_normal((6, 3)).astype(np.float32)
    assert _steps(h, 3, counted)[-1] == (0, 0)
    stepplans.clear()  # the step walks again; its padded program is the bucket plan's
    assert len(MEMOS["runtime.step_plans"]) == 0 and len(MEMOS["runtime.bucket_plans"]) > 0
    assert _steps(h, 1, counted) == [(1, 0)]
