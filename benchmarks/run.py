"""lazycore's benchmark suite (issue 7): one command, a table on screen, JSON on disk.

    python benchmarks/run.py                      # full run, writes benchmarks/results.json
    python benchmarks/run.py --quick              # CI smoke: tiny sizes, few steps
    python benchmarks/run.py --only 2,3 --json out.json
    python benchmarks/run.py --profile            # also cProfile benchmark 2's lazy step

Every comparison runs in this one process, warm-up first, then timed steps
(>= 20 in a full run). Benchmarks 1-3 time their variants in two blocks of
consecutive steps each, mirrored (A B C, then C B A: a drifting machine
slows them all alike); each row gives the median with min and max over the timed steps, the ratio to the benchmark's named baseline and the largest
absolute difference from the baseline's numbers, which is checked.

1. Tracing overhead: a 100-op elementwise chain on 16x16 tensors per step,
   microseconds per op: lazycore.torch trace only (the Python op calls;
   ``mark_step`` runs outside the timed region) and the whole step (trace +
   barrier + run), against eager torch and two do-nothing
   ``__torch_dispatch__`` wrapper subclasses (``_make_wrapper_subclass``):
   one calls the op on the inner tensors (the named baseline), one wraps the
   op's meta result.
2. Training step: MLP 784-1024-1024-10 (ReLU), batch 128, cross entropy,
   plain SGD, steady state: lazycore.torch, eager torch, torch.compile (the
   model + loss compiled; backward and ``opt.step()`` as usual; skipped with a
   note if it fails) and jax.jit of the same math (jax.numpy + jax.grad,
   parameters donated; the baseline, waiting for each step). The lazy step
   ends with ``mark_step()``, which starts the step's program and waits for
   the previous one, so tracing overlaps execution (as PyTorch/XLA); rows
   for ``mark_step(wait=True)`` and for jax.jit dispatching ahead the same
   way show both sides of that. A row with a new learning rate every step
   (``LR * (1 + 1e-6 * step)``) shows what a schedule costs the trace. Every
   variant starts from the same weights and sees the same batches; final
   losses and parameters are compared.
3. Fusion: ``tanh(x*1.5+0.5)*sigmoid(x) - x*x/3 + exp(-abs(x))`` on 4M float32:
   NumPy, eager torch, jax.jit (baseline), lazycore.torch, lazycore.numpy. A
   lazy step is: record the expression, ``mark_step(wait=True)``; the
   result stays on the device (no host copy is timed), as jax's
   ``block_until_ready``.
4. First-step latency (trace + lower + compile + run) of benchmark 2's step:
   lazycore after ``lazycore.cache.clear()`` against jax.jit's first call of a
   new function object (after ``jax.clear_caches()``). The torch frontend's
   meta-result cache stays warm (it is not a compile cache). Then the first
   step of a new process (its imports not timed), twice on one fresh
   persistent compile cache folder: the first process compiles and writes
   the program, the second loads it (``LAZYCORE_CACHE_DIR``).
5. Recompiles: the lazy training step with the batch size cycling through 3
   sizes for 20 steps (expect exactly 3 compiles) and with the learning rate
   changed every step (expect 1), from ``lazycore.metrics.counters()``.
6. The NumPy shim's heat demo against NumPy (``benchmarks/numpy_heat.py``).
7. A small GPT's training step (``benchmarks/gpt.py``: 2 pre-LayerNorm blocks,
   width 128, context 64, batch 16, clip_grad_norm_, AdamW) against jax.jit
   of the same math: eager torch, torch.compile (inductor), lazycore traced
   (waiting and pipelined), ``lazycore.torch.capture`` and
   ``torch.compile(step, backend="lazycore")``; first-call times and
   lazycore's compile counts; every final loss and parameter checked against
   eager torch. 7b: the step's compiled program alone, lazycore's and
   jax.jit's, next to eager torch's whole step.
8. Benchmark 7's step data-parallel on 1, 2 and 4 forced CPU devices
   (``benchmarks/scaleout.py``, in a child process) against jax.jit with the
   same layouts, with the collectives of both programs.
9. Automatic step barriers and the learned scalar policy
   (``benchmarks/autobarrier.py``): a loop without ``mark_step`` against
   the same loop with it, and compile counts.
10. Shape buckets (``benchmarks/buckets.py``): an MLP training step over
   batch sizes 30..33 and a transformer block over sequence lengths 40..64,
   marked ``dynamic`` or not: compiles, sweep time, the loss against eager
   torch's; the steady step padded and at its own size.
11. A 12-layer stack of residual MLP blocks (``benchmarks/rolled_layers.py``),
   forward, compiled unrolled and with ``roll_loops`` (one loop over the
   stacked weights): first call (trace + compile) and step, rolled/unrolled.
12. What checking indices held on the device costs in-range programs
   (``benchmarks/index_checks.py``): benchmark 7's step and an indexing-heavy
   step, each with ``settings.index_checks`` on and off in mirrored blocks.
13-15. Training steps of models from transformers, torchvision and timm
   (``benchmarks/real_models.py``, models in ``model_zoo.py``; ``--size
   small|tiny``): GPT-2 (small's shape, or 2 layers of width 64), the tiny
   transformers family (GPT-2, BERT masked LM, Llama, T5), ResNet-50 and
   ViT-small at 224x224 (tiny: ResNet-18 and a 2-block ViT at 64x64): eager
   torch (the baseline; torch on ``--torch-threads``, default 1), inductor,
   lazycore traced and captured, with first steps and compile counts.
16. Greedy ``generate()`` of GPT-2 (``benchmarks/generation.py``): time to
   first token and per token, programs compiled, default and static cache,
   1 and 8 prompts, against eager torch and inductor.
17. Recurrent layers (``benchmarks/real_models.py``, models in
   ``model_zoo.py``): PyTorch's examples' word language model (a 2-layer
   LSTM) and a bidirectional GRU tagger, training steps against eager torch
   and inductor, traced and captured.

The persistent compile cache is off in this process (benchmarks 4 and 5
count compiles); benchmark 4 measures it in processes of its own.

Targets are printed next to the ratios, never asserted. ``--quick`` only
checks that every benchmark runs and agrees numerically (timings are printed
but mean nothing; targets are not judged). The exit status is 1 if a result
disagrees with its baseline or a benchmark raised, else 0.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import importlib
import io
import json
import os
import pathlib
import platform
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

import numpy

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

ROWS: list[dict] = []
NOTES: list[str] = []
FAILURES: list[str] = []


# --- helpers -------------------------------------------------------------------------------------


def _stats(times):
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "n": len(times)}


def row(bench, variant, times=None, unit="ms", scale=1e3, baseline=False, diff=None, tol=None,
        target=None, value=None, note=""):
    """One table row; ``times`` in seconds, shown in ``unit`` (``scale`` = unit per second)."""
    r = {"bench": bench, "variant": variant, "unit": unit, "baseline": baseline, "note": note,
         "max_abs_diff": diff, "tol": tol, "target": target}
    if times is not None:
        s = _stats(times)
        r.update({k: (v * scale if k != "n" else v) for k, v in s.items()})
        if getattr(times, "faults", None) is not None:
            r["page_faults_per_step"] = times.faults
    if value is not None:
        r["value"] = value
    if diff is not None and tol is not None and not (diff <= tol):
        FAILURES.append(f"{bench} / {variant}: max abs diff {diff:.3g} > {tol:.3g}")
        r["agrees"] = False
    elif diff is not None:
        r["agrees"] = True
    ROWS.append(r)
    return r


class Timings(list):
    """Step times in seconds, with ``faults``: the minor page faults per timed step
    (``getrusage``). On this VM a fresh page costs 1-6 us when first written, so a step
    whose outputs land in memory the allocator has just handed back to the kernel pays
    milliseconds for it: a 16 MB result faulted in took a 2 ms fusion step to 6-24 ms.
    Which variant is hit depends on the allocator's state, not on the system measured;
    the count says when a time is that and not the system."""

    faults: float | None = None


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def in_blocks(fns: dict, warmup: int, steps: int, settle: dict | None = None):
    """Time several variants in two blocks of consecutive steps each, the
    second round in reverse order (A B C, then C B A), so a slow drift of the
    machine hits every variant alike while each still runs undisturbed by the
    others (interleaving single steps made jax.jit's fusion step up to 2x
    slower than alone). Each block starts with one untimed step and ends with
    ``settle[name]()`` (untimed), where given: a variant that leaves work
    running (an asynchronous barrier) finishes it before the next one starts.
    Each function may return the seconds of a part of its step (or None).
    Returns ``({name: step times}, {name: part times})``."""
    settle = settle or {}
    for n, fn in fns.items():
        for _ in range(warmup):
            fn()
        if n in settle:
            settle[n]()
    names = list(fns)
    times = {n: Timings() for n in names}
    parts = {n: [] for n in names}
    faults = dict.fromkeys(names, 0)
    first = (steps + 1) // 2
    for order, count in ((names, first), (names[::-1], steps - first)):
        for n in order:
            fns[n]()
            f0 = _minor_faults()
            for _ in range(count):
                t = time.perf_counter()
                part = fns[n]()
                times[n].append(time.perf_counter() - t)
                if part is not None:
                    parts[n].append(part)
            faults[n] += _minor_faults() - f0
            if n in settle:
                settle[n]()
    for n in names:
        times[n].faults = faults[n] / max(len(times[n]), 1)
    return times, parts


@contextlib.contextmanager
def programs_on_their_own_core():
    """While open, every thread of the process but this one (XLA's and
    torch's workers, which run compiled programs) runs on the last CPU and
    this thread on the others: a host whose programs run on an accelerator,
    as on a GPU or TPU host, where tracing has the CPU to itself. Yields
    False, changing nothing, where the process cannot set thread affinity or
    has one CPU."""
    import threading

    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_setaffinity") else []
    if len(cpus) < 2:
        yield False
        return
    me = threading.get_native_id()
    before = {}
    for tid in map(int, os.listdir("/proc/self/task")):
        try:
            before[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, set(cpus[:-1]) if tid == me else {cpus[-1]})
        except (ProcessLookupError, PermissionError):
            continue  # a thread that ended meanwhile
    try:
        yield True
    finally:
        # threads started while pinned (XLA's and torch's pools grow on demand) inherited
        # the one CPU: left so, every later benchmark's programs would run on one core
        for tid in map(int, os.listdir("/proc/self/task")):
            try:
                os.sched_setaffinity(tid, before.get(tid, set(cpus)))
            except (ProcessLookupError, PermissionError):
                continue


def own_core_rows(bench, variants, labels, settle, warm, steps):
    """Time ``variants`` again with their programs on a core of their own
    (:func:`programs_on_their_own_core`), as rows of ``bench``; the steps
    continue from where the main rows left them, whose values were checked
    there. ``labels``: ``(name, label, target)``, the baseline first."""
    with programs_on_their_own_core() as pinned:
        if not pinned:
            NOTES.append(f"{bench.split()[0]}: skipped: this process cannot give its programs a core of their own")
            return
        times, _ = in_blocks(variants, warm, steps, settle)
    for i, (name, label, target) in enumerate(labels):
        row(bench, label, times[name], baseline=i == 0, target=target,
            note="XLA's threads on the last CPU, the tracing thread on the others")
    set_ratios(bench)


def maxdiff(a, b) -> float:
    a = numpy.asarray(a, dtype=numpy.float64)
    b = numpy.asarray(b, dtype=numpy.float64)
    return float(numpy.max(numpy.abs(a - b))) if a.size else 0.0


def set_ratios(bench):
    """Ratio of each row's median to the bench's baseline row's median."""
    rows = [r for r in ROWS if r["bench"] == bench]
    base = [r for r in rows if r["baseline"] and "median" in r]
    if not base:
        return
    b = base[0]
    for r in rows:
        if "median" in r and r["unit"] == b["unit"]:
            r["ratio"] = r["median"] / b["median"]
            r["ratio_to"] = b["variant"]


# --- 1. tracing overhead ---------------------------------------------------------------------------


def _passthrough_classes(torch):
    from torch.utils._pytree import tree_map

    class Inner(torch.Tensor):
        """Do-nothing wrapper: dispatch unwraps, calls the op on the inner tensors, rewraps."""

        @staticmethod
        def __new__(cls, inner):
            r = torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device,
                                                    strides=inner.stride(), requires_grad=False)
            r.inner = inner
            return r

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            un = lambda t: t.inner if isinstance(t, Inner) else t  # noqa: E731
            out = func(*tree_map(un, args), **tree_map(un, kwargs or {}))
            return tree_map(lambda t: Inner(t) if isinstance(t, torch.Tensor) else t, out)

    class Meta(torch.Tensor):
        """Do-nothing wrapper: dispatch runs the op on meta tensors and wraps the result's metadata."""

        @staticmethod
        def __new__(cls, meta):
            r = torch.Tensor._make_wrapper_subclass(cls, meta.shape, dtype=meta.dtype, device="cpu",
                                                    strides=meta.stride(), requires_grad=False)
            r.meta = meta
            return r

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            un = lambda t: t.meta if isinstance(t, Meta) else t  # noqa: E731
            out = func(*tree_map(un, args), **tree_map(un, kwargs or {}))
            return tree_map(lambda t: Meta(t) if isinstance(t, torch.Tensor) else t, out)

    return Inner, Meta


