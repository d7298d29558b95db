"""Benchmarks 13-15: training steps of transformers, torchvision and timm models
(issue 40 item 1), registered in ``run.py``.

13. A GPT-2 causal LM (``--size small``: GPT-2 small's 12 layers of width 768
    and vocabulary 50257; ``--size tiny``: 2 layers of width 64), batch 4 x 128
    tokens, AdamW with transformers' ``get_linear_schedule_with_warmup`` and
    ``clip_grad_norm_(1.0)``.
14. The transformers family at 2 layers of width 64 (GPT-2, BERT masked LM,
    Llama, Mistral with a sliding window of 16, T5), batch 4 x 32 tokens:
    per-op cost dominates these steps.
15. torchvision's ResNet and timm's ViT training steps (``small``: ResNet-50
    and ViT-small/16 at 224x224, batch 8; ``tiny``: ResNet-18 and a 2-block
    ViT at 64x64, batch 4), each with its library's optimizer and schedule.

The models are in ``model_zoo.py``. Rows per model, as same-run ratios of
medians to eager torch (the baseline): ``torch.compile`` of the model
(inductor; the optimizer, clipping and schedule stay eager, as a user's
``model = torch.compile(model)``), lazycore traced per op with
``mark_step()`` after every step (pipelined: the step's program runs while
the next step traces), and the step under ``lazycore.torch.capture``
(``mark_step()`` too). The schedule steps after the step, outside the
captured function, as a training loop writes it. Each row gives its first
step's time (lazycore's traced row from an empty compile cache; the
captured row finds the traced row's programs there, but its recorded first
call and its replays (one ``call`` of the recorded body) are graphs of their
own: a compile each, counted in its row; inductor with its disk caches
off), its compile count (``lazycore.metrics.counters()``: XLA programs
compiled in its first step and over all its steps) and its ratio to
inductor's median. The torchax row (``torchax_step.py``, where torchax is
installed) runs the same step with the whole of it under one ``jax.jit``;
lazycore's rows then also give their ratio to the fastest of eager, inductor
and torchax (issue 40's targets). PyTorch/XLA has a row nowhere yet (not
installed here).

Every variant starts from the same weights and sees the same batches; after
its last step its loss and every floating-point entry of the model's
``state_dict`` (batch norm's running statistics included) are compared with
eager torch's, relative to ``max(1, |eager|)``.

At the tiny sizes the variants are timed in mirrored blocks (``run.py``'s
``in_blocks``); at ``small`` one after the other, each freed before the next
is built (four copies of GPT-2 small with AdamW's state would take 8 GB).
"""

from __future__ import annotations

import contextlib
import copy
import gc
import os
import importlib.util
import time

TOL = 2e-3
"""Largest difference from eager torch's final loss and state, relative to
``max(1, |eager|)``. AdamW's normalised update moves a weight by about the
learning rate (1e-4 here) whatever the gradient's size, so a rounding
difference that flips a tiny gradient's sign moves it by up to 2e-4 a step:
over 20-30 steps, 2e-3 bounds that; SGD with momentum at lr 0.1 stays far
below it over so few steps."""


def size_of(args) -> str:
    return getattr(args, "size", None) or ("tiny" if args.quick else "small")


@contextlib.contextmanager
def torch_threads(args, kit, bench: str):
    """torch's intra-op threads for eager and inductor while a benchmark runs
    (``--torch-threads``, default 1, as issue 40's figures): on 2 cores that
    other processes load, torch's two OpenMP threads wait on each other at
    every op, and a tiny GPT-2 step that takes 14-18 ms on one thread took
    40-1,800 ms on two (load average 9). XLA's own threads are not torch's.
    On a quiet machine the default understates eager: at ``--size small`` two
    threads made eager's GPT-2 small step 6.1 -> 2.0 s, ResNet-50 4.4 -> 1.3 s
    (benchmarks/results_real_models_small*.json); issue 40's "the fastest of
    eager and inductor" is the run with ``--torch-threads`` at the core count."""
    import torch

    n = getattr(args, "torch_threads", None) or 1
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    kit.NOTES.append(f"{bench}: torch on {n} thread(s) (--torch-threads), load average "
                     f"{os.getloadavg()[0]:.1f} at the start")
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _missing_columns() -> str:
    absent = [name for name, mod in (("torchax", "torchax"), ("PyTorch/XLA", "torch_xla"))
              if importlib.util.find_spec(mod) is None]
    return f"{' and '.join(absent)} not installed here: no row" if absent else ""


