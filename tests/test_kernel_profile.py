"""Per-kernel device time (issue 43, item 7): ``lazycore.profile.kernels()``
times every kernel XLA runs (its profiler, through jaxlib) and sums them per
program and kernel; ``profile.trace(..., kernels=True)`` puts them in the
Perfetto trace; ``metrics.report()`` lists the top ones."""

from __future__ import annotations

import json
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import lazycore
import lazycore.numpy as lnp
from lazycore.observe import metrics
from lazycore.runtime import pjrt


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if f"# {marker}" in line and "_line_of" not in line)


def _step(a):
    b = lnp.tanh(a) @ a  # kernels: the matmul
    return float((b + lnp.exp(a)).sum())


def test_each_kernel_of_a_program_is_timed_and_counted_per_run():
    a = lnp.asarray(np.linspace(0, 1, 128 * 128, dtype=np.float32).reshape(128, 128))
    _step(a)  # compiled outside the profile
    (prog,) = [p for p in metrics.programs(every=True)][-1:]
    t0 = time.perf_counter()
    with lazycore.profile.kernels() as prof:
        for _ in range(3):
            _step(a)
    wall = time.perf_counter() - t0
    label = f"program {prog.number}"
    assert prof.executions == {label: 3}, prof.executions
    assert prof.rows and all(r.program == label for r in prof.rows), prof.table()
    assert all(r.count == 3 for r in prof.rows), prof.table()  # every kernel runs once per execution
    assert 0 < prof.total < wall
    assert [r.time for r in prof.rows] == sorted((r.time for r in prof.rows), reverse=True)
    # the kernel holding the matmul says so, and names the line it came from
    (dot,) = [r for r in prof.rows if "dot" in r.what]
    assert f"test_kernel_profile.py:{_line_of('kernels: the matmul')}" in dot.lines, dot
    # each event lies inside the block, on perf_counter's clock
    assert len(prof.events) == 3 * len(prof.rows)
    assert all(t0 <= start and start + dur <= t0 + wall for _, _, start, dur, _ in prof.events), prof.events[:3]
    text = prof.table()
    assert text.splitlines()[0].split()[:6] == ["program", "kernel", "time", "ms", "count", "mean"], text
    assert f"{label} x3" in text and dot.kernel in text, text
    assert pjrt.LAUNCHES.log is None  # launches are no longer noted
    assert "kernels (the last lazycore.profile.kernels()" in metrics.report()


def test_a_jax_program_in_the_profile_shows_under_its_own_name():
    f = jax.jit(lambda x: jnp.sin(x) * 2)
    x = jnp.ones(1024)
    f(x).block_until_ready()
    a = lnp.asarray(np.ones((64, 64), np.float32))
    _step(a)
    with lazycore.profile.kernels() as prof:
        f(x).block_until_ready()
        _step(a)
    programs = {r.program for r in prof.rows}
    assert any(p.startswith("jit_") for p in programs), prof.table()
    assert any(p.startswith("program ") for p in programs), prof.table()


def test_kernels_go_into_the_perfetto_trace_on_a_device_track(tmp_path):
    a = lnp.asarray(np.ones((96, 96), np.float32))
    _step(a)
    path = tmp_path / "t.json"
    with lazycore.profile.trace(path, kernels=True):
        for _ in range(2):
            _step(a)
    data = json.loads(path.read_text())
    evs = data["traceEvents"]
    kernels = [e for e in evs if e.get("cat") == "kernel"]
    barriers = [e for e in evs if e.get("cat") == "barrier"]
    assert len(barriers) == 2 and kernels, evs
    tracks = {e["tid"]: e["args"]["name"] for e in evs if e.get("name") == "thread_name"}
    assert {tracks[e["tid"]] for e in kernels} == {"XLA kernels (device 0)"}, tracks
    assert all(e["args"]["program"].startswith("program ") for e in kernels)
    # each kernel runs after its barrier began and before the trace ended
    first = min(b["ts"] for b in barriers)
    end = max(e["ts"] + e["dur"] for e in evs if e.get("ph") == "X")
    assert all(first <= k["ts"] <= end for k in kernels), (first, kernels[:2])


def test_a_torch_training_step_profiles_its_kernels():
    import lazycore.torch as ltorch

    dev = ltorch.device()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 32).to(dev), torch.randn(16, 1).to(dev)

    def step():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        ltorch.mark_step()

    for _ in range(3):
        step()
    with lazycore.profile.kernels() as prof:
        for _ in range(4):
            step()
    assert sum(prof.executions.values()) == 4, prof.executions
    assert any("dot" in r.what or r.what == "dot" or "custom-call" in r.what for r in prof.rows), prof.table()
    assert all(r.count % 4 == 0 for r in prof.rows), prof.table()


def test_a_rolled_loops_body_kernels_are_the_programs_and_the_loop_is_not_counted_twice(rolling_on):
    """Identical layers run as one XLA while loop (``roll_loops``): the
    profiler times the loop and, inside it, its body's kernels."""
    import lazycore.torch as ltorch

    dev = ltorch.device()
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Tanh()) for _ in range(6)])
    model = model.to(dev)
    x = torch.randn(8, 32).to(dev)
    with torch.no_grad():
        for _ in range(2):
            model(x).sum().item()
        with lazycore.profile.kernels() as prof:
            for _ in range(3):
                model(x).sum().item()
    (label,) = prof.executions
    assert label.startswith("program ") and prof.executions[label] == 3, prof.table()
    loops = [r for r in prof.rows if r.container]
    assert loops and all(r.what.startswith("while") for r in loops), prof.table()
    # the layers' matmuls run inside the loop: 6 a run
    assert any(r.count == 18 and "dot" in r.what for r in prof.rows), prof.table()
    assert prof.total == pytest.approx(sum(r.time for r in prof.rows if not r.container))
    assert "     -  while" in prof.table(None)


