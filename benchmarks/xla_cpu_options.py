"""One step program of benchmark 15 compiled under XLA CPU options, one
process, alternated runs, outputs compared bit for bit (issue 40 (a)/(c);
docs/dev/cpu_program_gap.md).

A lazy training step of ``--model`` (``vit``: timm ViT-small/16,
``resnet50``: torchvision ResNet-50; 224x224, batch 8, benchmark 15's optimizer
and schedule; ``gpt2``, ``bert``, ``llama``, ``mistral``, ``t5``: benchmark 14's
tiny transformers, where compiling is most of the first step) is recorded; the
largest program it compiles (the step) is compiled ``--compiles`` times per
variant, in turn (the median compile time is printed), each ``NAME=FLAG:VALUE[,FLAG:VALUE]`` of
``--variant`` (XLA's debug options, as ``XLA_FLAGS`` spells them without
``--``; ``default`` is always first). The variants then run in turn on the
same random inputs ``--rounds`` times; the medians, per-round ratios to the
default and whether every output has the default's bits are printed.

    LAZYCORE_CACHE_DIR=off .venv/bin/python benchmarks/xla_cpu_options.py --model vit \\
        --variant vec512=xla_cpu_prefer_vector_width:512

An option that changes any output's bits is not a speed-up lazycore may take
(eager's answers decide; docs/dev/lowerings.md): the ``bits`` column says so.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


_TINY = ("gpt2", "bert", "llama", "mistral", "t5")
"""benchmark 14's tiny transformers (batch x 32 tokens), whose compile time is most of a first step"""


def record_step(model: str, batch: int):
    """The StableHLO of the largest program two lazy training steps compile."""
    import torch

    import lazycore
    import lazycore.torch as ltorch
    from lazycore.runtime import compiler

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import model_zoo

    recorded = []
    original = compiler.lower

    def lower(module, pipeline=compiler.DEFAULT_PIPELINE, **kw):
        out = original(module, pipeline, **kw)
        with out.context:
            text = out.operation.get_asm()
        recorded.append(text)
        return out

    if model in _TINY:
        work = model_zoo.tiny_transformers(batch=batch)[_TINY.index(model)]
    else:
        work = model_zoo.vision("small", batch=batch)[0 if model == "resnet50" else 1]
    compiler.lower = lower
    try:
        dev = ltorch.device()
        torch.manual_seed(0)
        m = work.build().to(dev)
        opt, schedule, clip = work.optimizer(m, 12)
        for b in work.batches(torch.Generator().manual_seed(0), 2):
            b = {k: v.to(dev) for k, v in b.items()}
            work.loss(m, b).backward()
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(m.parameters(), clip)
            opt.step()
            opt.zero_grad()
            schedule()
            lazycore.mark_step(wait=True)
        next(m.parameters()).cpu()
    finally:
        compiler.lower = original
    print(f"{work.name}: {len(recorded)} programs lowered, the largest {max(map(len, recorded))} characters",
          flush=True)
    return max(recorded, key=len)


def compiled(text: str, overrides: list[tuple[str, str]]):
    from lazycore.runtime import compiler, pjrt

    keep = pjrt._compile_options

    def options(device):
        o = keep(device)
        if overrides:
            o.env_option_overrides = overrides
        return o

    pjrt._compile_options = options
    try:
        t0 = time.perf_counter()
        exe = compiler.compile_stablehlo(compiler.parse(text))
        return exe, time.perf_counter() - t0
    finally:
        pjrt._compile_options = keep


def _inputs(exe, seed: int):
    import numpy as np

    from lazycore.dialect.types import to_numpy_dtype

    rng = np.random.default_rng(seed)
    out = []
    for t in exe.input_types:
        dtype = to_numpy_dtype(t.dtype)
        if np.issubdtype(dtype, np.floating):
            out.append((np.abs(rng.standard_normal(t.shape)) * 0.05 + 1e-3).astype(dtype))
        else:
            out.append(np.zeros(t.shape, dtype))
    return out


def parse_variant(spec: str) -> tuple[str, list[tuple[str, str | bool]]]:
    name, _, flags = spec.partition("=")
    pairs = []
    for item in flags.split(";"):
        if item:
            flag, _, value = item.partition(":")
            value = value.strip()
            # XLA takes a boolean option only as a bool, not the string XLA_FLAGS spells
            value = {"true": True, "false": False}.get(value.lower(), value)
            pairs.append((flag.strip().lstrip("-"), value))
    return name, pairs


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=("vit", "resnet50") + _TINY, default="vit")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--compiles", type=int, default=1, help="compile each variant this many times, in turn")
    p.add_argument("--variant", action="append", default=[],
                   help="NAME=flag:value[;flag:value] (XLA debug options; several --variant for several)")
    args = p.parse_args(argv)
    os.environ["LAZYCORE_CACHE_DIR"] = "off"

    import numpy as np

    from lazycore.runtime import pjrt

    text = record_step(args.model, args.batch)
    variants = {"default": []}
    variants.update(parse_variant(v) for v in args.variant)
    exes, compile_s = {}, {name: [] for name in variants}
    for _ in range(args.compiles):  # in turn: a drifting machine slows every variant alike
        for name, flags in variants.items():
            exes[name], secs = compiled(text, flags)
            compile_s[name].append(secs)
    for name, flags in variants.items():
        ts = compile_s[name]
        print(f"{name} {flags}: compiled in {statistics.median(ts):.2f} s (median of {len(ts)}; "
              f"{statistics.median(ts) / statistics.median(compile_s['default']):.2f}x default's)", flush=True)
    host = _inputs(exes["default"], 0)
    times = {k: [] for k in exes}
    outs = {}
    for r in range(args.rounds + 1):  # the first round warms up
        for name, exe in exes.items():
            buffers = [pjrt.to_device(a) for a in host]  # donated arguments: fresh buffers each run
            t0 = time.perf_counter()
            results, done = exe.launch(buffers)
            done.block_until_ready()
            if r:
                times[name].append(time.perf_counter() - t0)
            else:
                outs[name] = [np.asarray(pjrt.to_host(b)) for b in results]
    base = times["default"]
    print(f"\n{args.model}, batch {args.batch}, {args.rounds} alternated rounds, load {os.getloadavg()[0]:.1f}")
    for name, ts in times.items():
        same = all(a.shape == b.shape and a.tobytes() == b.tobytes() for a, b in zip(outs[name], outs["default"]))
        differ = sum(a.tobytes() != b.tobytes() for a, b in zip(outs[name], outs["default"]))
        paired = ", ".join(f"{t / b:.3f}" for t, b in zip(ts, base))
        print(f"  {name:12s} median {statistics.median(ts) * 1e3:8.1f} ms  "
              f"{statistics.median(ts) / statistics.median(base):.3f}x; per round {paired}; "
              f"bits {'same' if same else f'DIFFER in {differ} of {len(outs[name])} outputs'}")


if __name__ == "__main__":
    main()