class Variant:
    """One system's training loop over a workload: ``one()`` runs a step and
    what follows it (the schedule, a barrier); ``final()`` gives the last
    loss and the model's floating-point state on the host."""

    def __init__(self, work, model, batches, total, after=None, wrap=None, model_wrap=None):
        import torch

        self.model = model
        opt, self.schedule, clip = work.optimizer(model, total)
        params = [p for p in model.parameters() if p.requires_grad]
        forward = model_wrap(model) if model_wrap is not None else model

        def step(batch):
            loss = work.loss(forward, batch)
            loss.backward()
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(params, clip)
            opt.step()
            opt.zero_grad()
            return loss.detach()

        self.step = wrap(step) if wrap is not None else step
        self.batches, self.after, self.i, self.last = batches, after, 0, None

    def one(self):
        batch = self.batches[self.i % len(self.batches)]
        self.i += 1
        self.last = self.step(batch)
        self.schedule()
        if self.after is not None:
            self.after()

    def final(self):
        state = {k: v.detach().cpu().double() for k, v in self.model.state_dict().items() if v.is_floating_point()}
        return float(self.last.cpu()), state


def _difference(got, want) -> tuple[float, str]:
    """The largest difference relative to ``max(1, |want|)`` of the losses and states, and where."""
    (gl, gs), (wl, ws) = got, want
    worst, where = abs(gl - wl) / max(1.0, abs(wl)), "loss"
    for k, w in ws.items():
        d = float(((gs[k] - w).abs() / w.abs().clamp(min=1.0)).max()) if w.numel() else 0.0
        if not d <= worst:  # NaN counts as worst
            worst, where = d, k
    return worst, where


