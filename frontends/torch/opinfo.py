"""The OpInfo sweep: PyTorch's own op database run on the lazy device against eager CPU.

For every OpInfo in ``torch.testing._internal.common_methods_invocations.op_db``
that supports float32 on the CPU, the first few float32 sample inputs run
twice: eagerly on the CPU, and on the lazy device (tensors in ``input``,
``args`` and ``kwargs`` moved there, a ``device=`` argument pointed there).
The lazy results come back to the host and must equal eager's
(``torch.testing.assert_close``, NaNs equal). Each OpInfo gets one status:

- ``pass_no_fallback``: every sample matched and no op fell back to the CPU;
- ``pass_with_fallback``: every sample matched, some op ran as a counted CPU
  fallback (``lazycore.metrics.fallbacks()``);
- ``mismatch``: a sample gave different values, shape or dtype (a bug);
- ``error``: the lazy run raised where eager did not;
- ``skipped``: nothing to compare (eager raised on every sample, or the
  samples need element types the lazy device does not have, such as complex).

Random ops (``normal``, ``bernoulli``, ``dropout``, ...) and ops returning
uninitialized memory (``empty``, ...) cannot match eager's values; their
results are checked by shape and dtype only.

``python -m lazycore.frontends.torch.opinfo [--write-readme] [--limit N] [--ops a,b]``
runs the sweep, prints the counts and the failing ops, and with
``--write-readme`` records the counts in the README between
``<!-- opinfo:begin -->`` and ``<!-- opinfo:end -->``.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import re
import sys
import time
import warnings
from dataclasses import dataclass, field

import torch

import lazycore
from lazycore import metrics

STATUSES = ("pass_no_fallback", "pass_with_fallback", "mismatch", "error", "skipped")
SAMPLES_PER_OP = 4
RTOL, ATOL = 1e-4, 1e-5

# Values drawn from a random stream (eager's and the lazy device's differ by
# design) or left uninitialized: only shapes and dtypes can be compared.
VALUE_FREE = frozenset({
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal",
    "normal.in_place", "normal.number_mean", "uniform", "rand_like", "randn", "randn_like", "randint",
    "randint_like", "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout.with_train", "nn.functional.rrelu",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d", "svd_lowrank",
    "pca_lowrank", "empty", "empty_like", "empty_permuted", "empty_strided", "new_empty",
    "new_empty_strided",
})

# Wider tolerances where eager and XLA legitimately round differently
# (op name -> (rtol, atol)); everything else uses RTOL/ATOL.
TOLERANCES: dict[str, tuple[float, float]] = {}

README = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "README.md")
BEGIN, END = "<!-- opinfo:begin -->", "<!-- opinfo:end -->"


@dataclass
class Result:
    """One OpInfo's outcome."""

    name: str
    status: str
    detail: str = ""
    samples: int = 0  # samples compared
    fallbacks: list[str] = field(default_factory=list)  # ATen ops that ran on the CPU


class _Skip(Exception):
    pass


def op_name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def float32_ops():
    """The OpInfos that support float32 on the CPU, in op_db's order."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db
    return [op for op in op_db if torch.float32 in op.supported_dtypes("cpu")]


# --- moving samples -------------------------------------------------------------------


def _map(x, fn):
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(_map(v, fn) for v in x))
    if isinstance(x, (list, tuple)):
        return type(x)(_map(v, fn) for v in x)
    if isinstance(x, dict):
        return {k: _map(v, fn) for k, v in x.items()}
    return x


def _tensors(x):
    out = []
    _map(x, out.append)
    return out


def _clone(x):
    return _map(x, lambda t: t.clone())


def _to_lazy(x, dev):
    def move(t):
        if t.layout != torch.strided:
            raise _Skip(f"{t.layout} input")
        return t.to(dev)

    return _map(x, move)


def _device_kwargs(kwargs, dev):
    # Factory-style samples name the CPU as their device; the lazy run names the lazy one.
    out = dict(kwargs)
    if "device" in out and torch.device(out["device"]).type == "cpu":
        out["device"] = dev
    return out


def _to_host(x):
    return _map(x, lambda t: t.cpu() if t.layout == torch.strided else t)


def _unsupported_dtype(*xs):
    from .dtypes import supported

    for x in xs:
        for t in _tensors(x):
            if not supported(t.dtype):
                return t.dtype
    return None


# --- comparing ----------------------------------------------------------------------------


def _compare(name, actual, expected):
    """None when ``actual`` (lazy, on the host) matches eager's ``expected``, else why not."""
    if name in VALUE_FREE:
        a, e = _tensors(actual), _tensors(expected)
        if len(a) != len(e):
            return f"{len(a)} tensors, eager returns {len(e)}"
        for x, y in zip(a, e):
            if x.shape != y.shape or x.dtype != y.dtype:
                return f"got {list(x.shape)} {x.dtype}, eager {list(y.shape)} {y.dtype}"
        return None
    rtol, atol = TOLERANCES.get(name, (RTOL, ATOL))
    try:
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True,
                                   check_device=False, check_layout=False)
    except AssertionError as e:
        return _short(str(e))
    return None


