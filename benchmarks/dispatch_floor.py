"""What a traced step's forward and backward cost beyond any ``__torch_dispatch__`` tracer's floor (issue 40 (b)).

    python benchmarks/dispatch_floor.py [--model gpt2|bert|llama|mistral|t5] [--steps 15] [--by-op N]
    python benchmarks/dispatch_floor.py --ops [--steps 5]

On benchmark 14's tiny transformers (``model_zoo.tiny_transformers``), the
CPU time (this thread's, so figures mean something on a loaded machine) of
one forward and backward pass, medians of ``--steps``:

- **eager**: eager torch on one thread;
- **lazy**: lazycore traced, every op recorded (its barrier is not in it);
- **canned**: the same lazy model, but each op's handler returns fresh
  tensors over the values a traced step's op of the same kind made, in the
  order they came (no signature, no meta lookup, no replay, no node): what
  autograd, the modules, torch's ``__torch_dispatch__`` boundary and making
  the wrapper tensors cost. No tracer built on a tensor subclass pays less;
  ``lazy - canned`` is lazycore's own tracing.

Then the whole traced step's parts, on this thread: the step's Python (the
optimizer's and clipping's captured replays included) and the barrier's host
work (``mark_step(wait=True)``: encoding the step, recalling its plan,
launching; the program runs on XLA's threads, so its waiting is not CPU).

It also counts the view reads one traced pass replays as recordings of
their own, apart from the op that reads them (an op's views are read within
its own replay where its signature allows: T5 tiny 390 a pass -> 45).

``--by-op N``: the N op overloads whose calls cost the most over canned's
(each top-level dispatch timed on this thread, lazy and canned alternated).
``--ops``: single ops in a loop (``add``, ``mm``, ``mm`` of a transposed view
and of one transposed twice, ``view``, ``t``, ``x * 0.5``, ``linear``), each against canned: a
tight loop keeps caches warm, so a model's op costs more than its row here.
Wall-clock timers mislead on a loaded machine (the step's wall time was 3x
its CPU time at load 13): every figure here is this thread's CPU time.
"""

from __future__ import annotations

import argparse
import collections
import copy
import os
import pathlib
import statistics
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _fresh(r, new):
    """A result like ``r`` with new lazy tensors over the same storages and steps."""
    if type(r) is new.Tensor:
        return new._new(r._storage, r._steps, r.shape, r.stride(), r.storage_offset(), r.dtype, r.device, r._key)
    if isinstance(r, (list, tuple)):
        return type(r)(_fresh(x, new) for x in r)
    return r


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="gpt2", choices=["gpt2", "bert", "llama", "mistral", "t5"])
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--by-op", type=int, default=0, metavar="N")
    p.add_argument("--ops", action="store_true")
    args = p.parse_args(argv)
    if args.ops:
        return _ops(args.steps)

    import torch

    import lazycore
    import lazycore.torch as ltorch
    import model_zoo
    from lazycore.frontends.torch import dispatch
    from lazycore.frontends.torch import tensor as lazy_tensor

    lazycore.config.configure(cache_dir="off")
    torch.set_num_threads(1)
    gpt2, bert, llama, mistral, t5 = model_zoo.tiny_transformers()
    work = {"gpt2": gpt2, "bert": bert, "llama": llama, "mistral": mistral, "t5": t5}[args.model]
    torch.manual_seed(0)
    proto = work.build()
    host = work.batches(torch.Generator().manual_seed(1), 4)
    clock = time.thread_time
    median = lambda xs: statistics.median(xs) * 1e3  # noqa: E731

    def forward_backward(model, batch, after=None):
        t = clock()
        work.loss(model, batch).backward()
        spent = clock() - t
        for prm in model.parameters():
            prm.grad = None
        if after is not None:
            after()
        return spent

    eager = copy.deepcopy(proto)
    eager_t = [forward_backward(eager, host[0]) for _ in range(5 + args.steps)][5:]

    # canned: op kind -> the results a traced pass made, handed out again in order
    tape, taken, mode = collections.defaultdict(list), collections.Counter(), ["trace"]
    run = dispatch.run

    by_op, depth = {"trace": collections.Counter(), "canned": collections.Counter()}, [0]
    calls = collections.Counter()

    def handle(func, fargs, fkwargs):
        if mode[0] == "record":
            r = run(func, fargs, fkwargs)
            tape[func].append(r)
            return r
        if mode[0] == "canned":
            made = tape.get(func)
            if made is not None and taken[func] < len(made):
                taken[func] += 1
                return _fresh(made[taken[func] - 1], lazy_tensor)
        return run(func, fargs, fkwargs)

    def timed(func, fargs, fkwargs):  # (--by-op) each top-level call's CPU time, by op
        if depth[0] or mode[0] not in by_op:
            return handle(func, fargs, fkwargs)
        depth[0] += 1
        t = time.thread_time_ns()
        try:
            return handle(func, fargs, fkwargs)
        finally:
            by_op[mode[0]][func] += time.thread_time_ns() - t
            calls[mode[0], func] += 1
            depth[0] -= 1

    handler = timed if args.by_op else handle

    dev = ltorch.device()
    model = copy.deepcopy(proto).to(dev)
    batch = {k: v.to(dev) for k, v in host[0].items()}
    wait = lambda: ltorch.mark_step(wait=True)  # noqa: E731
    lazy_tensor.route_ops(handler)
    try:
        for _ in range(5):
            forward_backward(model, batch, wait)
        mode[0] = "record"
        forward_backward(model, batch, wait)
        for counts in (*by_op.values(), calls):  # (--by-op) the timed passes only
            counts.clear()
        lazy_t, canned_t = [], []
        for i in range(2 * args.steps):  # alternated, so a drifting machine slows both alike
            mode[0] = "canned" if i % 2 else "trace"
            taken.clear()
            (canned_t if i % 2 else lazy_t).append(forward_backward(model, batch, wait))
            mode[0] = "trace"
    finally:
        lazy_tensor.route_ops(run)
    ops = sum(len(v) for v in tape.values())
    reads = _view_reads(lambda: forward_backward(model, batch, wait))

    # the whole traced step, as benchmark 14 runs it (the barrier waited for, so it is timed alone)
    import real_models

    lazy = real_models.Variant(work, copy.deepcopy(proto).to(dev), [{k: v.to(dev) for k, v in b.items()} for b in host],
                               10 + args.steps)
    for _ in range(6):
        lazy.one()
        wait()
    step_t, barrier_t = [], []
    for _ in range(args.steps):
        t0 = clock()
        lazy.one()
        t1 = clock()
        wait()
        step_t.append(t1 - t0)
        barrier_t.append(clock() - t1)

    e, lz, cn = median(eager_t), median(lazy_t), median(canned_t)
    print(f"{work.name}: this thread's CPU ms, medians of {args.steps}; load average {os.getloadavg()[0]:.1f}")
    print(f"  forward + backward   eager {e:6.2f}   lazy {lz:6.2f} ({lz / e:.2f}x)   canned {cn:6.2f} ({cn / e:.2f}x): "
          f"{ops} ops, lazycore's own tracing {lz - cn:.2f} ms ({(lz - cn) * 1e3 / max(ops, 1):.1f} us an op)")
    print(f"  view reads replayed apart from their op: {reads} a pass")
    print(f"  traced step          step's Python {median(step_t):6.2f}   barrier's host work {median(barrier_t):6.2f}")
    if args.by_op:
        own = {f: (t - by_op["canned"][f]) / 1e3 / args.steps for f, t in by_op["trace"].items()}
        print(f"  the {args.by_op} ops costing most over canned (us a pass; us a call; calls a pass):")
        for f in sorted(own, key=own.get, reverse=True)[:args.by_op]:
            n = calls["trace", f] / args.steps
            print(f"    {own[f]:8.1f} {own[f] / n:7.1f} {n:6.0f}  {f}")
    return 0


