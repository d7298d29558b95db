"""A process of a group that dies (lazycore.runtime.peers): the others raise
lazycore's PeerLost naming it, once, and exit with Python's status, with no
jax.distributed fatal error or native stack.

Two or three processes on 127.0.0.1 (gloo, two forced host devices each)
join through ``lazycore.distributed.initialize()`` and read a value of a
mesh over all of them each step; one kills itself with SIGKILL at step 3.
Every process runs with a timeout and is killed if it outlives it.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from _bits import BY_HAND  # (tests/ is on the path)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 60

BODY = r"""
import os, signal, sys, time
import numpy as np
import lazycore as lc

lc.distributed.initialize(timeout_s=30, heartbeat_timeout_s=int(os.environ["HEARTBEAT"]))
rank = lc.distributed.process_index()
SYNC = os.environ["SYNC"]  # step i read by process r: the file r.i
mesh = lc.Mesh((lc.distributed.device_count(),), ("data",))

def step(i):
    if os.environ["DIE"] == str(rank) and i == 3:
        # die only once every other process has read step 2 and gone on to step 3's read: killed
        # the moment its own step 2 ended, a survivor still finishing step 2 (under load) lost it
        others = [r for r in range(int(os.environ["WORLD_SIZE"])) if r != rank]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(os.path.exists(os.path.join(SYNC, f"{r}.2")) for r in others):
            time.sleep(0.01)
        time.sleep(1.0)  # for them to enter the read (a few ms of work)
        print(f"process {rank} is killed", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    whole = lc.shard(np.full((2, 2), float(rank + i), np.float32), mesh, ("data", None), local=True)
    if os.environ["READ"] == "gather":  # a read that gathers the value from every process
        lc.to_numpy(whole)
    else:  # a program whose all-reduce waits for the dead process's part
        lc.to_numpy(lc.apply("reduce_sum", whole, dims=(0, 1)))
    print(f"process {rank} step {i}", flush=True)
    open(os.path.join(SYNC, f"{rank}.{i}"), "w").close()

for i in range(int(os.environ["STEPS"])):
    if os.environ["CATCH"] == "1":
        try:
            step(i)
        except lc.distributed.PeerLost as e:
            assert isinstance(e, RuntimeError) and e.process == int(os.environ["DIE"]) and e.how == "died", e
            print(f"process {rank} caught: {e}", flush=True)
            sys.exit(0)
    else:
        step(i)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _group(n: int, die: int, read: str = "gather", catch=(), heartbeat: int = 20,
           steps: int = 100) -> list[tuple[int, str, str]]:
    """Run BODY as ``n`` processes (those in ``catch`` catch PeerLost and exit 0);
    (exit status, stdout, stderr) of each."""
    port = _free_port()
    sync = tempfile.mkdtemp(prefix="clean_exits_")
    procs = []
    for rank in range(n):
        env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
        env.update(XLA_FLAGS="--xla_force_host_platform_device_count=2", LAZYCORE_CACHE_DIR="off",
                   PYTHONPATH=os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")])),
                   LAZYCORE_COORDINATOR=f"127.0.0.1:{port}", WORLD_SIZE=str(n), RANK=str(rank),
                   DIE=str(die), READ=read, HEARTBEAT=str(heartbeat), STEPS=str(steps),
                   CATCH="1" if rank in catch else "0", SYNC=sync)
        procs.append(subprocess.Popen([sys.executable, "-c", BODY], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    out = []
    deadline = time.monotonic() + TIMEOUT
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            out.append((p.returncode, stdout, stderr))
    except subprocess.TimeoutExpired:
        raise AssertionError("a process of the group outlived the timeout") from None
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(sync, ignore_errors=True)
    assert _service_gone(port), "the coordination service's process outlived its group"
    return out


def _service_gone(port: int, within_s: float = 10.0) -> bool:
    """Whether no coordination service process (lazycore/runtime/coordinator.py) for ``port`` is left."""
    deadline = time.monotonic() + within_s
    while True:
        left = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().split(b"\0")
            except OSError:
                continue
            if any(a.endswith(b"coordinator.py") for a in cmd) and f":{port}".encode() in b" ".join(cmd):
                left.append(pid)
        if not left or time.monotonic() > deadline:
            return not left
        time.sleep(0.2)


NATIVE = re.compile(r"Check fail|\*\*\* |client\.h:\d+\]|^F\d{4} |coordination_service|Fatal Python error|SIGABRT",
                    re.MULTILINE)


def _clean(code: int, stderr: str, want: int) -> None:
    assert code == want, (code, stderr[-3000:])
    assert not NATIVE.search(stderr), stderr[-3000:]


def _killed(result, rank: int) -> None:
    code, stdout, _ = result
    assert code == -9 and f"process {rank} is killed" in stdout, (code, stdout[-500:])


def test_a_survivor_raises_peerlost_naming_the_dead_process_and_exits_with_status_1():
    (code, stdout, stderr), dead = _group(2, die=1)
    _killed(dead, 1)
    _clean(code, stderr, 1)  # an uncaught exception's status, not SIGABRT's
    assert "process 0 step 2" in stdout and "process 0 step 3" not in stdout
    (line,) = [ln for ln in stderr.splitlines() if re.match(r"\S*(Error|PeerLost|Exception)\b", ln)]  # raised once
    assert line.startswith("lazycore.runtime.peers.PeerLost: lazycore: process 1 of 2 died"), line
    assert "Gloo" in line  # jax's error, in the message


# CI: test_three_processes_one_killed_both_survivors_exit_cleanly takes the same path (its process 2 catches PeerLost
# and exits with status 0)
@BY_HAND
def test_a_survivor_that_catches_peerlost_exits_with_status_0():
    (code, stdout, stderr), dead = _group(2, die=1, catch=(0,))
    _killed(dead, 1)
    _clean(code, stderr, 0)
    assert "process 0 caught: lazycore: process 1 of 2 died" in stdout, stdout[-2000:]


def test_three_processes_one_killed_both_survivors_exit_cleanly():
    (code0, _, err0), dead, (code2, out2, err2) = _group(3, die=1, catch=(2,))
    _killed(dead, 1)
    _clean(code2, err2, 0)
    assert "process 2 caught: lazycore: process 1 of 3 died" in out2, out2[-2000:]
    _clean(code0, err0, 1)
    assert "PeerLost: lazycore: process 1 of 3 died" in err0, err0[-3000:]
    assert "collective that cannot finish" not in err0  # its read raised, though gloo left it waiting


def test_a_survivor_stuck_in_a_collective_exits_with_the_message_and_status_1():
    start = time.monotonic()
    (code, stdout, stderr), dead = _group(2, die=1, read="reduce", heartbeat=6)
    _killed(dead, 1)
    _clean(code, stderr, 1)
    assert "PeerLost: lazycore: process 1 of 2 died" in stderr and "collective that cannot finish" in stderr, \
        stderr[-3000:]
    assert "Traceback (most recent call last)" in stderr  # where the main thread waited
    assert time.monotonic() - start < TIMEOUT


# CI: test_two_processes_process_0_killed (process 0 dies, the service stays, the survivor exits cleanly) and
# test_three_processes_one_killed_both_survivors_exit_cleanly (three processes, one catching) take the same path
@BY_HAND
def test_when_process_0_is_killed_the_coordination_service_stays_and_the_others_exit_cleanly():
    # jax runs the service inside process 0; lazycore runs it in a process of its own (runtime/coordinator.py)
    dead, (code1, _, err1), (code2, out2, err2) = _group(3, die=0, catch=(2,))
    _killed(dead, 0)
    _clean(code1, err1, 1)
    assert "PeerLost: lazycore: process 0 of 3 died" in err1, err1[-3000:]
    _clean(code2, err2, 0)
    assert "process 2 caught: lazycore: process 0 of 3 died" in out2, out2[-2000:]
    assert "collective that cannot finish" not in err1, err1[-3000:]


def test_two_processes_process_0_killed():
    dead, (code, _, stderr) = _group(2, die=0)
    _killed(dead, 0)
    _clean(code, stderr, 1)
    assert "PeerLost: lazycore: process 0 of 2 died" in stderr, stderr[-3000:]


def test_a_normal_job_still_ends_with_jaxs_shutdown():
    # no one dies: every process runs every step and exits 0 (the watch says goodbye, stays quiet)
    results = _group(2, die=-1, catch=(0, 1), steps=12)
    for rank, (code, stdout, stderr) in enumerate(results):
        _clean(code, stderr, 0)
        assert f"process {rank} step 11" in stdout and "PeerLost" not in stdout + stderr
