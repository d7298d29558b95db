"""A plain multi-process job prints only its own lines (issue 43's paper cut:
``[Gloo] Rank 0 is connected to 1 peer ranks`` per process).

tests/test_native_log_lines.py checks stderr of the README's one-process
examples; tests/test_clean_exits.py checks stderr of process groups for
jax's fatal errors. Neither looks at stdout, where gloo writes: jaxlib
0.10.2 bundles a gloo whose ``tcp::Context::printConnectivityInfo`` writes
``[Gloo] Rank R is connected to N peer ranks. Expected number of connected
peer ranks is : N`` with ``std::cout`` for every communicator it connects
(a line per device of the process, again for each new set of devices a
program's collectives use), unconditionally. lazycore runs the native calls
that may connect one (a put on a mesh over several processes, which jax
checks with a collective; a spanning program's first launch; a gathering
read) with file descriptor 1 filtered (lazycore.runtime.nativeout); the filter's
own tests below run in a child process that writes to its descriptor 1 as
native code does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

from test_clean_exits import _free_port

GLOO = re.compile(r"^\[Gloo\] Rank \d+ is connected to \d+ peer ranks")
LINE = "[Gloo] Rank {} is connected to 3 peer ranks. Expected number of connected peer ranks is : 3\n"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 120

# each native call that may connect processes: a value put on a mesh over all of them (jax checks it
# is every process's), a program whose all-reduce spans them, a read that gathers from all of them
BODY = r"""
import numpy as np
import lazycore as lc

lc.distributed.initialize(timeout_s=60)
rank = lc.distributed.process_index()
mesh = lc.Mesh((lc.distributed.device_count(),), ("data",))
for i in range(2):
    w = lc.shard(np.full((4, 2), 2.0 + i, np.float32), mesh, ("data", None))
    x = lc.shard(np.full((2, 2), float(rank + i), np.float32), mesh, ("data", None), local=True)
    total = float(lc.to_numpy(lc.apply("reduce_sum", lc.apply("mul", x, w), dims=(0, 1))))
    rows = lc.to_numpy(x)[:, 0].tolist()
    print(f"process {rank} step {i}: {total} {rows}", flush=True)