def _view_reads(one_pass) -> int:
    """How many view reads ``one_pass`` replays as recordings of their own
    (:func:`lazycore.trace.views.read` with steps), not with the op reading
    them (dispatch's ``_with_views``; views picked by a number are read apart)."""
    from lazycore.frontends.torch import dispatch
    from lazycore.trace import views

    n, read = [0], views.read

    def counted(storage, steps, start=None):
        n[0] += bool(steps)
        return read(storage, steps, start)

    views.read = dispatch.read_view = counted
    try:
        one_pass()
    finally:
        views.read = dispatch.read_view = read
    return n[0]


def _ops(rounds: int) -> int:
    """``--ops``: us a call of single ops on lazy tensors, and canned's (see the module docs)."""
    import torch

    import lazycore
    import lazycore.torch as ltorch
    from lazycore.frontends.torch import dispatch
    from lazycore.frontends.torch import tensor as lazy_tensor

    lazycore.config.configure(cache_dir="off")
    torch.set_num_threads(1)
    dev = ltorch.device()
    x, w = torch.randn(128, 64).to(dev), torch.randn(64, 64).to(dev)
    wt = w.t()
    ops = {"add": lambda: x + x, "mm": lambda: torch.mm(x, w), "mm of w.t()": lambda: torch.mm(x, wt),
           "mm of w.t().t()": lambda: torch.mm(x, wt.t()),
           "view": lambda: x.view(8192), "t": lambda: w.t(), "x * 0.5": lambda: x * 0.5,
           "linear": lambda: torch.nn.functional.linear(x, w)}
    run, canned = dispatch.run, {}

    def handler(func, fargs, fkwargs):
        r = canned.get(func)
        if r is None:
            r = canned[func] = run(func, fargs, fkwargs)
        return _fresh(r, lazy_tensor)

    def per_call(f, n=1000):
        for _ in range(20):
            f()
        ltorch.mark_step()
        t = time.thread_time()
        for _ in range(n):
            f()
        spent = time.thread_time() - t
        ltorch.mark_step()
        return spent / n * 1e6

    got = {k: ([], []) for k in ops}
    for _ in range(rounds):  # alternated
        for k, f in ops.items():
            got[k][0].append(per_call(f))
            canned.clear()
            lazy_tensor.route_ops(handler)
            try:
                got[k][1].append(per_call(f))
            finally:
                lazy_tensor.route_ops(run)
    print(f"us a call, this thread's CPU, medians of {rounds}; load average {os.getloadavg()[0]:.1f}")
    for k, (lazy, floor) in got.items():
        lz, fl = statistics.median(lazy), statistics.median(floor)
        print(f"  {k:16s} lazy {lz:6.2f}   canned {fl:6.2f}   lazycore's own {lz - fl:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
