"""lazycore from several Python threads (docs/threads.md).

Threads share one pending graph per device; every op, read and barrier holds
:data:`lazycore.ir.context.LOCK`. The stress test runs N threads that trace,
read (``.tolist()``, ``.item()``) and ``mark_step()`` in random order on
private tensors, on shared read-only tensors and on one shared tensor they
update in place under their own lock; every value read must equal eager's
(eager torch on the CPU, or NumPy) exactly: the arithmetic is on small
integers in float32, where every result is exact.

Each stress run is a child process with faulthandler on (tests/_threads_child.py),
so a crash fails its test instead of killing pytest. CI runs a small budget;
``LAZYCORE_THREAD_STEPS`` sets the steps per thread, or by hand::

    python -m tests.test_threads torch 8 5000    # frontend, threads, steps per thread

prints the figures (threads, steps, ops, barriers, compiles, wall time).
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _bits import BY_HAND  # noqa: E402 (tests/ is on the path)
from _threads_child import in_child, run_threads  # noqa: E402

CI_STEPS = 40
"""Steps per thread in CI (each step: one random action); ``LAZYCORE_THREAD_STEPS`` overrides it."""

MOD = 101.0


def _steps(default: int = CI_STEPS) -> int:
    return int(os.environ.get("LAZYCORE_THREAD_STEPS", default))


class TorchSide:
    """The torch frontend and its reference: eager torch on the CPU."""

    name = "torch"

    def __init__(self):
        import torch

        import lazycore.torch as ltorch

        self.torch, self.ltorch = torch, ltorch
        self.dev = ltorch.device()

    def lazy(self, host: np.ndarray):
        return self.torch.tensor(host, device=self.dev)

    def ref(self, host: np.ndarray):
        return self.torch.tensor(host)

    def maximum(self, a, b):
        return self.torch.maximum(a, b)

    def branch(self, pred, true_fn, false_fn, x):
        """``torch.cond`` (lazycore.cond on the device: both branches traced)."""
        return self.torch.cond(pred, true_fn, false_fn, (x,))

    def mark_step(self):
        self.ltorch.mark_step()

    def host(self, t) -> np.ndarray:
        return np.asarray(t.tolist(), dtype=np.float32) if t.dim() else np.float32(t.item())

    def item(self, t) -> float:
        return t.item()


class NumpySide:
    """The NumPy frontend and its reference: NumPy."""

    name = "numpy"

    def __init__(self):
        import lazycore
        import lazycore.numpy as lnp

        self.lnp, self.lc = lnp, lazycore

    def lazy(self, host: np.ndarray):
        return self.lnp.asarray(host)

    def ref(self, host: np.ndarray):
        return np.array(host)

    def maximum(self, a, b):
        return (self.lnp if isinstance(a, self.lnp.ndarray) else np).maximum(a, b)

    def branch(self, pred, true_fn, false_fn, x):
        return self.lc.cond(pred, true_fn, false_fn, x)

    def mark_step(self):
        self.lc.mark_step()

    def host(self, t) -> np.ndarray:
        return np.asarray(t.tolist(), dtype=np.float32)

    def item(self, t) -> float:
        return t.item()


def _host(rng: random.Random, n: int) -> np.ndarray:
    return np.array([rng.randrange(int(MOD)) for _ in range(n)], dtype=np.float32)


class Shared:
    """What the threads share: read-only tensors, and an accumulator they
    update in place under ``lock`` (the user's own synchronization)."""

    def __init__(self, side, rng: random.Random, n: int):
        hosts = [_host(rng, n) for _ in range(3)]
        self.hosts = hosts
        self.lazy = [side.lazy(h) for h in hosts]
        self.ref = [side.ref(h) for h in hosts]
        self.acc = side.lazy(np.zeros(n, np.float32))
        self.acc_ref = side.ref(np.zeros(n, np.float32))
        self.lock = threading.Lock()


class Counts:
    def __init__(self):
        self.ops = 0
        self.reads = 0
        self.steps = 0
        self.marks = 0


def _check(side, got, want, what: str) -> None:
    g, w = side.host(got), side.host(want)
    if not np.array_equal(g, w):
        raise AssertionError(f"{side.name} {what}: lazy {g.tolist()} != eager {w.tolist()}")


def _worker(side, shared: Shared, seed: int, steps: int, n: int, counts: Counts, errors: list,
            start: threading.Barrier) -> None:
    rng = random.Random(seed)
    try:
        h = _host(rng, n)
        x, xr = side.lazy(h), side.ref(h)
        temps: list = []  # live pending values of this thread (outputs of other threads' barriers too)
        start.wait()
        ops = reads = marks = 0
        for _ in range(steps):
            action = rng.randrange(12)
            j = rng.randrange(len(shared.lazy))
            if action == 0:
                k = float(rng.randrange(1, 50))
                x, xr = (x * 3.0 + k) % MOD, (xr * 3.0 + k) % MOD
                ops += 3
            elif action == 1:
                x, xr = (x + shared.lazy[j]) % MOD, (xr + shared.ref[j]) % MOD
                ops += 2
            elif action == 2:
                x, xr = side.maximum(x, shared.lazy[j]), side.maximum(xr, shared.ref[j])
                ops += 1
            elif action == 3:  # a write through a view: in place
                a = rng.randrange(n - 1)
                b = rng.randrange(a + 1, n + 1)
                c = float(rng.randrange(1, 9))
                x[a:b] = (x[a:b] + c) % MOD
                xr[a:b] = (xr[a:b] + c) % MOD
                ops += 4
            elif action == 4:  # in place on the whole tensor: its old buffer may be donated
                x *= 2.0
                x %= MOD
                xr *= 2.0
                xr %= MOD
                ops += 2
            elif action == 5:  # a pending value kept alive for a while
                temps.append(((x - shared.lazy[j]) * 2.0, (xr - shared.ref[j]) * 2.0))
                ops += 2
                if len(temps) > 4:
                    del temps[rng.randrange(len(temps))]
            elif action == 6:
                _check(side, x, xr, f"thread {seed} private value")
                reads += 1
            elif action == 7:
                got, want = side.item((x * 1.0).sum()), side.item(xr.sum())
                if got != want:
                    raise AssertionError(f"{side.name} thread {seed} sum: lazy {got} != eager {want}")
                ops += 2
                reads += 1
            elif action == 8:
                side.mark_step()
                marks += 1
            elif action == 9:  # the shared accumulator, updated in place under the user's lock
                with shared.lock:
                    shared.acc += x
                    shared.acc %= 1009.0
                    shared.acc_ref += xr
                    shared.acc_ref %= 1009.0
                    ops += 2
                    if rng.randrange(3) == 0:
                        _check(side, shared.acc, shared.acc_ref, f"thread {seed} shared accumulator")
                        reads += 1
            elif action == 10:  # a branch on a value: its bodies are traced while other threads trace
                k = float(rng.randrange(1, 9))
                pick = float(rng.randrange(int(MOD) * n))

                def double(t):
                    return (t * 2.0) % MOD

                def shift(t, k=k):
                    return (t + k) % MOD

                x = side.branch(x.sum() > pick, double, shift, x)
                xr = double(xr) if float(xr.sum()) > pick else shift(xr)
                ops += 6
            else:
                if temps:
                    t, tr = temps[rng.randrange(len(temps))]
                    _check(side, t, tr, f"thread {seed} kept value")
                    reads += 1
        _check(side, x, xr, f"thread {seed} final value")
        for t, tr in temps:
            _check(side, t, tr, f"thread {seed} final kept value")
        with shared.lock:
            counts.ops += ops
            counts.reads += reads + 1 + len(temps)
            counts.steps += steps
            counts.marks += marks
    except BaseException as e:  # noqa: BLE001  (reported by the main thread)
        import traceback

        errors.append(f"thread {seed}: {type(e).__name__}: {e}\n{traceback.format_exc()}")
        start.abort()


def stress(frontend: str, threads: int, steps: int, n: int = 6, seed: int = 0) -> dict:
    """Run ``threads`` workers of ``steps`` random actions each; raise on any
    value that differs from eager's or any thread's error. Returns the figures."""
    import lazycore
    from lazycore.observe import metrics

    side = TorchSide() if frontend == "torch" else NumpySide()
    rng = random.Random(seed)
    shared = Shared(side, rng, n)
    counts = Counts()
    errors: list = []
    metrics.reset()
    start = threading.Barrier(threads)
    workers = [threading.Thread(target=_worker, args=(side, shared, seed * 1000 + k, steps, n, counts, errors, start))
               for k in range(threads)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.perf_counter() - t0
    assert not errors, "\n".join(errors)
    lazycore.mark_step(wait=True)
    _check(side, shared.acc, shared.acc_ref, "shared accumulator at the end")
    for t, h in zip(shared.lazy, shared.hosts):  # read-only: unchanged
        _check(side, t, side.ref(h), "shared read-only tensor at the end")
    c = metrics.counters()
    return {"frontend": frontend, "threads": threads, "steps": counts.steps, "ops": counts.ops,
            "reads": counts.reads, "mark_steps": counts.marks, "executions": c["executions"],
            "compiles": c["compiles"], "wall_s": round(wall, 2)}


# --- child processes (faulthandler on: a crash is a failed test) -----------------------------


def _child(frontend: str, threads: int, steps: int = CI_STEPS) -> None:
    figures = stress(frontend, threads, _steps(steps))
    print("figures:", figures)


def _torch_4_threads():
    _child("torch", 4)


def _torch_8_threads():
    _child("torch", 8, CI_STEPS // 3)


def _numpy_3_threads():
    _child("numpy", 3)


def _issue_repro() -> None:
    """The issue's program: two threads, a few ops and mark_step() each on one
    device, first as the process's first compile (concurrent), then again
    after a barrier of the main thread; each time the main thread's next
    barrier after them."""
    import torch

    import lazycore.torch as ltorch

    dev = ltorch.device()
    _two_threads(torch, ltorch, dev)
    assert (torch.ones(2, device=dev) + 1).tolist() == [2.0, 2.0]
    _two_threads(torch, ltorch, dev)


def _two_threads(torch, ltorch, dev) -> None:
    results = {}

    def work(k):
        x = torch.full((4,), float(k), device=dev)
        for i in range(50):
            x = x * 1.0 + 1.0
            if i % 10 == 9:
                ltorch.mark_step()
        results[k] = x.tolist()

    errors = run_threads(work, [(k,) for k in range(2)])
    assert not errors, errors
    assert results == {0: [50.0] * 4, 1: [51.0] * 4}, results
    assert (torch.ones(3, device=dev) * 2).tolist() == [2.0] * 3  # the process is not left broken


def _contexts_and_compiles():
    """MLIR contexts made and modules compiled from 8 threads at once (the
    ``lazy`` dialect's loading raced: 'redefinition of symbol', segfaults)."""
    from lazycore.dialect.build import new_context
    from lazycore.runtime import compiler

    text = """
    func.func @main(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
      %0 = "lazy.add"(%a, %b) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      %1 = "lazy.mul"(%0, %0) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      return %1 : tensor<3xf32>
    }"""
    outs = []

    def work(k):
        for i in range(4):
            new_context()
            a = np.full(3, k, np.float32)
            b = np.full(3, i, np.float32)
            (out,) = compiler.run_module(text, [a, b])
            outs.append(((a + b) * (a + b), np.asarray(out)))

    errors = run_threads(work, [(k,) for k in range(8)])
    assert not errors, errors
    assert len(outs) == 32
    for want, got in outs:
        np.testing.assert_array_equal(got, want)


# --- the tests ------------------------------------------------------------------------------


def test_issue_repro_two_threads_first_compile_concurrent_then_warm():
    in_child(__file__, "_issue_repro", timeout=300)


def test_contexts_and_compiles_from_eight_threads():
    in_child(__file__, "_contexts_and_compiles", timeout=300)


# CI: test_torch_eight_threads_stress_equals_eager takes the same path (the same stress, more threads, fewer steps)
@BY_HAND
def test_torch_four_threads_stress_equals_eager():
    in_child(__file__, "_torch_4_threads", timeout=600)


def test_torch_eight_threads_stress_equals_eager():
    in_child(__file__, "_torch_8_threads", timeout=600)


def test_numpy_three_threads_stress_equals_eager():
    in_child(__file__, "_numpy_3_threads", timeout=600)


def test_compile_cache_from_threads(clean_runtime):
    """The LRU compile cache: concurrent gets and puts keep its bound and
    never lose a key's move to the recent end (a get raced an eviction)."""
    from lazycore.ir.config import settings
    from lazycore.runtime.cache import CompileCache

    cache = CompileCache()
    bound = settings.cache_size

    def work(k):
        for i in range(2000):
            key = bytes([k, i % 7])
            if cache.get(key) is None:
                cache.put(key, (k, i % 7))
            got = cache.get(key)
            assert got is None or got == (k, i % 7), got

    errors = run_threads(work, [(k,) for k in range(6)])
    assert not errors, errors
    assert len(cache) <= bound


def main(argv: list[str]) -> int:
    frontend = argv[0] if argv else "torch"
    threads = int(argv[1]) if len(argv) > 1 else 4
    steps = int(argv[2]) if len(argv) > 2 else _steps(2000)
    import faulthandler

    faulthandler.enable()
    os.environ.setdefault("LAZYCORE_CACHE_DIR", "off")
    print(stress(frontend, threads, steps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
