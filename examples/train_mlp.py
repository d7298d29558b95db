"""Train a small MLP on synthetic data: eager PyTorch, lazycore traced, lazycore captured.

    bash scripts/dev demo            # or: python examples/train_mlp.py --steps 300

The training step is plain PyTorch (Adam, cross-entropy). lazycore runs it
twice: traced (every op recorded, ``ltorch.mark_step()`` after each step, so
one program per step whose run overlaps the next step's tracing) and
captured (``@ltorch.capture``: traced until two calls agree, then replayed
with no op dispatched). Losses are kept as tensors and read once at the end,
as a training loop that logs every N steps would: reading one every step
would wait for each program. Prints the three loss curves, the largest
relative difference to eager, the time per step of each (wall time over the
steps after warm-up, the last one waited for), and lazycore's metrics.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch import nn

import lazycore
import lazycore.torch as ltorch

WARMUP = 5


def spirals(n: int, classes: int, seed: int = 0):
    """Interleaved noisy spirals in 2-D, one arm per class."""
    g = torch.Generator().manual_seed(seed)
    per = n // classes
    r = torch.linspace(0.05, 1.0, per).repeat(classes)
    k = torch.arange(classes).repeat_interleave(per)
    theta = k * (2 * torch.pi / classes) + r * 4.0 + 0.4 * torch.randn(per * classes, generator=g)
    x = torch.stack([r * torch.cos(theta), r * torch.sin(theta)], dim=1)
    return x, k


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 3))


def train(device, steps: int, x, y, mode: str):
    """``mode``: eager, traced or captured. (losses, seconds per step after warm-up, accuracy, step)."""
    net = model().to(device)
    opt = torch.optim.Adam(net.parameters(), lr=0.005)
    x, y = x.to(device), y.to(device)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    fn = ltorch.capture(step) if mode == "captured" else step
    losses = []
    start = time.perf_counter()
    for i in range(steps):
        if i == WARMUP:
            if mode != "eager":
                lazycore.mark_step(wait=True)
            start = time.perf_counter()
        losses.append(fn(x, y))
        if mode != "eager":
            ltorch.mark_step()
    if mode != "eager":
        lazycore.mark_step(wait=True)
    per_step = (time.perf_counter() - start) / max(steps - WARMUP, 1)
    with torch.no_grad():
        accuracy = (net(x).argmax(dim=1) == y).float().mean().item()
    return [float(loss.cpu()) for loss in losses], per_step, accuracy, fn


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--every", type=int, default=25, help="print the losses every N steps")
    args = p.parse_args(argv)

    x, y = spirals(384, 3)
    dev = ltorch.device()
    eager, eager_t, eager_acc, _ = train("cpu", args.steps, x, y, "eager")
    lazycore.metrics.reset()
    traced, traced_t, traced_acc, _ = train(dev, args.steps, x, y, "traced")
    captured, captured_t, captured_acc, fn = train(dev, args.steps, x, y, "captured")
    counters = lazycore.metrics.counters()

    print(f"MLP 2-64-64-3 (tanh), Adam, {len(x)} points, {args.steps} steps; eager on CPU, lazycore on {dev}")
    print(f"{'step':>6} {'eager loss':>12} {'traced loss':>12} {'captured loss':>14}")
    for i in list(range(0, args.steps, args.every)) + [args.steps - 1]:
        print(f"{i + 1:>6} {eager[i]:>12.6f} {traced[i]:>12.6f} {captured[i]:>14.6f}")
    worst = max(abs(e - l) / max(abs(e), 1e-30) for e, l in zip(eager + eager, traced + captured))
    print(f"largest relative loss difference to eager: {worst:.2e};  accuracy eager {eager_acc:.3f}, "
          f"traced {traced_acc:.3f}, captured {captured_acc:.3f}")
    print(f"time per step after {WARMUP} warm-up steps: eager {eager_t * 1e3:.2f} ms, traced {traced_t * 1e3:.2f} ms, "
          f"captured {captured_t * 1e3:.2f} ms ({fn.replays} of {args.steps} calls replayed)")
    load = os.getloadavg()[0]
    print(f"  (load average {load:.2f} on {os.cpu_count()} cores: eager torch's threads slow down sharply when "
          f"the cores are busy, XLA's less; benchmarks/ has same-run ratios)")
    print("lazycore metrics: " + ", ".join(f"{k}={counters[k]}" for k in
                                           ("compiles", "cache_hits", "executions", "fallbacks",
                                            "transfers_to_device", "transfers_to_host", "donated_buffers")))
    fallbacks = lazycore.metrics.fallbacks()
    if fallbacks:
        for op, sites in fallbacks.items():
            print(f"  fallback {op}: " + ", ".join(f"{loc} x{n}" for loc, n in sites.items()))
    if fn.why:
        print(f"  capture: {fn.why}")
    ok = worst <= 1e-4 and counters["fallbacks"] == 0 and fn.replays == args.steps - 2
    print("OK: lazy training matches eager, and the captured step replays" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
