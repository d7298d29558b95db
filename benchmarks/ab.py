"""A/B of lazycore at two commits on the same benchmarks, in one run on one machine.

    python benchmarks/ab.py --base /tmp/pre/.venv/bin/python --only 1,2,3,4,5,6,7,8 --rounds 3

Each side is a Python interpreter whose environment has lazycore installed at
the commit it stands for (an editable install of a clone, for example); both
run this checkout's ``benchmarks/run.py`` (or ``--base-benchmarks``, a copy
adapted to the older package), so only the package differs. The sides
alternate, base first, then the reverse order the next round (A B, B A, ...):
a machine whose speed drifts slows both alike. The table gives, per row of
lazycore's, the median over rounds of each side's median and their ratio
(head / base: above 1 is slower), and the same for the row's same-run ratio
to its benchmark's baseline (eager torch, jax.jit), which cancels most of the
load that reaches both sides of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent


def _run(python: str, bench_dir: pathlib.Path, only: str, out: pathlib.Path, extra: list[str]) -> dict:
    cmd = [python, str(bench_dir / "run.py"), "--only", only, "--json", str(out), *extra]
    subprocess.run(cmd, check=True, cwd=bench_dir, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def _ours(variant: str) -> bool:
    return variant.startswith(("lazycore", "example frontend", "torch.compile(step, backend"))


def _collect(runs: list[dict]) -> dict:
    """(bench, variant) -> {"median": [...], "ratio": [...], "compiles": [...]} over rounds."""
    rows: dict = {}
    for run in runs:
        for r in run["rows"]:
            if not _ours(r["variant"]):
                continue
            got = rows.setdefault((r["bench"], r["variant"]), {"median": [], "ratio": [], "compiles": []})
            if r.get("median") is not None:
                got["median"].append(r["median"])
            if r.get("ratio") is not None:
                got["ratio"].append(r["ratio"])
            value = r.get("value")
            if isinstance(value, dict) and "compiles" in value:
                got["compiles"].append(value["compiles"])
    return rows


def _med(xs):
    return statistics.median(xs) if xs else None


def table(base: dict, head: dict, slower: float) -> tuple[str, list[str]]:
    lines = [f"{'benchmark':<34} {'variant':<52} {'base':>9} {'head':>9} {'head/base':>9} "
             f"{'ratio b':>8} {'ratio h':>8} {'h/b':>6}"]
    worse = []
    for key in base:
        if key not in head:
            continue
        b, h = base[key], head[key]
        bm, hm, br, hr = _med(b["median"]), _med(h["median"]), _med(b["ratio"]), _med(h["ratio"])
        if bm is None and b["compiles"]:
            lines.append(f"{key[0][:34]:<34} {key[1][:52]:<52} {'compiles':>9} {b['compiles']} -> {h['compiles']}")
            continue
        if bm is None or hm is None:
            continue
        q = hm / bm
        rq = hr / br if br and hr else None
        cell = lambda v: "-" if v is None else f"{v:.3g}"  # noqa: E731
        lines.append(f"{key[0][:34]:<34} {key[1][:52]:<52} {bm:>9.4g} {hm:>9.4g} {q:>8.3f}x "
                     f"{cell(br):>8} {cell(hr):>8} {'-' if rq is None else f'{rq:.3f}':>6}")
        # a row is called slower only when both its time and its same-run ratio say so
        if q > slower and (rq is None or rq > slower):
            worse.append(f"{key[0]} / {key[1]}: {q:.3f}x time, " + ("-" if rq is None else f"{rq:.3f}x ratio"))
    return "\n".join(lines), worse


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, help="the Python whose lazycore is the older commit")
    p.add_argument("--head", default=sys.executable, help="the Python whose lazycore is the newer (default: this one)")
    p.add_argument("--base-benchmarks", type=pathlib.Path, default=HERE,
                   help="benchmarks folder the base runs (default: this one)")
    p.add_argument("--only", default="1,2,3,4,5,6,7,8")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--slower", type=float, default=1.05, help="flag rows slower than this (head/base)")
    p.add_argument("--json", type=pathlib.Path, default=None, help="write every run's rows here")
    p.add_argument("extra", nargs="*", help="more arguments for run.py (after --)")
    args = p.parse_args(argv)
    sides = {"base": (args.base, args.base_benchmarks.resolve()), "head": (args.head, HERE)}
    runs: dict = {"base": [], "head": []}
    loads = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            order = ["base", "head"] if k % 2 == 0 else ["head", "base"]
            for side in order:
                python, bench_dir = sides[side]
                loads.append(os.getloadavg()[0])
                print(f"round {k + 1}/{args.rounds}: {side} (load {loads[-1]:.2f})", flush=True)
                runs[side].append(_run(python, bench_dir, args.only, pathlib.Path(tmp) / f"{side}{k}.json",
                                       args.extra))
    text, worse = table(_collect(runs["base"]), _collect(runs["head"]), args.slower)
    print(f"\nA/B over {args.rounds} rounds, benchmarks {args.only}; load average at each run's start: "
          + ", ".join(f"{x:.2f}" for x in loads))
    print(text)
    print(f"\nrows slower than {args.slower:.2f}x in both time and same-run ratio: {len(worse)}")
    for w in worse:
        print("  " + w)
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "loads": loads, "slower": worse}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
