"""The compile cache: one compile per program structure, bounded, keyed safely."""

import os
import subprocess
import sys

import numpy as np
import pytest

import lazycore as lc
from lazycore.ir import config
from lazycore.observe import metrics
from lazycore.runtime.barrier import Walk

from test_runtime_core import MiniArray


pytestmark = pytest.mark.usefixtures("clean_runtime")


def step(x, scale):
    """A small program: read back (a barrier) ``tanh(x * scale + x)``."""
    a = MiniArray.from_numpy(x)
    return MiniArray(lc.apply("tanh", (a * scale + a).t)).numpy()


def test_same_program_twice_compiles_once(rng):
    x = rng.standard_normal((4, 4)).astype(np.float32)
    first, second = step(x, 2.0), step(x, 2.0)
    np.testing.assert_array_equal(first, second)
    c = metrics.counters()
    assert (c["compiles"], c["cache_hits"], c["executions"]) == (1, 1, 2)
    assert len(metrics.timings()["compile"]) == 1 and len(metrics.timings()["execute"]) == 2


def test_new_scalar_value_reuses_the_program(rng):
    x = rng.standard_normal((4, 4)).astype(np.float32)
    a = MiniArray.from_numpy(x)
    assert (a * 2.0).t.value.node.digest == (a * 3.0).t.value.node.digest
    np.testing.assert_allclose(step(x, 2.0), np.tanh(x * np.float32(2.0) + x), rtol=1e-6)
    np.testing.assert_allclose(step(x, 3.0), np.tanh(x * np.float32(3.0) + x), rtol=1e-6)
    assert metrics.counters()["compiles"] == 1


def test_zero_and_one_are_baked_so_they_compile_apart_until_the_number_changes(rng):
    # the learned scalar policy (lazycore.trace.scalar_policy): 1 is baked at a
    # place that has seen only 1; once that place takes 2.0 it is a parameter
    x = rng.standard_normal((3,)).astype(np.float32)
    np.testing.assert_allclose(step(x, 1.0), np.tanh(x + x), rtol=1e-6)
    np.testing.assert_allclose(step(x, 2.0), np.tanh(3 * x), rtol=1e-6)
    assert metrics.counters()["compiles"] == 2
    np.testing.assert_allclose(step(x, 1.0), np.tanh(x + x), rtol=1e-6)
    np.testing.assert_allclose(step(x, 0.0), np.tanh(x), rtol=1e-6)
    assert metrics.counters()["compiles"] == 2


def test_shape_or_dtype_change_recompiles(rng):
    step(rng.standard_normal((4, 4)).astype(np.float32), 2.0)
    step(rng.standard_normal((5, 4)).astype(np.float32), 2.0)
    step(rng.standard_normal((5, 4)), 2.0)  # f64
    assert metrics.counters()["compiles"] == 3


def test_sharing_of_leaves_is_part_of_the_key(rng):
    # over the host copies' 64 KiB: x + x (exact) is not answered on the host beside the pending a + b
    x, y = (rng.standard_normal((20_000,)).astype(np.float32) for _ in range(2))
    a, b = lc.from_numpy(x), lc.from_numpy(y)
    same, diff = lc.apply("add", a, a), lc.apply("add", a, b)
    assert same.value.node.digest == diff.value.node.digest  # leaves hash their type only
    assert Walk([same.value]).encoding != Walk([diff.value]).encoding
    # each barrier on its own, so each is a program of its own
    np.testing.assert_allclose(lc.to_numpy(same), x + x)
    np.testing.assert_allclose(lc.to_numpy(lc.apply("add", a, b)), x + y)
    assert metrics.counters()["compiles"] == 2


def test_sharing_of_inner_nodes_is_part_of_the_key(rng):
    x, y = (lc.from_numpy(rng.standard_normal((3,)).astype(np.float32)) for _ in range(2))
    n1, n2 = lc.apply("neg", x), lc.apply("neg", y)
    shared = lc.apply("add", n1, n1)
    apart = lc.apply("add", n1, n2)
    assert Walk([shared.value]).encoding != Walk([apart.value]).encoding


