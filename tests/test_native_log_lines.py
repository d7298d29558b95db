"""A plain run of the README's examples writes nothing to stderr but
lazycore's own documented lines (issue 43's acceptance).

The examples run in a child process, as a user runs them: XLA's C++ logging
goes straight to the process's stderr, where no Python capture sees it. The
"Scaling out" example runs on a mesh of 4 forced CPU devices: GSPMD's
partitioner logged "GSPMD sharding propagation is going to be deprecated" at
every mesh compile; lazycore now writes Shardy's annotations and compiles
with Shardy, as jax does (lazycore.passes.lowering.collectives)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _bits import FULL  # (tests/ is on the path)

HERE = Path(__file__).parent

RUN_EXAMPLES = """
import sys
sys.path.insert(0, {tests!r})
from test_readme import README, section, steps

namespace = {{"__name__": "readme_examples"}}
for i, (code, _) in enumerate(steps(section("One example per capability", README))):
    if "lazycore.Mesh((1,)" in code:
        assert "force_host_platform_device_count=4: (4,)" in code, code  # the README says how to run it on 4
        code = code.replace("lazycore.Mesh((1,)", "lazycore.Mesh((4,)")
    exec(compile(code, f"README.md (example {{i}})", "exec"), namespace)
assert len(namespace["mesh"].devices) == 4, namespace["mesh"]
print("examples: ok")
"""

LAZYCORE_LINE = "lazycore: "
"""The prefix of every line lazycore writes to stderr itself (its warnings,
the slow-compile line of docs/guides/debugging.md)."""


def _run(code: str, flags: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAZYCORE_")}
    env["LAZYCORE_CACHE_DIR"] = "off"  # every program compiled here, each compile a chance to log
    env["XLA_FLAGS"] = flags
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # XLA's warnings as a user sees them
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=600, cwd=HERE.parent)


def _foreign_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith(LAZYCORE_LINE)]


def test_the_readme_examples_write_no_native_log_lines():
    run = _run(RUN_EXAMPLES.format(tests=str(HERE)), "--xla_force_host_platform_device_count=4")
    assert run.returncode == 0 and run.stdout.rstrip().endswith("examples: ok"), run.stdout[-3000:] + run.stderr[-3000:]
    assert _foreign_lines(run.stderr) == [], run.stderr[-3000:]


MESH_PROGRAMS = """
import numpy as np
import lazycore, lazycore.numpy as lnp

mesh = lazycore.Mesh((2, 2), ("data", "model"))
x = lnp.shard(lnp.asarray(np.arange(32.0).reshape(8, 4)), mesh, ("data", "model"))
y = lnp.shard(x * 2.0 + 1.0, mesh, ("model", None))              # a constraint inside the program
rows = lazycore.shard(np.arange(32.0).reshape(8, 4), mesh, ("data", None))
total = lazycore.all_reduce(rows, mesh, "data")                  # a manual computation
back = (y.reshape(32) * 3.0).sum()                               # a layout XLA chooses, read back
want = np.arange(32.0).reshape(8, 4)
assert np.array_equal(np.asarray(y), want * 2 + 1)
assert np.array_equal(total.numpy(), want[:4] + want[4:])
assert float(np.asarray(back)) == float(((want * 2 + 1) * 3).sum())
print("mesh: ok")
"""


def test_mesh_programs_with_constraints_and_collectives_write_no_native_log_lines():
    """Beyond the README's one shard: a constraint, a collective's manual
    computation, and a result laid out as XLA chose, then used again."""
    run = _run(MESH_PROGRAMS, "--xla_force_host_platform_device_count=4")
    assert run.returncode == 0 and run.stdout.rstrip().endswith("mesh: ok"), run.stdout[-3000:] + run.stderr[-3000:]
    assert _foreign_lines(run.stderr) == [], run.stderr[-3000:]


@pytest.mark.skipif(not FULL, reason="two processes under torchrun (a minute): LAZYCORE_TEST_FULL=1")
def test_the_torchrun_example_prints_only_its_own_lines():
    """The README's torchrun example (docs/guides/scaling-out.md): gloo's
    connection lines on stdout are dropped (lazycore.runtime.nativeout); on
    stderr only lazycore's own lines."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAZYCORE_")}
    # OMP_NUM_THREADS set: torchrun's launcher warns that it sets it otherwise (not a native line)
    env.update(LAZYCORE_CACHE_DIR="off", XLA_FLAGS="--xla_force_host_platform_device_count=2", OMP_NUM_THREADS="1")
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                          "examples/train_data_parallel.py", "--steps", "2"], env=env, capture_output=True,
                         text=True, timeout=600, cwd=HERE.parent)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert len(lines) == 6 and all(re.match(r"process [01]( of 2,|:) ", line) for line in lines), run.stdout
    assert _foreign_lines(run.stderr) == [], run.stderr[-3000:]
