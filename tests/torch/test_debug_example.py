"""The recompile walkthrough of docs/guides/debugging.md: the trap recompiles every step and says why; the fix does not."""

import os
import pathlib
import subprocess
import sys

from _bits import BY_HAND  # (tests/ is on the path)

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "debug_recompiles.py"


def run(*args):
    env = dict(os.environ, LAZYCORE_DEBUG="1")
    out = subprocess.run([sys.executable, str(EXAMPLE), *args], env=env, capture_output=True, text=True,
                         timeout=600, check=True)
    return out.stdout, out.stderr


def test_growing_history_recompiles_and_names_the_cat_line():
    stdout, stderr = run()
    assert "6 compiles" in stdout
    assert "recompile: input 4 shape (4,) vs (3,); first used by lazy.concatenate at" in stderr
    assert "debug_recompiles.py:31" in stderr and "warning: 3 of the last" in stderr


# CI: test_growing_history_recompiles_and_names_the_cat_line runs the example; test_debug.py checks the cache hits' lines
@BY_HAND
def test_fixed_shapes_hit_the_cache():
    stdout, stderr = run("--fixed")
    assert "3 compiles" in stdout and stderr.count("cache hit") == 3
    # the same mean loss either way, up to rounding: the trap's mean sums the five losses in
    # eager's kernel's order ((l0 + l4) + l1 + l2 + l3), the fix adds them one by one
    fixed, trap = (float(out.splitlines()[0].split(":")[1]) for out in (stdout, run()[0]))
    assert abs(fixed - trap) <= 2e-7 * abs(trap)