def test_cache_is_lru_and_bounded_by_the_setting(rng):
    progs = [rng.standard_normal((n,)).astype(np.float32) for n in (2, 3, 4)]
    with config.override(cache_size=2):
        step(progs[0], 2.0)
        step(progs[1], 2.0)
        step(progs[0], 2.0)  # hit: now most recent
        step(progs[2], 2.0)  # evicts progs[1]'s program
        assert lc.cache.size() == 2
        step(progs[0], 2.0)
        assert metrics.counters()["cache_hits"] == 2
        step(progs[1], 2.0)
        assert metrics.counters()["compiles"] == 4


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="memory mappings are read from Linux's /proc")
def test_cache_gives_programs_back_as_the_process_nears_its_mapping_limit(rng, monkeypatch):
    # XLA's CPU executables keep their kernels' code in mappings of their own:
    # 256 programs of a real model's size passed the kernel's limit and the next
    # compile crashed. Here the limit is made 40 mappings past what the process
    # holds now, and every program takes some: the cache keeps the process under.
    from lazycore.runtime import cache as runtime_cache

    budget = runtime_cache._mappings() + 40
    monkeypatch.setattr(runtime_cache.CACHE, "mapping_limit", int(budget / runtime_cache.MAPPINGS_SHARE) + 1)
    xs = [rng.standard_normal((n, 3)).astype(np.float32) for n in range(2, 26)]
    for x in xs:
        np.testing.assert_allclose(step(x, 2.0), np.tanh(x * np.float32(2.0) + x), rtol=1e-6)
        assert runtime_cache._mappings() <= budget + 40  # (at most the program just made past it)
    c = metrics.counters()
    assert c["programs_given_back"] > 0 and 1 <= lc.cache.size() < len(xs)
    np.testing.assert_allclose(step(xs[-1], 2.0), np.tanh(xs[-1] * np.float32(2.0) + xs[-1]), rtol=1e-6)
    assert metrics.counters()["cache_hits"] == 1  # the newest program was kept
    np.testing.assert_allclose(step(xs[0], 2.0), np.tanh(xs[0] * np.float32(2.0) + xs[0]), rtol=1e-6)
    assert metrics.counters()["compiles"] == len(xs) + 1  # a program given back compiles again


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="memory mappings are read from Linux's /proc")
def test_programs_held_elsewhere_are_not_given_back_in_vain(rng, monkeypatch):
    # the mappings are over the limit but not the cache's (here: the process's
    # own, the limit below them): a quarter of the programs dropped frees none,
    # and the cache stops there instead of dropping every program at each insert
    from lazycore.runtime import cache as runtime_cache

    xs = [rng.standard_normal((n,)).astype(np.float32) for n in range(2, 11)]
    for x in xs:
        step(x, 2.0)
    assert lc.cache.size() == len(xs)
    monkeypatch.setattr(runtime_cache.CACHE, "mapping_limit", 2)
    held = list(runtime_cache.CACHE._entries.values())  # (alive elsewhere: dropping them frees nothing)
    step(rng.standard_normal((11,)).astype(np.float32), 2.0)
    assert lc.cache.size() == len(xs) + 1 - len(xs) // 4
    assert metrics.counters()["programs_given_back"] == len(xs) // 4
    # nor at the inserts after it: a loop's own programs are not dropped a quarter a compile
    for x in xs[:3]:
        step(x, 3.0)
    assert metrics.counters()["programs_given_back"] == len(xs) // 4
    del held


def test_a_vain_give_back_is_tried_again_once_the_process_grows(monkeypatch):
    from lazycore.runtime import cache as runtime_cache

    maps = [30_000]
    monkeypatch.setattr(runtime_cache, "_mappings", lambda: maps[0])
    cache = runtime_cache.CompileCache()
    cache.mapping_limit = 65_536  # (budget 32,768, hold step 1,024)
    for i in range(9):
        cache.put(bytes([i]), object())
    maps[0] = 100_000  # (and it stays there: dropping programs frees nothing)
    cache.put(b"\x09", object())
    assert len(cache) == 8  # a quarter of the 9 older ones dropped, in vain
    for i in range(2, 6):
        cache.get(bytes([i]))  # (a loop's own programs, used again)
    maps[0] += 1_023
    cache.put(b"x", object())
    assert len(cache) == 9  # grown by less than the step: nothing dropped
    maps[0] += 1
    cache.put(b"y", object())
    assert len(cache) == 8  # a quarter of the 9 older ones, in vain again: the least recently used
    assert [bytes([i]) in cache for i in range(10)] == [False] * 2 + [True] * 4 + [False] * 2 + [True] * 2
    maps[0] = 32_000  # back under the budget: the next time past it gives back at once
    cache.put(b"z", object())
    maps[0] = 40_000
    cache.put(b"w", object())
    assert len(cache) == 8