def _shape_only_class(torch):
    """A do-nothing wrapper subclass that only knows shapes: each op returns
    new wrappers with the metadata eager's meta kernel gave the first call of
    its signature. Training through it costs what autograd, the modules, the
    optimizer and subclass dispatch cost: the least Python any
    ``__torch_dispatch__`` frontend pays for a step."""
    from torch.utils._pytree import tree_map

    memo = {}

    class ShapeOnly(torch.Tensor):
        @staticmethod
        def __new__(cls, shape, dtype, stride):
            return torch.Tensor._make_wrapper_subclass(cls, shape, dtype=dtype, device="cpu", strides=stride,
                                                        requires_grad=False)

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            key = (func,) + tuple((a.shape, a.dtype) if type(a) is ShapeOnly else
                                  tuple(a) if isinstance(a, list) else a for a in args)
            got = memo.get(key)
            if got is None:
                def meta(t):
                    if isinstance(t, ShapeOnly):
                        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
                    return t

                out = func(*tree_map(meta, args), **tree_map(meta, kwargs or {}))
                if isinstance(out, torch.Tensor):
                    got = (None, (out.shape, out.dtype, out.stride()))
                elif isinstance(out, (list, tuple)):
                    got = (type(out), [(o.shape, o.dtype, o.stride()) for o in out])
                else:
                    got = ("value", out)
                memo[key] = got
            kind, spec = got
            if kind is None:
                return ShapeOnly(*spec)
            if kind == "value":
                return spec
            return kind(ShapeOnly(*s) for s in spec)

    return ShapeOnly


