"""The persistent compile cache (lazycore.runtime.diskcache): a second process
loads what the first compiled, the key misses when the executable would
differ, bad entries are recompiled, the folder is bounded, shared and clearable.

Processes are subprocesses with ``LAZYCORE_CACHE_DIR`` at a fresh folder
(tests/conftest.py turns the cache off for everything else); the in-process
tests point ``settings.cache_dir`` at one with ``config.override``.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lazycore as lc
from lazycore.ir import config
from lazycore.observe import metrics
from lazycore.runtime import diskcache
from lazycore.runtime.diskcache import DISK, SUFFIX, DiskCacheWarning

from _bits import BY_HAND  # (tests/ is on the path)

TIMEOUT = 300

TORCH_PROGRAM = """
    import torch
    import lazycore.torch as ltorch
    dev = ltorch.device()
    x = torch.linspace(-2, 2, 24).reshape(4, 6).to(dev)
    w = torch.linspace(0.5, 1.5, 18).reshape(6, 3).to(dev)
    y = torch.tanh(x @ w) * 2 + x.sum()
    result = y.cpu().numpy().tolist()
"""

NUMPY_PROGRAM = """
    import lazycore.numpy as lnp
    a = lnp.arange(24.0).reshape(4, 6)
    b = (lnp.sin(a) * 2 + a.T.sum(axis=0)[:, None]).sum(axis=1)
    result = lnp.asarray(b).tolist()
"""


def run_process(program: str, cache_dir, *, env=None, unset=()) -> dict:
    """Run ``program`` (it sets ``result``) in a fresh interpreter with
    ``LAZYCORE_CACHE_DIR=cache_dir`` (None: unset); its result, counters and stderr."""
    code = textwrap.dedent(program) + textwrap.dedent("""
        import json, sys, lazycore
        print(json.dumps({"result": result, "counters": lazycore.metrics.counters(),
                          "mlir": "torch_mlir" in sys.modules}))
    """)
    drop = ("LAZYCORE_CACHE_DIR", "XLA_FLAGS", *unset)
    full_env = {k: v for k, v in os.environ.items() if k not in drop}
    if cache_dir is not None:
        full_env["LAZYCORE_CACHE_DIR"] = str(cache_dir)
    full_env.update(env or {})
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, env=full_env)
    assert out.returncode == 0, out.stderr[-4000:]
    ans = json.loads(out.stdout.strip().splitlines()[-1])
    ans["stderr"] = out.stderr
    return ans


def entries(folder) -> list[str]:
    return sorted(p for p in os.listdir(folder) if p.endswith(SUFFIX)) if os.path.isdir(folder) else []


# CI: [numpy] and test_a_program_loaded_with_loops_rolled_needs_no_compiler (TORCH_PROGRAM loaded by a second process)
@pytest.mark.parametrize("program", [pytest.param(TORCH_PROGRAM, marks=BY_HAND), NUMPY_PROGRAM], ids=["torch", "numpy"])
def test_a_second_process_loads_instead_of_compiling(program, tmp_path):
    first = run_process(program, tmp_path)
    assert (first["counters"]["compiles"], first["counters"]["disk_cache_hits"]) == (1, 0)
    assert first["counters"]["disk_cache_writes"] == 1 and len(entries(tmp_path)) == 1
    second = run_process(program, tmp_path, env={"LAZYCORE_DEBUG": "1"})
    assert second["counters"]["compiles"] == 0
    assert second["counters"]["disk_cache_hits"] >= 1
    assert second["counters"]["disk_cache_writes"] == second["counters"]["disk_cache_errors"] == 0
    assert second["result"] == first["result"]  # bit for bit: the same executable
    assert "disk cache hit: trace" in second["stderr"]
    assert first["mlir"] and not second["mlir"]  # a loaded program needs no compiler


def test_a_program_loaded_with_loops_rolled_needs_no_compiler(tmp_path):
    # with roll_loops the barrier asks which parameters the program takes
    # stacked before looking it up: the loop matcher answers, without MLIR
    roll = {"LAZYCORE_ROLL_LOOPS": "1"}
    first = run_process(TORCH_PROGRAM, tmp_path, env=roll)
    second = run_process(TORCH_PROGRAM, tmp_path, env=roll)
    assert (first["counters"]["compiles"], second["counters"]["compiles"]) == (1, 0)
    assert second["counters"]["disk_cache_hits"] >= 1
    assert second["result"] == first["result"]
    assert first["mlir"] and not second["mlir"]


TRAINING = """
    import torch
    import lazycore.torch as ltorch
    torch.manual_seed(0)
    dev = ltorch.device()
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(5, 8, generator=g).to(dev), torch.randint(0, 3, (5,), generator=g).to(dev)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        ltorch.mark_step()
        losses.append(loss.item())
    result = [losses, [p.detach().cpu().numpy().tolist() for p in model.parameters()]]
