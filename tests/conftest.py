import os

# Tests count compiles: a program another run left in the persistent compile
# cache would load instead. Subprocesses inherit this; tests/test_disk_cache.py
# points its own processes at a fresh folder.
os.environ["LAZYCORE_CACHE_DIR"] = "off"

import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


_modules_seen = [0]


@pytest.fixture
def clean_runtime():
    """No pending work, an empty compile cache and zeroed counters.

    The collection frees the previous tests' cycles; then, where modules were
    imported since the last time (transformers, scikit-learn, ... as files
    import them), what is alive is frozen, as lazycore.ir.heap freezes a
    process's imports at its first barriers: a worker late in the suite held
    a million objects more than lazycore had frozen, and this collection took
    0.6-0.9 s of every test's setup there (76 s of test_np_hunt31n_fixes' 82)."""
    import gc
    import sys

    import lazycore as lc
    from lazycore.observe import metrics

    gc.collect()
    if len(sys.modules) != _modules_seen[0]:
        _modules_seen[0] = len(sys.modules)
        gc.freeze()
    lc.mark_step(wait=True)
    lc.cache.clear()
    metrics.reset()
    yield


@pytest.fixture
def fresh_cutter():
    """The automatic step cut learns per process: each test starts from nothing learned."""
    from lazycore.ir.context import TRACE

    TRACE.cutter.reset()
    yield
    TRACE.cutter.reset()


@pytest.fixture
def restore_lowerings():
    """User lowerings and PDL patterns are process-wide: the test leaves them as it found them."""
    from lazycore.passes.lowering import registry

    user, pdl = dict(registry.USER), list(registry.PDL_SOURCES)
    yield
    registry.USER.clear()
    registry.USER.update(user)
    registry.PDL_SOURCES[:] = pdl


@pytest.fixture
def rolling_on():
    """Layers rolled from ``rolled_chains.MIN_COPIES`` copies, whatever the
    platform's default (the CPU's rolls only runs of 16 or more): for tests of
    rolling itself, whose stacks are a few layers deep."""
    from lazycore.ir.config import override

    with override(roll_loops=True):
        yield


@pytest.fixture
def counted(monkeypatch):
    """Counts of walked barriers and of graphs padded to their buckets
    (a step plan recalled walks nothing; a bucket plan recalled pads nothing)."""
    from lazycore.runtime import buckets, planning

    counts = {"walks": 0, "padded": 0}
    walk, pad = planning.walk, buckets.pad_graph

    def walked(step):
        counts["walks"] += 1
        return walk(step)

    def padded(*args, **kwargs):
        counts["padded"] += 1
        return pad(*args, **kwargs)

    monkeypatch.setattr(planning, "walk", walked)
    monkeypatch.setattr(buckets, "pad_graph", padded)
    return counts


def pytest_collection_modifyitems(config, items):
    """In CI's xdist workers (``--dist loadfile --no-loadscope-reorder``, scripts/dev): the files
    tests/ci_durations.json lists run first, longest first, then the rest as collected. xdist's
    own order (most tests first) started the 200 s benchmark smoke test (one test) last: one
    worker ran it alone for two minutes after the other had finished."""
    if not hasattr(config, "workerinput"):
        return  # one process (a helper's few files, LAZYCORE_TEST_WORKERS=0): collection order
    import json
    import pathlib

    seconds = json.loads((pathlib.Path(__file__).parent / "ci_durations.json").read_text())
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::")[0], 0))  # stable: files stay whole
