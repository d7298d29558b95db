"""Where XLA's CPU step program loses to eager's kernels, per kind of kernel
(issue 40 (a)/(c); docs/dev/cpu_program_gap.md).

One workload of benchmark 15 (``--model vit``: timm ViT-small/16, ``resnet50``:
torchvision ResNet-50; 224x224, batch 8, the benchmark's optimizer and
schedule) trains a few steps eagerly under ``torch.profiler`` (torch on
``--threads`` threads) and a few lazily under ``lazycore.profile.kernels()``
(XLA's profiler: every kernel its step program ran). Both are summed by kind of
work: matrix products, convolutions, reductions, copies and transposes,
elementwise ops (with what is fused into them), so the two columns say where
the compiled program spends more than eager's kernels do. The top XLA kernels
and eager ops are printed too.

    LAZYCORE_CACHE_DIR=off .venv/bin/python benchmarks/cpu_program_gap.py --model vit [--steps 2]

Matrix products: lazycore lowers a 1x1 convolution's weight gradient as a
dot over batch and positions (frontends/torch/ops/conv.py
``_pointwise_weight_grad``), which eager times inside
``aten::convolution_backward``; on ResNet-50 36 of the program's 38 dots are
those (the classifier's two are the rest), so the ``convolution + matrix
product`` row is the one to set beside eager's. The top matrix-product
kernels print their dot's shapes (from the step program's optimized HLO).

Kernel times are XLA's per-kernel device times; XLA's CPU runtime may run
independent kernels at once, so their sum can exceed the program's wall time
(printed beside it). Eager's column is each op's self CPU time on the calling
thread (intra-op threads included in the op's span).
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict

HLO: list[str] = []
"""The optimized HLO texts of the programs the lazy profile ran (``--hlo``)."""
KINDS = ("matrix product", "convolution", "reduction", "copy / transpose", "elementwise", "other")


_LAYOUT = {"copy", "transpose", "concatenate", "pad", "slice", "dynamic-slice", "dynamic-update-slice", "reshape",
           "bitcast", "broadcast", "parameter", "constant", "tuple", "get-tuple-element"}


def xla_kind(opcode: str, ops) -> str:
    """The kind of work of one XLA kernel from its opcode and every op fused into it."""
    names = set(ops) | {opcode}
    if "convolution" in names:
        return "convolution"
    if "dot" in names:
        return "matrix product"
    if names & {"reduce", "reduce-window", "select-and-scatter"}:
        return "reduction"
    if names - {"fusion"} <= _LAYOUT:
        return "copy / transpose"
    if opcode == "fusion" or names & {"add", "multiply", "subtract", "divide", "select", "exponential"}:
        return "elementwise"
    return "other"


def fenced(ops) -> bool:
    """Holds lazy-keep-roundings' fence (bitcast(bitcast<int>(m) xor replica-id))."""
    return "xor" in ops and "bitcast-convert" in ops


def dot_shapes(text: str) -> dict[str, str]:
    """Kernel name -> its dot's ``result = dot(lhs, rhs), contracting dims`` of
    one optimized HLO module: a fusion's from the computation it calls."""
    import re

    bodies, current, calls, shape = {}, None, {}, {}
    for line in text.splitlines():
        head = re.match(r"%?([\w.\-]+) \(", line)
        if head:
            current, shape = head.group(1), {}
            continue
        if line.startswith("}"):
            current = None
            continue
        value = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = ([a-z]+\d*\[[\d,]*\])", line)
        if value:
            shape[value.group(1)] = value.group(2)
        if " dot(" in line and current is not None and value:
            args = re.search(r" dot\(([^)]*)\)", line).group(1)
            operands = [shape.get(a.strip().lstrip("%"), a.strip()) for a in args.split(",")]
            dims = ", ".join(re.findall(r"(?:lhs|rhs)_contracting_dims=\{[\d,]*\}", line))
            bodies.setdefault(current, f"{value.group(2)} = dot({', '.join(operands)}) {dims}")
        fused = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = .*\bcalls=%?([\w.\-]+)", line)
        if fused:
            calls[fused.group(1)] = fused.group(2)
    return {k: bodies[c] for k, c in calls.items() if c in bodies}


