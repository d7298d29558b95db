"""Generated against interpreted replay of one fragment (docs/dev/replay.md,
"Generate always or interpret always?").

    python benchmarks/replay_forms.py [--rounds 31]

A chain of adds and multiplies over two placeholders, encoded as fragment
entries (``lazycore.ir.remake.entries``), replayed on the same inputs in one
process, alternated (``thread_time``, medians): interpreted
(``lazycore.ir.remake.made``, the digests looked up as a replay has them)
against the generated replay (``Fragment.replay``), at a lowering's size
(4 entries) and a captured step's (2,000); then made once (2,000 entries):
interpreted (``Fragment.made_once``) against generating, compiling and
running the code for one use.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time

import numpy as np

import lazycore as lc
from lazycore.dialect.types import TensorType
from lazycore.ir import remake
from lazycore.ir.graph import LOG, Value
from lazycore.ir.regions import Arg, Body
from lazycore.trace.fragment import Fragment, _key


def fragment_of(n: int) -> Fragment:
    t = TensorType((4, 4), "f32")
    args = [Arg(0, t), Arg(1, t)]
    x = lc.LazyTensor(Value(args[0], 0), lc.default_device())
    c = lc.LazyTensor(Value(args[1], 0), lc.default_device())
    for _ in range(n // 2):
        y = lc.apply("add", x, c)
        x = lc.apply("mul", y, y)
    order = Body(args, [x.value], {(id(a), 0): i for i, a in enumerate(args)}).order
    at = {(id(a), 0): i for i, a in enumerate(args)}
    for k, node in enumerate(order):
        at[(id(node), 0)] = 2 + k
    entries = remake.entries(order, lambda v: at[(id(v[0]), v[1])])
    return Fragment(entries, 2, (), [1 + len(order)], label="replay_forms")


def alternated(a, b, rounds: int, per: int = 1) -> tuple[float, float]:
    ta, tb = [], []
    for r in range(rounds):
        for fn, out in ((a, ta), (b, tb)) if r % 2 == 0 else ((b, tb), (a, ta)):
            gc.collect()
            s = time.thread_time()
            fn()
            out.append((time.thread_time() - s) / per)
    return statistics.median(ta), statistics.median(tb)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=31)
    args = p.parse_args(argv)
    x = lc.from_numpy(np.ones((4, 4), np.float32)).value
    c = lc.from_numpy(np.ones((4, 4), np.float32)).value
    on, LOG.on = LOG.on, False  # nothing here is a step: keep the log out of it
    try:
        print("load:", os.getloadavg())
        print("| entries | interpreted us | generated us | interpreted/generated |\n|---|---|---|---|")
        for n, reps in ((4, 2000), (2000, 5)):
            f = fragment_of(n)
            f.made_once([x, c])  # remembers the digests on these inputs
            f.replay((), (x, c))  # generates

            def interpreted(f=f, reps=reps):
                for _ in range(reps):
                    inputs = [x, c]
                    env = inputs + list(f.consts)
                    remake.made(f.entries, env, f._digests.get(_key(inputs)))
                    [env[p] for p in f.outputs]

            def generated(f=f, reps=reps):
                for _ in range(reps):
                    f.replay((), (x, c))

            mi, mg = alternated(interpreted, generated, args.rounds, reps)
            print(f"| {n} | {mi * 1e6:.1f} | {mg * 1e6:.1f} | {mi / mg:.2f} |")
        print("\n| made once, 2,000 entries | interpreted ms | generated, compiled, run ms | generated/interpreted |"
              "\n|---|---|---|---|")
        ti, tg = [], []
        for r in range(max(3, args.rounds // 3)):
            f = fragment_of(2000)

            def once_interpreted(f=f):
                f.made_once([x, c])

            def once_generated(f=f):
                remake._COMPILED.clear()  # one use: its text met for the first time
                f.fast = None
                f.replay((), (x, c))

            for fn, out in ((once_interpreted, ti), (once_generated, tg)) if r % 2 == 0 else \
                    ((once_generated, tg), (once_interpreted, ti)):
                gc.collect()
                s = time.thread_time()
                fn()
                out.append(time.thread_time() - s)
        mi, mg = statistics.median(ti), statistics.median(tg)
        print(f"| 2000 | {mi * 1e3:.1f} | {mg * 1e3:.1f} | {mg / mi:.1f} |")
        print("load:", os.getloadavg())
    finally:
        LOG.on = on
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
