"""lazycore's programs on a GPU, where lazycore itself is not installed.

lazycore needs the MLIR bindings of the torch-mlir wheel (about 290 MB), which a
GPU machine with only jax[cuda] and torch does not have. A program lazycore
exports (:func:`lazycore.export`) is a StableHLO portable artifact that any
PJRT client compiles for its own device, so the check is in two halves:

    python scripts/gpu_check.py export OUT          # with lazycore, on any CPU
    python scripts/gpu_check.py run OUT --platform gpu   # jax, torch, transformers

``export`` writes one folder per program in tests/jaxlib_consumer.py's layout
(artifact, calling convention, arguments) plus the answers lazycore (on the
exporting machine's device) and eager torch (CPU) gave (``expected.npz``).
``run`` compiles each artifact with tests/jaxlib_consumer.py (never importing
lazycore), compares its results with those answers and with eager torch on the
run's device, and times the GPT-2 step against eager torch there.

The programs: ``x * 0.3 + y`` in float32 and float64 (a product a sum takes:
XLA's CPU backend contracts it into a fused multiply-add, which eager does not)
and a transformers GPT-2 training step's loss and gradients with the
parameters as arguments (tiny config, random init, nothing downloaded).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import time

import numpy as np
import torch

GPT2 = dict(vocab_size=128, n_positions=64, n_embd=64, n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
            attn_pdrop=0.0)
BATCH, SEQ = 4, 32
CONSUMER = pathlib.Path(__file__).resolve().parent.parent / "tests" / "jaxlib_consumer.py"


def axpy(x, y):
    return (x * 0.3 + y,)


def gpt2_step(config: dict):
    """``(step, parameters)``: ``step(ids, *parameters) -> (loss, *gradients)``
    of a GPT-2 language model with ``config`` (seed 0), and its parameters."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(**config)
    cfg._attn_implementation = "eager"
    model = transformers.GPT2LMHeadModel(cfg)
    names = [n for n, _ in model.named_parameters()]

    def step(ids, *params):
        params = [p.detach().requires_grad_() for p in params]
        out = torch.func.functional_call(model.to(ids.device), dict(zip(names, params)), (ids,), {"labels": ids})
        return (out.loss.detach(), *(g.detach() for g in torch.autograd.grad(out.loss, params)))

    return step, [p.detach().clone() for p in model.parameters()]


def programs(only: str | None):
    """``(name, function, arguments)`` of the programs to check."""
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        yield f"axpy_{str(dtype)[6:]}", axpy, [torch.randn(1 << 18, generator=g, dtype=dtype) for _ in range(2)]
    if only != "axpy":
        step, params = gpt2_step(GPT2)
        yield "gpt2_step", step, [torch.randint(0, GPT2["vocab_size"], (BATCH, SEQ), generator=g), *params]


def export(out: pathlib.Path, only: str | None) -> None:
    import lazycore
    import lazycore.torch as ltorch

    dev = ltorch.device()
    for name, fn, args in programs(only):
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        lazy_args = [a.to(dev) for a in args]
        exported = lazycore.export(fn, *lazy_args)
        (folder / "artifact.mlirbc").write_bytes(exported.artifact)
        (folder / "convention.json").write_text(json.dumps(exported.calling_convention()))
        for i, a in enumerate(args):
            np.save(folder / f"arg{i}.npy", a.numpy())
        lazy = [t.cpu().numpy() for t in fn(*lazy_args)]
        eager = [t.numpy() for t in fn(*args)]
        np.savez(folder / "expected.npz", **{f"lazy{j}": t for j, t in enumerate(lazy)},
                 **{f"eager{j}": t for j, t in enumerate(eager)})
        print(f"{name}: {len(exported.artifact)} bytes, {len(args)} arguments, {len(lazy)} results")


def _differ(a: np.ndarray, b: np.ndarray) -> str:
    scale = float(np.max(np.abs(b))) or 1.0
    return f"{int((a != b).sum())}/{a.size} differ (max rel {float(np.max(np.abs(a.astype(np.float64) - b))) / scale:.1e})"


def _median_ms(fn, n: int = 50) -> float:
    for _ in range(5):
        fn()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def run(out: pathlib.Path, platform: str, only: str | None) -> None:
    spec = importlib.util.spec_from_file_location("jaxlib_consumer", CONSUMER)
    consumer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(consumer)  # it refuses any import of lazycore from here on
    tdev = "cuda" if platform == "gpu" else "cpu"
    sync = torch.cuda.synchronize if tdev == "cuda" else (lambda: None)
    print(f"jax {consumer.jax.__version__}, torch {torch.__version__}, platform {platform}")
    for name, fn, _ in programs(only):
        folder = out / name
        convention, executable, args = consumer.load(folder, platform)
        expected = np.load(folder / "expected.npz")

        def call():
            return [r[0] for r in executable.execute_sharded(args).disassemble_into_single_device_arrays()]

        got = [np.asarray(r) for r in call()]
        kinds = [r["kind"] for r in convention["results"]]
        raised = [r["message"] for r, g in zip(convention["results"], got) if r["kind"] == "check" and g.any()]
        got = [g for g, kind in zip(got, kinds) if kind == "result"]
        targs = [torch.from_numpy(np.array(a)).to(tdev) for a in args]
        want = [t.cpu().numpy() for t in fn(*targs)]
        for j, g in enumerate(got[:2]):
            print(f"{name} result {j}: vs lazycore where exported {_differ(g, expected[f'lazy{j}'])}; "
                  f"vs eager torch CPU {_differ(g, expected[f'eager{j}'])}; vs eager torch {tdev} {_differ(g, want[j])}")
        worst = max(float(np.max(np.abs(g.astype(np.float64) - w))) / (float(np.max(np.abs(w))) or 1.0)
                    for g, w in zip(got, want))
        print(f"{name}: {len(got)} results, each within {worst:.1e} (max rel) of eager torch {tdev}; "
              f"{kinds.count('check')} value checks, raised: {raised or 'none'}")
        if name == "gpt2_step":
            xla = _median_ms(lambda: [r.block_until_ready() for r in call()])
            eager = _median_ms(lambda: (fn(*targs), sync()))
            print(f"{name}: median ms, the artifact on XLA {platform} {xla:.3f}, eager torch {tdev} {eager:.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["export", "run"])
    p.add_argument("out", type=pathlib.Path)
    p.add_argument("--platform", default="gpu", help="run: the jax platform to compile for (gpu, cpu)")
    p.add_argument("--only", choices=["axpy"], default=None, help="only the x * 0.3 + y programs")
    args = p.parse_args()
    if args.what == "export":
        export(args.out, args.only)
    else:
        run(args.out, args.platform, args.only)


if __name__ == "__main__":
    main()
