"""Benchmark 7: a small GPT's training step (issue 19), registered in ``run.py``.

The model: vocabulary 512, context 64, width 128, 4 heads, 2 pre-LayerNorm
blocks (causal ``F.scaled_dot_product_attention``, a 4x MLP with exact GELU,
residuals), a final LayerNorm and an untied head without bias; learned token
and position embeddings; dropout 0. The step: next-token cross entropy on a
batch of 16, backward, ``clip_grad_norm_(params, 1.0)``, AdamW (lr 1e-3,
weight decay 0.01). Every system starts from the same weights and sees the
same batches; after its last step its loss and parameters are compared with
eager torch's (float32 throughout).

Rows, as same-run ratios of medians to jax.jit (the baseline: the same math
in jax.numpy, AdamW and the clipping written out, parameters and optimizer
state donated, waiting for each step): eager torch; torch.compile (inductor);
lazycore traced per op with ``mark_step(wait=True)`` and pipelined
(``mark_step()``); the step under ``lazycore.torch.capture``; and
``torch.compile(step, backend="lazycore")`` on host tensors. Each system's
first call (trace + compile + run; lazycore after ``cache.clear()``, jax
after ``jax.clear_caches()``) and lazycore's compile counts are rows too.
"""

from __future__ import annotations

import math
import time

import numpy

VOCAB, CONTEXT, WIDTH, HEADS, BLOCKS, BATCH = 512, 64, 128, 4, 2, 16
LR, WEIGHT_DECAY, BETAS, EPS, MAX_NORM = 1e-3, 0.01, (0.9, 0.999), 1e-8, 1.0
TOL = 5e-4
"""Largest absolute difference from eager torch's final loss and parameters
after the run (float32; every system measured 3e-5 or less over 26 steps:
AdamW's normalised steps carry rounding differences of the gradients into the
parameters, bounded by the learning rate per step)."""


def _config(quick):
    if quick:
        return {"vocab": 64, "context": 16, "width": 32, "heads": 2, "blocks": 1, "batch": 4}
    return {"vocab": VOCAB, "context": CONTEXT, "width": WIDTH, "heads": HEADS, "blocks": BLOCKS, "batch": BATCH}


# --- torch -------------------------------------------------------------------------------------------


def make_model(cfg):
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc = nn.Linear(d, 4 * d)
            self.out = nn.Linear(4 * d, d)

        def forward(self, h):
            b, t, d = h.shape
            q, k, v = self.qkv(self.ln1(h)).split(d, dim=2)
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            h = h + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return h + self.out(F.gelu(self.fc(self.ln2(h))))

    class GPT(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.tok = nn.Embedding(c["vocab"], c["width"])
            self.pos = nn.Embedding(c["context"], c["width"])
            self.blocks = nn.ModuleList(Block(c["width"], c["heads"]) for _ in range(c["blocks"]))
            self.ln = nn.LayerNorm(c["width"])
            self.head = nn.Linear(c["width"], c["vocab"], bias=False)

        def forward(self, x):
            h = self.tok(x) + self.pos.weight[: x.shape[1]]
            for blk in self.blocks:
                h = blk(h)
            return self.head(self.ln(h))

    torch.manual_seed(0)
    return GPT(cfg)


def make_data(cfg, k=4):
    import torch

    g = torch.Generator().manual_seed(1)
    seqs = [torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["context"] + 1), generator=g) for _ in range(k)]
    return [(s[:, :-1].contiguous(), s[:, 1:].contiguous()) for s in seqs]


def make_step(model):
    """The training step as one function of a batch (what every torch row runs)."""
    import torch
    import torch.nn.functional as F

    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)

    def step(x, y):
        opt.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, MAX_NORM)
        opt.step()
        return loss

    return step


