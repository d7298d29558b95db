"""Data-parallel training over a mesh of devices, in one process or several.

    XLA_FLAGS=--xla_force_host_platform_device_count=4 python examples/train_data_parallel.py
    XLA_FLAGS=--xla_force_host_platform_device_count=2 torchrun --nproc-per-node 2 examples/train_data_parallel.py

The step is plain PyTorch; the only change for data parallelism is where the
batch goes: split along the mesh's ``data`` axis, so every device computes
the step on its rows and XLA's SPMD partitioner adds the gradients' sum
across devices. Under ``torchrun`` every process loads only its part of each
batch (``local=True``); the mesh spans the devices of all processes and each
step is one program run by all of them. Every process checks its losses
against eager PyTorch on the whole batch and prints them.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
from torch import nn

import lazycore

if "WORLD_SIZE" in os.environ:  # under torchrun: join the other processes first
    lazycore.distributed.initialize()

import lazycore.torch as ltorch  # noqa: E402

RTOL = 1e-5


def mlp():
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 6))


def batches(steps: int, rows: int):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(rows, 20, generator=g), torch.randint(0, 6, (rows,), generator=g)) for _ in range(steps)]


def train(data, device=None, mesh=None):
    """Losses of SGD steps (momentum) over ``data``: eagerly on the CPU, or on
    ``mesh`` with each process's rows of every batch."""
    torch.manual_seed(0)
    model = mlp().to(device or "cpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    rank, processes = lazycore.distributed.process_index(), lazycore.distributed.process_count()
    losses = []
    for x, y in data:
        if mesh is not None:
            part = x.shape[0] // processes  # this process's rows, as a data loader would give them
            rows = slice(rank * part, (rank + 1) * part)
            x = ltorch.shard(x[rows], mesh, ("data", None), local=True)
            y = ltorch.shard(y[rows], mesh, ("data",), local=True)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if mesh is None:
            opt.step()
        else:
            ltorch.optimizer_step(opt)
        losses.append(loss.detach())
    return [float(v.item()) for v in losses]  # one read at the end: the steps run back to back


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rows", type=int, default=64)
    args = parser.parse_args()
    data = batches(args.steps, args.rows)
    mesh = lazycore.Mesh((lazycore.distributed.device_count(),), ("data",))
    eager = train(data)
    lazy = train(data, ltorch.device(mesh), mesh)
    worst = max(abs(e - l) / abs(e) for e, l in zip(eager, lazy))
    rank = lazycore.distributed.process_index()
    print(f"process {rank} of {lazycore.distributed.process_count()}, {mesh.name}: losses {[round(v, 6) for v in lazy]}")
    print(f"process {rank}: largest relative difference to eager {worst:.2e}; "
          f"compiles {lazycore.metrics.counters()['compiles']}")
    if worst > RTOL:
        print(f"process {rank}: FAILED: the mesh's losses differ from eager's", file=sys.stderr)
        return 1
    print(f"process {rank}: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
