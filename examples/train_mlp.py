"""Train a small MLP on synthetic data on the lazy device, next to eager PyTorch.

    bash scripts/dev demo            # or: python examples/train_mlp.py --steps 300

The training loop is plain PyTorch; the only lazy-specific lines are moving
the model and data to ``ltorch.device()`` and ``ltorch.optimizer_step(opt)``
(``opt.step()`` followed by the step barrier). Prints both loss curves, the
largest relative difference, and lazycore's metrics: one compile per distinct
step graph, cache hits for every later step, no fallbacks.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

import lazycore
import lazycore.torch as ltorch


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


def train(device, steps: int, x, y):
    net = model().to(device)
    opt = torch.optim.Adam(net.parameters(), lr=0.005)
    x, y = x.to(device), y.to(device)
    losses, times = [], []
    for _ in range(steps):
        start = time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        if device == "cpu":
            opt.step()
        else:
            ltorch.optimizer_step(opt)
        losses.append(loss.item())
        times.append(time.perf_counter() - start)
    with torch.no_grad():
        accuracy = (net(x).argmax(dim=1) == y).float().mean().item()
    return losses, times, accuracy


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--every", type=int, default=25, help="print the losses every N steps")
    args = p.parse_args(argv)

    x, y = spirals(384, 3)
    dev = ltorch.device()
    eager, eager_t, eager_acc = train("cpu", args.steps, x, y)
    lazycore.metrics.reset()
    lazy, lazy_t, lazy_acc = train(dev, args.steps, x, y)
    counters = lazycore.metrics.counters()

    print(f"MLP 2-64-64-3 (tanh), Adam, {len(x)} points, {args.steps} steps; eager on CPU vs lazycore on {dev}")
    print(f"{'step':>6} {'eager loss':>12} {'lazy loss':>12} {'rel diff':>10}")
    for i in list(range(0, args.steps, args.every)) + [args.steps - 1]:
        rel = abs(eager[i] - lazy[i]) / max(abs(eager[i]), 1e-30)
        print(f"{i + 1:>6} {eager[i]:>12.6f} {lazy[i]:>12.6f} {rel:>10.2e}")
    worst = max(abs(e - l) / max(abs(e), 1e-30) for e, l in zip(eager, lazy))
    print(f"largest relative loss difference: {worst:.2e};  accuracy eager {eager_acc:.3f}, lazy {lazy_acc:.3f}")
    steady = slice(min(5, args.steps - 1), None)
    print(f"median step time (after warm-up): eager {statistics.median(eager_t[steady]) * 1e3:.2f} ms, "
          f"lazy {statistics.median(lazy_t[steady]) * 1e3:.2f} ms")
    print("lazycore metrics: " + ", ".join(f"{k}={counters[k]}" for k in
                                           ("compiles", "cache_hits", "executions", "fallbacks",
                                            "transfers_to_device", "transfers_to_host", "donated_buffers")))
    fallbacks = lazycore.metrics.fallbacks()
    if fallbacks:
        for op, sites in fallbacks.items():
            print(f"  fallback {op}: " + ", ".join(f"{loc} x{n}" for loc, n in sites.items()))
    ok = worst <= 1e-4 and counters["fallbacks"] == 0
    print("OK: lazy training matches eager" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