def torch_runner(model, batches, after=None, wrap=None):
    """``(one, final, step)`` for a torch row: ``one()`` runs the step (wrapped
    by ``wrap``) on the next of ``batches`` and then ``after()``; ``final()``
    gives the last loss and the parameters on the host."""
    step = make_step(model)
    if wrap is not None:
        step = wrap(step)
    it, last = [0], [None]

    def one():
        x, y = batches[it[0] % len(batches)]
        it[0] += 1
        last[0] = step(x, y)
        if after is not None:
            after()

    def final():
        return float(last[0].detach().cpu()), [p.detach().cpu().numpy() for p in model.parameters()]

    return one, final, step


def shapes_only_runner(cfg, batches, kit, before=None, after=None):
    """``one()`` for benchmark 7's step through run.py's shapes-only
    do-nothing subclass: what autograd, the modules, the optimizer and
    ``__torch_dispatch__`` cost with no tracer behind them, the least Python
    a per-op frontend pays for the step. ``before()`` runs first and
    ``after()`` last: with jax.jit's launch before and its wait after, the
    trace overlaps the program as a pipelined tracer's does."""
    import torch

    shape_only = kit._shape_only_class(torch)
    model = make_model(cfg)
    for mod in model.modules():
        for name, p in list(mod.named_parameters(recurse=False)):
            setattr(mod, name, torch.nn.Parameter(shape_only(p.shape, p.dtype, p.stride())))
    fake = [tuple(shape_only(t.shape, t.dtype, t.stride()) for t in xy) for xy in batches]
    one, _, _ = torch_runner(model, fake)

    def timed():
        if before is not None:
            before()
        one()
        if after is not None:
            after()

    return timed


# --- jax -----------------------------------------------------------------------------------------------


def jax_params(model):
    """The torch model's weights as a jax pytree (torch's layouts: Linear weights are [out, in])."""
    import jax.numpy as jnp

    return {k: jnp.asarray(v.detach().cpu().numpy()) for k, v in model.named_parameters()}


