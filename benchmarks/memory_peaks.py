"""Peak memory of a training step on the lazy device, and what measuring it costs.

    python benchmarks/memory_peaks.py [--quick] [--blocks N] [--width D] [--batch B] [--steps S]

A stack of residual MLP blocks (LayerNorm, Linear D -> 4D, GELU, Linear 4D
-> D, residual) trained with Adam on the lazy device, one program a step.
Reported: what live tensors hold between steps (``torch.lazy.memory_allocated``:
parameters, gradients, Adam's moments, the batch); the step's peak
(``torch.lazy.max_memory_allocated`` after ``reset_peak_memory_stats``) with
buffer donation and without; XLA's figures for the step's program
(``lazycore.metrics.programs(every=True)``: arguments, results, results
written into donated arguments, scratch); the step time without any memory
question asked (each barrier then counts only its program's own figures)
and after one (each barrier walks the live tensors); and the step's top
kernels (``lazycore.profile.kernels()``) with the time a profiled step takes.

Measured (4 blocks, width 256, batch 256, 20 steps; XLA CPU on the shared
2-core test machine, under load: timings noisy):

- held between steps 32.4 MiB. The step's program: arguments 24.3 MiB
  (the gradients are None when it starts: ``zero_grad`` sets them so),
  results 32.1 MiB of which 24.1 MiB written into donated arguments, scratch
  17.3 MiB. Peak 49.6 MiB with donation (24.3 held + 8.0 new results + 17.3
  scratch), 71.4 MiB without (every updated parameter and moment a second
  buffer while the step runs).
- step time 308 ms before a memory question, 250 ms after one (each barrier
  then walks the ~50 live tensors, a fraction of a millisecond): the
  difference is the machine's noise, not the walk.
- kernels: 181 ms of device time a step; the layers' matmuls (``ynn_fusion``,
  XLA CPU's XNNPACK dots) inside the rolled loop lead, 18% and 17% for the
  two forward ones; a profiled step took 293 ms.
"""

from __future__ import annotations

import argparse
import time

import torch

import lazycore
import lazycore.torch as ltorch
from lazycore.ir.config import override
from lazycore.observe import memory

MIB = 1 << 20


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x)), approximate="tanh"))


def make(args, dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block(args.width) for _ in range(args.blocks)]).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch, args.width).to(dev)

    def step():
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        ltorch.mark_step()

    return step


def run(args, dev, steps):
    step = make(args, dev)
    for _ in range(3):  # the optimizer's state appears, the program settles
        step()
    torch.lazy.synchronize()
    torch.lazy.reset_peak_memory_stats()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    torch.lazy.synchronize()
    return (time.perf_counter() - t) / steps, torch.lazy.memory_allocated(), torch.lazy.max_memory_allocated()


def timed(args, dev, steps, exact):
    step = make(args, dev)
    for _ in range(3):
        step()
    memory.LEDGER.exact = exact
    torch.lazy.synchronize()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    torch.lazy.synchronize()
    return (time.perf_counter() - t) / steps


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--blocks", type=int, default=4)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    if args.quick:
        args.blocks, args.width, args.batch, args.steps = 2, 64, 32, 5
    dev = ltorch.device()
    print(f"{args.blocks} residual MLP blocks, width {args.width}, batch {args.batch}, Adam; {args.steps} steps")

    # before any memory question: each barrier counts its program's own figures, no walk
    cheap = timed(args, dev, args.steps, exact=False)
    _, held, peak = run(args, dev, args.steps)
    prog = lazycore.metrics.programs(every=True)[-1]
    with override(donation=False):
        _, held_nd, peak_nd = run(args, dev, args.steps)
    exact = timed(args, dev, args.steps, exact=True)

    m = prog.memory
    print(f"held between steps:   {held / MIB:8.1f} MiB (parameters, gradients, Adam's moments, the batch)")
    print(f"peak, donation on:    {peak / MIB:8.1f} MiB")
    print(f"peak, donation off:   {peak_nd / MIB:8.1f} MiB (held {held_nd / MIB:.1f} MiB)")
    print(f"the step's program:   arguments {m['argument'] / MIB:.1f} MiB, results {m['output'] / MIB:.1f} MiB "
          f"({m['alias'] / MIB:.1f} MiB into donated arguments), scratch {m['temp'] / MIB:.1f} MiB")
    print(f"step time:            {cheap * 1e3:.1f} ms before a memory question, {exact * 1e3:.1f} ms after "
          f"(each barrier walks the live tensors)")

    step = make(args, dev)
    for _ in range(3):
        step()
    t = time.perf_counter()
    with lazycore.profile.kernels() as prof:
        for _ in range(args.steps):
            step()
    profiled = (time.perf_counter() - t) / args.steps
    print(f"profiled step:        {profiled * 1e3:.1f} ms; top kernels:")
    print(prof.table(8))
    assert peak >= held and peak_nd > peak, (held, peak, peak_nd)


if __name__ == "__main__":
    main()
