"""``torch.distributed``'s ``lazy`` backend: DistributedDataParallel unchanged on lazy tensors.

Two processes on 127.0.0.1 (started as torchrun starts them, with timeouts)
join through ``lazycore.distributed.initialize()`` and
``init_process_group("lazy")``; each trains a DDP model on its half of every
batch and must end with the parameters of eager single-process training on
the whole batch. The collectives are checked on rank-dependent values. One
process (world size 1) checks the rest here: registration, errors.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

import lazycore.torch as ltorch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT = 300

BODY = r"""
import os
import numpy as np
import torch
import torch.distributed as dist
from torch import nn
import lazycore

lazycore.distributed.initialize()
import lazycore.torch as ltorch

dist.init_process_group("lazy")
rank, size = dist.get_rank(), dist.get_world_size()
assert (rank, size) == (lazycore.distributed.process_index(), 2), (rank, size)
assert dist.get_backend() == "lazy"
dev = ltorch.device()

# the collectives, on values that differ per process
t = torch.arange(6, dtype=torch.float32, device=dev).reshape(2, 3) + 10 * rank
s = t.clone(); dist.all_reduce(s)
assert s.cpu().tolist() == (2 * torch.arange(6.).reshape(2, 3) + 10).tolist(), s.cpu()
m = t.clone(); dist.all_reduce(m, op=dist.ReduceOp.MAX)
assert m.cpu().tolist() == (torch.arange(6.).reshape(2, 3) + 10).tolist()
a = t.clone(); dist.all_reduce(a, op=dist.ReduceOp.AVG)
assert a.cpu().tolist() == (torch.arange(6.).reshape(2, 3) + 5).tolist()
parts = [torch.zeros(2, 3, device=dev) for _ in range(2)]
dist.all_gather(parts, t)
assert [p.cpu().tolist() for p in parts] == [(torch.arange(6.).reshape(2, 3) + 10 * r).tolist() for r in range(2)]
whole = torch.zeros(4, 3, device=dev)
dist.all_gather_into_tensor(whole, t)
assert whole.cpu().tolist() == torch.cat([torch.arange(6.).reshape(2, 3) + 10 * r for r in range(2)]).tolist()
b = t.clone(); dist.broadcast(b, src=1)
assert b.cpu().tolist() == (torch.arange(6.).reshape(2, 3) + 10).tolist()
piece = torch.zeros(1, 3, device=dev)
dist.reduce_scatter_tensor(piece, t)
assert piece.cpu().tolist() == [(2 * torch.arange(6.).reshape(2, 3) + 10)[rank].tolist()], piece.cpu()
n = torch.tensor(rank + 1, device=dev); dist.all_reduce(n)
assert n.item() == 3 and n.dtype == torch.int64
dist.barrier()

# DDP: each process its half of every batch; rank 1 starts from other weights (DDP broadcasts rank 0's)
def mlp():
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 6))

g = torch.Generator().manual_seed(1)
batches = [(torch.randn(16, 20, generator=g), torch.randint(0, 6, (16,), generator=g)) for _ in range(5)]

def eager():
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in batches:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return [p.detach() for p in model.parameters()]

torch.manual_seed(rank)
model = nn.parallel.DistributedDataParallel(mlp().to(dev))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
rows = slice(8 * rank, 8 * (rank + 1))
for x, y in batches:
    opt.zero_grad()
    nn.functional.cross_entropy(model(x[rows].to(dev)), y[rows].to(dev)).backward()
    ltorch.optimizer_step(opt)
for want, got in zip(eager(), model.parameters()):
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
dist.destroy_process_group()
print(f"process {rank}: ok", flush=True)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_on_two_processes_matches_single_process_training():
    store, coordinator = _free_port(), _free_port()
    base = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    procs = []
    for rank in range(2):
        env = dict(base, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(store), LAZYCORE_COORDINATOR=f"127.0.0.1:{coordinator}",
                   WORLD_SIZE="2", RANK=str(rank), LOCAL_RANK=str(rank), LAZYCORE_CACHE_DIR="off",
                   PYTHONPATH=os.pathsep.join(filter(None, [ROOT, base.get("PYTHONPATH")])))
        procs.append(subprocess.Popen([sys.executable, "-c", BODY], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs = []
    try:
        for p in procs:
            text, _ = p.communicate(timeout=TIMEOUT)  # raises past the timeout; the finally kills both
            outs.append((p.returncode, text))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for rank, (code, text) in enumerate(outs):
        assert code == 0 and f"process {rank}: ok" in text, f"rank {rank} exited with {code}:\n{text[-4000:]}"


def test_backend_registered_and_refuses_cpu_tensors(tmp_path):
    assert "lazy" in dist.Backend.backend_list
    from lazycore.frontends.torch.distributed import ProcessGroupLazy

    pg = ProcessGroupLazy(0, 1)
    with pytest.raises(RuntimeError, match="takes tensors on a lazy device"):
        dist.all_reduce(torch.ones(2), group=pg)
    t = torch.ones(3, device=ltorch.device())
    dist.all_reduce(t, group=pg)  # a group of one: the value itself
    assert t.cpu().tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="does not support reduce op"):
        dist.all_reduce(t, op=dist.ReduceOp.BAND, group=pg)


ONE_PROCESS_DDP = r"""
import sys
import torch
import torch.distributed as dist
from torch import nn
import lazycore.torch as ltorch

dist.init_process_group("lazy", rank=0, world_size=1, store=dist.HashStore())
dev = ltorch.device()
model = nn.parallel.DistributedDataParallel(nn.Linear(4, 2).to(dev))
for i in range(3):  # c10d's logger collects its runtime stats from the second iteration on
    print(f"iteration {i}", file=sys.stderr, flush=True)
    model(torch.ones(3, 4, device=dev)).sum().backward()
print(model.module.weight.grad.cpu().tolist())
"""


def test_ddp_on_the_lazy_device_writes_no_time_stats_warning():
    # c10d's reducer has no timer for the lazy device type: its logger warned
    # "Time stats are currently only collected for CPU and CUDA devices" at the second iteration
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "TORCH_CPP_LOG_LEVEL")}
    env.update(LAZYCORE_CACHE_DIR="off", PYTHONPATH=os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")])))
    run = subprocess.run([sys.executable, "-c", ONE_PROCESS_DDP], env=env, capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines() == [str([[9.0] * 4] * 2)], run.stdout  # 3 iterations x 3 rows of ones
    own = [line for line in run.stderr.splitlines() if not line.startswith("lazycore: ")]  # a slow compile's line
    assert own == [f"iteration {i}" for i in range(3)], run.stderr[-3000:]
