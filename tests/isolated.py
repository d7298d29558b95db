"""Run a test's body in a fresh Python process: for code that may kill the
process (XLA's constant folder dies of SIGFPE on an integer division by a
constant 0), which must fail that one test, not the whole run."""

import os
import subprocess
import sys


def run_isolated(test_file: str, function: str, timeout: int = 600) -> None:
    """Call ``function`` of the test module ``test_file`` in a child process;
    fail with its exit status and output unless it returns normally."""
    folder, name = os.path.split(os.path.abspath(test_file))
    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import sys; sys.path[:0] = [{folder!r}, {here!r}]; "
            f"import {name.removesuffix('.py')} as m; m.{function}(); print('isolated: ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0 and out.stdout.rstrip().endswith("isolated: ok"), (
        f"{function} exited with status {out.returncode}\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
