"""A process does not exit under a program still running on XLA's CPU threads (issue 40).

Two replay-on runs of torchvision's MaxViT-T loop died of a segmentation fault
at exit, 2 s after an exception ended the loop (``tf_XLAEigen ... segfault at
X ip X error 14``: a worker thread jumped into code unmapped beneath it). The
loop cuts its steps with ``mark_step()``, which does not wait, so the last
step's program was still running when the exception ended the script
(measured: XLA's threads used 0.35 s of CPU in the 2.5 s after the script's
end). :func:`lazycore.runtime.pjrt.wait_at_exit` waits for every program still
running before the interpreter's and the native libraries' teardown.

A program dropped while it runs is no hazard: PJRT keeps the executable until
its run ends (checked by dropping compiled and deserialized programs mid-run
and compiling others meanwhile), so the in-memory compile cache may evict freely.
"""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BODY = r"""
import atexit

outs = []


def at_teardown():
    print("running at teardown:", sum(not o.is_ready() for o in outs), flush=True)


atexit.register(at_teardown)  # before jax and lazycore exist: runs after their exit handlers

import jax
import jax.numpy as jnp
import numpy as np

from lazycore.dialect.types import type_of
from lazycore.runtime import pjrt


def f(x):
    return jax.lax.fori_loop(0, 600, lambda i, x: jnp.tanh(x @ x * (1.0 / 256)), x)


artifact = jax.jit(f).lower(jax.ShapeDtypeStruct((256, 256), jnp.float32)).as_text().encode()
host = np.random.default_rng(0).random((256, 256), dtype=np.float32)
exe = pjrt.compile_artifact(artifact, [type_of(host)], [type_of(host)])
results, _ = exe.launch([pjrt.to_device(host)])
outs.extend(results)
print("running at the script's end:", sum(not o.is_ready() for o in outs), flush=True)
raise RuntimeError("the loop failed")  # as an exception ends a loop that cut its steps without waiting
"""


def test_the_process_waits_for_running_programs_before_its_teardown():
    out = subprocess.run([sys.executable, "-c", BODY], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert "RuntimeError: the loop failed" in out.stderr, out.stderr[-2000:]
    assert out.returncode == 1, (out.returncode, out.stderr[-2000:])
    # (the program must still be running when the script ends, or this shows nothing)
    assert "running at the script's end: 1" in out.stdout, out.stdout
    assert "running at teardown: 0" in out.stdout, out.stdout