def jax_step_fn(cfg, counted_mean: bool = False):
    """``step(params, m, v, count, x, y) -> (params, m, v, loss)``, jitted, state donated.
    ``counted_mean``: the loss divides by the number of targets other than
    -100, as torch's ``cross_entropy`` (``ignore_index=-100``, mean) does,
    instead of by the batch's size: the same value here, but with the batch
    split over devices the count is a sum over them too."""
    import jax
    import jax.numpy as jnp

    heads, nblocks = cfg["heads"], cfg["blocks"]

    def layer_norm(h, p, name):
        mu = h.mean(-1, keepdims=True)
        var = ((h - mu) ** 2).mean(-1, keepdims=True)
        return (h - mu) / jnp.sqrt(var + 1e-5) * p[name + ".weight"] + p[name + ".bias"]

    def linear(h, p, name, bias=True):
        out = h @ p[name + ".weight"].T
        return out + p[name + ".bias"] if bias else out

    def loss_fn(p, x, y):
        b, t = x.shape
        h = p["tok.weight"][x] + p["pos.weight"][:t]
        d = h.shape[-1]
        mask = jnp.tril(jnp.ones((t, t), bool))
        for i in range(nblocks):
            n = f"blocks.{i}."
            q, k, v = jnp.split(linear(layer_norm(h, p, n + "ln1"), p, n + "qkv"), 3, axis=-1)
            q, k, v = (z.reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3) for z in (q, k, v))
            s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // heads)
            a = jax.nn.softmax(jnp.where(mask, s, -jnp.inf), axis=-1) @ v
            h = h + linear(a.transpose(0, 2, 1, 3).reshape(b, t, d), p, n + "proj")
            m = jax.nn.gelu(linear(layer_norm(h, p, n + "ln2"), p, n + "fc"), approximate=False)
            h = h + linear(m, p, n + "out")
        logits = linear(layer_norm(h, p, "ln"), p, "head", bias=False)
        logp = jax.nn.log_softmax(logits, axis=-1)
        picked = jnp.take_along_axis(logp, y[..., None], axis=-1)[..., 0]
        if counted_mean:
            kept = y != -100
            return -jnp.sum(jnp.where(kept, picked, 0.0)) / jnp.sum(kept).astype(picked.dtype)
        return -jnp.mean(picked)

    def step(p, m, v, count, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        # clip_grad_norm_: the norm of the per-tensor norms, clip coefficient clamped at 1
        total = jnp.sqrt(sum(jnp.sum(gi * gi) for gi in jax.tree_util.tree_leaves(g)))
        coef = jnp.minimum(MAX_NORM / (total + 1e-6), 1.0)
        g = jax.tree_util.tree_map(lambda gi: gi * coef, g)
        # AdamW as torch's single-tensor implementation writes it
        b1, b2 = BETAS
        count = count + 1.0
        bc1, bc2 = 1 - b1 ** count, 1 - b2 ** count
        m = jax.tree_util.tree_map(lambda mi, gi: b1 * mi + (1 - b1) * gi, m, g)
        v = jax.tree_util.tree_map(lambda vi, gi: b2 * vi + (1 - b2) * gi * gi, v, g)

        def update(pi, mi, vi):
            pi = pi * (1 - LR * WEIGHT_DECAY)
            return pi - (LR / bc1) * mi / (jnp.sqrt(vi) / jnp.sqrt(bc2) + EPS)

        p = jax.tree_util.tree_map(update, p, m, v)
        return p, m, v, count, loss

    return jax.jit(step, donate_argnums=(0, 1, 2, 3))


# --- the benchmark ---------------------------------------------------------------------------------------


def bench(args, kit):
    """Benchmark 7; ``kit``: run.py's module (row, in_blocks, maxdiff, set_ratios, NOTES)."""
    import jax
    import jax.numpy as jnp
    import torch

    import lazycore
    import lazycore.torch as ltorch

    B = "7 GPT training step (ms)"
    cfg = _config(args.quick)
    data = make_data(cfg)
    warm, steps = args.warmup, args.steps
    firsts: dict[str, float] = {}
    compiles: dict[str, int] = {}
    first_compiles: dict[str, int] = {}
    finals: dict = {}
    variants: dict = {}
    settle: dict = {}

    def counted(name, fn):
        """``fn``, adding the programs lazycore compiles while it runs to ``compiles[name]``."""
        compiles[name] = 0
        counter = lazycore.metrics.counters

        def one():
            c0 = counter()["compiles"]
            fn()
            compiles[name] += counter()["compiles"] - c0

        return one

    def timed_first(name, fn):
        """The variant's first call, timed."""
        fn = counted(name, fn)
        t = time.perf_counter()
        fn()
        ltorch.mark_step(wait=True)  # (the pipelined variant's program too)
        firsts[name] = time.perf_counter() - t
        first_compiles[name] = compiles[name]
        return fn

    def torch_variant(name, model, batches, after=None, wrap=None):
        one, finals[name], step = torch_runner(model, batches, after, wrap)
        variants[name] = timed_first(name, one)
        return step

    # jax.jit (baseline)
    jdata = [(jnp.asarray(x.numpy().astype(numpy.int32)), jnp.asarray(y.numpy().astype(numpy.int32)))
             for x, y in data]
    jax.clear_caches()
    jstep = jax_step_fn(cfg)
    names = list(jax_params(make_model(cfg)))

    def jax_state():
        """``(launch, wait, final)`` over a state of its own: ``launch()``
        dispatches the next step, ``wait()`` blocks until it is done."""
        p0 = jax_params(make_model(cfg))
        st = {"p": p0, "m": jax.tree_util.tree_map(jnp.zeros_like, p0),
              "v": jax.tree_util.tree_map(jnp.zeros_like, p0), "c": jnp.zeros((), jnp.float32), "i": 0,
              "loss": None}

        def launch():
            x, y = jdata[st["i"] % len(jdata)]
            st["i"] += 1
            st["p"], st["m"], st["v"], st["c"], st["loss"] = jstep(st["p"], st["m"], st["v"], st["c"], x, y)

        return (launch, lambda: jax.block_until_ready(st["loss"]),
                lambda: (float(st["loss"]), [numpy.asarray(st["p"][k]) for k in names]))

    jlaunch, jwait, finals["jax"] = jax_state()
    variants["jax"] = timed_first("jax", lambda: (jlaunch(), jwait()))
    # the least a per-op tracer's step could take: the shapes-only subclass's
    # Python alone, and beside jax.jit's program, launched before it and waited for after
    variants["floor"] = timed_first("floor", shapes_only_runner(cfg, data, kit))
    flaunch, fwait, finals["jaxfloor"] = jax_state()
    variants["jaxfloor"] = timed_first("jaxfloor", shapes_only_runner(cfg, data, kit, before=flaunch, after=fwait))

    torch_variant("eager", make_model(cfg), data)

    if args.no_torch_compile:
        kit.NOTES.append("7: torch.compile (inductor) skipped (--no-torch-compile)")
    else:
        try:
            model = make_model(cfg)
            # a cold first call, as the others': no compiled graph from inductor's on-disk caches
            with torch.compiler.config.patch(force_disable_caches=True):
                torch_variant("inductor", model, data, wrap=torch.compile)
        except Exception as e:  # noqa: BLE001
            variants.pop("inductor", None)
            kit.NOTES.append(f"7: torch.compile (inductor) failed here, skipped: {type(e).__name__}: "
                             f"{str(e).splitlines()[0][:200]}")

    dev = ltorch.device()
    # the traced step's first call compiles from scratch; the pipelined and
    # captured steps make the same programs and find them in the cache. The
    # cache is emptied before any lazy tensor exists: a model uploaded before
    # lazycore.cache.clear() keeps layout keys the clear forgot, and its steps
    # made programs of their own, one node apart (2 compiles more in the next
    # row; tests/test_step_graph_wait_and_clear.py)
    ltorch.mark_step(wait=True)
    lazycore.cache.clear()
    ldata = [(x.to(dev), y.to(dev)) for x, y in data]
    wait = lambda: ltorch.mark_step(wait=True)  # noqa: E731
    torch_variant("lazyw", make_model(cfg).to(dev), ldata, after=wait)
    torch_variant("lazy", make_model(cfg).to(dev), ldata, after=ltorch.mark_step)
    captured = torch_variant("lazycap", make_model(cfg).to(dev), ldata, after=ltorch.mark_step,
                             wrap=ltorch.capture)
    for name in ("lazyw", "lazy", "lazycap"):
        settle[name] = wait
    torch_variant("lazytc", make_model(cfg), data, wrap=lambda step: torch.compile(step, backend="lazycore"))

    times, _ = kit.in_blocks(variants, warm, steps, settle)

    eloss, eparams = finals["eager"]()

    def check(name):
        loss, ps = finals[name]()
        return loss, max([abs(loss - eloss)] + [kit.maxdiff(a, b) for a, b in zip(ps, eparams)])

    total = warm + steps + 3  # the first call, the warm-up, one untimed step at each of in_blocks' two blocks

    def first(name):
        return f"first call {firsts[name] * 1e3:.0f} ms"

    def lazy_note(name):
        cache = "" if name in ("lazyw", "lazytc") else " (cache warm from the row above)"
        return (f"{first(name)}{cache}; lazycore compiled {first_compiles[name]} program(s) in it, "
                f"{compiles[name]} in all {total} steps")

    jloss, d = check("jax")
    kit.row(B, "jax.jit (donated params and state)", times["jax"], baseline=True, diff=d, tol=TOL,
            value={"final_loss": jloss, "first_call_ms": firsts["jax"] * 1e3},
            note=f"loss after {total} steps {jloss:.6f}; {first('jax')}")
    loss, d = check("jaxfloor")
    kit.row(B, "jax.jit + the do-nothing subclass's step (pipelined per-op floor)", times["jaxfloor"], diff=d,
            tol=TOL, value={"first_call_ms": firsts["jaxfloor"] * 1e3}, note="jax.jit's step launched, the same torch step traced through a shapes-only "
                          "__torch_dispatch__ subclass meanwhile, then waited for: the least a pipelined per-op "
                          "tracer could take here")
    kit.row(B, "do-nothing subclass's step alone (Python floor)", times["floor"],
            value={"first_call_ms": firsts["floor"] * 1e3, "computes_values": False},
            note="autograd, modules, clipping, AdamW and subclass dispatch, no tracer, no values")
    kit.row(B, "eager torch", times["eager"], diff=0.0, tol=TOL,
            value={"final_loss": eloss, "first_call_ms": firsts["eager"] * 1e3},
            note=f"the reference: loss {eloss:.6f}; {first('eager')}")
    if "inductor" in variants:
        loss, d = check("inductor")
        kit.row(B, "torch.compile (inductor)", times["inductor"], diff=d, tol=TOL,
                value={"final_loss": loss, "first_call_ms": firsts["inductor"] * 1e3},
                note=f"the whole step compiled; {first('inductor')} (inductor's disk caches off for it)")
    rows = [
        ("lazyw", "lazycore.torch, mark_step(wait=True)", "per-op tracing, waits for its own step"),
        ("lazy", "lazycore.torch, mark_step() (pipelined)", "tracing overlaps the step before"),
        ("lazycap", "lazycore.torch.capture", None),
        ("lazytc", 'torch.compile(step, backend="lazycore")', "host tensors: uploads, runs, downloads per graph"),
    ]
    for name, label, note in rows:
        loss, d = check(name)
        if name == "lazycap":
            note = f"{captured.replays} replays, {captured.traces} traces"
            if captured.replays == 0:
                note += f"; does not replay: {captured.why}"
        kit.row(B, label, times[name], diff=d, tol=TOL,
                value={"final_loss": loss, "first_call_ms": firsts[name] * 1e3,
                       "first_call_compiles": first_compiles[name], "compiles": compiles[name]},
                note=f"{note}; {lazy_note(name)}")
    kit.NOTES.append(f"7: tolerance {TOL:g} absolute on the final loss and parameters against eager torch "
                     f"(float32)")
    print(f"7: lazycore.torch.capture: {captured.replays} replays, {captured.traces} traces; why: {captured.why}")
    kit.set_ratios(B)
    # on a GPU or TPU host the program runs on the device and tracing has the
    # CPU to itself; here the 2 cores are shared between them
    kit.own_core_rows("7d GPT training step, programs on a core of their own (ms)",
                  {k: variants[k] for k in ("jax", "jaxfloor", "lazy", "lazycap")},
                  [("jax", "jax.jit (donated params and state)", None),
                   ("jaxfloor", "jax.jit + the do-nothing subclass's step (pipelined per-op floor)", None),
                   ("lazy", "lazycore.torch, mark_step() (pipelined)", "<= 1.1x"),
                   ("lazycap", "lazycore.torch.capture", "<= 1.0x")], settle, warm, steps)
    new_process(args, kit)
    executable_alone(cfg, data, kit, 3 if args.quick else 10)


def new_process(args, kit):
    """Rows for the first step of a new process (issue 19, item 6): twice on
    one fresh persistent compile cache folder, the first process compiles
    and writes the program, the second loads it; medians of 3 pairs."""
    import tempfile

    B = "7c GPT first step in a new process (ms)"
    runs: dict[bool, list] = {False: [], True: []}
    for _ in range(1 if args.quick else 3):
        with tempfile.TemporaryDirectory(prefix="lazycore-bench-cache-") as folder:
            for cached in (False, True):
                runs[cached].append(kit._first_step_in_new_process(folder, args.quick, child="gpt"))
    losses = {r["loss"] for rs in runs.values() for r in rs}
    for cached, label in ((False, "compiled and written (cold cache folder)"), (True, "loaded from disk")):
        rs = runs[cached]
        compiles, loads = sum(r["compiles"] for r in rs), sum(r["disk_cache_hits"] for r in rs)
        if cached and compiles:
            kit.FAILURES.append(f"{B}: a process with its program in the persistent cache compiled {compiles} time(s)")
        kit.row(B, f"lazycore.torch, {label}", [r["seconds"] for r in rs], baseline=not cached,
                target=None if not cached else "<= 0.2x (5x faster)",
                diff=max(losses) - min(losses), tol=0.0,
                note=f"{compiles} compile(s), {loads} load(s) from disk over {len(rs)} process(es); trace "
                     f"{1e3 * sorted(r['trace'] for r in rs)[len(rs) // 2]:.0f} ms")
    kit.set_ratios(B)


def first_step_child(quick: bool) -> None:
    """In a new process: the traced step's first call (trace, compile or load,
    run; after the imports, the model's upload and the batch's), as JSON."""
    import json

    import torch  # noqa: F401

    import lazycore
    import lazycore.torch as ltorch

    cfg = _config(quick)
    x, y = make_data(cfg, k=1)[0]
    dev = ltorch.device()
    model = make_model(cfg).to(dev)
    step = make_step(model)
    x, y = x.to(dev), y.to(dev)
    ltorch.mark_step(wait=True)
    t = time.perf_counter()
    loss = step(x, y)
    traced = time.perf_counter() - t
    ltorch.mark_step(wait=True)
    seconds = time.perf_counter() - t
    c = lazycore.metrics.counters()
    print(json.dumps({"seconds": seconds, "trace": traced, "loss": float(loss.detach().cpu()),
                      "compiles": c["compiles"], "disk_cache_hits": c["disk_cache_hits"]}))


def executable_alone(cfg, data, kit, rounds):
    """Rows for the compiled step alone (issue 19, item 4): lazycore's steady
    step program and jax.jit's, both without donation and fed the same
    buffers every call, timed in alternation in this process, next to eager
    torch's whole step. What is left of benchmark 7's gap is host work."""
    import re

    import jax
    import jax.numpy as jnp

    import lazycore
    import lazycore.torch as ltorch
    from lazycore.dialect.types import to_numpy_dtype
    from lazycore.dialect.mlir import ir
    from lazycore.runtime import compiler, pjrt

    B = "7b GPT step, compiled program alone (ms)"
    dev = ltorch.device()
    model = make_model(cfg).to(dev)
    step = make_step(model)
    # the second step is the steady one (the optimizer's state exists after the
    # first): captured as it compiles, not cleared from the cache and compiled again
    with lazycore.testing.capture() as cap:
        for x, y in data[:2]:
            step(x.to(dev), y.to(dev))
            ltorch.mark_step(wait=True)
    text = re.sub(r"\{tf\.aliasing_output = \d+ : i32\}", "", cap.graphs[-1].stablehlo)
    with compiler.new_context():
        artifact, ins, outs = compiler.stablehlo_artifact(ir.Module.parse(text))
    exe = pjrt.compile_artifact(artifact, ins, outs)
    rng = numpy.random.default_rng(0)
    bufs = [pjrt.to_device((rng.standard_normal(t.shape) * 0.01).astype(to_numpy_dtype(t.dtype)))
            if t.dtype.startswith("f") else pjrt.to_device(numpy.zeros(t.shape, to_numpy_dtype(t.dtype))) for t in ins]

    p0 = jax_params(make_model(cfg))
    state = [p0, jax.tree_util.tree_map(jnp.zeros_like, p0), jax.tree_util.tree_map(jnp.zeros_like, p0),
             jnp.zeros((), jnp.float32)]
    jx, jy = (jnp.asarray(a.numpy().astype(numpy.int32)) for a in data[0])
    jstep = jax.jit(jax_step_fn(cfg).__wrapped__)  # no donation: the same buffers every call
    eager = make_step(make_model(cfg))
    variants = {
        "lazy": lambda: jax.block_until_ready(exe(bufs)),
        "jax": lambda: jax.block_until_ready(jstep(*state, jx, jy)),
        "eager": lambda: eager(*data[0]),
    }
    times, _ = kit.in_blocks(variants, 2, rounds)
    kit.row(B, "jax.jit's program (no donation)", times["jax"], baseline=True)
    kit.row(B, "lazycore's steady-step program (no donation)", times["lazy"],
            note=f"{len(ins)} arguments; the traced step's StableHLO compiled again without its aliasing")
    kit.row(B, "eager torch, whole step", times["eager"], note="for reference: kernels and Python")
    kit.set_ratios(B)
