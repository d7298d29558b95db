"""Benchmark 16's first-token rows (issue 40 item 4): the first generated
token of a new process, and of a second process that finds the programs on disk.

Greedy ``generate(max_new_tokens=1)`` of GPT-2 (``generation.py``'s model and
one prompt of ``PROMPT`` tokens, the default cache) as the first work of a
new process, after the imports and the model's upload, then the same call
again in that process (warm): eager torch; lazycore on a fresh persistent
cache folder (it compiles and writes its programs); a second lazycore
process on that folder (it loads them); torchax under ``jax.jit`` where it is
installed (the prompt's forward and the first token's argmax, as one jitted
function: ``jax.clear_caches()``, a new function). Each lazy child reports
where its first call's time went: lazycore's phases (trace: the barriers'
graph work; lowering; compile; disk load; execute), the rest of the call
being Python (transformers' setup, op dispatch or a replay), and the call's
CPU time (the process's, XLA's compile threads included, and the calling
thread's: steadier than wall time on a loaded machine). Medians over pairs
of processes; every call's tokens are checked against eager's.

    python benchmarks/first_token.py [--size tiny|small] [--reps N]
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
PHASES = ("trace", "lowering", "compile", "disk_load", "execute")


def rows(kit, size: str, reps: int) -> None:
    """The rows, for run.py's ``kit`` (row, set_ratios, NOTES, FAILURES)."""
    import tempfile

    B = f"16 GPT-2 {size} first token of a new process (ms)"
    runs = measure(size, reps, tempfile)
    want = runs["eager"][0]["tokens"]
    kit.row(B, "eager torch", [r["first"] for r in runs["eager"]], baseline=True, diff=0.0, tol=0.0,
            note=f"warm call {_med(runs['eager'], 'warm') * 1e3:.1f} ms")
    if runs["torchax"]:
        kit.row(B, "torchax, jax.jit", [r["first"] for r in runs["torchax"]],
                diff=float(max(r["tokens"] != want for r in runs["torchax"])), tol=None,
                note=f"warm call {_med(runs['torchax'], 'warm') * 1e3:.1f} ms")
    else:
        kit.NOTES.append(f"{B}: torchax not installed here: no row")
    for key, label in (("cold", "lazycore.torch, compiled and written (cold cache folder)"),
                       ("disk", "lazycore.torch, programs loaded from disk")):
        rs = runs[key]
        kit.row(B, label, [r["first"] for r in rs], diff=float(max(r["tokens"] != want for r in rs)), tol=0.0,
                target="<= 1.5x torchax" if key == "cold" else "<= 0.2x the cold folder's",
                value={"warm_ms": _med(rs, "warm") * 1e3, "compiles": sum(r["compiles"] for r in rs),
                       "disk_cache_hits": sum(r["disk_cache_hits"] for r in rs),
                       **{f"{p}_ms": _med(rs, p) * 1e3 for p in (*PHASES, "cpu", "main_cpu")}},
                note=describe(rs))
        if key == "disk" and any(r["compiles"] for r in rs):
            kit.FAILURES.append(f"{B}: a process with its programs on disk compiled")
    kit.set_ratios(B)


def measure(size: str, reps: int, tempfile=None, work: str = "token") -> dict:
    """``{"eager", "cold", "disk", "torchax": [child JSON, ...]}`` over ``reps`` rounds
    (``work``: :func:`child`'s)."""
    if tempfile is None:
        import tempfile
    runs: dict[str, list] = {"eager": [], "cold": [], "disk": [], "torchax": []}
    for _ in range(reps):
        runs["eager"].append(_child(size, "eager", None, work))
        with tempfile.TemporaryDirectory(prefix="lazycore-bench-cache-") as folder:
            runs["cold"].append(_child(size, "lazy", folder, work))
            runs["disk"].append(_child(size, "lazy", folder, work))
        got = _child(size, "torchax", None, work)
        if got is not None:
            runs["torchax"].append(got)
    return runs


def describe(rs: list) -> str:
    phases = ", ".join(f"{p} {_med(rs, p) * 1e3:,.0f}" for p in PHASES)
    return (f"warm call {_med(rs, 'warm') * 1e3:.1f} ms; {sum(r['compiles'] for r in rs)} compile(s), "
            f"{sum(r['disk_cache_hits'] for r in rs)} load(s) over {len(rs)} process(es); "
            f"lowerings recorded {sum(r.get('recordings', 0) for r in rs)}, "
            f"loaded {sum(r.get('recordings_loaded', 0) for r in rs)}; "
            f"first call's phases (ms): {phases}; its CPU (ms): {_med(rs, 'cpu') * 1e3:,.0f} "
            f"(this thread {_med(rs, 'main_cpu') * 1e3:,.0f})")


def _med(rs: list, key: str) -> float:
    return statistics.median(r[key] for r in rs)


