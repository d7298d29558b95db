"""Write the figures of docs/performance.md from benchmarks/results*.json.

    python benchmarks/run.py          # a full run writes benchmarks/results.json
    python scripts/perf_page.py       # the page's figures, between its markers, from those files
    python scripts/perf_page.py --check   # exit 1 when the page is not what the files give

A run of some benchmarks alone (``--only``, for example the real models at
``--size small``, which take a quiet half hour of their own) may be kept
beside the full run as ``benchmarks/results_<what>.json``; each file is one
section of the page, results.json first.

The page's prose (what each benchmark measures, how) is written by hand; the
figures are only ever this script's output, so no run log is pasted by hand
(dated history goes to CHANGELOG.md).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results.json"


def result_files() -> list[Path]:
    """benchmarks/results.json, then every other benchmarks/results_*.json by name."""
    return [p for p in [RESULTS] + sorted(RESULTS.parent.glob("results_*.json")) if p.exists()]
PAGE = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def _num(v, unit: str) -> str:
    if v is None:
        return "-"
    return f"{v:.3g} {unit}" if abs(v) < 1000 else f"{v:,.0f} {unit}"


def _only(which) -> str:
    """A run of some benchmarks (``--only``) says which, so a missing one is not read as dropped."""
    if not which:
        return ""
    runs, start = [], which[0]
    for a, b in zip(which, which[1:] + [None]):
        if b != a + 1:
            runs.append(str(start) if start == a else f"{start}-{a}")
            start = b
    return f", benchmarks {', '.join(runs)} only (`--only`)"


def render(results: dict) -> str:
    meta = results["meta"]
    load = meta.get("load_average")
    lines = [
        f"Run of {meta.get('date', 'an undated run')}"
        f"{' (--quick: timings mean nothing)' if meta.get('quick') else ''}"
        f"{_only(meta.get('only'))}: "
        f"torch {meta['torch']} ({meta['torch_threads']} threads), jax {meta['jax']}, {meta['cpus']} CPUs "
        f"({meta['machine']}, {meta['device']})"
        + (f", load average {load[0]:.2f} before and {load[1]:.2f} after" if load else "")
        + f"; {meta['warmup']} warm-up and {meta['steps']} timed steps a row, medians with min-max; "
        f"ratio = median / the baseline's median in the same run.",
        "",
    ]
    bench = None
    for r in results["rows"]:
        if r["bench"] != bench:
            bench = r["bench"]
            lines += ["", f"### {bench}", "", "| variant | median | min-max | ratio | agrees | notes |",
                      "|---|---|---|---|---|---|"]
        unit = r.get("unit", "")
        if "value" in r and unit == "compiles":
            v = r["value"]
            lines.append(f"| {r['variant']} | {v['compiles']} compiles | expected {v['expected']} | - | "
                         f"{'yes' if v['compiles'] == v['expected'] else 'no'} | {r.get('note', '')} |")
            continue
        span = "-" if r.get("min") is None else f"{_num(r['min'], unit)} - {_num(r['max'], unit)}"
        ratio = f"{r['ratio']:.2f}x" if "ratio" in r else ("baseline" if r.get("baseline") else "-")
        agrees = {True: "yes", False: "**no**", None: "-"}[r.get("agrees")]
        notes = [n for n in (r.get("target") and f"target {r['target']}", r.get("note")) if n]
        lines.append(f"| {r['variant']} | {_num(r.get('median'), unit)} | {span} | {ratio} | {agrees} | "
                     f"{'; '.join(notes).replace('|', '/')} |")
    if results.get("notes"):
        lines += ["", "Notes: " + "; ".join(results["notes"])]
    if results.get("failures"):
        lines += ["", "Failures: " + "; ".join(results["failures"])]
    return "\n".join(lines).strip("\n")


def page_with(text: str, page: str) -> str:
    block = f"{BEGIN}\n{text}\n{END}"
    if BEGIN not in page:
        raise SystemExit(f"{PAGE} has no {BEGIN} marker")
    return re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda m: block, page, flags=re.S)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, nargs="+", default=None,
                   help="results files, one section each (default: benchmarks/results.json and results_*.json)")
    p.add_argument("--check", action="store_true", help="exit 1 if the page is not what the results give")
    a = p.parse_args(argv)
    page = PAGE.read_text()
    files = a.results or result_files()
    new = page_with("\n\n".join(render(json.loads(f.read_text())) for f in files), page)
    if a.check:
        if new != page:
            names = ", ".join(str(f) for f in files)
            print(f"{PAGE} is not what {names} gives: run python scripts/perf_page.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