def bench_workloads(bench_title, workloads, args, kit, mirrored: bool, lazy=("traced", "captured"),
                    torchax: bool = True):
    """Rows for each workload: eager torch (baseline), inductor, torchax under jax.jit (``torchax``, where
    installed), lazycore traced and captured (``lazy``)."""
    import torch

    import lazycore
    import lazycore.torch as ltorch

    warm, steps = args.warmup, args.steps
    total = 1 + warm + steps + 2  # first call, warm-up, timed, one untimed step per mirrored block
    dev = ltorch.device()
    wait = lambda: ltorch.mark_step(wait=True)  # noqa: E731
    missing = _missing_columns()

    def compiled():
        c = lazycore.metrics.counters()
        return c.get("compiles", 0) + c.get("stack_compiles", 0)

    for work in workloads:
        B = bench_title.format(name=work.name)
        torch.manual_seed(0)
        proto = work.build()
        g = torch.Generator().manual_seed(1)
        host = work.batches(g, 4)
        lazy_batches = None
        # name -> (label, factory, settle); factories build the variant when it is its turn
        plan = {}

        def eager():
            return Variant(work, copy.deepcopy(proto), host, total)

        plan["eager"] = ("eager torch", eager, None)
        if args.no_torch_compile:
            kit.NOTES.append(f"{B.split()[0]} {work.name}: torch.compile (inductor) skipped (--no-torch-compile)")
        else:
            plan["inductor"] = ("torch.compile(model) (inductor)",
                                lambda: Variant(work, copy.deepcopy(proto), host, total, model_wrap=torch.compile),
                                None)

        if torchax and importlib.util.find_spec("torchax") is not None:
            import torchax_step

            holder = [None]

            def torchax_variant():
                holder[0] = torchax_step.TorchaxVariant(work, copy.deepcopy(proto), host, total)
                return holder[0]

            plan["torchax"] = ("torchax under jax.jit", torchax_variant, lambda: holder[0].wait())

        def lazy_variant(capture):
            def make():
                nonlocal lazy_batches
                if lazy_batches is None:
                    lazy_batches = [{k: v.to(dev) for k, v in b.items()} for b in host]
                return Variant(work, copy.deepcopy(proto).to(dev), lazy_batches, total, after=ltorch.mark_step,
                               wrap=ltorch.capture if capture else None)

            return make

        plan["traced"] = ("lazycore.torch, mark_step() (pipelined)", lazy_variant(False), wait)
        if "captured" in lazy:
            plan["captured"] = ("lazycore.torch.capture, mark_step()", lazy_variant(True), wait)

        firsts, first_compiles, all_compiles, finals, built = {}, {}, {}, {}, {}
        captured = [None]

        def first_step(name, v):
            if name == "traced":
                wait()
                lazycore.cache.clear()  # the traced row's first step compiles from scratch
            c0 = compiled()
            t = time.perf_counter()
            if name == "inductor":
                with torch.compiler.config.patch(force_disable_caches=True):
                    v.one()
            else:
                v.one()
            if name in ("traced", "captured"):
                wait()
            elif name == "torchax":
                v.wait()
            firsts[name] = time.perf_counter() - t
            first_compiles[name] = compiled() - c0

        def counted(name, v):
            def one():
                c0 = compiled()
                v.one()
                all_compiles[name] += compiled() - c0

            return one

        def start(name):
            try:
                v = plan[name][1]()
                first_step(name, v)
            except Exception as e:  # noqa: BLE001
                if name not in ("inductor", "torchax"):
                    raise
                kit.NOTES.append(f"{B.split()[0]} {work.name}: {plan[name][0]} failed, no row: "
                                 f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
                return None
            all_compiles[name] = first_compiles[name]
            if name == "captured":
                captured[0] = v.step  # its replay counts, for the row
            return v

        times = {}
        if mirrored:
            for name in list(plan):
                v = start(name)
                if v is None:
                    continue
                built[name] = v
            fns = {n: counted(n, v) for n, v in built.items()}
            settle = {n: plan[n][2] for n in built if plan[n][2] is not None}
            times, _ = kit.in_blocks(fns, warm, steps, settle)
            for n, v in built.items():
                finals[n] = v.final()
            built.clear()
        else:
            for name in list(plan):
                v = start(name)
                if v is None:
                    continue
                one, settle = counted(name, v), plan[name][2]
                for _ in range(warm):
                    one()
                if settle:
                    settle()
                ts = kit.Timings()
                for _ in range(steps + 2):  # as many steps as the mirrored blocks run
                    t = time.perf_counter()
                    one()
                    ts.append(time.perf_counter() - t)
                if settle:
                    settle()
                times[name] = ts
                finals[name] = v.final()
                del v, one
                gc.collect()
        want = finals["eager"]
        for name, (label, _, _) in plan.items():
            if name not in times:
                continue
            d, where = _difference(finals[name], want) if name != "eager" else (0.0, "")
            notes = [f"first step {firsts[name] * 1e3:,.0f} ms"]
            value = {"first_step_ms": firsts[name] * 1e3, "final_loss": finals[name][0]}
            if name in ("traced", "captured"):
                notes.append(f"{first_compiles[name]} compile(s) in it, {all_compiles[name]} in all {total} steps"
                             + (" (its own graphs: the traced row's programs were in the cache)"
                                if name == "captured" else ""))
                value.update(first_step_compiles=first_compiles[name], compiles=all_compiles[name])
            if name == "captured":
                cap = captured[0]
                if cap is not None:
                    notes.append(f"{cap.replays} replays, {cap.traces} traces"
                                 + (f"; not replayed: {cap.why}" if cap.replays == 0 and cap.why else ""))
                    value.update(replays=cap.replays, traces=cap.traces)
            if name == "eager":
                notes.append(work.what)
                if missing:
                    notes.append(missing)
            if d and where != "loss":
                notes.append(f"largest difference at {where}")
            kit.row(B, label, times[name], baseline=name == "eager", diff=d, tol=TOL, value=value,
                    note="; ".join(notes))
        kit.set_ratios(B)
        rows = {r["variant"]: r for r in kit.ROWS if r["bench"] == B}
        peers = [rows[plan[n][0]] for n in ("eager", "inductor", "torchax") if n in times]
        fastest = min(peers, key=lambda r: r["median"])
        for r in rows.values():
            if not r["variant"].startswith("lazycore"):
                continue
            notes = []
            if "inductor" in times:
                ind = rows[plan["inductor"][0]]
                r["value"]["ratio_to_inductor"] = r["median"] / ind["median"]
                notes.append(f"{r['median'] / ind['median']:.2f}x inductor")
            if len(peers) > 1:  # issue 40's targets are against the fastest of eager, inductor and torchax
                r["value"]["ratio_to_fastest_peer"] = r["median"] / fastest["median"]
                notes.append(f"{r['median'] / fastest['median']:.2f}x the fastest peer ({fastest['variant']})")
            if notes:
                r["note"] = "; ".join(notes) + "; " + r["note"]
        del proto, host, lazy_batches
        wait()
        gc.collect()


# --quick (the CI smoke run) checks that each benchmark runs and agrees, at
# the least compile cost (XLA compiles are most of its time): GPT-2 tiny on
# 2 x 16 tokens with every lazy row; Llama tiny, and ResNet-18 cut to one
# block a stage at 32x32, traced only.


def bench_gpt2(args, kit):
    import model_zoo

    size = size_of(args)
    work = model_zoo.gpt2(size, *((2, 16) if args.quick else ()))
    with torch_threads(args, kit, "13"):
        bench_workloads("13 transformers {name} training step (ms)", [work], args, kit, mirrored=size != "small")


def bench_tiny_family(args, kit):
    import model_zoo

    works = model_zoo.tiny_transformers(*((2, 16) if args.quick else ()))
    if args.quick:
        works = [w for w in works if w.name.startswith("Llama")]  # GPT-2 tiny is benchmark 13's quick model
    with torch_threads(args, kit, "14"):
        bench_workloads("14 transformers {name} training step (ms)", works, args, kit, mirrored=True,
                        lazy=("traced",) if args.quick else ("traced", "captured"), torchax=not args.quick)


def bench_vision(args, kit):
    import model_zoo

    size = size_of(args)
    works = model_zoo.vision(size, quick=args.quick)
    with torch_threads(args, kit, "15"):
        bench_workloads("15 {name} training step (ms)", works, args, kit, mirrored=size != "small",
                        lazy=("traced",) if args.quick else ("traced", "captured"), torchax=not args.quick)


def bench_recurrent(args, kit):
    import model_zoo

    works = model_zoo.recurrent(quick=args.quick)
    with torch_threads(args, kit, "17"):
        bench_workloads("17 {name} training step (ms)", works, args, kit, mirrored=True,
                        lazy=("traced",) if args.quick else ("traced", "captured"), torchax=False)
