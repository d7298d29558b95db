"""The benchmark suite (benchmarks/run.py) runs end to end and every result agrees with its baseline.

A smoke run only: ``--quick`` uses tiny sizes and a few steps (benchmark 7's
GPT has one block of width 32; benchmarks 13-16 run ``--size tiny`` with fewer
models), and never judges timings. It runs in a subprocess so the suite's cache clears, metric
resets and jax/torch state stay out of this test process. torch.compile is
skipped here (its compile alone takes tens of seconds on CI machines); a full
``python benchmarks/run.py`` includes it. XLA compiles at LLVM optimisation
level 0: compiling is most of the smoke run's time, level 0 halves it, and
nothing here is timed.

The README's test command leaves out those whose subjects other tests
cover (4: first steps and a second process loading from disk, tests/test_disk_cache.py;
8: meshes, tests/torch/test_sharding.py; 10: shape buckets, tests/test_buckets.py and
tests/torch/test_shape_buckets.py; 11: rolled layers,
tests/torch/test_rolling_training.py; 12: index checks,
tests/test_index_check_cost.py; 13-15: transformers, torchvision and timm steps, tests/zoo; 16:
generation, the tests/torch/test_generation_*.py files; 17: recurrent layers,
tests/torch/test_recurrent_loops.py; 7: the GPT step's systems side by side, whose lazycore paths
tests/torch/test_capture.py, test_dynamo_backend.py and test_training.py take), which are most of the
smoke's time (7 alone: about 120 of 158 s on an AMD EPYC); ``LAZYCORE_TEST_FULL=1`` runs every benchmark.
"""

import json
import os
import pathlib
import subprocess
import sys

from _bits import FULL  # (tests/ is on the path)

ROOT = pathlib.Path(__file__).resolve().parents[1]
ALL = {"1", "2", "2d", "3", "4", "5", "6", "7", "7b", "7c", "7d", "8", "8d", "9", "10", "11", "12", "13", "14", "15", "16", "17"}
FULL_ONLY = {"4", "7", "7b", "7c", "7d", "8", "8d", "10", "11", "12", "13", "14", "15", "16", "17"}


def test_benchmark_suite_quick(tmp_path):
    out = tmp_path / "bench.json"
    only = [] if FULL else ["--only", ",".join(sorted({b.rstrip("bcd") for b in ALL - FULL_ONLY}, key=int))]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--no-torch-compile", "--json", str(out), *only],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()),
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "OK: every benchmark ran" in proc.stdout
    res = json.loads(out.read_text())
    assert res["failures"] == []
    benches = {r["bench"].split()[0] for r in res["rows"]}
    assert benches == (ALL if FULL else ALL - FULL_ONLY), benches
    for r in res["rows"]:
        assert r.get("agrees", True), r
    # benchmark 5's compile counts are exact, not timings: check them too
    counts = [r["value"] for r in res["rows"] if r["unit"] == "compiles" and r["bench"].startswith("5 ")]
    assert [c["compiles"] for c in counts] == [c["expected"] for c in counts] == [3, 1], counts
    # and benchmark 9's (automatic barriers against mark_step, the learned scalar policy)
    counts = [r["value"] for r in res["rows"] if r["unit"] == "compiles" and r["bench"].startswith("9 ")]
    assert len(counts) == 7 and all(c["compiles"] == c["expected"] for c in counts), counts
    # benchmark 7: every system's row, each checked against eager torch above
    gpt = {r["variant"]: r for r in res["rows"] if r["bench"].startswith("7 ")}
    assert bool(gpt) == FULL, sorted(gpt)
    systems = {"jax.jit (donated params and state)", "eager torch", "lazycore.torch, mark_step(wait=True)",
               "lazycore.torch, mark_step() (pipelined)", "lazycore.torch.capture",
               'torch.compile(step, backend="lazycore")', "jax.jit + the do-nothing subclass's step "
               "(pipelined per-op floor)", "do-nothing subclass's step alone (Python floor)"}
    assert not FULL or systems <= set(gpt), sorted(gpt)
    for r in gpt.values():
        if r["value"].get("computes_values", True):  # the floor alone traces shapes, no values
            assert r["max_abs_diff"] is not None and r["agrees"], r
        assert r["value"]["first_call_ms"] > 0, r
    # the lazycore backend compiles each of its graphs once (forward, backward,
    # clipping, optimizer; the optimizer's first step is a graph of its own)
    if FULL:
        tc = gpt['torch.compile(step, backend="lazycore")']["value"]
        assert 0 < tc["first_call_compiles"] and tc["compiles"] <= tc["first_call_compiles"] + 1, tc
    # benchmark 8: jax.jit and lazycore on meshes of 1, 2 and 4 forced devices, checked against eager torch
    mesh = [r for r in res["rows"] if r["bench"].startswith("8 ")]
    assert {r["bench"] for r in mesh} == ({f"8 data-parallel GPT step, {n} (ms)" for n in
                                           ("1 device", "2 devices", "4 devices")} if FULL else set()), mesh
    for r in mesh:
        assert r["max_abs_diff"] is not None and r["agrees"], r
    # one program for the traced steady step (and the first step's and the optimizer's first),
    # and one for the captured step's (one call node: its own program)
    assert all(r["value"]["compiles"] <= 4 for r in mesh if "compiles" in r.get("value", {})), mesh
    # benchmarks 13-15: transformers, torchvision models' training steps, each lazy row checked against eager's
    real = [r for r in res["rows"] if r["bench"].split()[0] in ("13", "14", "15")]
    assert {r["variant"] for r in real if r["bench"].startswith("13 ")} == ({
        "eager torch", "torchax under jax.jit", "lazycore.torch, mark_step() (pipelined)",
        "lazycore.torch.capture, mark_step()"} if FULL else set()), real
    for r in real:
        assert r["max_abs_diff"] is not None and r["agrees"] and r["value"]["first_step_ms"] > 0, r
    # GPT-2 tiny's traced steps compile the first step's program and the steady step's, nothing after
    for traced in [r for r in real if r["bench"].startswith("13 ") and r["variant"].startswith("lazycore.torch,")]:
        assert 1 <= traced["value"]["first_step_compiles"] and traced["value"]["compiles"] <= \
            traced["value"]["first_step_compiles"] + 1, traced
    # benchmark 16: generate()'s tokens are eager's, and the warm calls compile nothing
    gen = [r for r in res["rows"] if r["bench"].startswith("16 ")]
    lazy_gen = [r for r in gen if r["variant"] == "lazycore.torch"]
    assert bool(lazy_gen) == FULL and all(r["agrees"] and r["value"]["warm_programs"] == 0 for r in lazy_gen), gen
