"""Where a traced training step's time goes, on a model of benchmarks 13-15 (issue 40 item 2).

    python benchmarks/step_breakdown.py [--model gpt2|resnet18|llama|bert|t5|vit] [--steps 10] [--profile 15]

Runs the model's lazy training step (``model_zoo.py``'s tiny sizes, the
benchmark's optimizer, schedule and clipping) with ``mark_step(wait=True)``
after every step, so each part is timed alone, and splits the steady steps'
wall time into:

- **trace**: the step's Python (modules, autograd, clipping, optimizer, the
  schedule), every op recorded on the lazy device; per recorded op, from the
  graph's node count;
- **barrier**: ``mark_step(wait=True)``, and in it lazycore's phases from
  ``lazycore.metrics.timings()``: ``trace`` (walk the graph, make the cache
  key), ``lowering`` and ``compile`` (only on a cache miss), ``execute``
  (launch and run the program), and host <-> device ``transfer``;
- what the barrier spends outside those phases (launch bookkeeping, donation,
  result handles).

Beside it, the same step in eager torch and through run.py's do-nothing
``__torch_dispatch__`` subclass that only knows shapes (the least a per-op
tracer pays: autograd, modules, optimizer and dispatch, with no values);
and, with ``--profile N``,
the top N functions of a cProfile of the traced steps by own time.
Under ``LAZYCORE_DEBUG=1`` lazycore says why a step recompiled or a capture
did not replay.
"""

from __future__ import annotations

import argparse
import cProfile
import copy
import io
import os
import pathlib
import pstats
import statistics
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _workload(name):
    import model_zoo

    gpt2, bert, llama, mistral, t5 = model_zoo.tiny_transformers()
    resnet, vit = model_zoo.vision("tiny")
    return {"gpt2": gpt2, "bert": bert, "llama": llama, "mistral": mistral, "t5": t5, "resnet18": resnet,
            "vit": vit}[name]


