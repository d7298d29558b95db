"""Several processes, one program (lazycore.runtime.distributed), on 127.0.0.1.

Two processes with two forced CPU devices each join through
``lazycore.distributed.initialize()`` (torchrun's environment), make a mesh
over the 4 devices and train data-parallel, each process giving its half of
every batch: the losses are eager's on the whole batch, in both processes.
``torchrun`` runs the data-parallel example the same way. A process that
dies makes the other fail with lazycore's PeerLost naming it instead of
hanging, and exit with Python's status. Every process runs with a timeout.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import lazycore as lc
from _bits import BY_HAND  # (tests/ is on the path)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 300

BODY = r"""
import os, sys
import numpy as np
import torch
from torch import nn
import lazycore as lc

lc.distributed.initialize(heartbeat_timeout_s=int(os.environ.get("HEARTBEAT", "100")))
import lazycore.torch as ltorch
from lazycore.observe import metrics

rank, count = lc.distributed.process_index(), lc.distributed.process_count()
assert count == 2 and lc.distributed.local_rank() == rank, (count, lc.distributed.local_rank())
assert len(lc.devices()) == 2  # this process's own
mesh = lc.Mesh((lc.distributed.device_count(),), ("data",))
assert mesh.size == 4, mesh
assert mesh.name == "mesh(data=4 over process 0 cpu:0-1, process 1 cpu:0-1)", mesh.name  # not jax's global ids

# a global value from each process's part; every process reads the whole
part = np.arange(8, dtype=np.float32).reshape(4, 2) + 100 * rank
whole = lc.shard(part, mesh, ("data", None), local=True)
assert whole.shape == (8, 2), whole.shape
total = lc.apply("reduce_sum", whole, dims=(0, 1))
want = np.concatenate([np.arange(8, dtype=np.float32).reshape(4, 2) + 100 * r for r in range(2)])
np.testing.assert_array_equal(lc.to_numpy(whole), want)
assert float(lc.to_numpy(total)) == want.sum()

def mlp():
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 6))

g = torch.Generator().manual_seed(1)
X, Y = torch.randn(48, 20, generator=g), torch.randint(0, 6, (48,), generator=g)

def train(device=None):
    torch.manual_seed(0)
    model = mlp().to(device or "cpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    losses, compiles = [], []
    for step in range(10):
        x, y = X, Y
        if device is not None:
            rows = slice(rank * 24, (rank + 1) * 24)
            x = ltorch.shard(X[rows], mesh, ("data", None), local=True)
            y = ltorch.shard(Y[rows], mesh, ("data",), local=True)
        if os.environ.get("DIE") == str(rank) and step == 3:
            print(f"process {rank} exits", flush=True)
            os._exit(3)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if device is None:
            opt.step()
        else:
            ltorch.optimizer_step(opt)
        losses.append(loss.item())
        compiles.append(metrics.counters()["compiles"])
    return losses, compiles

eager, _ = train()
metrics.reset()
lazy, compiles = train(ltorch.device(mesh))
for e, l in zip(eager, lazy):
    assert abs(e - l) <= 1e-5 * abs(e), (eager, lazy)
assert compiles[1] - compiles[0] == 1 and compiles[-1] == compiles[1], compiles
print(f"process {rank}: ok", flush=True)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _environment(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS",)}
    env.update(XLA_FLAGS="--xla_force_host_platform_device_count=2", LAZYCORE_CACHE_DIR="off",
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")])))
    env.update(extra)
    return env


def _two_processes(**extra) -> list[tuple[int, str, float]]:
    """Run BODY as ranks 0 and 1 as torchrun would start them; (exit status, output, seconds) of each."""
    port = _free_port()
    procs = []
    start = time.monotonic()
    for rank in range(2):
        env = _environment(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port - 1), WORLD_SIZE="2", RANK=str(rank),
                           LOCAL_RANK=str(rank), **extra)
        procs.append(subprocess.Popen([sys.executable, "-c", BODY], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    out = []
    for p in procs:
        try:
            text, _ = p.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError("a process of the group hung past the timeout")
        out.append((p.returncode, text, time.monotonic() - start))
    return out


def test_two_processes_train_as_one():
    for rank, (code, text, _) in enumerate(_two_processes()):
        assert code == 0 and f"process {rank}: ok" in text, text[-4000:]


# CI: test_clean_exits.py::test_a_survivor_raises_peerlost_naming_the_dead_process_and_exits_with_status_1
@BY_HAND
def test_a_dead_process_fails_the_other_within_the_heartbeat_timeout():
    (code0, text0, seconds), (code1, text1, _) = _two_processes(DIE="1", HEARTBEAT="10")
    assert code1 == 3 and "process 1 exits" in text1, text1[-2000:]
    # lazycore's error names it, and the survivor exits with Python's status (lazycore.runtime.peers;
    # tests/test_clean_exits.py), not jax.distributed's fatal error
    assert code0 == 1, text0[-4000:]
    assert "PeerLost: lazycore: process 1 of 2 died" in text0, text0[-4000:]
    assert "Check fail" not in text0 and "client.h" not in text0, text0[-4000:]
    assert seconds < 120, seconds


@pytest.mark.skipif(shutil.which("torchrun", path=os.path.dirname(sys.executable)) is None, reason="no torchrun")
def test_torchrun_runs_the_data_parallel_example():
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    out = subprocess.run(
        [torchrun, "--nproc-per-node", "2", "--master-port", str(_free_port()),
         os.path.join(ROOT, "examples", "train_data_parallel.py"), "--steps", "6"],
        env=_environment(), capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    assert "process 0: OK" in out.stdout and "process 1: OK" in out.stdout, out.stdout


def test_initialize_errors():
    env = {k: os.environ.pop(k) for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LAZYCORE_COORDINATOR")
           if k in os.environ}
    try:
        with pytest.raises(ValueError, match="no coordinator_address .* no num_processes .* no process_id"):
            lc.distributed.initialize()
        with pytest.raises(ValueError, match=r"process_id 2 is not in \[0, 2\)"):
            lc.distributed.initialize("127.0.0.1:1", 2, 2)
        lc.devices()
        with pytest.raises(RuntimeError, match="must run before anything uses a device"):
            lc.distributed.initialize("127.0.0.1:1", 2, 0)
    finally:
        os.environ.update(env)
    assert not lc.distributed.is_initialized()
    assert lc.distributed.process_count() == 1 and lc.distributed.process_index() == 0
    np.testing.assert_array_equal(lc.to_numpy(lc.from_numpy(np.arange(3))), np.arange(3))