"""


def _two_processes() -> list[tuple[int, str, str]]:
    port = _free_port()
    procs = []
    for rank in range(2):
        env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
        env.update(XLA_FLAGS="--xla_force_host_platform_device_count=2", LAZYCORE_CACHE_DIR="off",
                   PYTHONPATH=os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")])),
                   LAZYCORE_COORDINATOR=f"127.0.0.1:{port}", WORLD_SIZE="2", RANK=str(rank))
        procs.append(subprocess.Popen([sys.executable, "-c", BODY], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    try:
        outs = [p.communicate(timeout=TIMEOUT) for p in procs]
        return [(p.returncode, *out) for p, out in zip(procs, outs)]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_two_process_job_prints_only_its_own_lines():
    results = _two_processes()
    for rank, (code, stdout, stderr) in enumerate(results):
        assert code == 0, (rank, code, stderr[-2000:])
        assert [line for line in stdout.splitlines() if GLOO.match(line)] == [], stdout
        want = [f"process {rank} step {i}: {4 * (2.0 + i) * (1 + 2 * i)} {[0.0 + i] * 2 + [1.0 + i] * 2}"
                for i in range(2)]
        assert stdout.splitlines() == want, (stdout, stderr[-2000:])


def _child(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.path.join(ROOT, "src"),
                                                                         os.environ.get("PYTHONPATH")]))}
    head = "import ctypes, os, sys, threading\nfrom lazycore.runtime import nativeout\n"
    return subprocess.run([sys.executable, "-c", head + textwrap.dedent(code)], capture_output=True, env=env,
                          timeout=120)


def test_the_filter_drops_gloos_lines_only_and_keeps_the_order_of_the_rest():
    run = _child(f"""
        libc = ctypes.CDLL(None)
        print("before", flush=True)
        libc.printf(b"c buffered before\\n")  # a C library buffer: flushed before the window
        with nativeout.filtered():
            os.write(1, {LINE.format(0)!r}.encode())
            print("python inside", flush=True)
            os.write(1, b"[Gloo] Rank 1 is conn")  # a line in pieces
            os.write(1, b"ected to 3 peer ranks. Expected number of connected peer ranks is : 3\\n")
            os.write(1, b"[Gloo] Rank 2 said something else\\n")
            os.write(1, b"quoted: " + {LINE.format(3)!r}.encode())  # not at a line's start
            os.write(1, b"no newline yet, ")
            os.write(1, b"then one\\n")
            print("python buffered inside")  # flushed at the window's end, into the filter
            os.write(1, b"[Gloo] Rank")  # cut by the window's end: handed on as it is
        os.write(1, b"s: cut\\n")
        print("after", nativeout.dropped(), flush=True)
    """)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert run.stdout.decode().splitlines() == [
        "before", "c buffered before", "python inside", "[Gloo] Rank 2 said something else",
        "quoted: " + LINE.format(3).rstrip("\n"), "no newline yet, then one", "python buffered inside",
        "[Gloo] Ranks: cut", "after 2"], run.stdout.decode()


def test_the_filter_drops_a_line_another_threads_line_landed_in():
    # gloo's threads write unlocked: one line can land inside another's start
    # (seen in a two-process run: '[Gloo] Rank [Gloo] Rank 2 is connected ...')
    run = _child(f"""
        with nativeout.filtered():
            os.write(1, b"[Gloo] Rank ")
            os.write(1, {LINE.format(2)!r}.encode())
            os.write(1, b"3 is connected to 3 peer ranks. Expected number of connected peer ranks is : 3\\n")
            os.write(1, b"[Gloo] Rank 0 is conn" + {LINE.format(1)!r}.encode()
                     + b"ected to 3 peer ranks. Expected number of connected peer ranks is : 3\\nmine\\n")
            os.write(1, b"quoted: " + {LINE.format(4)!r}.encode())  # not a line's start: kept
        print("after", nativeout.dropped(), flush=True)
    """)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert run.stdout.decode().splitlines() == ["mine", "quoted: " + LINE.format(4).rstrip("\n"), "after 4"], \
        run.stdout.decode()


def test_the_filter_hands_on_much_written_by_threads_while_the_window_waits_for_them():
    # 8 MB from native-like writers while the window's thread waits on them: more than a pipe holds
    run = _child(f"""
        def write(k):
            for i in range(20000):
                os.write(1, (f"{{k}}:{{i}} " + "x" * 400 + "\\n").encode())
                if i % 5000 == 0:
                    os.write(1, {LINE.format(0)!r}.encode())

        with nativeout.filtered():
            with nativeout.filtered():  # a window inside one: the same filter
                threads = [threading.Thread(target=write, args=(k,)) for k in range(2)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
        print("done", nativeout.dropped(), flush=True)
    """)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    lines = run.stdout.decode().splitlines()
    assert lines[-1] == "done 8"
    assert sorted(lines[:-1]) == sorted(f"{k}:{i} " + "x" * 400 for k in range(2) for i in range(20000))
    for k in range(2):
        mine = [line.split()[0] for line in lines[:-1] if line.startswith(f"{k}:")]
        assert mine == [f"{k}:{i}" for i in range(20000)]  # each writer's lines in its order


def test_restore_ends_the_window_at_once_and_a_later_window_filters_again():
    # peers' end of a process stuck in a collective calls restore() before os._exit
    run = _child(f"""
        with nativeout.filtered():
            os.write(1, b"inside\\n")
            nativeout.restore()
            os.write(1, {LINE.format(0)!r}.encode())  # the real stdout again: kept
        with nativeout.filtered():
            os.write(1, {LINE.format(1)!r}.encode())
        print("after", nativeout.dropped(), flush=True)
        nativeout.filtered().__enter__()
        print("exits inside a window", flush=True)
        nativeout.restore()
        os._exit(0)
    """)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert run.stdout.decode().splitlines() == ["inside", LINE.format(0).rstrip("\n"), "after 1",
                                                "exits inside a window"]


def test_a_window_on_stderr_drops_only_its_lines():
    # the lazy process group's window over c10d's time-stats warning (frontends/torch/distributed.py)
    run = _child("""
        noise = nativeout.Lines(rb"(\\[rank\\d+\\]:)?\\[W[^\\]]*\\] Warning: noise[^\\n]*", b"[")
        print("before", file=sys.stderr)
        with nativeout.filtered(2, noise):
            os.write(2, b"[rank0]:[W1130 logger.cpp:329] Warning: noise (function operator())\\n")
            os.write(2, b"[W1130 other.cpp:1] Warning: kept\\n")
            print("inside", file=sys.stderr)
        print("dropped", nativeout.dropped(2), nativeout.dropped(1), flush=True)
    """)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert run.stderr.decode().splitlines() == ["before", "[W1130 other.cpp:1] Warning: kept", "inside"]
    assert run.stdout.decode() == "dropped 1 0\n"
