"""Benchmark 11: a 12-layer stack compiled unrolled and rolled into loops.

    python benchmarks/rolled_layers.py [--quick]
    python benchmarks/rolled_layers.py --sweep [--quick] [--reps N]   # 4 to 24 layers

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

The sweep (:func:`sweep`; ``--sweep``, and its ends in run.py's benchmark
11) sets rolling's default per platform (``lazycore.runtime.rolling.
DEFAULTS``): both models at 4, 8, 12, 16 and 24 layers, rolled and
unrolled, the first calls' cost beyond a step against the step time rolling
loses or gains over :data:`HORIZON` steps, and the smallest layer count from
which rolling pays, for the platform it ran on (jax's default backend).
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


def mlp_run(roll: bool, layers: int, width: int, batch: int, clear: bool = True) -> dict:
    """The MLP forward's first call (cache off; ``clear``: the compile cache
    emptied first) and ``one()``, a step more."""
    import lazycore
    from lazycore.ir.config import override

    forward = _model(layers, width, batch)

    def one():
        with override(roll_loops=roll, cache_dir="off"):
            return forward()

    if clear:
        lazycore.cache.clear()
    t = time.perf_counter()
    one()
    return {"first_s": time.perf_counter() - t, "starts_s": [time.perf_counter() - t], "one": one}


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


def training_run(roll: bool, cfg: dict, clear: bool = True) -> dict:
    """The GPT's training step on the lazy device, compiled: its first call,
    split by phase (``trace``: the barrier's walk; the rest of the first call
    outside the phases is the op-by-op tracing in torch), two more steps (the
    second step's graph, with optimizer state, compiles too) and the compile
    count; ``one()`` runs a step more, ``final()`` gives the parameters.
    ``clear``: the compile cache emptied first."""
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

    if clear:
        lazycore.cache.clear()
    metrics.reset()
    t = time.perf_counter()
    one()
    first = time.perf_counter() - t
    phases = {k: v[0] for k, v in metrics.timings().items() if v and k != "transfer"}
    starts = [first]
    for _ in range(2):
        t = time.perf_counter()
        one()
        starts.append(time.perf_counter() - t)
    return {"first_s": first, "starts_s": starts, "phases": phases, "compiles": metrics.counters()["compiles"],
            "one": one,
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
    # --quick: the compile cache cleared once for both, not before each:
    # their programs differ (rolling's least copies are part of the compile
    # key), so each first call still compiles all its own; a clear before
    # each cost in_blocks' first steps a recompile of the steady programs
    unrolled = training_run(False, cfg)
    rolled = training_run(True, cfg, clear=not args.quick)
    # --quick: no 1-block floor (a timing only, no value to check; its 2 compiles were a fifth of this benchmark)
    one = None if args.quick else training_run(False, dict(cfg, blocks=1))
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
    if one is not None:
        r = kit.row(B, "GPT training step, first call, 1 block unrolled (the floor)", [one["first_s"]],
                    note=_phases(one) + "; XLA compiles the unrolled blocks' identical kernels once, so this is "
                         "about all a rolled program can save")
        r["ratio"] = one["first_s"] / unrolled["first_s"]
    kit.row(B, "GPT training step, unrolled", unrolled["times"], baseline=True)
    r = kit.row(B, "GPT training step, rolled", rolled["times"], diff=diff, tol=5e-4,
                target="at most 1.05x unrolled")
    r["ratio"] = rolled["step_s"] / unrolled["step_s"]
    # the sweep's ends (the whole sweep: rolled_layers.py --sweep); --quick
    # the MLP alone: the GPT's compiles would take most of the smoke run
    B = "11 rolled vs unrolled by layer count (ms): the rolling default"
    if args.quick:
        results = sweep(kit, (4, 8), GPT_QUICK, (32, 8), 3, 1, models=("MLP forward",))
    else:
        results = sweep(kit, (4, 24), GPT, (256, 32), max(args.steps, 10), 1)
    sweep_rows(kit, B, results)


SWEEP_LAYERS = (4, 8, 12, 16, 24)
HORIZON = 1000
"""The steps over which a rolled program's slower (or faster) step is set
against the compile time it saves: a development run's or a short
fine-tune's length, where the first call's seconds are still felt."""


def sweep(kit, layer_counts, cfg: dict, mlp: tuple, steps: int, reps: int,
          models=("GPT training step", "MLP forward")) -> dict:
    """The GPT training step and the MLP forward at each of ``layer_counts``
    layers, rolled and unrolled, in one process; ``mlp``: (width, batch).

    Per count, each variant's first calls are made ``reps`` times, the order
    alternating (a fresh model, the compile cache cleared, the disk cache
    off); then the last two are stepped in mirrored blocks (``kit.in_blocks``)
    so the machine's drift hits both alike. A first call's cost is its
    time beyond a compiled step's (the GPT's first three calls: the second
    step's graph, with optimizer state, compiles too). Returns
    ``{model: [per count: dict]}``."""
    import lazycore

    out = {}
    for model in models:
        rows = out[model] = []
        for i, layers in enumerate(layer_counts):
            def start(roll):
                if model == "MLP forward":
                    return mlp_run(roll, layers, *mlp, clear=False)
                return training_run(roll, dict(cfg, blocks=layers), clear=False)

            runs, starts = {}, {False: [], True: []}
            for rep in range(reps):
                # once per pair, not per variant: the two compile programs of
                # their own anyway, and a clear between them cost the first
                # one's steps (8 and 16 layers, rolled first: rolled steps
                # 1.4-2.3x; 4, 12 and 24, unrolled first: 0.5-0.9x)
                lazycore.cache.clear()
                for roll in ((False, True) if (i + rep) % 2 == 0 else (True, False)):
                    runs.pop(roll, None)
                    runs[roll] = start(roll)
                    starts[roll].append(runs[roll]["starts_s"])
            times, _ = kit.in_blocks({"unrolled": runs[False]["one"], "rolled": runs[True]["one"]}, 0, steps)
            row = {"layers": layers}
            for roll, name in ((False, "unrolled"), (True, "rolled")):
                step = statistics.median(times[name])
                row[name] = {"times": times[name], "step_s": step,
                             "first_s": statistics.median(sum(s) - len(s) * step for s in starts[roll])}
            rows.append(row)
            del runs
    return out


def judge(row: dict, horizon: int = HORIZON) -> dict:
    """What rolling gains at one layer count: the first calls' seconds saved,
    the seconds each step loses, and the net over ``horizon`` steps."""
    u, r = row["unrolled"], row["rolled"]
    saved = u["first_s"] - r["first_s"]
    lost = r["step_s"] - u["step_s"]
    if saved > 0 and lost <= 0:
        runs = "always"
    elif saved <= 0 and lost >= 0:
        runs = "never"
    elif saved > 0:
        runs = f"in runs up to {saved / lost:.0f} steps"
    else:
        runs = f"in runs beyond {saved / lost:.0f} steps"
    return {"saved_s": saved, "lost_s": lost, "net_s": saved - horizon * lost, "pays": runs,
            "first_ratio": r["first_s"] / u["first_s"], "step_ratio": r["step_s"] / u["step_s"]}


def decision(rows: list[dict], horizon: int = HORIZON) -> int | None:
    """The smallest layer count from which rolling pays at every larger
    count measured (net over ``horizon`` steps above zero), or None."""
    least = None
    for row in reversed(rows):
        if judge(row, horizon)["net_s"] <= 0:
            break
        least = row["layers"]
    return least


def _decision_text(model: str, rows: list[dict], platform: str) -> str:
    least = decision(rows)
    counts = f"{rows[0]['layers']}-{rows[-1]['layers']}"
    if least is None:
        text = f"{platform}, {model}: rolling does not pay at {rows[-1]['layers']} layers over {HORIZON} steps"
    else:
        text = (f"{platform}, {model}: rolling pays from {least} layers (of {counts}) over {HORIZON} steps"
                + ("" if least == rows[0]["layers"] else f"; not at {rows[0]['layers']}"))
    # what rolling saves grows with the layers it folds: a verdict that turns
    # more than once along the counts is the machine's noise, not the model's
    pays = [judge(row)["net_s"] > 0 for row in rows]
    if sum(a != b for a, b in zip(pays, pays[1:])) > 1:
        text += " (the verdict turns more than once along the counts: too noisy to decide)"
    return text


def _platform() -> str:
    import jax

    return jax.default_backend()


def sweep_rows(kit, B: str, results: dict) -> None:
    """Benchmark 11's rows of a sweep: per model and layer count the rolled
    step against the unrolled one, the first calls in the note; then the
    decision per model for the platform it ran on."""
    platform = _platform()
    for model, rows in results.items():
        for row in rows:
            j = judge(row)
            u, r = row["unrolled"], row["rolled"]
            kit.row(B, f"{model}, {row['layers']} layers, unrolled step", u["times"], baseline=True,
                    note=f"first calls {u['first_s'] * 1e3:.0f} ms beyond a step")
            x = kit.row(B, f"{model}, {row['layers']} layers, rolled step", r["times"],
                        note=(f"first calls {r['first_s'] * 1e3:.0f} ms beyond a step ({j['first_ratio']:.2f}x); "
                              f"rolling pays: {j['pays']}"),
                        value={"first_ratio": j["first_ratio"], "saved_s": j["saved_s"], "lost_s": j["lost_s"],
                               "pays": j["pays"]})
            x["ratio"] = j["step_ratio"]
        kit.row(B, f"{platform}: rolling default, {model}", value={"pays_from_layers": decision(rows),
                                                                    "horizon_steps": HORIZON, "platform": platform},
                note=_decision_text(model, rows, platform))


def print_sweep(results: dict) -> None:
    platform = _platform()
    for model, rows in results.items():
        print(f"\n{model} on {platform}: ms; first = first calls beyond a compiled step; net over {HORIZON} steps")
        print(f"{'layers':>6} {'first unrolled':>14} {'first rolled':>12} {'ratio':>6} {'step unrolled':>13} "
              f"{'step rolled':>11} {'ratio':>6} {'net s':>7}  rolling pays")
        for row in rows:
            j = judge(row)
            u, r = row["unrolled"], row["rolled"]
            print(f"{row['layers']:>6} {u['first_s'] * 1e3:>14.0f} {r['first_s'] * 1e3:>12.0f} {j['first_ratio']:>6.2f} "
                  f"{u['step_s'] * 1e3:>13.2f} {r['step_s'] * 1e3:>11.2f} {j['step_ratio']:>6.2f} "
                  f"{j['net_s']:>7.1f}  {j['pays']}")
        print(_decision_text(model, rows, platform))


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
    p.add_argument("--sweep", action="store_true",
                   help=f"the GPT step and MLP forward at {', '.join(map(str, SWEEP_LAYERS))} layers, "
                        "rolled and unrolled, and the decision for this platform")
    p.add_argument("--reps", type=int, default=2, help="first calls per variant and count in a sweep")
    args = p.parse_args(argv)
    if args.sweep:
        import run as kit

        counts = (4, 8) if args.quick else SWEEP_LAYERS
        cfg = GPT_QUICK if args.quick else GPT
        mlp = (32, 8) if args.quick else (args.width, args.batch)
        print_sweep(sweep(kit, counts, cfg, mlp, 4 if args.quick else args.steps, 1 if args.quick else args.reps))
        return 0
    if args.quick:
        args.width, args.batch, args.steps = 32, 8, 5
    _report("MLP forward", {roll: measure(roll, args.layers, args.width, args.batch, args.steps)
                            for roll in (False, True)}, lambda r: f"{r['compiles']} compile")
    cfg = dict(GPT_QUICK if args.quick else GPT, blocks=args.layers)
    _report("GPT training step", {roll: measure_training(roll, cfg, args.steps) for roll in (False, True)}, _phases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