def eager_kind(name: str) -> str:
    n = name.removeprefix("aten::")
    if n in ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_scaled_dot_product_flash_attention_for_cpu",
             "_scaled_dot_product_flash_attention_for_cpu_backward"):
        return "matrix product"
    if "convolution" in n or n.startswith("mkldnn_conv"):
        return "convolution"
    if n in ("sum", "mean", "max", "amax", "norm", "linalg_vector_norm", "_foreach_norm", "native_layer_norm",
             "native_layer_norm_backward", "native_batch_norm", "native_batch_norm_backward", "_softmax",
             "_softmax_backward_data", "_log_softmax", "_log_softmax_backward_data", "nll_loss_forward",
             "nll_loss_backward", "max_pool2d_with_indices", "max_pool2d_with_indices_backward",
             "adaptive_avg_pool2d", "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward"):
        return "reduction"
    if n in ("copy_", "clone", "contiguous", "cat", "_to_copy", "transpose", "permute", "t", "view", "reshape",
             "_unsafe_view", "expand", "select", "slice", "unbind", "as_strided", "empty", "empty_like",
             "zeros", "zero_", "fill_", "new_zeros", "empty_strided", "resize_"):
        return "copy / transpose"
    return "elementwise"


def _run_steps(work, model, batches, steps, after=None):
    import torch

    opt, schedule, clip = work.optimizer(model, steps + 10)
    params = [p for p in model.parameters() if p.requires_grad]

    def one(batch):
        loss = work.loss(model, batch)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        opt.zero_grad()
        schedule()
        if after is not None:
            after()
        return loss

    return one


def eager_profile(work, proto, host, steps, threads):
    import copy

    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(threads)
    one = _run_steps(work, copy.deepcopy(proto), host, steps)
    one(host[0])  # warm-up
    plain, cpu = [], []
    for i in range(steps):  # without the profiler: its cost per op is large beside small ops'
        t0, c0 = time.perf_counter(), time.process_time()
        one(host[(i + 1) % len(host)])
        plain.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(steps):
            one(host[(i + 1) % len(host)])
    per = defaultdict(float)
    counts = defaultdict(int)
    for e in prof.key_averages():
        if e.key.startswith("aten::"):
            per[e.key] += e.self_cpu_time_total / 1e6 / steps
            counts[e.key] += e.count // steps
    return (_median(plain), _median(cpu)), per, counts


