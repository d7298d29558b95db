"""The compiler's imports on a background thread, where a process's first
program must be compiled (:func:`lazycore.runtime.programs.load_compiler_ahead`):
a cold process's first compile no longer pays the ~80-150 ms of MLIR, pass and
lowering imports inside the user's first call (benchmarks/first_token.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from lazycore.ir.config import override
from lazycore.runtime.diskcache import DISK, SUFFIX, TEMP_PREFIX

COLD = """
    import os, sys
    import lazycore.torch
    from lazycore.runtime import programs
    (thread,) = programs._AHEAD
    # a fork joins it first: the child imports the compiler without finding an import lock held
    pid = os.fork()
    if pid == 0:
        import lazycore.runtime.compiler
        os._exit(0 if "lazycore.passes.canonicalize" in sys.modules else 5)
    _, status = os.waitpid(pid, 0)
    from lazycore.passes import pipeline
    print(os.waitstatus_to_exitcode(status), thread.is_alive(), pipeline._loaded,
          "lazycore.runtime.compiler" in sys.modules)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the at-fork join needs os.fork")
def test_a_process_that_must_compile_imports_the_compiler_ahead():
    env = {**os.environ, "LAZYCORE_CACHE_DIR": "off"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(COLD)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    # the child imported at once; the thread had ended, the passes registered, before any barrier
    assert done.stdout.split() == ["0", "False", "True", "True"]


def test_holds_programs_sees_program_entries_only(tmp_path):
    with override(cache_dir=None):
        assert not DISK.holds_programs()
    with override(cache_dir=str(tmp_path / "none-yet")):
        assert not DISK.holds_programs()  # (a folder the first writer makes)
    with override(cache_dir=str(tmp_path)):
        for name in ("hmac-secret", "ab.lcd", f"{TEMP_PREFIX}ab{SUFFIX}"):
            (tmp_path / name).write_bytes(b"x")
        assert not DISK.holds_programs()  # the secret, a data entry, a writer's temporary file
        (tmp_path / f"ab{SUFFIX}").write_bytes(b"x")
        assert DISK.holds_programs()