"""


def test_a_training_loop_with_donation_runs_from_the_cache(tmp_path):
    first = run_process(TRAINING, tmp_path)
    second = run_process(TRAINING, tmp_path)
    c1, c2 = first["counters"], second["counters"]
    assert c1["compiles"] >= 1 and c1["donated_buffers"] > 0
    assert c2["compiles"] == 0 and c2["disk_cache_hits"] == c1["compiles"]
    assert c2["donated_buffers"] == c1["donated_buffers"]  # the loaded programs alias as the compiled ones
    assert second["result"] == first["result"]


SMALL = """
    import numpy as np
    import lazycore as lc
    x = lc.from_numpy(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    result = lc.to_numpy(lc.apply("tanh", lc.apply("add", x, x))).tolist()
"""

ZERO_TANH = """
    from lazycore.passes import register_lowering
    from lazycore.passes.lowering import hlo
    register_lowering("tanh", lambda op, rewriter: hlo.splat_like(0.0, op.operands[0]))
"""


def test_xla_flags_are_part_of_the_key(tmp_path):
    plain = run_process(SMALL, tmp_path)
    flags = {"XLA_FLAGS": "--xla_backend_optimization_level=1"}
    flagged = run_process(SMALL, tmp_path, env=flags)
    assert (flagged["counters"]["compiles"], flagged["counters"]["disk_cache_hits"]) == (1, 0)
    assert len(entries(tmp_path)) == 2
    again = run_process(SMALL, tmp_path, env=flags)
    assert (again["counters"]["compiles"], again["counters"]["disk_cache_hits"]) == (0, 1)
    assert plain["result"] == again["result"]


def test_a_user_lowering_is_part_of_the_key(tmp_path):
    builtin = run_process(SMALL, tmp_path)
    want = np.tanh(2 * np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    np.testing.assert_allclose(builtin["result"], want, rtol=1e-6)

    user = run_process(ZERO_TANH + SMALL, tmp_path)
    assert (user["counters"]["compiles"], user["counters"]["disk_cache_hits"]) == (1, 0)
    assert user["result"] == np.zeros((3, 4)).tolist()
    # with the lowering registered the program is known by its StableHLO: found again
    user2 = run_process(ZERO_TANH + SMALL, tmp_path)
    assert (user2["counters"]["compiles"], user2["counters"]["disk_cache_hits"]) == (0, 1)
    assert user2["result"] == user["result"]
    # and the built-in program is still the built-in one
    builtin2 = run_process(SMALL, tmp_path)
    assert (builtin2["counters"]["compiles"], builtin2["counters"]["disk_cache_hits"]) == (0, 1)
    assert builtin2["result"] == builtin["result"]


def test_off_writes_nothing_anywhere(tmp_path):
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    home.mkdir()
    ans = run_process(SMALL, "off", env={"HOME": str(home), "XDG_CACHE_HOME": str(xdg)})
    c = ans["counters"]
    assert (c["compiles"], c["disk_cache_writes"], c["disk_cache_hits"]) == (1, 0, 0)
    assert list(home.iterdir()) == [] and not xdg.exists()


def test_default_folder_is_the_user_cache_directory(tmp_path):
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    home.mkdir()
    run_process(SMALL, None, env={"HOME": str(home), "XDG_CACHE_HOME": str(xdg)})
    assert len(entries(xdg / "lazycore")) == 1
    run_process(SMALL, None, env={"HOME": str(home)}, unset=("XDG_CACHE_HOME",))
    assert len(entries(home / ".cache" / "lazycore")) == 1


def test_bad_settings_are_refused(tmp_path):
    with pytest.raises(ValueError, match="cache_max_bytes"):
        config.configure(cache_max_bytes=0)
    bad = subprocess.run([sys.executable, "-c", "import lazycore.ir.config"], capture_output=True, text=True,
                         timeout=TIMEOUT, env={**os.environ, "LAZYCORE_CACHE_MAX_BYTES": "lots"})
    assert bad.returncode != 0 and "LAZYCORE_CACHE_MAX_BYTES must be an integer" in bad.stderr


def test_concurrent_processes_share_one_folder(tmp_path):
    code = textwrap.dedent(SMALL) + "import json, lazycore\nprint(json.dumps([result, lazycore.metrics.counters()]))\n"
    env = {**os.environ, "LAZYCORE_CACHE_DIR": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for _ in range(3)]
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=TIMEOUT)
        assert p.returncode == 0, stderr[-4000:]
        assert "DiskCacheWarning" not in stderr
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    assert all(o[0] == outs[0][0] for o in outs)
    assert all(o[1]["disk_cache_errors"] == 0 for o in outs)
    # no temporary file left: the entry and the folder's secret (one, made by the first writer)
    assert sorted(os.listdir(tmp_path)) == sorted([diskcache.SECRET_FILE, *entries(tmp_path)])
    assert len(entries(tmp_path)) == 1
    after = run_process(SMALL, tmp_path)  # the entry the last writer left is whole
    assert (after["counters"]["compiles"], after["counters"]["disk_cache_hits"]) == (0, 1)
    assert after["result"] == outs[0][0]


# --- in this process ---------------------------------------------------------------------------------


@pytest.fixture
def disk(tmp_path, clean_runtime):
    with config.override(cache_dir=tmp_path, cache_max_bytes=1 << 30):
        yield tmp_path


def program(n: int, scale: float = 3.0):
    """Read back ``tanh(x * scale + x)`` for an ``(n, 4)`` input; one program per ``n``."""
    x = np.linspace(-1, 1, 4 * n, dtype=np.float32).reshape(n, 4)
    a = lc.from_numpy(x)
    s = lc.apply("broadcast_in_dim", lc.scalar(scale, "f32"), dims=(), shape=(n, 4))
    return lc.to_numpy(lc.apply("tanh", lc.apply("add", lc.apply("mul", a, s), a))), np.tanh(x * np.float32(scale) + x)


def forget_in_memory():
    lc.cache.clear()


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "foreign"])
def test_a_bad_entry_warns_and_is_compiled_and_written_again(disk, damage):
    got, want = program(3)
    (name,) = entries(disk)
    path = disk / name
    blob = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(blob[: len(blob) // 2])
    elif damage == "flip":  # a byte in the executable: XLA itself would load this
        b = bytearray(blob)
        b[-len(blob) // 3] ^= 0x40
        path.write_bytes(bytes(b))
    elif damage == "empty":
        path.write_bytes(b"")
    else:  # another program's entry under this name
        program(5)
        other = [n for n in entries(disk) if n != name][0]
        path.write_bytes((disk / other).read_bytes())
    forget_in_memory()
    metrics.reset()
    with pytest.warns(DiskCacheWarning, match="ignoring persistent compile cache entry"):
        again, _ = program(3)
    np.testing.assert_allclose(again, want, rtol=1e-6)
    np.testing.assert_array_equal(again, got)
    c = metrics.counters()
    assert (c["compiles"], c["disk_cache_hits"], c["disk_cache_errors"], c["disk_cache_writes"]) == (1, 0, 1, 1)
    # rewritten whole: the next process-like start loads it
    forget_in_memory()
    program(3)
    assert metrics.counters()["disk_cache_hits"] == 1 and metrics.counters()["compiles"] == 1


def test_a_hit_loads_the_program_and_counts_it(disk):
    got, want = program(3)
    forget_in_memory()
    metrics.reset()
    again, _ = program(3, scale=5.0)  # the scalar is a parameter: the same program
    c = metrics.counters()
    assert (c["compiles"], c["disk_cache_hits"], c["cache_hits"]) == (0, 1, 0)
    np.testing.assert_allclose(again, np.tanh(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4) * 6), rtol=1e-6)
    assert len(metrics.timings()["compile"]) == 0 and len(metrics.timings()["lowering"]) == 0
    program(3)
    assert metrics.counters()["cache_hits"] == 1  # now in memory too
    assert "1 loads, 0 writes, 0 errors; 1 programs" in metrics.report()


def test_eviction_removes_the_least_recently_used(disk):
    made = {}
    for n in (2, 3, 4):
        before = set(entries(disk))
        program(n)
        (made[n],) = set(entries(disk)) - before
    for age, n in enumerate((2, 3, 4)):  # known ages: 2 oldest, then 3, then 4
        os.utime(disk / made[n], ns=((age + 1) * 10**9,) * 2)
    forget_in_memory()
    program(2)  # a hit touches its entry: 3 is now the least recently used
    assert metrics.counters()["disk_cache_hits"] == 1
    assert os.stat(disk / made[2]).st_mtime_ns > 3 * 10**9
    bound = sum(os.stat(disk / made[n]).st_size for n in (2, 3, 4))
    with config.override(cache_max_bytes=bound):  # a fourth program over a bound the three fill
        program(5)
    left = set(entries(disk))
    assert made[3] not in left
    assert made[2] in left and len(left - set(made.values())) == 1  # the new entry stays
    assert sum(os.stat(disk / p).st_size for p in left) <= bound
    assert DISK.evict(0) == len(left) and entries(disk) == []


def test_clear_keeps_or_empties_the_folder(disk):
    program(3)
    (disk / "unrelated.txt").write_text("not ours")
    lc.cache.clear()
    assert len(entries(disk)) == 1
    lc.cache.clear(disk=True)
    assert entries(disk) == [] and (disk / "unrelated.txt").exists()
    metrics.reset()
    program(3)
    assert metrics.counters()["compiles"] == 1


def test_off_in_process_reads_and_writes_nothing(disk):
    program(3)
    forget_in_memory()
    metrics.reset()
    with config.override(cache_dir="off"):
        assert config.settings.cache_dir is None
        program(3)
        program(4)
    c = metrics.counters()
    assert (c["compiles"], c["disk_cache_hits"], c["disk_cache_writes"]) == (2, 0, 0)
    assert len(entries(disk)) == 1


def test_an_unwritable_folder_warns_once_and_runs(tmp_path, clean_runtime):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    DISK._write_failures_reported.clear()
    with config.override(cache_dir=blocker / "cache"):
        with pytest.warns(DiskCacheWarning, match="cannot write"):
            got, want = program(3)
        np.testing.assert_allclose(got, want, rtol=1e-6)
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            program(4)  # reported once per folder
    assert metrics.counters()["disk_cache_errors"] == 2


def test_testing_capture_sees_a_program_that_is_on_disk(disk):
    from lazycore.observe import testing

    program(3)
    forget_in_memory()
    with testing.capture() as cap:
        program(3)
    assert len(cap.graphs) == 1
    assert metrics.counters()["disk_cache_hits"] == 0


def test_entry_format_round_trip_and_refusals(disk):
    program(3)
    (name,) = entries(disk)
    key = bytes.fromhex(name[: -len(SUFFIX)])
    blob = (disk / name).read_bytes()
    serialized, inputs, outputs = diskcache.unpack(blob, key)
    assert len(serialized) > 0 and outputs and {tuple(t.shape) for t in outputs} == {(3, 4)}
    assert [t.dtype for t in inputs][:1] == ["f32"]
    with pytest.raises(ValueError, match="another program"):
        diskcache.unpack(blob, bytes(16))
    with pytest.raises(ValueError, match="format"):
        diskcache.unpack(b"LZC", key)


def test_the_compile_guard_counts_a_load(disk):
    from lazycore.observe.guards import GuardError, guard

    program(3)
    program(4)
    forget_in_memory()
    metrics.reset()
    with guard(compiles="error"):
        program(3)  # warm-up: the first barrier may compile (here: load)
        with pytest.raises(GuardError, match="compile after warm-up"):
            program(4)  # on disk, refused all the same: guarded runs do not depend on the folder
    c = metrics.counters()
    assert (c["compiles"], c["disk_cache_hits"]) == (0, 1)


def test_a_profile_marks_a_loaded_program(disk, tmp_path):
    program(3)
    forget_in_memory()
    path = tmp_path / "trace.json"
    with lc.profile.trace(path):
        program(3)
        program(3)
    spans = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]
    assert [e["args"]["cache"] for e in spans if e["cat"] == "barrier"] == ["disk", "hit"]
    assert "disk_load" in {e["name"] for e in spans} and "compile" not in {e["name"] for e in spans}


def test_a_pass_from_outside_lazycore_keys_the_program_by_its_stablehlo(disk):
    from lazycore.passes.pipeline import DEFAULT_PIPELINE, PASSES, register_pass

    @register_pass("test-disk-cache-noop", "does nothing (its code is not in the key)")
    def noop():
        return lambda module_op: None

    try:
        with config.override(pipeline=DEFAULT_PIPELINE + ",test-disk-cache-noop"):
            got, want = program(3)
            forget_in_memory()
            metrics.reset()
            again, _ = program(3)
        c, t = metrics.counters(), metrics.timings()
        assert (c["compiles"], c["disk_cache_hits"]) == (0, 1)
        assert len(t["lowering"]) == 1 and len(t["compile"]) == 0  # lowered to find it, not compiled
        np.testing.assert_array_equal(again, got)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    finally:
        PASSES.pop("test-disk-cache-noop")


def _training_losses():
    """:data:`TRAINING` run in this process: its losses and parameters."""
    names: dict = {}
    exec(textwrap.dedent(TRAINING), names)  # noqa: S102 - the test's own program text
    return names["result"]


def test_a_donating_program_on_disk_is_loaded_without_looking_for_loops(disk, monkeypatch):
    # which stacks a program takes is in its plan: looking for the walk's layer
    # loops first (a GPT's first step: about 50 ms) is needed only to compile
    from lazycore.runtime import rolling

    with config.override(roll_loops=True):
        losses, params = _training_losses()
        forget_in_memory()
        metrics.reset()
        searched = []
        found = rolling._found
        monkeypatch.setattr(rolling, "_found", lambda walk: searched.append(walk) or found(walk))
        again, params_again = _training_losses()
    c = metrics.counters()
    assert c["compiles"] == 0 and c["disk_cache_hits"] >= 1
    assert (again, params_again) == (losses, params)  # bit for bit: the same executables
    assert searched == []