def _short(text, n=300):
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


# --- the sweep ----------------------------------------------------------------------------


def run_sample(op, sample, dev):
    """Compare one sample; returns None (match), ("mismatch", why), ("error", why) or ("skip", why)."""
    name = op_name(op)
    inp, args, kwargs = sample.input, sample.args, sample.kwargs
    bad = _unsupported_dtype(inp, args, kwargs)
    if bad is not None:
        return "skip", f"{bad} input"
    try:
        expected = op(*_clone((inp, *args)), **_clone(kwargs))
    except Exception as e:  # eager's own error: nothing to compare
        return "skip", f"eager raised {type(e).__name__}"
    bad = _unsupported_dtype(expected)
    if bad is not None:
        return "skip", f"{bad} result"
    if any(t.layout != torch.strided for t in _tensors(expected)):
        return "skip", "non-strided result"
    try:
        largs = _to_lazy((inp, *args), dev)
        lkwargs = _device_kwargs(_to_lazy(kwargs, dev), dev)
    except _Skip as e:
        return "skip", str(e)
    try:
        actual = op(*largs, **lkwargs)
        host = _to_host(actual)
        wrong_device = [t.device for t in _tensors(actual) if t.device.type != "lazy"]
        lazycore.mark_step()
    except Exception as e:
        return "error", _short(f"{type(e).__name__}: {e}")
    if wrong_device:
        return "mismatch", f"result on {wrong_device[0]}, not the lazy device"
    why = _compare(name, host, expected)
    return None if why is None else ("mismatch", why)


def run_op(op, dev, samples: int = SAMPLES_PER_OP) -> Result:
    """Run the first ``samples`` float32 samples of ``op`` and classify it."""
    name = op_name(op)
    lazycore.mark_step()
    metrics.reset()
    compared, skips = 0, []
    try:
        sample_iter = op.sample_inputs("cpu", torch.float32, requires_grad=False)
        picked = list(itertools.islice(sample_iter, samples))
    except Exception as e:
        return Result(name, "skipped", f"no samples: {type(e).__name__}: {_short(str(e), 120)}")
    outcome = None
    for sample in picked:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = run_sample(op, sample, dev)
        if r is None:
            compared += 1
        elif r[0] == "skip":
            skips.append(r[1])
        else:
            outcome = r
            break
    fell_back = sorted(metrics.fallbacks())
    if outcome is not None:
        # a failed lazy run can leave pending handles in reference cycles; drop them so
        # the next op's barriers do not carry (and fail on) this op's graph
        del picked, sample
        gc.collect()
        _drain()
        return Result(name, outcome[0], outcome[1], compared, fell_back)
    if compared == 0:
        return Result(name, "skipped", "; ".join(sorted(set(skips))) or "no samples", 0, fell_back)
    status = "pass_with_fallback" if fell_back else "pass_no_fallback"
    return Result(name, status, "", compared, fell_back)


def _drain():
    try:
        lazycore.mark_step()
    except Exception:
        pass


