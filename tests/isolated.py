"""Run a test's body in a fresh Python process: for code that may kill the
process (XLA's constant folder dies of SIGFPE on an integer division by a
constant 0), which must fail that one test, not the whole run, and for code
that needs another environment before jax starts (several forced CPU
devices: :data:`FOUR_DEVICES`)."""

import os
import subprocess
import sys


FOUR_DEVICES = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
"""The environment of a child process with 4 CPU devices (jax reads it when it starts)."""


def run_isolated(test_file: str, function: str, timeout: int = 600, env: dict | None = None) -> None:
    """Call ``function`` of the test module ``test_file`` in a child process
    (with ``env`` added to its environment); fail with its exit status and
    output unless it returns normally."""
    folder, name = os.path.split(os.path.abspath(test_file))
    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import sys; sys.path[:0] = [{folder!r}, {here!r}]; "
            f"import {name.removesuffix('.py')} as m; m.{function}(); print('isolated: ok')")
    full_env = dict(os.environ, **(env or {}))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=full_env)
    assert out.returncode == 0 and out.stdout.rstrip().endswith("isolated: ok"), (
        f"{function} exited with status {out.returncode}\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
