"""2-D heat equation, explicit finite differences: the same code on NumPy or lazycore.numpy.

    python examples/heat.py            # lazycore.numpy
    python examples/heat.py --numpy    # plain NumPy

Only the import differs (and, on the lazy side, ``lazycore.mark_step()`` ends
each time step: one compiled program runs every step).
"""

from __future__ import annotations

import argparse
import time


def simulate(np, n: int = 256, steps: int = 100, alpha: float = 0.2, step_end=None, every: int = 1):
    """Temperature on an n x n plate after ``steps`` steps; returns (field, seconds per step list).

    ``step_end`` runs after every ``every`` steps (lazy: the barrier, so
    ``every`` steps fuse into one program)."""
    u = np.zeros((n, n), dtype=np.float32)
    u[n // 4: 3 * n // 4, n // 4: 3 * n // 4] = 1.0  # a hot square
    u[0, :] = 0.5  # a warm edge, held fixed
    times = []
    for i in range(steps):
        start = time.perf_counter()
        inner = u[1:-1, 1:-1]
        lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * inner
        u[1:-1, 1:-1] = inner + alpha * lap
        if step_end is not None and (i + 1) % every == 0:
            step_end()
        times.append(time.perf_counter() - start)
    return u, times


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--numpy", action="store_true", help="run with plain NumPy")
    p.add_argument("--n", type=int, default=256)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--every", type=int, default=1, help="lazy: steps per program (barrier every N steps)")
    args = p.parse_args(argv)
    if args.numpy:
        import numpy as np

        step_end = None
    else:
        import lazycore
        import lazycore.numpy as np

        step_end = lazycore.mark_step
    u, times = simulate(np, args.n, args.steps, step_end=step_end, every=args.every)
    import numpy

    field = numpy.asarray(u)
    print(f"{'numpy' if args.numpy else 'lazycore.numpy'}: n={args.n}, {args.steps} steps, "
          f"median step {sorted(times)[len(times) // 2] * 1e3:.3f} ms, mean temperature {field.mean():.6f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
