"""Benchmark 11: a 12-layer stack compiled unrolled and rolled into one loop.

    python benchmarks/rolled_layers.py [--quick]

The forward pass of a stack of residual MLP blocks, each with its own
weights, written as a plain Python loop over lazycore.numpy arrays. With
``roll_loops`` off the program holds 12 copies of the block; with it on
(``LAZYCORE_ROLL_LOOPS=1``) the barrier finds the identical copies and
compiles one ``stablehlo.while`` over the stacked weights
(lazycore.runtime.rolling). Reported: the first call (trace, lower and XLA
compile, the compile cache empty and the disk cache off) and the median
step once compiled, for both, in one process; their ratios; and the largest
difference between the two results.
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


def bench(args, kit) -> None:
    """Benchmark 11; ``kit``: run.py's module (row)."""
    B = "11 12-layer stack: unrolled vs rolled into a loop (ms)"
    layers, width, batch = (12, 32, 8) if args.quick else (12, 256, 32)
    steps = 5 if args.quick else max(args.steps, 20)
    unrolled = measure(False, layers, width, batch, steps)
    rolled = measure(True, layers, width, batch, steps)
    diff = float(numpy.abs(unrolled["out"] - rolled["out"]).max())
    kit.row(B, "first call, unrolled (trace + compile)", [unrolled["first_s"]], baseline=True,
            note=f"{unrolled['compiles']} compile(s)")
    r = kit.row(B, "first call, rolled (trace + compile)", [rolled["first_s"]], diff=diff, tol=1e-4,
                target="at least 3x faster than unrolled", note=f"{rolled['compiles']} compile(s)")
    r["ratio"] = rolled["first_s"] / unrolled["first_s"]
    kit.row(B, "step, unrolled", unrolled["times"], baseline=True)
    r = kit.row(B, "step, rolled", rolled["times"], diff=diff, tol=1e-4, target="at most 1.05x unrolled")
    r["ratio"] = rolled["step_s"] / unrolled["step_s"]


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
    results = {roll: measure(roll, args.layers, args.width, args.batch, args.steps) for roll in (False, True)}
    for roll, r in results.items():
        print(f"{'rolled  ' if roll else 'unrolled'}: first call {r['first_s'] * 1e3:8.1f} ms ({r['compiles']} compile), "
              f"step {r['step_s'] * 1e3:7.3f} ms")
    u, r = results[False], results[True]
    print(f"first call rolled/unrolled {r['first_s'] / u['first_s']:.2f}x, step {r['step_s'] / u['step_s']:.2f}x, "
          f"max |diff| {float(numpy.abs(u['out'] - r['out']).max()):.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