def test_mappings_are_read_only_within_an_inserts_reach_of_the_budget(monkeypatch):
    # reading /proc/self/maps costs about 0.35 ms per thousand mappings: far
    # under the budget an insert skips it; within MAPPINGS_PER_INSERT per
    # insert since the last reading of it, every insert reads
    from lazycore.runtime import cache as runtime_cache

    maps, reads = [10_000], []
    monkeypatch.setattr(runtime_cache, "_mappings", lambda: reads.append(maps[0]) or maps[0])
    cache = runtime_cache.CompileCache()
    cache.mapping_limit = 65_536  # (budget 32,768)
    step = runtime_cache.MAPPINGS_PER_INSERT
    for i in range(40):
        cache.put(bytes([i]), object())
    # read at the first insert, then once the inserts since could have reached the budget
    assert len(reads) == 2 and len(cache) == 40
    maps[0] = 32_768 - step // 2
    reads.clear()
    cache = runtime_cache.CompileCache()
    cache.mapping_limit = 65_536
    for i in range(5):
        cache.put(bytes([i]), object())
    assert len(reads) == 5  # (within one insert's reach of the budget: each reads)
    maps[0] = 40_000
    cache.put(b"x", object())
    assert metrics.counters()["programs_given_back"] > 0  # past the budget at once
    reads.clear()
    lc.cache.clear()
    runtime_cache.CompileCache().clear()  # an empty cache gives nothing back: nothing read
    assert reads == []


def test_cache_size_comes_from_the_environment():
    env = dict(os.environ, LAZYCORE_CACHE_SIZE="7")
    code = "from lazycore.ir.config import settings; print(settings.cache_size)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "7"
    env["LAZYCORE_CACHE_SIZE"] = "many"
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "LAZYCORE_CACHE_SIZE must be an integer" in bad.stderr


def test_unknown_setting_is_refused():
    with pytest.raises(KeyError, match="cache_sise"):
        config.configure(cache_sise=3)


def test_a_hit_does_no_mlir_work(rng, monkeypatch):
    import lazycore.dialect
    import lazycore.dialect.build
    from lazycore.runtime import compiler

    x = rng.standard_normal((2, 2)).astype(np.float32)
    step(x, 2.0)

    def boom(*a, **k):
        raise AssertionError("MLIR used on a cache hit")

    for mod, name in ((lazycore.dialect.build, "new_context"), (lazycore.dialect, "create"),
                      (compiler, "lower"), (compiler, "compile_stablehlo")):
        monkeypatch.setattr(mod, name, boom)
    np.testing.assert_allclose(step(x, 5.0), np.tanh(x * np.float32(5.0) + x), rtol=1e-6)
    assert metrics.counters()["cache_hits"] == 1


def test_user_lowerings_are_part_of_the_key(rng):
    """The environment part of the key is kept between barriers; registering
    or dropping a lowering must still reach it."""
    from lazycore.passes import register_lowering, unregister_lowering
    from lazycore.passes.lowering import hlo, registry

    def tanh_as_zero(op, rewriter):  # a visibly different program
        return hlo.splat_like(0.0, op.operands[0])

    x = rng.standard_normal((4, 4)).astype(np.float32)
    want = np.tanh(x * 2.0 + x)
    try:
        np.testing.assert_allclose(step(x, 2.0), want, rtol=1e-6)
        register_lowering("tanh", tanh_as_zero)
        np.testing.assert_array_equal(step(x, 2.0), np.zeros_like(x))
        unregister_lowering("tanh")
        np.testing.assert_allclose(step(x, 2.0), want, rtol=1e-6)
        assert metrics.counters()["compiles"] == 2  # the builtin program came back from the cache
    finally:
        registry.clear_user_patterns()