def _median(xs):
    return sorted(xs)[len(xs) // 2]


def lazy_profile(work, proto, host, steps):
    import copy

    import lazycore
    import lazycore.torch as ltorch

    dev = ltorch.device()
    batches = [{k: v.to(dev) for k, v in b.items()} for b in host]
    one = _run_steps(work, copy.deepcopy(proto).to(dev), batches, steps, after=lambda: lazycore.mark_step(wait=True))
    for i in range(2):  # the first steps compile
        one(batches[i % len(batches)])
    walls, cpu = [], []
    for i in range(steps):
        t0, c0 = time.perf_counter(), time.process_time()
        one(batches[(i + 2) % len(batches)])
        walls.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    from lazycore.observe import kernels

    def keep(text, original=kernels.kernels_of):
        HLO.append(text)
        return original(text)

    kernels.kernels_of = keep
    with lazycore.profile.kernels() as prof:
        for i in range(steps):
            one(batches[(i + 2) % len(batches)])
    return (_median(walls), _median(cpu)), prof


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=("vit", "resnet50"), default="vit")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--threads", type=int, default=2, help="torch's intra-op threads for eager")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--top", type=int, default=8)
    p.add_argument("--rows", default="", help="write every XLA kernel's row (ms a step, ops) here as JSON")
    p.add_argument("--hlo", default="", help="write the profiled programs' optimized HLO here")
    args = p.parse_args(argv)
    os.environ.setdefault("LAZYCORE_CACHE_DIR", "off")

    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch

    import model_zoo

    works = model_zoo.vision("small", batch=args.batch)
    work = works[0 if args.model == "resnet50" else 1]
    torch.manual_seed(0)
    proto = work.build()
    host = work.batches(torch.Generator().manual_seed(0), 3)

    e_wall, e_per, e_counts = eager_profile(work, proto, host, args.steps, args.threads)
    l_wall, prof = lazy_profile(work, proto, host, args.steps)

    from lazycore.observe import kernels

    known = {}
    for text in sorted(HLO, key=len):  # the step program's (the largest) kernels win a name both have
        known.update(kernels.kernels_of(text))

    def full(r):
        k = known.get(r.kernel)
        return (k.opcode, k.ops) if k is not None else (r.what.split(":", 1)[0], ())

    e_kind, x_kind, x_count = defaultdict(float), defaultdict(float), defaultdict(int)
    x_transposed, x_fenced = defaultdict(float), defaultdict(float)
    for name, t in e_per.items():
        e_kind[eager_kind(name)] += t
    for r in prof.rows:
        if r.container:
            continue
        opcode, ops = full(r)
        k = xla_kind(opcode, ops)
        x_kind[k] += r.time / args.steps
        x_count[k] += r.count // args.steps
        if "transpose" in ops or opcode == "transpose":
            x_transposed[k] += r.time / args.steps
        if fenced(ops):
            x_fenced[k] += r.time / args.steps
    print(f"\n{work.name}, batch {args.batch}, load {os.getloadavg()[0]:.1f}: eager step {e_wall[0] * 1e3:.0f} ms wall, "
          f"{e_wall[1] * 1e3:.0f} ms process CPU (torch {args.threads} threads); lazy traced step {l_wall[0] * 1e3:.0f} ms "
          f"wall, {l_wall[1] * 1e3:.0f} ms process CPU (medians of {args.steps}, neither profiled)")
    xt = sum(x_kind.values()) or 1.0
    print(f"{'kind':<18} {'eager ms':>9} {'XLA ms':>9} {'XLA share':>9} {'XLA kernels':>11} "
          f"{'with a transpose ms':>19} {'fenced ms':>9}")
    for k in KINDS:
        e, x = e_kind.get(k, 0.0), x_kind.get(k, 0.0)
        print(f"{k:<18} {e * 1e3:>9.1f} {x * 1e3:>9.1f} {100 * x / xt:>8.1f}% {x_count.get(k, 0):>11} "
              f"{x_transposed.get(k, 0.0) * 1e3:>19.1f} {x_fenced.get(k, 0.0) * 1e3:>9.1f}")
    both = ("convolution", "matrix product")
    print(f"{'conv + matrix prod':<18} {sum(e_kind.get(k, 0.0) for k in both) * 1e3:>9.1f} "
          f"{sum(x_kind.get(k, 0.0) for k in both) * 1e3:>9.1f}")
    print(f"{'all':<18} {sum(e_kind.values()) * 1e3:>9.1f} {sum(x_kind.values()) * 1e3:>9.1f}")
    print(f"\ntop {args.top} eager ops (self CPU ms a step, calls):")
    for name, t in sorted(e_per.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"  {t * 1e3:8.1f}  {e_counts[name]:5d}  {name}  [{eager_kind(name)}]")
    if args.rows:
        import json

        with open(args.rows, "w") as f:
            json.dump([{"program": r.program, "kernel": r.kernel, "ms": r.time / args.steps * 1e3,
                        "count": r.count // args.steps, "opcode": full(r)[0], "ops": list(full(r)[1])}
                       for r in prof.rows if not r.container], f)
    dots = dot_shapes(max(HLO, key=len)) if HLO else {}
    for kind in KINDS:
        rows = [r for r in prof.rows if not r.container and xla_kind(*full(r)) == kind]
        if not rows:
            continue
        print(f"\ntop {args.top} XLA {kind} kernels of {len(rows)} (ms a step, runs a step):")
        for r in rows[:args.top]:
            print(f"  {r.time / args.steps * 1e3:8.1f}  {r.count // args.steps:5d}  {r.program} {r.kernel}  "
                  f"{r.what[:120]}" + (f"  [{dots[r.kernel]}]" if kind == "matrix product" and r.kernel in dots else ""))
    if args.hlo:  # the optimized HLO of the programs profiled, to read a kernel's shapes
        with open(args.hlo, "w") as f:
            f.write("\n\n".join(HLO))

if __name__ == "__main__":
    main()