def test_not_inside_a_jax_profiler_trace(tmp_path):
    jax.profiler.start_trace(str(tmp_path))
    try:
        with pytest.raises(RuntimeError, match="jax.profiler trace is running"):
            with lazycore.profile.kernels():
                pass
    finally:
        jax.profiler.stop_trace()
    with lazycore.profile.kernels():  # and afterwards it records again
        pass


def _mesh_kernels():
    import os
    import tempfile

    mesh = lazycore.Mesh((4,), ("data",))
    x = lnp.shard(lnp.asarray(np.arange(64, dtype=np.float32).reshape(16, 4)), mesh, ("data", None))
    w = lnp.shard(lnp.asarray(np.ones((4, 4), np.float32)), mesh, (None, None))

    def step():
        return float(lnp.tanh(x @ w).sum())

    step()
    with lazycore.profile.kernels() as prof:
        for _ in range(3):
            step()
    (label,) = prof.executions
    assert prof.executions[label] == 3 and label.startswith("program "), prof.executions
    # each kernel ran on each of the 4 devices at each execution; the sum over the split rows is XLA's all-reduce
    assert all(r.count == 12 for r in prof.rows), prof.table()
    assert any(r.what == "all-reduce" for r in prof.rows), prof.table()
    assert len(prof.events) == 36
    path = os.path.join(tempfile.mkdtemp(), "mesh.json")
    with lazycore.profile.trace(path, kernels=True):
        with pytest.raises(RuntimeError, match="a kernel profile is already recording"):
            with lazycore.profile.kernels():
                pass
        step()
    evs = json.load(open(path))["traceEvents"]
    tracks = {e["args"]["name"] for e in evs if e.get("name") == "thread_name"}
    assert {f"XLA kernels (device {i})" for i in range(4)} <= tracks, tracks
    assert sum(1 for e in evs if e.get("cat") == "kernel") == 12


def test_a_mesh_programs_kernels_on_every_device():
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from isolated import FOUR_DEVICES, run_isolated

    run_isolated(__file__, "_mesh_kernels", env=FOUR_DEVICES)


_SCRIPT = """\
import json, numpy as np, lazycore, lazycore.numpy as lnp
a = lnp.asarray(np.linspace(0, 1, 64 * 64, dtype=np.float32).reshape(64, 64))
def step(a):
{pad}    return float((lnp.tanh(a) @ a).sum())
step(a)
with lazycore.profile.kernels() as prof:
    step(a)
print(json.dumps({{"lines": sorted({{w for r in prof.rows for w in r.lines}}), "table": prof.table(),
                  "hits": lazycore.metrics.counters()["disk_cache_hits"]}}))
"""


def _profile_in_a_process(path, cache_dir):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("LAZYCORE_CACHE_DIR", "XLA_FLAGS")}
    env["LAZYCORE_CACHE_DIR"] = str(cache_dir)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_program_loaded_from_the_disk_cache_does_not_name_the_compiling_scripts_lines(tmp_path):
    """The lines in a program's HLO are those of the process that compiled it:
    a second script that loads it from the disk cache must not show the first
    script's file and line as its own."""
    first, second = tmp_path / "first_script.py", tmp_path / "second_script.py"
    first.write_text(_SCRIPT.format(pad=""))
    second.write_text(_SCRIPT.format(pad="    pass\n" * 3))
    a = _profile_in_a_process(first, tmp_path / "cache")
    assert a["hits"] == 0 and "first_script.py:4" in a["lines"], a
    b = _profile_in_a_process(second, tmp_path / "cache")
    assert b["hits"] >= 1, b  # the step's program came from the first process
    assert not any(w.startswith("first_script.py") for w in b["lines"]), b["table"]
    assert set(b["lines"]) <= {"second_script.py:7"}, b["table"]
    assert "loaded from the disk cache" in b["table"], b["table"]


def test_the_first_run_of_a_program_made_inside_the_profile_is_kept_apart():
    """XLA's CPU backend compiles a program's kernels as they first run: that
    run is reported on its own, not summed into the rows and the total."""
    a = lnp.asarray(np.linspace(0, 1, 48 * 48, dtype=np.float32).reshape(48, 48))
    old = lnp.asarray(np.ones((40, 40), np.float32))
    _step(old)  # made before the profile: all its runs are rows
    with lazycore.profile.kernels() as prof:
        _step(old)
        for _ in range(3):
            _step(a)  # compiled here
    (new,) = [p for p in prof.executions if p in prof.first_runs]
    assert prof.executions[new] == 3 and len(prof.executions) == 2, prof.table()
    assert prof.first_runs[new] > 0, prof.first_runs
    assert all(r.count == 2 for r in prof.rows if r.program == new), prof.table()
    assert all(r.count == 1 for r in prof.rows if r.program != new), prof.table()
    assert f"first runs kept apart (XLA compiles a program's kernels as they first run): {new}" in prof.table()
    # the Perfetto events keep every run
    assert sum(1 for e in prof.events if e[0] == new) == 3 * sum(1 for r in prof.rows if r.program == new)
