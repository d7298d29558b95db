"""Benchmark 8: benchmark 7's GPT step data-parallel on 1, 2 and 4 devices (issue 20), registered in ``run.py``.

The devices are forced host CPU devices, so the benchmark runs in a child
process started with ``XLA_FLAGS=--xla_force_host_platform_device_count=4``
(jax reads it once, when it starts); the child prints its rows as JSON and
the parent adds them to the table. On a 2-core machine 4 "devices" share 2
cores: the figures compare lazycore with jax.jit on the same mesh, not
meshes with each other.

Per mesh size N (the first N devices, one axis ``data``): the batch of 16 is
split along ``data``, parameters and optimizer state are replicated. The
baseline is jax.jit of benchmark 7's step with the same layouts (batch
``P("data", None)``, the rest ``P()``), state donated; lazycore runs the
torch step on ``ltorch.device(mesh)`` with the batch marked
``("data", None)``, traced per op and pipelined (``mark_step()``), and under
``lazycore.torch.capture``. Each row notes the collectives in the program XLA
compiled (lazycore's from ``metrics.programs()``, jax's from the compiled
executable's HLO), which should match in count and kind. After the timed
steps every variant's loss and parameters are compared with eager torch on
the whole batch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy

SIZES = (1, 2, 4)


def bench(args, kit):
    """Run the child and add its rows to ``kit`` (run.py's module)."""
    flags = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()
    env = dict(os.environ, XLA_FLAGS=flags, LAZYCORE_CACHE_DIR="off")
    cmd = [sys.executable, os.path.abspath(__file__), "--steps", str(args.steps), "--warmup", str(args.warmup)]
    if args.quick:
        cmd.append("--quick")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"benchmark 8's child exited with status {out.returncode}:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    kit.ROWS.extend(result["rows"])
    kit.NOTES.extend(result["notes"])
    kit.FAILURES.extend(result["failures"])


def _child(argv) -> None:
    import argparse

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import run as kit

    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args(argv)

    import lazycore

    lazycore.config.configure(cache_dir="off")
    for n in SIZES:
        _one_size(n, args, kit)
    print(json.dumps({"rows": kit.ROWS, "notes": kit.NOTES, "failures": kit.FAILURES}))


def _one_size(n, args, kit):
    import jax
    import jax.numpy as jnp
    import torch
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    import gpt
    import lazycore
    import lazycore.torch as ltorch
    from lazycore.observe import placement

    B = f"8 data-parallel GPT step, {n} device{'s' * (n > 1)} (ms)"
    cfg = gpt._config(args.quick)
    data = gpt.make_data(cfg)
    variants, finals, collectives, settle = {}, {}, {}, {}

    # jax.jit with the same layouts (the baseline)
    jmesh = Mesh(numpy.array(jax.devices()[:n]), ("data",))
    rep, split = NamedSharding(jmesh, P()), NamedSharding(jmesh, P("data", None))
    jdata = [(jax.device_put(x.numpy().astype(numpy.int32), split), jax.device_put(y.numpy().astype(numpy.int32), split))
             for x, y in data]
    host = gpt.jax_params(gpt.make_model(cfg))
    names = list(host)  # torch's order (device_put gives the dict back with sorted keys)
    fresh = lambda: jax.device_put(jax.tree_util.tree_map(numpy.zeros_like, host), rep)  # noqa: E731
    jsteps = {}  # one jitted step per loss form: the floor row runs the baseline's program, compiled once
    jcollectives = {}  # and its collectives read once: each lower().compile() compiles it again

    def jax_variant(name, counted_mean=False, floor=False):
        """A jax.jit row: its own state from the same start, its collectives
        noted. ``floor``: the shapes-only subclass traces benchmark 7's torch
        step while each program runs (the least a pipelined per-op tracer
        could take beside it)."""
        st = {"p": jax.device_put(jax.tree_util.tree_map(numpy.array, host), rep), "m": fresh(), "v": fresh(),
              "c": jax.device_put(jnp.zeros((), jnp.float32), rep), "i": 0, "loss": None}
        if counted_mean not in jsteps:
            jsteps[counted_mean] = gpt.jax_step_fn(cfg, counted_mean=counted_mean)
        jstep = jsteps[counted_mean]
        if counted_mean not in jcollectives:
            jcollectives[counted_mean] = placement.collectives(
                jstep.lower(st["p"], st["m"], st["v"], st["c"], *jdata[0]).compile().as_text())
        collectives[name] = jcollectives[counted_mean]

        def launch():
            x, y = jdata[st["i"] % len(jdata)]
            st["i"] += 1
            st["p"], st["m"], st["v"], st["c"], st["loss"] = jstep(st["p"], st["m"], st["v"], st["c"], x, y)

        def wait():
            jax.block_until_ready(st["loss"])

        if floor:
            variants[name] = gpt.shapes_only_runner(cfg, data, kit, before=launch, after=wait)
        else:
            variants[name] = lambda: (launch(), wait())
        finals[name] = lambda: (float(st["loss"]), [numpy.asarray(st["p"][k]) for k in names])

    jax_variant("jax")
    # the same with torch's cross_entropy mean: divided by the count of targets other than -100
    jax_variant("jaxc", counted_mean=True)
    jax_variant("jaxfloor", floor=True)

    # eager torch on the whole batch: the reference values
    def torch_variant(name, model, batches, after=None, wrap=None):
        variants[name], finals[name], step = gpt.torch_runner(model, batches, after, wrap)
        return step

    torch_variant("eager", gpt.make_model(cfg), data)

    mesh = lazycore.Mesh((n,), ("data",), devices=[f"cpu:{i}" for i in range(n)])
    dev = ltorch.device(mesh)
    ldata = []
    for x, y in data:
        x, y = x.to(dev), y.to(dev)
        ltorch.mark_sharding(x, mesh, ("data", None))
        ltorch.mark_sharding(y, mesh, ("data", None))
        ldata.append((x, y))
    wait = lambda: ltorch.mark_step(wait=True)  # noqa: E731
    lazycore.metrics.reset()
    torch_variant("lazy", gpt.make_model(cfg).to(dev), ldata, after=ltorch.mark_step)
    captured = torch_variant("lazycap", gpt.make_model(cfg).to(dev), ldata, after=ltorch.mark_step, wrap=ltorch.capture)
    settle["lazy"] = settle["lazycap"] = wait

    c0 = lazycore.metrics.counters()["compiles"]
    times, _ = kit.in_blocks(variants, args.warmup, args.steps, settle)
    compiles = lazycore.metrics.counters()["compiles"] - c0
    progs = lazycore.metrics.programs()
    collectives["lazy"] = progs[-1].collectives if progs else {}

    eloss, eparams = finals["eager"]()

    def check(name):
        loss, ps = finals[name]()
        return max([abs(loss - eloss)] + [kit.maxdiff(a, b) for a, b in zip(ps, eparams)])

    def show(c):
        return ", ".join(f"{k} {v}" for k, v in sorted(c.items())) or "none"

    same = collectives["lazy"] == collectives["jax"]
    kit.row(B, "jax.jit (same layouts, state donated)", times["jax"], baseline=True, diff=check("jax"), tol=gpt.TOL,
            value={"collectives": collectives["jax"]}, note=f"collectives: {show(collectives['jax'])}")
    kit.row(B, "jax.jit, mean over the targets counted (torch's cross_entropy)", times["jaxc"], diff=check("jaxc"),
            tol=gpt.TOL, value={"collectives": collectives["jaxc"]},
            note=f"collectives: {show(collectives['jaxc'])}"
                 f" ({'same as' if collectives['jaxc'] == collectives['lazy'] else 'differ from'} lazycore's)")
    kit.row(B, "jax.jit + the do-nothing subclass's step (pipelined per-op floor)", times["jaxfloor"],
            diff=check("jaxfloor"), tol=gpt.TOL,
            note="the program launched, benchmark 7's torch step traced meanwhile through a shapes-only "
                 "__torch_dispatch__ subclass, then waited for: the least a pipelined per-op tracer could take")
    kit.row(B, "eager torch (whole batch, one CPU)", times["eager"], diff=0.0, tol=gpt.TOL, note="the reference values")
    kit.row(B, "lazycore.torch on the mesh, mark_step()", times["lazy"], diff=check("lazy"), tol=gpt.TOL,
            target="<= 1.1x jax.jit",
            value={"collectives": collectives["lazy"], "compiles": compiles},
            note=f"collectives: {show(collectives['lazy'])} ({'same as' if same else 'differ from'} jax's); "
                 f"{compiles} compiles in the timed and warm-up steps of both lazycore rows")
    kit.row(B, "lazycore.torch.capture on the mesh", times["lazycap"], diff=check("lazycap"), tol=gpt.TOL,
            target="<= 1.1x jax.jit", note=f"{captured.replays} replays, {captured.traces} traces")
    kit.set_ratios(B)
    # --quick: pinned for the largest mesh only (these rows time steps whose values were checked above)
    if not args.quick or n == SIZES[-1]:
        kit.own_core_rows(f"8d data-parallel GPT step, {n} device{'s' * (n > 1)}, programs on a core of their own "
                          "(ms)", {k: variants[k] for k in ("jax", "jaxfloor", "lazy", "lazycap")},
                          [("jax", "jax.jit (same layouts, state donated)", None),
                           ("jaxfloor", "jax.jit + the do-nothing subclass's step (pipelined per-op floor)", None),
                           ("lazy", "lazycore.torch on the mesh, mark_step()", "<= 1.1x jax.jit"),
                           ("lazycap", "lazycore.torch.capture on the mesh", "<= 1.1x jax.jit")],
                          settle, args.warmup, args.steps)
    if not same:
        kit.NOTES.append(f"8 ({n} devices): lazycore's collectives {show(collectives['lazy'])} vs jax's "
                         f"{show(collectives['jax'])}")


if __name__ == "__main__":
    _child(sys.argv[1:])
