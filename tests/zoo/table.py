"""Print the zoo's table by hand: every model (or the ones named), trained on
the lazy device next to eager.

    .venv/bin/python tests/zoo/table.py [name ...]

Columns: the largest relative loss difference over the steps, the largest
parameter/buffer difference after training, whether tied weights are still
one Parameter, compiles after the warm-up steps, the most programs a step
after the warm-up ran (and every step's count), fallbacks, and a step's time
after the warm-up, lazy and eager
(CPU here; first-step compiles excluded)."""

import os
import sys

os.environ.setdefault("LAZYCORE_CACHE_DIR", "off")  # compiles are counted: nothing from an earlier run
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import zoo_harness  # noqa: E402
import zoo_models  # noqa: E402


def row(r) -> str:
    tied = "yes" if all(a for a, _ in r.tied.values()) else "NO"
    tied = tied if r.tied else "-"
    return (f"| {r.name} | {r.loss_rel:.1e} | {r.param_diff:.1e} | {tied} | {r.compiles_after_warmup} | "
            f"{r.programs_after_warmup} ({'/'.join(map(str, r.programs))}) | {r.fallbacks} | "
            f"{r.lazy_s * 1e3:.0f} / {r.eager_s * 1e3:.0f} ms |")


def main(names) -> None:
    print("| model | loss rel diff | param diff | tied | compiles after warm-up | "
          "programs/step after warm-up (every step) | fallbacks | step lazy / eager |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names or [s.name for s in zoo_models.SPECS]:
        try:
            r = zoo_harness.train(zoo_models.BY_NAME[name])
        except Exception as e:  # one model's failure is a row, not the end of the table
            print(f"| {name} | error: {type(e).__name__}: {str(e)[:200]} |", flush=True)
            continue
        print(row(r), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
