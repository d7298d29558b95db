"""The matrix products of ViT-small's and ResNet-50's training steps, XLA's
CPU dot (through ``jax.jit``, the compiler lazycore's programs use) against
eager torch's, one process, alternated, same thread count
(docs/dev/cpu_program_gap.md).

Each row is one product of the step (forward, input gradient, weight
gradient; batch 8, 224x224): ``(batch, m, k, n)`` and whether an operand is
transposed, as the step computes it. XLA's variants are compiled per
``--variant NAME=flag:value[;flag:value]`` (XLA debug options) besides its
default; every variant's result is compared with the default's bits.

    .venv/bin/python benchmarks/cpu_dots.py [--threads 2] [--rounds 7] \\
        --variant eigen=xla_cpu_experimental_ynn_fusion_type:

Timings are medians of per-call wall times, each system alternated with the
other in the same process, so their ratio holds at any machine load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

# (name, batch, m, k, n, a transposed (contract over a's rows), b transposed (b is n x k))
VIT = [
    ("vit qkv fwd", 1, 1576, 384, 1152, False, True),
    ("vit fc1 fwd", 1, 1576, 384, 1536, False, True),
    ("vit fc2 fwd", 1, 1576, 1536, 384, False, True),
    ("vit proj fwd", 1, 1576, 384, 384, False, True),
    ("vit fc1 dgrad", 1, 1576, 1536, 384, False, False),
    ("vit fc1 wgrad", 1, 1536, 1576, 384, True, False),
    ("vit fc2 wgrad", 1, 384, 1576, 1536, True, False),
    ("vit attn q@k^T", 48, 197, 64, 197, False, True),
    ("vit attn p@v", 48, 197, 197, 64, False, False),
]
RESNET = [  # 1x1 convolutions of ResNet-50 as products (channels last): (N*H*W, Cin) x (Cin, Cout)
    ("r50 1x1 56x56 64->256", 1, 25088, 64, 256, False, False),
    ("r50 1x1 28x28 512->128", 1, 6272, 512, 128, False, False),
    ("r50 1x1 14x14 256->1024", 1, 1568, 256, 1024, False, False),
    ("r50 1x1 7x7 2048->512", 1, 392, 2048, 512, False, False),
]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--only", default="", help="substring of the rows to run")
    p.add_argument("--variant", action="append", default=[])
    p.add_argument("--cpu-time", action="store_true",
                   help="time each call by the process's CPU time, not wall (with --threads 1 under `taskset -c N`: "
                        "the work each does, whatever else shares the core)")
    args = p.parse_args(argv)

    import jax
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    variants = {"xla": {}}
    for spec in args.variant:
        name, _, flags = spec.partition("=")
        variants[name] = dict(item.split(":", 1) for item in flags.split(";") if item)

    print(f"torch {torch.__version__} ({args.threads} threads), jax {jax.__version__}; load {os.getloadavg()[0]:.1f}; "
          f"{'process CPU' if args.cpu_time else 'wall'} ms, medians of {args.rounds} alternated rounds")
    print(f"{'product':<26} {'GFLOP':>6} {'eager ms':>9} " + " ".join(f"{n + ' ms':>10} {n + '/eager':>9}" for n in variants))
    rng = np.random.default_rng(0)
    for name, b, m, k, n, ta, tb in VIT + RESNET:
        if args.only not in name:
            continue
        a = rng.standard_normal((b, k, m) if ta else (b, m, k)).astype(np.float32)
        w = rng.standard_normal((b, n, k) if tb else (b, k, n)).astype(np.float32)
        if b == 1:
            a, w = a[0], w[0]
        ta_, tb_ = torch.from_numpy(a), torch.from_numpy(w)

        def eager():
            x = ta_.transpose(-1, -2) if ta else ta_
            y = tb_.transpose(-1, -2) if tb else tb_
            return torch.matmul(x, y)

        def fn(x, y):
            x = jax.numpy.swapaxes(x, -1, -2) if ta else x
            y = jax.numpy.swapaxes(y, -1, -2) if tb else y
            return jax.numpy.matmul(x, y, precision="highest")

        ja, jw = jax.device_put(a), jax.device_put(w)
        compiled = {v: jax.jit(fn).lower(ja, jw).compile(compiler_options=opts) for v, opts in variants.items()}
        want = np.asarray(compiled["xla"](ja, jw))
        same = {v: np.asarray(c(ja, jw)).tobytes() == want.tobytes() for v, c in compiled.items()}
        eager_diff = float(np.abs(eager().numpy() - want).max())
        clock = time.process_time if args.cpu_time else time.perf_counter
        times = {"eager": [], **{v: [] for v in variants}}
        for r in range(args.rounds + 1):
            t0 = clock()
            eager()
            if r:
                times["eager"].append(clock() - t0)
            for v, c in compiled.items():
                t0 = clock()
                c(ja, jw).block_until_ready()
                if r:
                    times[v].append(clock() - t0)
        e = statistics.median(times["eager"])
        cols = " ".join(f"{statistics.median(times[v]) * 1e3:>10.2f} {statistics.median(times[v]) / e:>9.2f}"
                        + ("" if same[v] else " (bits differ)") for v in variants)
        print(f"{name:<26} {2 * b * m * k * n / 1e9:>6.2f} {e * 1e3:>9.2f} {cols}  max|xla-eager| {eager_diff:.2e}",
              flush=True)


if __name__ == "__main__":
    main()
