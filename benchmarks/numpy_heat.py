"""The NumPy shim's demo (examples/heat.py) against NumPy, same process, medians.

    python benchmarks/numpy_heat.py [--quick] [--json out.json]

Time per simulation step (median over timed steps after warm-up) for NumPy
and for lazycore.numpy with a barrier after every step and after every 10
steps (10 steps fused into one program); checks that the fields agree.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

import numpy

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import heat  # noqa: E402


def run(np, n, steps, step_end=None, every=1):
    warm = every * 2
    heat.simulate(np, n, warm, step_end=step_end, every=every)  # compile, warm caches
    start = time.perf_counter()
    u, _ = heat.simulate(np, n, steps, step_end=step_end, every=every)
    field = numpy.asarray(u)
    return (time.perf_counter() - start) / steps, field


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes, few steps (CI smoke run)")
    p.add_argument("--json", type=pathlib.Path, default=None)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    import lazycore
    import lazycore.numpy as lnp

    sizes = [64] if args.quick else [256, 1024]
    steps = 20 if args.quick else 100
    repeats = 2 if args.quick else args.repeats
    rows = []
    for n in sizes:
        base, ref = [], None
        for _ in range(repeats):
            t, ref = run(numpy, n, steps)
            base.append(t)
        for every in (1, 10):
            times, diff = [], 0.0
            for _ in range(repeats):
                t, field = run(lnp, n, steps, lazycore.mark_step, every)
                times.append(t)
                diff = max(diff, float(numpy.max(numpy.abs(field - ref))))
            row = {"n": n, "lazy_every": every, "numpy_ms": statistics.median(base) * 1e3,
                   "lazy_ms": statistics.median(times) * 1e3, "lazy_min_ms": min(times) * 1e3,
                   "lazy_max_ms": max(times) * 1e3, "max_abs_diff": diff}
            row["speedup"] = row["numpy_ms"] / row["lazy_ms"]
            rows.append(row)
            if diff > 1e-5:
                print(f"MISMATCH n={n}: max abs diff {diff}")
                return 1
    print(f"{'n':>6} {'steps/program':>14} {'numpy ms/step':>14} {'lazy ms/step':>13} {'speedup':>8} {'max|diff|':>10}")
    for r in rows:
        print(f"{r['n']:>6} {r['lazy_every']:>14} {r['numpy_ms']:>14.3f} {r['lazy_ms']:>13.3f} "
              f"{r['speedup']:>7.2f}x {r['max_abs_diff']:>10.1e}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