def _median_ms(xs):
    return statistics.median(xs) * 1e3 if xs else 0.0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="gpt2", choices=["gpt2", "bert", "llama", "mistral", "t5", "resnet18", "vit"])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--profile", type=int, default=0, help="print the top N functions of a cProfile by own time")
    p.add_argument("--torch-threads", type=int, default=1)
    args = p.parse_args(argv)

    import torch

    import lazycore
    import lazycore.torch as ltorch
    import real_models
    import run

    lazycore.config.configure(cache_dir="off")
    torch.set_num_threads(args.torch_threads)
    work = _workload(args.model)
    torch.manual_seed(0)
    proto = work.build()
    host = work.batches(torch.Generator().manual_seed(1), 4)
    total = 3 + 2 * args.steps
    dev = ltorch.device()
    load = os.getloadavg()[0]

    # eager torch, for reference
    eager = real_models.Variant(work, copy.deepcopy(proto), host, total)
    for _ in range(3):
        eager.one()
    eager_t, eager_cpu = [], []
    for _ in range(args.steps):
        c, t = time.process_time(), time.perf_counter()
        eager.one()
        eager_t.append(time.perf_counter() - t)
        eager_cpu.append(time.process_time() - c)

    # the shapes-only floor: modules, autograd, clipping, optimizer and dispatch with no values
    shape_only = run._shape_only_class(torch)
    fmodel = copy.deepcopy(proto)
    for mod in fmodel.modules():
        for pname, prm in list(mod.named_parameters(recurse=False)):
            setattr(mod, pname, torch.nn.Parameter(shape_only(prm.shape, prm.dtype, prm.stride())))
        for bname, buf in list(mod.named_buffers(recurse=False)):
            setattr(mod, bname, shape_only(buf.shape, buf.dtype, buf.stride()))
    fbatches = [{k: shape_only(v.shape, v.dtype, v.stride()) for k, v in b.items()} for b in host]
    floor_t = []
    try:
        floor = real_models.Variant(work, fmodel, fbatches, total)
        for i in range(3 + args.steps):
            t = time.perf_counter()
            floor.one()
            if i >= 3:
                floor_t.append(time.perf_counter() - t)
    except Exception as e:  # noqa: BLE001 (a model whose Python reads a value cannot run on shapes alone)
        print(f"(the shapes-only floor does not run this model: {type(e).__name__}: {str(e)[:160]})")

    # lazycore, traced, every part timed alone
    lazy = real_models.Variant(work, copy.deepcopy(proto).to(dev),
                               [{k: v.to(dev) for k, v in b.items()} for b in host], total)
    ltorch.mark_step(wait=True)
    firsts = []
    for _ in range(3):
        c0 = lazycore.metrics.counters()["compiles"]
        t = time.perf_counter()
        lazy.one()
        ltorch.mark_step(wait=True)
        firsts.append((time.perf_counter() - t, lazycore.metrics.counters()["compiles"] - c0))
    lazycore.metrics.reset()
    prof = cProfile.Profile() if args.profile else None
    trace_t, barrier_t, trace_cpu, barrier_cpu = [], [], [], []
    for _ in range(args.steps):
        c0, t0 = time.process_time(), time.perf_counter()
        if prof:
            prof.enable()
        lazy.one()
        if prof:
            prof.disable()
        c1, t1 = time.process_time(), time.perf_counter()
        ltorch.mark_step(wait=True)
        c2, t2 = time.process_time(), time.perf_counter()
        trace_t.append(t1 - t0)
        barrier_t.append(t2 - t1)
        trace_cpu.append(c1 - c0)
        barrier_cpu.append(c2 - c1)
    c = lazycore.metrics.counters()
    tim = lazycore.metrics.timings()
    transfers = lazycore.metrics.transfer_timings()
    sizes = lazycore.metrics.graph_sizes()
    nodes = statistics.median(s[0] for s in sizes) if sizes else 0
    steps = args.steps

    step_ms = _median_ms([a + b for a, b in zip(trace_t, barrier_t)])
    print(f"\n{work.name} ({work.what}); load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; "
          f"torch on {args.torch_threads} thread(s); medians of {steps} steady steps, mark_step(wait=True) each")
    print(f"first 3 steps: " + ", ".join(f"{t * 1e3:,.0f} ms ({k} compile(s))" for t, k in firsts))
    print("(wall ms; in brackets the process's CPU ms, all its threads: on a loaded machine the CPU time is "
          "what the part costs, the wall time what it waited too)")
    print(f"{'eager torch step':44} {_median_ms(eager_t):9.1f} ms   [{_median_ms(eager_cpu):.1f}]")
    if floor_t:
        print(f"{'shapes-only subclass step (per-op floor)':44} {_median_ms(floor_t):9.1f} ms")
    print(f"{'lazycore traced step, total':44} {step_ms:9.1f} ms   ({step_ms / _median_ms(eager_t):.2f}x eager)")
    print(f"{'  trace (the step Python, ops recorded)':44} {_median_ms(trace_t):9.1f} ms   "
          f"[{_median_ms(trace_cpu):.1f}] {nodes:.0f} graph nodes: "
          f"{_median_ms(trace_cpu) * 1e3 / max(nodes, 1):.1f} CPU us a node")
    print(f"{'  barrier, mark_step(wait=True)':44} {_median_ms(barrier_t):9.1f} ms   [{_median_ms(barrier_cpu):.1f}]")
    parts = 0.0
    for phase in ("trace", "lowering", "compile", "execute"):
        xs = tim.get(phase, [])
        if xs:
            per_step = sum(xs) / steps
            parts += per_step
            print(f"{'    ' + phase + (' (graph walk, cache key)' if phase == 'trace' else ''):44} "
                  f"{per_step * 1e3:9.1f} ms   (mean; {len(xs)} in {steps} steps)")
    if transfers:
        per_step = sum(transfers) / steps
        print(f"{'    transfers':44} {per_step * 1e3:9.1f} ms   ({len(transfers)} in {steps} steps; "
              f"{c['transfers_to_device']} to, {c['transfers_to_host']} from the device)")
    print(f"{'    rest of the barrier (mean)':44} {(sum(barrier_t) / steps - parts) * 1e3:9.1f} ms")
    print(f"compiles {c['compiles']}, executions {c['executions']}, cache hits {c['cache_hits']}, "
          f"fallbacks {c['fallbacks']}, donated buffers {c['donated_buffers']} in {steps} steps")
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(args.profile)
        print(f"\ncProfile of the {steps} traced steps' Python (not the barriers), top {args.profile} by own time:")
        print("\n".join(line for line in s.getvalue().splitlines() if line.strip())[-6000:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
