"""Benchmark 10: shape buckets (issue 22, item 2).

Two sweeps, each run from an empty compile cache with and without
``lazycore.torch.dynamic`` marks:

- batch: the MLP training step of benchmark 2's kind (10-256-256-5, cross
  entropy, backward) at batch sizes 30, 31, 32, 33, with the default buckets
  (powers of two: 30..32 share 32's program, 33 takes 64's) and with buckets
  ``48,64`` (one program);
- sequence: a transformer block (causal attention with the softmax over the
  padded sequence, layer norms, GELU MLP, mean loss, backward) at every
  sequence length from 40 to 64 (``--quick``: 40, 52, 64).

Rows: the compiles of the sweep, its total time (trace, compile, run, reads
of the loss; the median of 3 sweeps, ``--quick`` 1), the ratio to the
unbucketed sweep, and the largest relative difference of a loss from eager
torch's. Then the steady-state step at one size (batch 33, padded to 64, and
sequence 41, padded to 64): what padding costs a step once it is compiled
(the marked input goes through the host to be padded).

    python benchmarks/buckets.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import statistics
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent


def _mlp(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(10, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                               torch.nn.ReLU(), torch.nn.Linear(256, 5))


def _block(torch, d=32, heads=4):
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
            self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(d, -1))
            att = (q @ k.transpose(-1, -2)) / math.sqrt(d // heads)
            causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~causal, float("-inf")).softmax(-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
            return x + self.mlp(self.ln2(x))

    torch.manual_seed(1)
    return Block()


def _cases(torch, quick):
    """name -> (model factory, inputs per size, loss, dim to mark, sizes)."""
    g = torch.Generator().manual_seed(2)

    def batch(n):
        return torch.randn(n, 10, generator=g), torch.randint(0, 5, (n,), generator=g)

    def seq(t):
        return (torch.randn(4, t, 32, generator=g),)

    def ce(model, x, y):
        return torch.nn.functional.cross_entropy(model(x), y)

    def sq(model, x):
        return model(x).pow(2).mean()

    lengths = (40, 52, 64) if quick else tuple(range(40, 65))
    return {
        "batch 30..33": (_mlp, batch, ce, 0, (30, 31, 32, 33)),
        f"sequence {lengths[0]}..{lengths[-1]} ({len(lengths)} lengths)": (_block, seq, sq, 1, lengths),
    }


def _step(ltorch, dev, model, loss_fn, inputs, dim, mark: bool) -> float:
    """One lazy training step (its inputs marked along ``dim`` when ``mark``); its loss."""
    model.zero_grad()
    lazy_inputs = [x.to(dev) for x in inputs]
    if mark:
        for x in lazy_inputs:
            ltorch.dynamic(x, dim)
    loss = loss_fn(model, *lazy_inputs)
    loss.backward()
    ltorch.mark_step()
    return loss.item()


def _sweep(torch, ltorch, lazycore, case, mark: bool, data, reference):
    factory, _, loss_fn, dim, _ = case
    dev = ltorch.device()
    model = factory(torch).to(dev)
    lazycore.cache.clear()
    lazycore.metrics.reset()
    worst = 0.0
    t0 = time.perf_counter()
    for inputs, want in zip(data, reference):
        got = _step(ltorch, dev, model, loss_fn, inputs, dim, mark)
        worst = max(worst, abs(got - want) / abs(want))
    seconds = time.perf_counter() - t0
    c = lazycore.metrics.counters()
    return seconds, c["compiles"], c["cache_hits"], worst


def _steady(torch, ltorch, lazycore, case, mark: bool, size: int, steps: int):
    factory, make, loss_fn, dim, _ = case
    dev = ltorch.device()
    model = factory(torch).to(dev)
    inputs = make(size)
    times = []
    for i in range(steps + 2):
        t0 = time.perf_counter()
        _step(ltorch, dev, model, loss_fn, inputs, dim, mark)
        if i >= 2:
            times.append(time.perf_counter() - t0)
    return times


def bench(args, kit):
    """Benchmark 10; ``kit``: run.py's module (row, set_ratios, NOTES)."""
    import torch

    import lazycore
    import lazycore.torch as ltorch

    repeats = 1 if args.quick else 3
    for name, case in _cases(torch, args.quick).items():
        factory, make, loss_fn, _, sizes = case
        data = [make(n) for n in sizes]
        eager = factory(torch)
        reference = [loss_fn(eager, *inputs).item() for inputs in data]
        B = f"10 buckets: {name}"
        variants = [("not marked (a program per size)", False, None, len(sizes))]
        if name.startswith("batch"):
            variants += [("dynamic(x, 0), buckets 2^k", True, None, 2), ("dynamic(x, 0), buckets 48,64", True, "48,64", 1)]
        else:
            variants += [("dynamic(x, 1), buckets 2^k", True, None, 1)]
        for i, (variant, mark, sizes_setting, expected) in enumerate(variants):
            runs = []
            with lazycore.config.override(buckets=sizes_setting):
                for _ in range(repeats):
                    runs.append(_sweep(torch, ltorch, lazycore, case, mark, data, reference))
            seconds = [r[0] for r in runs]
            compiles, hits, worst = runs[-1][1], runs[-1][2], max(r[3] for r in runs)
            kit.row(B, f"{variant}: compiles", value={"compiles": compiles, "expected": expected, "cache_hits": hits},
                    unit="compiles", target=f"exactly {expected}",
                    note="PASS" if compiles == expected else f"FAIL: {compiles} compiles")
            kit.row(B, f"{variant}: sweep time", times=seconds, unit="s", scale=1.0, baseline=i == 0,
                    diff=worst, tol=1e-6, note=f"max |loss - eager| / |eager| = {worst:.1e}")
        kit.set_ratios(B)
        steady = 33 if name.startswith("batch") else 41
        for variant, mark in (("steady step, exact size", False), ("steady step, padded", True)):
            times = _steady(torch, ltorch, lazycore, case, mark, steady, 3 if args.quick else args.steps)
            kit.row(f"10 buckets: {name}, steady step at {steady}", variant, times=times, baseline=not mark)
        kit.set_ratios(f"10 buckets: {name}, steady step at {steady}")
    kit.NOTES.append("10: sweep times include compiles (each sweep starts from an empty compile cache); "
                     "the padded steady step copies the marked input through the host to pad it")


def main(argv=None) -> int:
    sys.path.insert(0, str(HERE))
    import run

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", type=pathlib.Path, default=None)
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args(argv)
    import lazycore

    lazycore.config.configure(cache_dir="off")
    run.ROWS.clear(), run.NOTES.clear(), run.FAILURES.clear()
    bench(args, run)
    print(run.table(args.quick))
    for n in run.NOTES:
        print("note:", n)
    if args.json:
        args.json.write_text(json.dumps({"rows": run.ROWS, "notes": run.NOTES, "failures": run.FAILURES},
                                        indent=2, default=str))
    if run.FAILURES:
        print("FAILED:\n  " + "\n  ".join(run.FAILURES))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
