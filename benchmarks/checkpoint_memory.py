"""Activation checkpointing: XLA's memory for a training step, with and without.

    python benchmarks/checkpoint_memory.py [--quick] [--blocks N] [--width D] [--batch B]

A stack of residual MLP blocks (transformer-style: LayerNorm, Linear D -> 4D,
GELU (tanh form), Linear 4D -> D, residual), a sum-of-squares loss, one
forward + backward on the lazy device, compiled three ways: no checkpointing,
every block under ``torch.utils.checkpoint`` non-reentrant, and reentrant.
Reported per way, for the program that computes the gradients: XLA's
compiled memory figures (``get_compiled_memory_stats()`` of the PJRT
executable: temporary, argument and output bytes), the number of
``stablehlo.optimization_barrier`` in its StableHLO and of ``lazy.tanh`` in
the lazy module it was lowered from,
and the largest difference of its gradients from the un-checkpointed run.

Also: jax's figures for the same model with and without ``jax.checkpoint``
on the same backend, and the step cut in two programs (``mark_step`` after
the loss), where what backward needs is held as the forward program's output
buffers. ``LAZYCORE_ROLL_LOOPS=0`` is set: rolled loops of identical blocks
keep their stacked activations by construction, another measurement.

Measured (8 blocks, width 256, batch 512, this machine's XLA CPU):

- one program: temporaries 55.0 MiB without, 56.0 non-reentrant, 58.0
  reentrant; jax 58.5 MiB with and without ``jax.checkpoint``. The barrier
  keeps the recomputation (16 tanh in XLA's optimized HLO, 8 without), but
  XLA's CPU pipeline expands optimization barriers before scheduling
  (``OptimizationBarrierExpander``), so its scheduler puts each recomputed
  block right next to the forward one and nothing is saved, for jax too.
  XLA's GPU pipeline schedules with the barriers in place, which is where
  PyTorch/XLA and ``jax.checkpoint`` save memory (not measured here: no
  accelerator in this session).
- two programs: the forward holds 40.0 MiB for backward without
  checkpointing, 4.0 MiB with (the blocks' inputs only); backward's
  temporaries rise from 4.0 to 54.0 MiB, again because XLA CPU schedules all
  recomputations first.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("LAZYCORE_ROLL_LOOPS", "0")
os.environ.setdefault("LAZYCORE_CACHE_DIR", "off")

import torch  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x)), approximate="tanh"))


class Stack(torch.nn.Module):
    def __init__(self, blocks: int, width: int, mode):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(width) for _ in range(blocks))
        self.mode = mode  # None, "non-reentrant", "reentrant"

    def forward(self, x):
        for b in self.blocks:
            if self.mode is None:
                x = b(x)
            else:
                x = checkpoint(b, x, use_reentrant=self.mode == "reentrant")
        return (x * x).mean()


def run(mode, blocks, width, batch, split=False):
    import lazycore  # lazycore.testing: the observe layer's testing module
    import lazycore.torch as ltorch
    from lazycore.ir import events

    dev = ltorch.device()
    torch.manual_seed(0)
    model = Stack(blocks, width, mode).to(dev)
    x = torch.randn(batch, width, generator=torch.Generator().manual_seed(1)).to(dev).requires_grad_()
    programs = []

    def on_program(exe, device, walk, loaded):
        programs.append(exe)

    events.listen("program", on_program)
    try:
        with lazycore.testing.capture() as cap:
            loss = model(x)
            if split:  # the forward as its own program: what backward needs is its outputs
                ltorch.mark_step()
            loss.backward()
            grads = [p.grad for p in model.parameters()] + [x.grad]
            ltorch.mark_step() if hasattr(ltorch, "mark_step") else lazycore.mark_step()
            host = [g.cpu() for g in grads]
            loss = loss.item()
    finally:
        events.unlisten("program", on_program)
    stats = [exe.loaded.get_compiled_memory_stats() for exe in programs]
    # the program that computes the gradients: the one with the most temporaries
    i = max(range(len(stats)), key=lambda k: stats[k].temp_size_in_bytes)
    text = cap.text("stablehlo", graph=i)
    hlo = "\n".join(m.to_string() for m in programs[i].loaded.hlo_modules())
    s = stats[i]
    out = dict(temp=s.temp_size_in_bytes, argument=s.argument_size_in_bytes, output=s.output_size_in_bytes,
               barriers=text.count("stablehlo.optimization_barrier"), tanh=cap.text("lowered", graph=i).count("lazy.tanh"),
               # a float32 tanh's exact lowering (a float64 polynomial) rounds its range reduction
               # once, XLA's HLO has no tanh op of it: count those roundings
               hlo_tanh=hlo.count(" tanh(") + hlo.count(" round-nearest-even("), grads=host, loss=loss)
    if split:  # the first program is the forward; its outputs live until backward's program runs
        out["held"] = stats[0].output_size_in_bytes
        out["peak"] = stats[0].output_size_in_bytes + s.temp_size_in_bytes
    return out


def jax_checkpoint(blocks, width, batch):
    """XLA's temporaries for the same model's gradients in jax, with and without jax.checkpoint."""
    import jax
    import jax.numpy as jnp

    def block(p, x):
        g, b, w1, b1, w2, b2 = p
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        h = (x - mu) / jnp.sqrt(var + 1e-5) * g + b
        return x + jax.nn.gelu(h @ w1 + b1, approximate=True) @ w2 + b2

    def loss(ps, x, ck):
        f = jax.checkpoint(block) if ck else block
        for p in ps:
            x = f(p, x)
        return (x * x).mean()

    d, h = width, 4 * width
    ps = [tuple(jnp.zeros(shape, jnp.float32) for shape in ((d,), (d,), (d, h), (h,), (h, d), (d,)))
          for _ in range(blocks)]
    x = jnp.zeros((batch, d), jnp.float32)
    return {ck: jax.jit(jax.grad(loss), static_argnums=2).lower(ps, x, ck).compile().memory_analysis()
            .temp_size_in_bytes for ck in (False, True)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--quick", action="store_true", help="4 blocks, width 64, batch 128")
    a = p.parse_args(argv)
    if a.quick:
        a.blocks, a.width, a.batch = 4, 64, 128
    print(f"{a.blocks} residual MLP blocks, width {a.width} (hidden {4 * a.width}), batch {a.batch}, f32; "
          "forward + backward, XLA CPU")
    mib = 1 << 20
    print("\nOne program for forward and backward (how a training step runs):")
    print(f"{'checkpointing':<16}{'temp MiB':>10}{'args MiB':>10}{'out MiB':>10}{'barriers':>10}{'tanh':>6}"
          f"{'tanh in XLA':>13}{'max |dgrad|':>14}")
    base = None
    for mode in (None, "non-reentrant", "reentrant"):
        r = run(mode, a.blocks, a.width, a.batch)
        base = base or r
        diff = max(float((g - b).abs().max()) for g, b in zip(r["grads"], base["grads"]))
        print(f"{mode or 'none':<16}{r['temp'] / mib:>10.2f}{r['argument'] / mib:>10.2f}{r['output'] / mib:>10.2f}"
              f"{r['barriers']:>10}{r['tanh']:>6}{r['hlo_tanh']:>13}{diff:>14.2e}")
    jx = jax_checkpoint(a.blocks, a.width, a.batch)
    print(f"jax.grad of the same model on XLA CPU: temp {jx[False] / mib:.2f} MiB, with jax.checkpoint per block "
          f"{jx[True] / mib:.2f} MiB")

    print("\nForward and backward as two programs (mark_step after the loss): the forward's outputs are what")
    print("backward needs, held as device buffers between the programs:")
    print(f"{'checkpointing':<16}{'held MiB':>10}{'bwd temp MiB':>14}{'held+temp MiB':>15}{'max |dgrad|':>14}")
    base = None
    for mode in (None, "non-reentrant", "reentrant"):
        r = run(mode, a.blocks, a.width, a.batch, split=True)
        base = base or r
        diff = max(float((g - b).abs().max()) for g, b in zip(r["grads"], base["grads"]))
        print(f"{mode or 'none':<16}{r['held'] / mib:>10.2f}{r['temp'] / mib:>14.2f}{r['peak'] / mib:>15.2f}"
              f"{diff:>14.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