def _child(size: str, system: str, cache_dir, work: str = "token", recordings: bool = False):
    """A new process running :func:`child`; its JSON (None: torchax is not installed).
    ``recordings``: True turns the lowering recordings' disk store on in it
    (``LAZYCORE_RECORDINGS_ON_DISK``, ``frontends/torch/recipe_store.py``), for an A/B of what it saves."""
    code = (f"import sys; sys.path.insert(0, {str(HERE)!r}); import first_token; "
            f"first_token.child({size!r}, {system!r}, {work!r}, {recordings!r})")
    env = {**os.environ, "LAZYCORE_CACHE_DIR": cache_dir or "off"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    if out.returncode == 3:
        return None
    if out.returncode != 0:
        raise RuntimeError(f"the first-token process ({system}) failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def child(size: str, system: str, work: str = "token", recordings: bool = False) -> None:
    """In a new process: ``generate(max_new_tokens=1)`` of one prompt on
    ``system`` (eager, lazy or torchax), timed as the process's first call
    and again (warm), with lazycore's phases of the first call; JSON on
    stdout. Exits 3 where torchax is not installed. ``work="step"``: a
    training step (the prompt as labels, AdamW, ``mark_step``) in place of
    the token, its loss for the tokens."""
    import importlib.util

    import torch

    import generation

    torch.set_num_threads(1)
    model = generation._model(size)
    ids, mask = generation._prompts(model.config.vocab_size, 1)
    if system == "lazy":
        from lazycore.ir.config import configure

        configure(recordings_on_disk=recordings)
    if work == "step" and system == "torchax":
        raise SystemExit(3)
    if system == "torchax":
        if importlib.util.find_spec("torchax") is None:
            raise SystemExit(3)
        first, warm, tokens = _torchax_first_token(model, ids, mask)
        print(json.dumps({"first": first, "warm": warm, "tokens": tokens}))
        return
    report = {}
    if system == "lazy":
        import lazycore
        import lazycore.torch as ltorch
        from lazycore.ir import events

        dev = ltorch.device()
        model = model.to(dev)
        ids, mask = ids.to(dev), mask.to(dev)
        ltorch.mark_step(wait=True)
        lazycore.metrics.reset()
    times = []
    if work == "step":
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        cpu, main = time.process_time(), time.thread_time()
        if work == "step":
            t = time.perf_counter()
            loss = model(ids, attention_mask=mask, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            if system == "lazy":
                ltorch.mark_step(wait=True)
            out = [[round(float(loss), 4)]]
            t = time.perf_counter() - t
        else:
            out, t = generation._generate(model, ids, mask, 1, "dynamic", False)
        times.append(t)
        if system == "lazy" and not report:
            # CPU time (all threads: XLA compiles on its own; this thread) says less about the load than wall time
            report = {p: events.EVENTS.totals[p][1] for p in PHASES}
            report.update(cpu=time.process_time() - cpu, main_cpu=time.thread_time() - main)
            c = lazycore.metrics.counters()
            report.update(compiles=c["compiles"], disk_cache_hits=c["disk_cache_hits"],
                          recordings=c["recordings"], recordings_loaded=c["recordings_loaded"])
    print(json.dumps({"first": times[0], "warm": times[1], "tokens": list(out[0]) if work == "step" else out[0].tolist(),
                      **report}))


def _torchax_first_token(model, ids, mask):
    """torchax's first call: the prompt's forward under ``jax.jit`` (a new
    function, ``jax.clear_caches()``) and the first token's argmax, as
    ``generate(max_new_tokens=1)`` makes it; then a warm call."""
    import jax
    import torch
    from torchax_step import environment

    env = environment()  # (torchax 0.0.13 imports on torch 2.13 only through it)
    import torchax
    with env:
        model.to("jax")
        weights = dict(model.state_dict())
        jids, jmask = ids.to("jax"), mask.to("jax")

    def first_token(weights, ids, mask):
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        logits = torch.func.functional_call(model, weights, (ids,),
                                            dict(attention_mask=mask, position_ids=positions)).logits
        return torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=-1)

    jitted = torchax.interop.jax_jit(first_token)
    jax.clear_caches()
    times = []
    for _ in range(2):
        t = time.perf_counter()
        with env, torch.no_grad():
            out = jitted(weights, jids, jmask)
            host = out.cpu() if hasattr(out, "cpu") else torch.as_tensor(out)
        times.append(time.perf_counter() - t)
    return times[0], times[1], host[0].tolist()


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="tiny", choices=("tiny", "small"))
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--work", default="token", choices=("token", "step"),
                   help="the first generated token, or the first training step (no torchax row)")
    a = p.parse_args(argv)
    sys.path.insert(0, str(HERE))
    runs = measure(a.size, a.reps, work=a.work)
    want = runs["eager"][0]["tokens"]
    for key, rs in runs.items():
        if rs:
            print(f"{key:8s} first {_med(rs, 'first') * 1e3:9.1f} ms  warm {_med(rs, 'warm') * 1e3:8.1f} ms  "
                  f"tokens {'eager' if all(r['tokens'] == want for r in rs) else 'DIFFER'}"
                  + (f"  {describe(rs)}" if key in ("cold", "disk") else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
