"""The step log's pass against the walk's encoding, at each barrier of a tiny GPT-2 training step.

    python benchmarks/encoders.py [--steps 15] [--rounds 7]

docs/dev/replay.md ("The step log's key", session 31's figures) quotes it.
Since session 32 the log's key is written as nodes are made, so its "log"
row is what is left of it at the barrier (benchmarks/step_log_key.py
compares the two forms). At
each recalled barrier of model_zoo.py's tiny GPT-2 step (transformers,
random init), on the same pending values, alternated in one process
(``thread_time``, medians): the step log's encoding
(``StepLog.encode``, what step plans are keyed by) against the walk's
(``lazycore.ir.walk.encode``); and the barrier's plan stage as it is (the
log's pass, the plan's lookup, the plan filled) against the walk with a
lookup of its encoding (what keying step plans by the walk would cost).
"""

from __future__ import annotations

import argparse
import copy
import os
import pathlib
import statistics
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)

    import torch

    import lazycore
    import lazycore.torch as ltorch
    import model_zoo
    import real_models
    from lazycore.ir import walk
    from lazycore.ir.graph import LOG
    from lazycore.runtime import planning

    torch.set_num_threads(1)
    work = model_zoo.tiny_transformers()[0]
    torch.manual_seed(0)
    proto = work.build()
    host = work.batches(torch.Generator().manual_seed(1), 4)
    dev = ltorch.device()
    lazy = real_models.Variant(work, copy.deepcopy(proto).to(dev),
                               [{k: v.to(dev) for k, v in b.items()} for b in host], 3 + args.steps)
    ltorch.mark_step(wait=True)
    clock = time.thread_time
    got: dict[str, list] = {"log": [], "walk": [], "plan": [], "walked plan": []}
    nodes = []
    recall = planning.recall
    seen: dict = {}

    def measured(step):
        hit = recall(step)
        if not hit:
            return hit
        values = [t._value for t in step.pending]
        outputs = list(dict.fromkeys(values))
        rounds = {k: [] for k in got}
        for _ in range(args.rounds):
            t = clock()
            LOG.encode(values)
            rounds["log"].append(clock() - t)
            t = clock()
            walk.encode(outputs)
            rounds["walk"].append(clock() - t)
            t = clock()
            recall(step)
            rounds["plan"].append(clock() - t)
            t = clock()
            seen.get(walk.Walk(outputs).encoding)
            rounds["walked plan"].append(clock() - t)
        for k, xs in rounds.items():
            got[k].append(statistics.median(xs))
        nodes.append(len(walk.encode(outputs)[0]))
        return hit

    planning.recall = measured
    try:
        for _ in range(3 + args.steps):
            lazy.one()
            ltorch.mark_step(wait=True)
    finally:
        planning.recall = recall
    if not nodes:
        print("no barrier recalled its plan")
        return 1
    print(f"{work.name}: {statistics.median(nodes):.0f} nodes a barrier, {len(nodes)} recalled barriers, "
          f"{args.rounds} rounds each; load average {os.getloadavg()[0]:.1f}")
    base = statistics.median(got["log"])
    for k, xs in got.items():
        m = statistics.median(xs)
        print(f"{k:12} {m * 1e3:7.3f} ms   / log pass {m / base:5.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