def bench_tracing(args):
    import torch

    import lazycore
    import lazycore.torch as ltorch

    B = "1 tracing (us/op)"
    n_ops = 100

    def chain(x, y):
        for _ in range(n_ops // 4):
            x = x * 0.9
            x = x + y
            x = torch.tanh(x)
            x = x - 0.1
        return x

    g = torch.Generator().manual_seed(0)
    x0, y0 = torch.randn(16, 16, generator=g), torch.randn(16, 16, generator=g)
    warm, steps = args.warmup, args.steps
    per_op = 1e6 / n_ops  # seconds per step -> us per op

    ref = chain(x0, y0)
    Inner, Meta = _passthrough_classes(torch)
    xi, yi = Inner(x0), Inner(y0)
    xm, ym = Meta(x0.to("meta")), Meta(y0.to("meta"))
    dev = ltorch.device()
    xl, yl = x0.to(dev), y0.to(dev)
    ltorch.mark_step()
    out = {}

    def lazy(replay):
        def step():
            with lazycore.config.override(replay=replay):
                t0 = time.perf_counter()
                out[replay] = chain(xl, yl)
                t1 = time.perf_counter()
                ltorch.mark_step(wait=True)
            return t1 - t0
        return step

    # the example third frontend (examples/mini_frontend.py): the core API and lc.replayed only
    sys.path.insert(0, str(HERE.parent / "examples"))
    from mini_frontend import MiniArray

    def mini_chain(x, y):
        for _ in range(n_ops // 4):
            x = x * 0.9
            x = x + y
            x = x.tanh()
            x = x - 0.1
        return x

    xa, ya = MiniArray.from_numpy(x0.numpy()), MiniArray.from_numpy(y0.numpy())

    def mini():
        t0 = time.perf_counter()
        out["mini"] = mini_chain(xa, ya)
        t1 = time.perf_counter()
        lazycore.mark_step(wait=True)
        return t1 - t0

    times, parts = in_blocks({
        "eager": lambda: chain(x0, y0), "inner": lambda: out.__setitem__("inner", chain(xi, yi)),
        "meta": lambda: chain(xm, ym), "lazy": lazy(True), "lazy0": lazy(False), "mini": mini,
    }, warm, steps)
    row(B, "eager torch", times["eager"], "us/op", per_op)
    row(B, "do-nothing subclass (op on inner)", times["inner"], "us/op", per_op, baseline=True,
        diff=maxdiff(out["inner"].inner, ref), tol=1e-6, target="lazy trace <= 1.5x this")
    row(B, "do-nothing subclass (meta result)", times["meta"], "us/op", per_op, note="no values")
    d, d0 = maxdiff(out[True].cpu(), ref), maxdiff(out[False].cpu(), ref)
    row(B, "lazycore.torch trace only", parts["lazy"], "us/op", per_op, diff=d, tol=1e-5, target="<= 1.5x baseline")
    row(B, "lazycore.torch whole step", times["lazy"], "us/op", per_op, diff=d, tol=1e-5,
        note="trace + mark_step(wait=True) (cache hit, run)")
    row(B, "lazycore.torch trace only, replay off", parts["lazy0"], "us/op", per_op, diff=d0, tol=1e-5,
        note="LAZYCORE_REPLAY=0: every lowering's Python runs (before/after)")
    vs_torch = statistics.median(parts["mini"]) / statistics.median(parts["lazy"])
    row(B, "example frontend (lc.replayed) trace only", parts["mini"], "us/op", per_op,
        diff=maxdiff(out["mini"].numpy(), ref), tol=1e-5, target="<= 1.2x lazycore.torch trace only",
        value={"vs_torch": vs_torch}, note=f"{vs_torch:.2f}x lazycore.torch trace only (examples/mini_frontend.py)")
    set_ratios(B)


# --- 2. training step ------------------------------------------------------------------------------


def _mlp_config(args):
    if args.quick:
        return {"sizes": (784, 64, 64, 10), "batch": 16}
    return {"sizes": (784, 1024, 1024, 10), "batch": 128}


def _make_data(cfg, k=4, batch=None):
    import torch

    g = torch.Generator().manual_seed(1)
    b = batch or cfg["batch"]
    return [(torch.randn(b, cfg["sizes"][0], generator=g), torch.randint(0, cfg["sizes"][-1], (b,), generator=g))
            for _ in range(k)]


def _make_model(cfg):
    import torch

    torch.manual_seed(0)
    s = cfg["sizes"]
    layers = []
    for i in range(len(s) - 1):
        layers.append(torch.nn.Linear(s[i], s[i + 1]))
        if i < len(s) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def _torch_step(model, opt, x, y):
    import torch.nn.functional as F

    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def _jax_step_fn(grads: bool = False):
    """A new function object each call (benchmark 4 needs a fresh one).
    ``grads``: the step returns the gradients too, as a torch step leaves
    them in ``p.grad`` (what lazycore's program must write out)."""
    import jax
    import jax.numpy as jnp

    def loss_fn(params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w.T + b
            if i < len(params) - 1:
                h = jnp.maximum(h, 0.0)
        logp = jax.nn.log_softmax(h, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    def step(params, x, y, lr):
        loss, g = jax.value_and_grad(loss_fn)(params, x, y)
        new = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, g)
        return (new, loss, g) if grads else (new, loss)

    return jax.jit(step, donate_argnums=0)


def _jax_params(model):
    import jax.numpy as jnp

    lin = [m for m in model if hasattr(m, "weight")]
    return [(jnp.asarray(m.weight.detach().numpy()), jnp.asarray(m.bias.detach().numpy())) for m in lin]


def _params_np(model):
    return [p.detach().cpu().numpy() for p in model.parameters()]


LR = 0.01


def bench_training(args):
    import jax
    import torch

    import lazycore
    import lazycore.torch as ltorch

    B = "2 training step (ms)"
    cfg = _mlp_config(args)
    data = _make_data(cfg)
    warm, steps = args.warmup, args.steps
    total = warm + steps + 2  # in_blocks runs one untimed step at the start of each of its two blocks

    def make_torch(model, data, after=None, fwd=None, replay=True, drift=0.0, capture=False):
        """One training step as a function (returning its Python part's seconds
        when ``after`` is the barrier) and a function giving (loss, params).
        ``drift``: the learning rate is ``LR * (1 + drift * step)``, a new float
        every step (as a schedule makes), numerically within the tolerance.
        ``capture``: the step goes through ``lazycore.torch.capture``."""
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        it = [0]
        last = [None]
        step = ltorch.capture(_torch_step) if capture else _torch_step

        def one():
            with lazycore.config.override(replay=replay):
                t0 = time.perf_counter()
                x, y = data[it[0] % len(data)]
                it[0] += 1
                if drift:
                    opt.param_groups[0]["lr"] = LR * (1 + drift * it[0])
                if fwd is None:
                    last[0] = step(model, opt, x, y)
                else:
                    opt.zero_grad()
                    loss = fwd(x, y)
                    loss.backward()
                    opt.step()
                    last[0] = loss
                traced = time.perf_counter() - t0
                if after:
                    after()
            return traced if after else None

        return one, lambda: (float(last[0].detach().cpu()), _params_np(model))

    # jax (baseline): waits for every step
    jdata = [(jax.device_put(x.numpy()), jax.device_put(y.numpy().astype(numpy.int32))) for x, y in data]
    jstep = _jax_step_fn()
    st = {"p": _jax_params(_make_model(cfg)), "i": 0, "loss": None}

    def jone():
        x, y = jdata[st["i"] % len(jdata)]
        st["i"] += 1
        st["p"], st["loss"] = jstep(st["p"], x, y, LR)
        jax.block_until_ready((st["p"], st["loss"]))

    # jax dispatching ahead, as lazycore's default barrier does: each step
    # starts the next program and then waits for the one before
    sa = {"p": _jax_params(_make_model(cfg)), "i": 0, "loss": None}

    def jahead():
        x, y = jdata[sa["i"] % len(jdata)]
        sa["i"] += 1
        before = sa["loss"]
        sa["p"], sa["loss"] = jstep(sa["p"], x, y, LR)
        if before is not None:
            before.block_until_ready()

    # jax returning the gradients too: after a torch step p.grad holds them,
    # so lazycore's program writes them out (three weight-sized results)
    jgstep = _jax_step_fn(grads=True)
    sg = {"p": _jax_params(_make_model(cfg)), "i": 0, "loss": None}

    def jgrads():
        x, y = jdata[sg["i"] % len(jdata)]
        sg["i"] += 1
        sg["p"], sg["loss"], g = jgstep(sg["p"], x, y, LR)
        jax.block_until_ready((sg["p"], sg["loss"], g))

    variants = {"jax": jone, "jaxa": jahead, "jaxg": jgrads}
    finals = {"jaxg": lambda: (float(sg["loss"]), [numpy.asarray(a) for wb in sg["p"] for a in wb])}
    settle = {"jaxa": lambda: jax.block_until_ready((sa["p"], sa["loss"]))}
    finals["jaxa"] = lambda: (float(sa["loss"]), [numpy.asarray(a) for wb in sa["p"] for a in wb])
    variants["eager"], finals["eager"] = make_torch(_make_model(cfg), data)

    dev = ltorch.device()
    ldata = [(x.to(dev), y.to(dev)) for x, y in data]
    lmodel = _make_model(cfg).to(dev)
    # the Python floor: the same step through a subclass that only knows shapes
    ShapeOnly = _shape_only_class(torch)
    fmodel = _make_model(cfg)
    for mod in fmodel:
        if hasattr(mod, "weight"):
            for name in ("weight", "bias"):
                p = getattr(mod, name)
                setattr(mod, name, torch.nn.Parameter(ShapeOnly(p.shape, p.dtype, p.stride())))
    fdata = [(ShapeOnly(x.shape, x.dtype, x.stride()), ShapeOnly(y.shape, y.dtype, y.stride())) for x, y in data]
    variants["floor"] = make_torch(fmodel, fdata)[0]
    variants["lazy"], finals["lazy"] = make_torch(lmodel, ldata, after=ltorch.mark_step)
    variants["lazycap"], finals["lazycap"] = make_torch(_make_model(cfg).to(dev), ldata, after=ltorch.mark_step,
                                                        capture=True)
    variants["lazyw"], finals["lazyw"] = make_torch(_make_model(cfg).to(dev), ldata,
                                                    after=lambda: ltorch.mark_step(wait=True))
    variants["lazy0"], finals["lazy0"] = make_torch(_make_model(cfg).to(dev), ldata, after=ltorch.mark_step,
                                                    replay=False)
    variants["lazylr"], finals["lazylr"] = make_torch(_make_model(cfg).to(dev), ldata, after=ltorch.mark_step,
                                                      drift=1e-6)
    ltorch.mark_step(wait=True)
    for name in ("lazy", "lazycap", "lazyw", "lazy0", "lazylr"):
        settle[name] = lambda: ltorch.mark_step(wait=True)

    if args.no_torch_compile:
        NOTES.append("2: torch.compile skipped (--no-torch-compile)")
    else:
        try:
            import torch.nn.functional as F

            cmodel = _make_model(cfg)
            start = {k: v.clone() for k, v in cmodel.state_dict().items()}
            fwd = torch.compile(lambda x, y: F.cross_entropy(cmodel(x), y))
            make_torch(cmodel, data, fwd=fwd)[0]()  # compiles here: a failure skips the variant
            cmodel.load_state_dict(start)  # then the same start as the others
            variants["tc"], finals["tc"] = make_torch(cmodel, data, fwd=fwd)
        except Exception as e:  # noqa: BLE001
            NOTES.append(f"2: torch.compile failed here, skipped: {type(e).__name__}: {str(e).splitlines()[0][:200]}")

    times, parts = in_blocks(variants, warm, steps, settle)
    jparams = [numpy.asarray(a) for wb in st["p"] for a in wb]
    jloss = float(st["loss"])

    def check(name):
        loss, ps = finals[name]()
        return loss, max([abs(loss - jloss)] + [maxdiff(a, b) for a, b in zip(ps, jparams)])

    # every variant ran warm + steps steps from the same weights on the same batches
    jt, t, lt, lt0, traced = times["jax"], times["eager"], times["lazy"], times["lazy0"], parts["lazy"]
    loss, d_eager = check("eager")
    lloss, d_lazy = check("lazy")
    lloss0, d_lazy0 = check("lazy0")
    _, d_lazyw = check("lazyw")
    _, d_jaxa = check("jaxa")
    _, d_jaxg = check("jaxg")
    tol = 1e-3
    row(B, "jax.jit (donated params)", jt, baseline=True, diff=0.0, tol=tol, value={"final_loss": jloss},
        note=f"loss after {total} steps {jloss:.6f}")
    row(B, "jax.jit, dispatching ahead", times["jaxa"], diff=d_jaxa, tol=tol,
        note="waits for the step before, as lazycore's mark_step()")
    row(B, "jax.jit, returning the gradients too", times["jaxg"], diff=d_jaxg, tol=tol,
        note="what a torch step leaves in p.grad, and so lazycore's program writes out")
    row(B, "eager torch", t, diff=d_eager, tol=tol, value={"final_loss": loss}, note=f"loss {loss:.6f}")
    if "tc" in times:
        tloss, d_tc = check("tc")
        row(B, "torch.compile", times["tc"], diff=d_tc, tol=tol, value={"final_loss": tloss},
            note=f"loss {tloss:.6f}; model+loss compiled, opt.step eager")
    row(B, "lazycore.torch", lt, diff=d_lazy, tol=tol, value={"final_loss": lloss},
        target="<= 1.15x jax.jit", note=f"loss {lloss:.6f}; step incl. mark_step() (waits for the step before)")
    row(B, "  of which Python (trace, before mark_step)", traced,
        note="autograd, optimizer and lazycore dispatch; the rest is the barrier and XLA")
    _, d_lazycap = check("lazycap")
    row(B, "lazycore.torch.capture (the same step, captured)", times["lazycap"], diff=d_lazycap, tol=tol,
        target="<= 1.15x jax.jit", note="traced twice, then replayed: no op dispatch; mark_step() as above")
    row(B, "  of which Python (replay, before mark_step)", parts["lazycap"],
        note="guards, then the step's nodes made again from the recording")
    row(B, "do-nothing subclass, shapes only (Python floor)", times["floor"],
        note="autograd, modules, optimizer, subclass dispatch; no values: what any torch-dispatch frontend pays")
    row(B, "lazycore.torch, mark_step(wait=True)", times["lazyw"], diff=d_lazyw, tol=tol,
        note="waits for its own step: no overlap of tracing and execution")
    row(B, "lazycore.torch, replay off", lt0, diff=d_lazy0, tol=tol,
        note="LAZYCORE_REPLAY=0 (before/after)")
    _, d_lazylr = check("lazylr")
    row(B, "lazycore.torch, new learning rate every step", times["lazylr"], diff=d_lazylr, tol=tol,
        note="lr = LR*(1+1e-6*step): a new float per step, as a schedule gives")
    row(B, "  of which Python (new learning rate every step)", parts["lazylr"],
        note="the SGD updates replay one recording for every learning rate")
    set_ratios(B)
    own_core_rows("2d training step, programs on a core of their own (ms)",
                  {k: variants[k] for k in ("jax", "jaxa", "lazy", "lazycap", "floor")},
                  [("jax", "jax.jit (donated params)", None), ("jaxa", "jax.jit, dispatching ahead", None),
                   ("lazy", "lazycore.torch", "<= 1.15x jax.jit"),
                   ("lazycap", "lazycore.torch.capture (the same step, captured)", "<= 1.0x jax.jit"),
                   ("floor", "do-nothing subclass, shapes only (Python floor)", None)], settle, warm, steps)

    if args.profile:
        profile_lazy_step(lmodel, ldata, max(steps, 20))


def profile_lazy_step(lmodel, ldata, steps):
    import torch

    import lazycore.torch as ltorch

    opt = torch.optim.SGD(lmodel.parameters(), lr=LR)
    pr = cProfile.Profile()
    for i in range(steps):
        x, y = ldata[i % len(ldata)]
        if i == 2:
            pr.enable()
        _torch_step(lmodel, opt, x, y)
        ltorch.mark_step()
    pr.disable()
    s = io.StringIO()
    ps = pstats.Stats(pr, stream=s).sort_stats("tottime")
    ps.print_stats(10)
    text = s.getvalue()
    print(f"\ncProfile of benchmark 2's lazy step ({steps - 2} steps), top 10 by tottime:")
    print("\n".join(line for line in text.splitlines() if line.strip())[:6000])
    PROFILE.append(text)


PROFILE: list[str] = []


# --- 3. fusion --------------------------------------------------------------------------------------


def bench_fusion(args):
    import jax
    import jax.numpy as jnp
    import torch

    import lazycore
    import lazycore.numpy as lnp
    import lazycore.torch as ltorch

    B = "3 fusion (ms)"
    n = 1 << 16 if args.quick else 4 * 1024 * 1024
    xnp = numpy.random.default_rng(2).standard_normal(n).astype(numpy.float32)
    warm, steps = args.warmup, args.steps

    def np_f(x):
        return numpy.tanh(x * 1.5 + 0.5) * (1 / (1 + numpy.exp(-x))) - x * x / 3 + numpy.exp(-numpy.abs(x))

    def t_f(x):
        return torch.tanh(x * 1.5 + 0.5) * torch.sigmoid(x) - x * x / 3 + torch.exp(-torch.abs(x))

    def j_f(x):
        return jnp.tanh(x * 1.5 + 0.5) * jax.nn.sigmoid(x) - x * x / 3 + jnp.exp(-jnp.abs(x))

    def l_f(x):
        return lnp.tanh(x * 1.5 + 0.5) * (1 / (1 + lnp.exp(-x))) - x * x / 3 + lnp.exp(-lnp.abs(x))

    ref = np_f(xnp)
    tol = 1e-5
    xt = torch.from_numpy(xnp)
    jf = jax.jit(j_f)
    xj = jax.device_put(xnp)
    dev = ltorch.device()
    xl = xt.to(dev)
    xa = lnp.asarray(xnp)
    lazycore.mark_step()
    keep = {}

    def lt_step():
        keep["t"] = t_f(xl)
        ltorch.mark_step(wait=True)  # as block_until_ready; no host copy

    def ln_step():
        keep["n"] = l_f(xa)
        lazycore.mark_step(wait=True)

    times, _ = in_blocks({"numpy": lambda: np_f(xnp), "torch": lambda: t_f(xt),
                            "jax": lambda: jf(xj).block_until_ready(), "lt": lt_step, "ln": ln_step}, warm, steps)
    npt, tt, jt, lt, lnt = (times[k] for k in ("numpy", "torch", "jax", "lt", "ln"))
    td, jd = maxdiff(t_f(xt), ref), maxdiff(jf(xj), ref)
    ld, lnd = maxdiff(keep["t"].cpu(), ref), maxdiff(numpy.asarray(keep["n"]), ref)

    row(B, "NumPy", npt, diff=0.0, tol=tol, note=f"{n} float32")
    row(B, "eager torch", tt, diff=td, tol=tol)
    row(B, "jax.jit", jt, baseline=True, diff=jd, tol=tol, note="block_until_ready")
    row(B, "lazycore.torch", lt, diff=ld, tol=tol, target="<= 1.1x jax.jit, >= 5x NumPy",
        note="trace + mark_step(wait=True), no host copy")
    row(B, "lazycore.numpy", lnt, diff=lnd, tol=tol, target="<= 1.1x jax.jit, >= 5x NumPy",
        note="trace + mark_step(wait=True), no host copy")
    set_ratios(B)
    np_med = statistics.median(npt)
    for r in ROWS:
        if r["bench"] == B and "median" in r:
            r["speedup_vs_numpy"] = np_med * 1e3 / r["median"]


# --- 4. first-step latency ----------------------------------------------------------------------------


def bench_first_step(args):
    import jax
    import torch

    import lazycore
    import lazycore.torch as ltorch

    B = "4 first step (ms)"
    cfg = _mlp_config(args)
    data = _make_data(cfg, k=1)
    reps = 1 if args.quick else 3
    dev = ltorch.device()

    lat, ldiff_loss = [], None
    for _ in range(reps):
        model = _make_model(cfg).to(dev)
        x, y = data[0][0].to(dev), data[0][1].to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        ltorch.mark_step()
        lazycore.cache.clear()
        c0 = lazycore.metrics.counters()["compiles"]
        t = time.perf_counter()
        loss = _torch_step(model, opt, x, y)
        ltorch.mark_step(wait=True)
        lat.append(time.perf_counter() - t)
        compiled = lazycore.metrics.counters()["compiles"] - c0
        lloss = float(loss.detach().cpu())

    jl = []
    for _ in range(reps):
        model = _make_model(cfg)
        params = _jax_params(model)
        xj, yj = jax.device_put(data[0][0].numpy()), jax.device_put(data[0][1].numpy().astype(numpy.int32))
        jax.block_until_ready((params, xj, yj))
        jax.clear_caches()
        step = _jax_step_fn()  # a new function object
        t = time.perf_counter()
        params, jloss = step(params, xj, yj, LR)
        jax.block_until_ready((params, jloss))
        jl.append(time.perf_counter() - t)
    ldiff_loss = abs(lloss - float(jloss))

    row(B, "jax.jit first call", jl, baseline=True, diff=0.0, tol=1e-4, note="new function, jax.clear_caches()")
    row(B, "lazycore.torch first step", lat, diff=ldiff_loss, tol=1e-4, target="<= 1.5x jax.jit",
        note=f"cache.clear(); {compiled} compile(s)")

    # new processes on one fresh persistent cache folder: the first compiles, the second loads
    runs: dict[bool, list] = {False: [], True: []}
    for _ in range(reps):
        with tempfile.TemporaryDirectory(prefix="lazycore-bench-cache-") as folder:
            for cached in (False, True):
                runs[cached].append(_first_step_in_new_process(folder, args.quick))
    for cached, what in ((False, "cold disk cache"), (True, "program on disk")):
        rs = runs[cached]
        compiles, loads = sum(r["compiles"] for r in rs), sum(r["disk_cache_hits"] for r in rs)
        if cached and compiles:
            FAILURES.append(f"{B}: a process with its program in the persistent cache compiled {compiles} time(s)")
        row(B, f"lazycore.torch, new process, {what}", [r["seconds"] for r in rs],
            diff=max(abs(r["loss"] - float(jloss)) for r in rs), tol=1e-4,
            note=f"{compiles} compile(s), {loads} load(s) from disk over {len(rs)} process(es)")
    set_ratios(B)


def _first_step_in_new_process(cache_dir: str, quick: bool, child: str = "run") -> dict:
    """A benchmark's first step as the first work of a new process using
    ``cache_dir``: ``child.first_step_child(quick)`` (benchmark 4's, or 7's
    with ``child="gpt"``) prints its seconds, loss and counters as JSON."""
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import {child}; {child}.first_step_child({quick!r})"
    env = {**os.environ, "LAZYCORE_CACHE_DIR": cache_dir}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"the first-step process failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def first_step_child(quick: bool) -> None:
    """In a new process: benchmark 4's first step (after the imports and the
    uploads), its seconds, loss and counters as JSON on stdout."""
    import torch

    import lazycore
    import lazycore.torch as ltorch

    cfg = _mlp_config(argparse.Namespace(quick=quick))
    data = _make_data(cfg, k=1)
    dev = ltorch.device()
    model = _make_model(cfg).to(dev)
    x, y = data[0][0].to(dev), data[0][1].to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    ltorch.mark_step(wait=True)
    t = time.perf_counter()
    loss = _torch_step(model, opt, x, y)
    ltorch.mark_step(wait=True)
    seconds = time.perf_counter() - t
    c = lazycore.metrics.counters()
    print(json.dumps({"seconds": seconds, "loss": float(loss.detach().cpu()), "compiles": c["compiles"],
                      "disk_cache_hits": c["disk_cache_hits"]}))


# --- 5. recompiles -------------------------------------------------------------------------------------


def bench_recompiles(args):
    import torch

    import lazycore
    import lazycore.torch as ltorch

    B = "5 recompiles"
    cfg = _mlp_config(args)
    dev = ltorch.device()
    b = cfg["batch"]
    sizes = [b // 4, b // 2, b]
    datas = {s: [(x.to(dev), y.to(dev)) for x, y in _make_data(cfg, k=1, batch=s)] for s in sizes}

    def fresh():
        model = _make_model(cfg).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        ltorch.mark_step()
        lazycore.cache.clear()
        lazycore.metrics.reset()
        return model, opt

    model, opt = fresh()
    for i in range(20):
        x, y = datas[sizes[i % 3]][0]
        _torch_step(model, opt, x, y)
        ltorch.mark_step()
    got = lazycore.metrics.counters()["compiles"]
    hits = lazycore.metrics.counters()["cache_hits"]
    row(B, f"batch size cycling {sizes}, 20 steps", value={"compiles": got, "expected": 3, "cache_hits": hits},
        unit="compiles", target="exactly 3", note="PASS" if got == 3 else f"FAIL: {got} compiles")

    model, opt = fresh()
    x, y = datas[b][0]
    for i in range(20):
        opt.param_groups[0]["lr"] = LR * (1.0 + 0.05 * (i + 1))  # never 0 or 1 (those are constants)
        _torch_step(model, opt, x, y)
        ltorch.mark_step()
    got = lazycore.metrics.counters()["compiles"]
    hits = lazycore.metrics.counters()["cache_hits"]
    row(B, "learning rate changed every step, 20 steps", value={"compiles": got, "expected": 1, "cache_hits": hits},
        unit="compiles", target="exactly 1", note="PASS" if got == 1 else f"FAIL: {got} compiles")


# --- 6. NumPy heat demo ----------------------------------------------------------------------------


def bench_heat(args):
    import tempfile

    import numpy_heat

    B = "6 numpy heat (ms/step)"
    with tempfile.TemporaryDirectory() as d:
        out = pathlib.Path(d) / "heat.json"
        argv = ["--json", str(out)] + (["--quick"] if args.quick else [])
        print("--- benchmarks/numpy_heat.py", " ".join(argv[2:]))
        rc = numpy_heat.main(argv)
        if rc != 0:
            FAILURES.append("6 numpy heat: numpy_heat.main returned %d (mismatch)" % rc)
            return
        rows = json.loads(out.read_text())
    for r in rows:
        tag = f"n={r['n']}"
        ROWS.append({"bench": B, "variant": f"NumPy {tag}", "unit": "ms", "baseline": True,
                     "median": r["numpy_ms"], "note": "", "max_abs_diff": 0.0})
        ROWS.append({"bench": B, "variant": f"lazycore.numpy {tag}, {r['lazy_every']} step(s)/program", "unit": "ms",
                     "baseline": False, "median": r["lazy_ms"], "min": r["lazy_min_ms"], "max": r["lazy_max_ms"],
                     "ratio": r["lazy_ms"] / r["numpy_ms"], "ratio_to": f"NumPy {tag}",
                     "speedup_vs_numpy": r["speedup"], "max_abs_diff": r["max_abs_diff"],
                     "agrees": r["max_abs_diff"] <= 1e-5, "note": "medians over repeats of per-step means"})


# --- 7-17: benchmarks in files of their own -----------------------------------------------------


def _in_file(module: str, function: str = "bench"):
    """A benchmark written in its own file, imported when it runs (its
    libraries load only for the benchmarks asked for); it gets this module
    for the shared timing and reporting helpers."""

    def bench(args):
        getattr(importlib.import_module(module), function)(args, sys.modules[__name__])

    return bench


BENCHES = {1: bench_tracing, 2: bench_training, 3: bench_fusion, 4: bench_first_step, 5: bench_recompiles,
           6: bench_heat, 7: _in_file("gpt"), 8: _in_file("scaleout"), 9: _in_file("autobarrier"),
           10: _in_file("buckets"), 11: _in_file("rolled_layers"), 12: _in_file("index_checks"),
           13: _in_file("real_models", "bench_gpt2"), 14: _in_file("real_models", "bench_tiny_family"),
           15: _in_file("real_models", "bench_vision"), 16: _in_file("generation"),
           17: _in_file("real_models", "bench_recurrent")}


# --- output ----------------------------------------------------------------------------------------


def _fmt(v, unit):
    if v is None:
        return "-"
    return f"{v:.2f}" if unit == "us/op" or v < 100 else f"{v:.1f}"


def table(quick) -> str:
    lines = []
    hdr = (f"{'variant':<46} {'median':>9} {'min':>9} {'max':>9} {'ratio':>7} {'max|diff|':>9}  "
           f"{'target' if not quick else 'target (not judged: --quick)'}")
    bench = None
    for r in ROWS:
        if r["bench"] != bench:
            bench = r["bench"]
            lines.append("")
            lines.append(f"== {bench}")
            lines.append(hdr)
        if "value" in r and r["unit"] == "compiles":
            v = r["value"]
            lines.append(f"{r['variant']:<46} {v['compiles']:>9} compiles (expected {v['expected']}, "
                         f"{v['cache_hits']} cache hits)  {r['target']}: {r['note']}")
            continue
        ratio = f"{r['ratio']:.2f}x" if "ratio" in r else "-"
        d = r.get("max_abs_diff")
        ds = "-" if d is None else f"{d:.1e}"
        if r.get("agrees") is False:
            ds += "!"
        extra = []
        if r.get("target"):
            extra.append(r["target"])
        if "speedup_vs_numpy" in r and not r["variant"].startswith("NumPy"):
            extra.append(f"speedup vs NumPy {r['speedup_vs_numpy']:.2f}x")
        if r.get("note"):
            extra.append(r["note"])
        if r.get("page_faults_per_step", 0) >= 100:
            extra.append(f"{r['page_faults_per_step']:.0f} page faults/step")
        lines.append(f"{r['variant']:<46} {_fmt(r.get('median'), r['unit']):>9} {_fmt(r.get('min'), r['unit']):>9} "
                     f"{_fmt(r.get('max'), r['unit']):>9} {ratio:>7} {ds:>9}  {'; '.join(extra)}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="CI smoke: tiny sizes, few steps; checks runs + numerics only")
    p.add_argument("--json", type=pathlib.Path, default=HERE / "results.json", help="where to write the results")
    p.add_argument("--only", default="", help="comma-separated benchmark numbers (1-17)")
    p.add_argument("--size", choices=["small", "tiny"], default=None,
                   help="benchmarks 13, 15 and 16: GPT-2 small, ResNet-50 and ViT-small at 224x224 (small), or the "
                        "2-layer width-64 GPT-2, ResNet-18 and a 2-block ViT at 64x64 (tiny); default small, "
                        "--quick tiny")
    p.add_argument("--steps", type=int, default=None, help="timed steps (default 20, --quick 3)")
    p.add_argument("--warmup", type=int, default=None, help="warm-up steps (default 3, --quick 1)")
    p.add_argument("--no-torch-compile", action="store_true",
                   help="skip torch.compile (inductor) in benchmarks 2, 7 and 13-16")
    p.add_argument("--torch-threads", type=int, default=None,
                   help="torch's threads for eager and inductor in benchmarks 13-16 (default 1)")
    p.add_argument("--profile", action="store_true", help="cProfile benchmark 2's lazy step, top 10 by tottime")
    args = p.parse_args(argv)
    args.steps = args.steps if args.steps is not None else (3 if args.quick else 20)
    args.warmup = args.warmup if args.warmup is not None else (1 if args.quick else 3)
    if not args.quick and args.steps < 20:
        print(f"note: {args.steps} timed steps (< 20)")
    ROWS.clear(), NOTES.clear(), FAILURES.clear(), PROFILE.clear()

    import torch

    import lazycore

    # compiles are counted here: programs an earlier run left on disk must not load
    lazycore.config.configure(cache_dir="off")
    which = [int(s) for s in args.only.split(",") if s.strip()] or sorted(BENCHES)
    load_before = os.getloadavg()[0]  # the figures' context: this machine's ratios swing with its load
    t0 = time.perf_counter()
    for k in which:
        t = time.perf_counter()
        try:
            BENCHES[k](args)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            FAILURES.append(f"benchmark {k} raised {type(e).__name__}: {e}")
        print(f"[benchmark {k} done in {time.perf_counter() - t:.1f} s]", flush=True)

    import jax

    meta = {"quick": args.quick, "steps": args.steps, "warmup": args.warmup, "python": platform.python_version(),
            "torch": torch.__version__, "jax": jax.__version__, "numpy": numpy.__version__,
            "torch_threads": torch.get_num_threads(), "cpus": os.cpu_count(), "machine": platform.machine(),
            "device": str(jax.devices()[0]), "seconds": time.perf_counter() - t0,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_average": [load_before, os.getloadavg()[0]],
            "size": args.size or ("tiny" if args.quick else "small"),
            "only": which if args.only else None}
    print(f"\nlazycore benchmarks ({'--quick smoke run: timings mean nothing' if args.quick else 'full run'}); "
          f"torch {meta['torch']} ({meta['torch_threads']} threads), jax {meta['jax']}, {meta['cpus']} CPUs, "
          f"{args.warmup} warm-up + {args.steps} timed steps; ratio = median / the baseline's median")
    print(table(args.quick))
    for n in NOTES:
        print("note:", n)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "rows": ROWS, "notes": NOTES, "failures": FAILURES,
                                         "profile": PROFILE}, indent=2, default=str))
        print(f"results written to {args.json}")
    if FAILURES:
        print("FAILED:\n  " + "\n  ".join(FAILURES))
        return 1
    print("OK: every benchmark ran and agrees with its baseline")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