def sweep(names=None, limit=None, samples: int = SAMPLES_PER_OP, progress=None) -> dict[str, Result]:
    """Run the sweep over every float32 CPU OpInfo (or those in ``names``)."""
    import lazycore.torch as ltorch

    dev = ltorch.device()
    ops = float32_ops()
    if names:
        wanted = set(names)
        ops = [op for op in ops if op_name(op) in wanted or op.name in wanted]
    if limit is not None:
        ops = ops[:limit]
    results = {}
    torch.manual_seed(0)
    for op in ops:
        results[op_name(op)] = r = run_op(op, dev, samples)
        if progress:
            progress(r)
    return results


def counts(results) -> dict[str, int]:
    c = dict.fromkeys(STATUSES, 0)
    for r in results.values():
        c[r.status] += 1
    return c


# --- reporting ----------------------------------------------------------------------------


def summary(results, samples: int = SAMPLES_PER_OP) -> str:
    """The README text: the counts with and without fallback."""
    c = counts(results)
    compared = len(results) - c["skipped"]
    return "\n".join([
        f"OpInfos run: {len(results)} (float32 on the CPU, the first {samples} samples of each; "
        f"torch {torch.__version__.split('+')[0]}).",
        "",
        "| result | OpInfos |",
        "|---|---|",
        f"| match, no fallback | {c['pass_no_fallback']} |",
        f"| match, counting CPU fallbacks | {c['pass_no_fallback'] + c['pass_with_fallback']} |",
        f"| wrong values | {c['mismatch']} |",
        f"| error on the lazy device | {c['error']} |",
        f"| skipped (nothing comparable: eager raised, complex dtypes) | {c['skipped']} |",
        "",
        f"Of the {compared} OpInfos with comparable samples, {c['pass_no_fallback']} run entirely on the "
        f"lazy device and {c['pass_no_fallback'] + c['pass_with_fallback']} give eager's results.",
    ])


def write_readme(text: str, path: str = README) -> None:
    with open(path) as f:
        readme = f.read()
    block = f"{BEGIN}\n{text}\n{END}"
    if BEGIN in readme and END in readme:
        readme = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda m: block, readme, flags=re.S)
    else:
        section = (
            "### OpInfo coverage\n\n"
            "`python -m lazycore.frontends.torch.opinfo --write-readme` runs PyTorch's OpInfo database on the\n"
            "lazy device against eager CPU (`tests/torch/test_opinfo.py` checks it) and writes:\n\n"
            f"{block}\n"
        )
        readme = readme.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(readme)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m lazycore.frontends.torch.opinfo", description=__doc__.split("\n")[0])
    p.add_argument("--ops", help="comma-separated OpInfo names (default: all float32 CPU OpInfos)")
    p.add_argument("--limit", type=int, help="only the first N OpInfos")
    p.add_argument("--samples", type=int, default=SAMPLES_PER_OP, help="samples per OpInfo")
    p.add_argument("--write-readme", action="store_true", help="record the counts in README.md")
    p.add_argument("-v", "--verbose", action="store_true", help="print every OpInfo's result as it runs")
    a = p.parse_args(argv)
    names = [n.strip() for n in a.ops.split(",") if n.strip()] if a.ops else None

    def progress(r):
        if a.verbose:
            print(f"{r.status:20s} {r.name} {r.detail}", flush=True)

    start = time.perf_counter()
    results = sweep(names, a.limit, a.samples, progress)
    took = time.perf_counter() - start
    for status in ("mismatch", "error"):
        bad = [r for r in results.values() if r.status == status]
        if bad:
            print(f"\n{status} ({len(bad)}):")
            for r in bad:
                print(f"  {r.name}: {r.detail}")
    fb = [r for r in results.values() if r.status == "pass_with_fallback"]
    if fb:
        print(f"\npass_with_fallback ({len(fb)}):")
        for r in fb:
            print(f"  {r.name}: {', '.join(r.fallbacks)}")
    print()
    for k, v in counts(results).items():
        print(f"{k:20s} {v}")
    print(f"({len(results)} OpInfos in {took:.0f} s)")
    if a.write_readme:
        write_readme(summary(results, a.samples))
        print(f"wrote {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
