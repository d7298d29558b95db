"""Benchmark 11: a 12-layer stack compiled unrolled and rolled into loops.

    python benchmarks/rolled_layers.py [--quick]

Two models, each compiled with ``roll_loops`` off (the program holds 12
copies of the block) and on (the default: the barrier finds the identical
copies and compiles each run as one ``stablehlo.while`` over stacked
weights, lazycore.runtime.rolling), and with one block unrolled, the floor
no rolled program of the 12 can beat:

* the forward pass of a stack of residual MLP blocks, written as a plain
  Python loop over lazycore.numpy arrays;
* a torch training step of a 12-block GPT (benchmark 7's model: width 64,
  4 heads, context 32, batch 8, vocabulary 64; cross entropy, backward,
  AdamW): forward, backward and the per-layer updates are three loops.
  Without benchmark 7's gradient clipping: ``clip_grad_norm_`` stacks the
  per-tensor norms one binary concatenate at a time, each of another
  shape, which no loop of fixed types holds (docs/status.md).

Reported: the first call (trace, lower and XLA compile, the compile cache
empty and the disk cache off; for the training step also its phases) and
the median step once compiled, for both, in one process; their ratios; and
the largest difference between the two results.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy


def _model(layers: int, width: int, batch: int):
    import lazycore.numpy as lnp

    rng = numpy.random.default_rng(0)
    params = [tuple(lnp.asarray(rng.standard_normal(shape).astype(numpy.float32) * scale)
                    for shape, scale in (((width, 4 * width), width ** -0.5), ((4 * width,), 0.1),
                                         ((4 * width, width), (4 * width) ** -0.5), ((width,), 1.0)))
              for _ in range(layers)]
    x = lnp.asarray(rng.standard_normal((batch, width)).astype(numpy.float32))

    def forward():
        h = x
        for w1, b1, w2, g in params:
            z = h - h.mean(axis=-1, keepdims=True)
            z = z / numpy.sqrt((z * z).mean(axis=-1, keepdims=True) + 1e-5) * g
            h = h + numpy.tanh(z @ w1 + b1) @ w2
        return numpy.asarray(h)

    return forward


def measure(roll: bool, layers: int, width: int, batch: int, steps: int) -> dict:
    import lazycore
    from lazycore.ir.config import override

    forward = _model(layers, width, batch)
    with override(roll_loops=roll, cache_dir="off"):
        lazycore.cache.clear()
        c0 = lazycore.metrics.counters()["compiles"]
        t = time.perf_counter()
        out = forward()
        first = time.perf_counter() - t
        compiles = lazycore.metrics.counters()["compiles"] - c0
        forward()
        times = []
        for _ in range(steps):
            t = time.perf_counter()
            forward()
            times.append(time.perf_counter() - t)
    return {"first_s": first, "step_s": statistics.median(times), "times": times, "compiles": compiles, "out": out}


GPT = {"vocab": 64, "context": 32, "width": 64, "heads": 4, "blocks": 12, "batch": 8}
GPT_QUICK = {"vocab": 32, "context": 8, "width": 16, "heads": 2, "blocks": 4, "batch": 2}  # 4: the least a smoke run rolls (rolled_chains.MIN_COPIES is 3)


def training_run(roll: bool, cfg: dict) -> dict:
    """The GPT's training step on the lazy device, compiled: its first call,
    split by phase (``trace``: the barrier's walk; the rest of the first call
    outside the phases is the op-by-op tracing in torch), two more steps (the
    second step's graph, with optimizer state, compiles too) and the compile
    count; ``one()`` runs a step more, ``final()`` gives the parameters."""
    import gpt
    import lazycore
    import lazycore.torch as ltorch
    import torch
    import torch.nn.functional as F
    from lazycore.ir.config import override
    from lazycore.observe import metrics

    dev = ltorch.device()
    model = gpt.make_model(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=gpt.LR, betas=gpt.BETAS, eps=gpt.EPS,
                            weight_decay=gpt.WEIGHT_DECAY)
    data = [(x.to(dev), y.to(dev)) for x, y in gpt.make_data(cfg)]
    it = [0]

    def one():
        x, y = data[it[0] % len(data)]
        it[0] += 1
        with override(roll_loops=roll, cache_dir="off"):
            opt.zero_grad()
            logits = model(x)
            F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1)).backward()
            opt.step()
            ltorch.mark_step(wait=True)

    lazycore.cache.clear()
    metrics.reset()
    t = time.perf_counter()
    one()
    first = time.perf_counter() - t
    phases = {k: v[0] for k, v in metrics.timings().items() if v and k != "transfer"}
    one()
    one()
    return {"first_s": first, "phases": phases, "compiles": metrics.counters()["compiles"], "one": one,
            "final": lambda: numpy.concatenate([p.detach().cpu().numpy().ravel() for p in model.parameters()])}


def measure_training(roll: bool, cfg: dict, steps: int) -> dict:
    """:func:`training_run` and the median of ``steps`` more steps."""
    r = training_run(roll, cfg)
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        r["one"]()
        times.append(time.perf_counter() - t)
    return dict(r, step_s=statistics.median(times), times=times, out=r["final"]())


def _phases(r: dict) -> str:
    p = r["phases"]
    return (f"walk {p.get('trace', 0) * 1e3:.0f}, lower {p.get('lowering', 0) * 1e3:.0f}, "
            f"XLA {p.get('compile', 0) * 1e3:.0f}, run {p.get('execute', 0) * 1e3:.0f} ms; "
            f"{r['compiles']} compiles in 3 steps")


def bench(args, kit) -> None:
    """Benchmark 11; ``kit``: run.py's module (row)."""
    B = "11 12-layer stack: unrolled vs rolled into a loop (ms)"
    layers, width, batch = (12, 32, 8) if args.quick else (12, 256, 32)
    steps = 5 if args.quick else max(args.steps, 20)
    unrolled = measure(False, layers, width, batch, steps)
    rolled = measure(True, layers, width, batch, steps)
    one = measure(False, 1, width, batch, 1)
    diff = float(numpy.abs(unrolled["out"] - rolled["out"]).max())
    kit.row(B, "first call, unrolled (trace + compile)", [unrolled["first_s"]], baseline=True,
            note=f"{unrolled['compiles']} compile(s)")
    r = kit.row(B, "first call, 1 layer unrolled (the floor)", [one["first_s"]],
                note="what no rolled program of the 12 layers can beat: it still holds one layer and the rest")
    r["ratio"] = one["first_s"] / unrolled["first_s"]
    r = kit.row(B, "first call, rolled (trace + compile)", [rolled["first_s"]], diff=diff, tol=1e-4,
                target="at least 3x faster than unrolled", note=f"{rolled['compiles']} compile(s)")
    r["ratio"] = rolled["first_s"] / unrolled["first_s"]
    kit.row(B, "step, unrolled", unrolled["times"], baseline=True)
    r = kit.row(B, "step, rolled", rolled["times"], diff=diff, tol=1e-4, target="at most 1.05x unrolled")
    r["ratio"] = rolled["step_s"] / unrolled["step_s"]
    cfg = GPT_QUICK if args.quick else GPT
    steps = 5 if args.quick else max(args.steps, 10)
    # each compiled alone, then stepped in alternating blocks (run.py's
    # in_blocks): the machine's drift hits both alike
    unrolled = training_run(False, cfg)
    rolled = training_run(True, cfg)
    one = training_run(False, dict(cfg, blocks=1))
    times, _ = kit.in_blocks({"unrolled": unrolled["one"], "rolled": rolled["one"]}, 0, steps)
    for r, name in ((unrolled, "unrolled"), (rolled, "rolled")):
        r.update(times=times[name], step_s=statistics.median(times[name]), out=r["final"]())
    # AdamW's normalised steps carry rounding differences of the gradients
    # into the parameters, bounded by the learning rate per step (benchmark 7)
    diff = float(numpy.abs(unrolled["out"] - rolled["out"]).max())
    kit.row(B, "GPT training step, first call, unrolled", [unrolled["first_s"]], baseline=True,
            note=_phases(unrolled))
    r = kit.row(B, "GPT training step, first call, rolled", [rolled["first_s"]], diff=diff, tol=5e-4,
                target="at least 3x faster than unrolled", note=_phases(rolled))
    r["ratio"] = rolled["first_s"] / unrolled["first_s"]
    r = kit.row(B, "GPT training step, first call, 1 block unrolled (the floor)", [one["first_s"]],
                note=_phases(one) + "; XLA compiles the unrolled blocks' identical kernels once, so this is "
                     "about all a rolled program can save")
    r["ratio"] = one["first_s"] / unrolled["first_s"]
    kit.row(B, "GPT training step, unrolled", unrolled["times"], baseline=True)
    r = kit.row(B, "GPT training step, rolled", rolled["times"], diff=diff, tol=5e-4,
                target="at most 1.05x unrolled")
    r["ratio"] = rolled["step_s"] / unrolled["step_s"]


def _report(name: str, results: dict, detail) -> None:
    for roll, r in results.items():
        print(f"{name} {'rolled  ' if roll else 'unrolled'}: first call {r['first_s'] * 1e3:8.1f} ms ({detail(r)}), "
              f"step {r['step_s'] * 1e3:7.3f} ms")
    u, r = results[False], results[True]
    print(f"{name}: first call rolled/unrolled {r['first_s'] / u['first_s']:.2f}x, step {r['step_s'] / u['step_s']:.2f}x, "
          f"max |diff| {float(numpy.abs(u['out'] - r['out']).max()):.2e}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args(argv)
    if args.quick:
        args.width, args.batch, args.steps = 32, 8, 5
    _report("MLP forward", {roll: measure(roll, args.layers, args.width, args.batch, args.steps)
                            for roll in (False, True)}, lambda r: f"{r['compiles']} compile")
    cfg = dict(GPT_QUICK if args.quick else GPT, blocks=args.layers)
    _report("GPT training step", {roll: measure_training(roll, cfg, args.steps) for roll in (False, True)}, _phases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
