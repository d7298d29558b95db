"""ResNet-50's training step program under XLA's CPU convolution choices, one
process, alternated runs (issue 40 (a); passes/conv_layout.py ``_pointwise``,
XLA's ``xla_cpu_experimental_ynn_fusion_type``).

One lazy training step of torchvision's ResNet-50 (SGD momentum, 224x224,
batch 8 by default) is recorded; its step program is lowered twice (1x1
convolutions as matrix products (the opt-in ``products=true``) and as convolutions) and each
is compiled twice (YNNPACK's convolutions, XLA's default; Eigen's, with
``EIGEN``, XLA's option per compile). The four programs then run in turn on
the same random inputs, ``--rounds`` times, and the medians and ratios are printed
with the convolution and dot counts of XLA's optimized HLO. The inputs are
random (the timings do not depend on the values; batch norm's running
variances are kept positive).

    LAZYCORE_CACHE_DIR=off .venv/bin/python benchmarks/conv_choices.py [--batch 8] [--image 224] [--rounds 5]

``--model resnet18`` (or any torchvision model name) for a smaller one. Six
XLA compiles of the step program: about 3-4 minutes on a quiet 2-core machine
before the runs (100 s each at load 18).
"""

from __future__ import annotations

import argparse
import statistics
import time

from xla_cpu_options import _inputs, compiled  # (this folder: each benchmark runs as a script)


def record_step(model_name: str, batch: int, image: int):
    """The lazy module (text, before the pipeline), pipeline and aliasing of the
    largest program two training steps compile, and its StableHLO as compiled."""
    import torch
    import torch.nn.functional as F
    import torchvision

    import lazycore
    import lazycore.torch as ltorch
    from lazycore.runtime import compiler

    recorded = []
    original = compiler.lower

    def lower(module, pipeline=compiler.DEFAULT_PIPELINE, **kw):
        if isinstance(module, str):
            module = compiler.parse(module)
        with module.context:
            before = module.operation.get_asm()
        out = original(module, pipeline, **kw)
        with module.context:
            recorded.append((len(before), before, pipeline, {k: kw.get(k) for k in ("donate", "donors")},
                             out.operation.get_asm()))
        return out

    compiler.lower = lower
    try:
        dev = ltorch.device()
        torch.manual_seed(0)
        model = getattr(torchvision.models, model_name)(weights=None, num_classes=1000).train().to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.1 * batch / 256, momentum=0.9)
        for _ in range(2):
            x = torch.randn(batch, 3, image, image).to(dev)
            y = torch.randint(0, 1000, (batch,)).to(dev)
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            lazycore.mark_step(wait=True)
        next(model.parameters()).cpu()  # a failed step raises here
    finally:
        compiler.lower = original
    from lazycore.observe import metrics

    print(f"{args_note(recorded)}; {metrics.counters().get('compiles')} compiles, "
          f"{metrics.counters().get('failed_outputs')} failed outputs", flush=True)
    _, before, pipeline, aliasing, stablehlo = max(recorded, key=lambda r: r[0])
    return before, pipeline, aliasing, stablehlo


def args_note(recorded) -> str:
    return f"{len(recorded)} programs lowered, the largest {max(r[0] for r in recorded)} characters"


def lowered_with_products(before: str, pipeline: str, aliasing: dict) -> str:
    from lazycore.passes.pipeline import with_option
    from lazycore.runtime import compiler

    products = with_option(pipeline, "lazy-channels-last", "products", "true")
    return compiler.lower(before, products, **aliasing).operation.get_asm()


EIGEN = ("xla_cpu_experimental_ynn_fusion_type",
         "LIBRARY_FUSION_TYPE_DOT,LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT,LIBRARY_FUSION_TYPE_REDUCE")
"""YNNPACK for matrix products and reductions but not convolutions: XLA then runs
convolutions with Eigen (docs/guides/torch.md, "Eigen's convolutions instead of YNNPACK's")."""


def _hlo_counts(exe) -> str:
    text = exe.hlo_text()
    conv = sum(1 for line in text.splitlines() if " convolution(" in line)
    dot = sum(1 for line in text.splitlines() if " dot(" in line)
    return f"{conv} convolutions, {dot} dots in XLA's HLO"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)

    import os

    os.environ["LAZYCORE_CACHE_DIR"] = "off"  # the step is lowered here, not read from the disk cache

    from lazycore.runtime import pjrt

    before, pipeline, aliasing, without = record_step(args.model, args.batch, args.image)
    with_products = lowered_with_products(before, pipeline, aliasing)
    texts = {"products": with_products, "convolutions": without}
    for name, text in texts.items():
        convs = sum(1 for line in text.splitlines() if "stablehlo.convolution" in line and "=" in line)
        dots = sum(1 for line in text.splitlines() if "stablehlo.dot_general" in line and "=" in line)
        print(f"StableHLO, 1x1 as {name}: {convs} convolutions, {dots} dot_generals")
    variants = {}
    for conv_lib in ("ynnpack", "eigen"):
        for name, text in texts.items():
            exe, secs = compiled(text, [EIGEN] if conv_lib == "eigen" else [])
            key = f"{conv_lib} convolutions, 1x1 as {name}"
            variants[key] = exe
            print(f"{key}: compiled in {secs:.1f} s; {_hlo_counts(exe)}", flush=True)
    host = _inputs(next(iter(variants.values())), 0)
    times = {k: [] for k in variants}
    for r in range(args.rounds + 1):  # the first round warms up
        for key, exe in variants.items():
            buffers = [pjrt.to_device(a) for a in host]  # donated arguments: fresh buffers each run
            t0 = time.perf_counter()
            _, done = exe.launch(buffers)
            done.block_until_ready()
            if r:
                times[key].append(time.perf_counter() - t0)
    base = statistics.median(times["ynnpack convolutions, 1x1 as convolutions"])
    print(f"\n{args.model}, batch {args.batch}, {args.image}x{args.image}, {args.rounds} alternated rounds, "
          f"load {os.getloadavg()[0]:.1f}")
    first = times["ynnpack convolutions, 1x1 as convolutions"]
    for key, ts in times.items():
        med = statistics.median(ts)
        paired = ", ".join(f"{t / b:.3f}" for t, b in zip(ts, first))
        print(f"  {key:45s} median {med * 1e3:8.1f} ms  (min {min(ts) * 1e3:.1f}, max {max(ts) * 1e3:.1f}) "
              f"{med / base:.3f}x; per round {paired}")


if __name__ == "__main__":
    main()
