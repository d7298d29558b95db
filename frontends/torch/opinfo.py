"""The OpInfo sweep: PyTorch's own op database run on the lazy device against eager CPU.

For every OpInfo in ``torch.testing._internal.common_methods_invocations.op_db``
that supports float32 on the CPU, the first few float32 sample inputs run
(``--dtype``/``dtype=``: another element type, such as complex64, instead)
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
  samples need element types the lazy device does not have, such as the
  bits or quantized types; complex32 is held as complex<f32> with float16 parts).

Random ops (``normal``, ``bernoulli``, ``dropout``, ...) and ops returning
uninitialized memory (``empty``, ...) cannot match eager's values; their
results are checked by shape and dtype only.

The lazy device has no sparse layouts: a sparse sample argument stays on the
host (the op then runs as a counted CPU fallback), and a sparse result reaches
the device densified, counted too (:func:`lazycore.frontends.torch.dtypes.densified`);
it is compared with eager's by value, not layout.

``python -m lazycore.frontends.torch.opinfo [--write-readme] [--limit N] [--ops a,b]``
runs the sweep, prints the counts and the failing ops, and with
``--write-readme`` records the counts in the PyTorch guide (docs/guides/torch.md) between
``<!-- opinfo:begin -->`` and ``<!-- opinfo:end -->``.
"""

from __future__ import annotations

import argparse
import contextlib
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
from lazycore.observe import metrics

STATUSES = ("pass_no_fallback", "pass_with_fallback", "mismatch", "error", "skipped")
SAMPLES_PER_OP = 4
RTOL, ATOL = 1e-4, 1e-5

# Values drawn from a random stream (eager's and the lazy device's differ by
# design) or left uninitialized: only shapes and dtypes can be compared.
VALUE_FREE = frozenset({
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal",
    "normal.in_place", "normal.number_mean", "uniform", "rand_like", "randn", "randn_like", "randint",
    "randint_like", "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
    "svd_lowrank", "pca_lowrank", "empty", "empty_like", "empty_permuted", "empty_strided", "new_empty",
    "new_empty_strided",
})


def _dropping(training_default: bool):
    """Dropout draws only in training with 0 < p < 1; otherwise its values must match."""

    def random(s):
        p = s.kwargs.get("p", 0.5)
        return s.kwargs.get("training", training_default) and 0 < p < 1

    return random


# Ops random only for some samples: OpInfo name -> whether a sample's values are random.
RANDOM_SAMPLES = {
    "nn.functional.dropout": _dropping(True),
    "nn.functional.dropout2d": _dropping(True),
    "nn.functional.dropout3d": _dropping(True),
    "nn.functional.alpha_dropout": _dropping(False),
    "nn.functional.feature_alpha_dropout.with_train": _dropping(False),
    "nn.functional.rrelu": lambda s: s.kwargs.get("training", False),
    "nn.functional.scaled_dot_product_attention": lambda s: s.kwargs.get("dropout_p", 0.0) > 0,
    # (query,) key, value, embed_dim, num_heads, in_proj_weight, in_proj_bias, bias_k, bias_v,
    # add_zero_attn, dropout_p, ...
    "nn.functional.multi_head_attention_forward": lambda s: s.kwargs.get("training", True) and s.args[9] > 0,
}


def _topk_dim(sample):
    return sample.args[1] if len(sample.args) > 1 else sample.kwargs.get("dim", -1)


# (values, indices) results whose indices among equal values eager leaves to its sort
# (std::nth_element / partial_sort, unstable): OpInfo name -> the sample's reduced dim.
# Any index of an equal value is eager's answer too; the values must match as they are.
TIED_INDICES = {"topk": _topk_dim}

# Results whose eigenvectors' signs (phases) LAPACK leaves to the implementation: eager's
# MKL and jaxlib's LAPACK pick differently for most matrices of 3 <= n <= 25
# (frontends/torch/ops/decompositions.py, _eigh): OpInfo name -> the vectors' output index.
# The eigenvalues must match as they are, and each vector eager's times one sign (phase).
PHASED_VECTORS = {"linalg.eigh": 1}

# Tensor arguments eager requires on the CPU whatever the input's device: only the input moves.
HOST_ARGS = frozenset({"tensor_split"})

# Factories whose samples may give numbers alone and no device: run with device= the lazy one.
FACTORIES = frozenset({"arange", "linspace", "linspace.tensor_overload", "logspace", "logspace.tensor_overload"})

README = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "docs", "guides", "torch.md")
"""Where ``--write-readme`` records the counts: the PyTorch guide (the README only links to it)."""
BEGIN, END = "<!-- opinfo:begin -->", "<!-- opinfo:end -->"


@dataclass
class Result:
    """One OpInfo's outcome."""

    name: str
    status: str
    detail: str = ""
    samples: int = 0  # samples compared
    fallbacks: list[str] = field(default_factory=list)  # ATen ops that ran on the CPU
    seconds: float = 0.0


def op_name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def float32_ops():
    """The OpInfos that support float32 on the CPU, in op_db's order."""
    return ops_for(torch.float32)


def ops_for(dtype: torch.dtype):
    """The OpInfos that support ``dtype`` on the CPU, in op_db's order."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db
    return [op for op in op_db if dtype in op.supported_dtypes("cpu")]


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
    # The lazy device has no sparse layouts: a sparse argument stays on the host, where an
    # op taking it runs as a counted fallback (densifying it would fail ops that need it sparse)
    def move(t):
        return t.to(dev) if t.layout == torch.strided else t

    return _map(x, move)


def _retarget(x, dev):
    """The CPU named as a device (``to(x, "cpu")``, ``zeros(..., device="cpu")``) becomes the lazy one."""
    if isinstance(x, str) and x == "cpu" or isinstance(x, torch.device) and x.type == "cpu":
        return dev
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_retarget(v, dev) for v in x)
    if isinstance(x, dict):
        return {k: _retarget(v, dev) for k, v in x.items()}
    return x


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


def _value_free(name, sample) -> bool:
    if name in VALUE_FREE:
        return True
    rule = RANDOM_SAMPLES.get(name)
    return bool(rule and rule(sample))


def _compare(name, sample, actual, expected):
    """None when ``actual`` (lazy, on the host) matches eager's ``expected``, else why not."""
    if _value_free(name, sample):
        a, e = _tensors(actual), _tensors(expected)
        if len(a) != len(e):
            return f"{len(a)} tensors, eager returns {len(e)}"
        for x, y in zip(a, e):
            if x.shape != y.shape or x.dtype != y.dtype:
                return f"got {list(x.shape)} {x.dtype}, eager {list(y.shape)} {y.dtype}"
        return None
    try:
        torch.testing.assert_close(actual, expected, rtol=RTOL, atol=ATOL, equal_nan=True,
                                   check_device=False, check_layout=False)
    except AssertionError as e:
        if name in TIED_INDICES and _same_up_to_ties(sample, TIED_INDICES[name](sample), actual, expected):
            return None
        if name in PHASED_VECTORS and _same_up_to_phases(PHASED_VECTORS[name], actual, expected):
            return None
        return _short(str(e))
    return None


def _same_up_to_ties(sample, dim, actual, expected) -> bool:
    """Eager's values exactly, and indices that pick those values, each element once per slice."""
    (values, indices), (want, _) = actual, expected
    x = sample.input
    if not torch.equal(values, want) or indices.shape != want.shape or x.dim() == 0:
        return False
    if not torch.equal(x.gather(dim, indices), want):
        return False
    ordered = indices.sort(dim=dim).values
    return bool((ordered.diff(dim=dim) != 0).all())


def _same_up_to_phases(index, actual, expected) -> bool:
    """Eager's other outputs, and each of its vectors (columns of output ``index``) times one
    sign (phase), as eager's within the sweep's tolerance."""
    actual, expected = list(actual), list(expected)
    got, want = actual[index], expected[index]
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    inner = (got.conj() * want).sum(-2, keepdim=True)
    phase = torch.where(inner.abs() > 0, inner / inner.abs(), torch.ones_like(inner))
    actual[index] = got * phase
    try:
        torch.testing.assert_close(actual, expected, rtol=RTOL, atol=ATOL, equal_nan=True,
                                   check_device=False, check_layout=False)
    except AssertionError:
        return False
    return True


def _short(text, n=300):
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


# --- the sweep ----------------------------------------------------------------------------


def samples_of(op, n: int = SAMPLES_PER_OP, dtype: torch.dtype = torch.float32) -> list:
    """The first ``n`` CPU samples of ``op`` for ``dtype`` (float32 by default).

    ``sample_inputs_func`` is called directly: ``op.sample_inputs`` wraps it in an
    iterator that walks the Python stack with ``inspect`` per call (for unittest
    bookkeeping), a quarter of the sweep's time. Seeded so runs repeat.
    """
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(itertools.islice(op.sample_inputs_func(op, "cpu", dtype, False), n))


def trace_sample(op, sample, dev):
    """Run one sample eagerly and on the lazy device (traced, not yet executed).

    Returns ``("ok", expected, actual)``, ``("skip", why)`` or ``("error", why)``.
    """
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
    largs = (_to_lazy(inp, dev), *(args if name in HOST_ARGS else _to_lazy(args, dev)))
    lkwargs = kwargs if name in HOST_ARGS else _to_lazy(kwargs, dev)
    if not _tensors((inp, args, kwargs)) and "device" not in kwargs and name in FACTORIES:
        lkwargs = {**lkwargs, "device": dev}  # the sample makes a CPU tensor from numbers: make it lazy
    try:
        actual = op(*_retarget(largs, dev), **_retarget(lkwargs, dev))
    except Exception as e:
        return "error", _short(f"{type(e).__name__}: {e}")
    return "ok", expected, actual


def check_sample(op, sample, expected, actual):
    """Bring a traced result to the host and compare: None, ("mismatch", why) or ("error", why)."""
    try:
        host = _to_host(actual)
    except Exception as e:
        return "error", _short(f"{type(e).__name__}: {e}")
    elsewhere = [t.device for t in _tensors(actual) if t.device.type != "lazy"]
    if elsewhere:
        return "mismatch", f"result on {elsewhere[0]}, not the lazy device"
    why = _compare(op_name(op), sample, host, expected)
    return None if why is None else ("mismatch", why)


def run_op(op, dev, samples: int = SAMPLES_PER_OP, batch: bool = False, dtype: torch.dtype = torch.float32) -> Result:
    """Run the first ``samples`` samples of ``op`` for ``dtype`` and classify it.

    Each sample gets its own barrier (``lazycore.mark_step()``), unless ``batch``:
    then all samples are traced first and run as one program, one XLA compile per
    OpInfo instead of one per sample (what the test suite uses to stay fast).
    """
    name = op_name(op)
    start = time.perf_counter()
    _drain()
    metrics.reset()
    compared, skips, outcome, traced = 0, [], None, []
    try:
        picked = samples_of(op, samples, dtype)
    except Exception as e:
        return Result(name, "skipped", f"no samples: {type(e).__name__}: {_short(str(e), 120)}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for sample in picked:
            r = trace_sample(op, sample, dev)
            if r[0] == "skip":
                skips.append(r[1])
                continue
            if r[0] == "error":
                outcome = r
                break
            traced.append((sample, r[1], r[2]))
            if batch:
                continue
            outcome = _barrier() or check_sample(op, *traced.pop())
            if outcome is not None:
                break
            compared += 1
        if outcome is None and traced:
            outcome = _barrier()
            for t in traced if outcome is None else ():
                outcome = check_sample(op, *t)
                if outcome is not None:
                    break
                compared += 1
    fell_back = sorted(metrics.fallbacks())
    if outcome is not None:
        # a failed lazy run can leave pending handles in reference cycles; drop them so
        # the next op's barriers do not carry (and fail on) this op's graph
        del picked, traced
        gc.collect()
        _drain()
        return Result(name, outcome[0], outcome[1], compared, fell_back, time.perf_counter() - start)
    if compared == 0:
        why = "; ".join(sorted(set(skips))) or "no samples"
        return Result(name, "skipped", why, 0, fell_back, time.perf_counter() - start)
    status = "pass_with_fallback" if fell_back else "pass_no_fallback"
    return Result(name, status, "", compared, fell_back, time.perf_counter() - start)


def _fallback_calls() -> dict[str, int]:
    return {op: sum(sites.values()) for op, sites in metrics.fallbacks().items()}


def _fell_back_since(before: dict[str, int]) -> list[str]:
    return sorted(op for op, n in _fallback_calls().items() if n > before.get(op, 0))


def run_group(ops, dev, samples: int = SAMPLES_PER_OP, dtype: torch.dtype = torch.float32) -> dict[str, Result]:
    """:func:`run_op` (``batch=True``) for several OpInfos at once: every OpInfo's samples
    traced, then one barrier for all of them, so one program (one XLA compile, one
    lowering) serves the group instead of one per OpInfo.

    Each OpInfo's fallbacks are those counted while its own samples were traced and
    compared. Only a clean pass is taken from the group: an OpInfo whose tracing or
    comparison failed runs again alone (:func:`run_op`), and the result is that run's, as
    without grouping; a barrier that fails or counts a fallback of its own runs the
    whole group again one OpInfo at a time.
    """
    start = time.perf_counter()
    _drain()
    metrics.reset()
    results, pending, alone = {}, [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in ops:
            before = _fallback_calls()
            try:
                picked = samples_of(op, samples, dtype)
            except Exception:
                alone.append(op)  # run_op gives the skip, with its reason
                continue
            skips, traced, failed = [], [], False
            for sample in picked:
                r = trace_sample(op, sample, dev)
                if r[0] == "skip":
                    skips.append(r[1])
                elif r[0] == "error":
                    failed = True
                    break
                else:
                    traced.append((sample, r[1], r[2]))
            if failed:
                alone.append(op)
                continue
            pending.append((op, traced, skips, _fell_back_since(before)))
        before = _fallback_calls()
        if _barrier() is not None or _fell_back_since(before):
            alone = list(ops)
            pending = []
        for op, traced, skips, fell_back in pending:
            before = _fallback_calls()
            outcome = next((o for o in (check_sample(op, *t) for t in traced) if o is not None), None)
            if outcome is not None:
                alone.append(op)
                continue
            fell_back = sorted(set(fell_back) | set(_fell_back_since(before)))
            name = op_name(op)
            if not traced:
                results[name] = Result(name, "skipped", "; ".join(sorted(set(skips))) or "no samples", 0, fell_back)
            else:
                status = "pass_with_fallback" if fell_back else "pass_no_fallback"
                results[name] = Result(name, status, "", len(traced), fell_back)
    del pending
    if alone:
        gc.collect()  # a failed trace can leave pending handles in reference cycles
        _drain()
    share = (time.perf_counter() - start) / max(len(results), 1)
    for r in results.values():
        r.seconds = share
    for op in alone:
        results[op_name(op)] = run_op(op, dev, samples, True, dtype)
    return {op_name(op): results[op_name(op)] for op in ops}


def _barrier():
    try:
        lazycore.mark_step()
    except Exception as e:
        return "error", _short(f"at the barrier: {type(e).__name__}: {e}")
    return None


def _drain():
    try:
        lazycore.mark_step()
    except Exception:
        pass


@contextlib.contextmanager
def _ltc_mark_step():
    """OpInfo's random-op wrappers call ``torch._lazy.mark_step()`` on a ``lazy`` result, to
    line torch's own LazyTensor backend's RNG up with eager. lazycore's random values are
    compared by shape only, so the call is made a no-op (not a barrier per sample)."""
    import torch._lazy

    saved = torch._lazy.mark_step
    torch._lazy.mark_step = lambda *args, **kwargs: None
    try:
        yield
    finally:
        torch._lazy.mark_step = saved


def sweep(names=None, limit=None, samples: int = SAMPLES_PER_OP, progress=None,
          batch: bool = False, dtype: torch.dtype = torch.float32, group: int = 1) -> dict[str, Result]:
    """Run the sweep over every CPU OpInfo of ``dtype`` (or those in ``names``); see :func:`run_op`.
    ``group`` > 1 (with ``batch``): that many OpInfos per program (:func:`run_group`)."""
    import lazycore.torch as ltorch

    dev = ltorch.device()
    ops = ops_for(dtype)
    if names:
        wanted = set(names)
        ops = [op for op in ops if op_name(op) in wanted or op.name in wanted]
    if limit is not None:
        ops = ops[:limit]
    results = {}
    with _ltc_mark_step():
        if batch and group > 1:
            for i in range(0, len(ops), group):
                for r in run_group(ops[i:i + group], dev, samples, dtype).values():
                    results[r.name] = r
                    if progress:
                        progress(r)
            return results
        for op in ops:
            results[op_name(op)] = r = run_op(op, dev, samples, batch, dtype)
            if progress:
                progress(r)
    return results


def counts(results) -> dict[str, int]:
    c = dict.fromkeys(STATUSES, 0)
    for r in results.values():
        c[r.status] += 1
    return c


# --- reporting ----------------------------------------------------------------------------


def summary(results, samples: int = SAMPLES_PER_OP, batch: bool = False, group: int = 1) -> str:
    """The README text: the counts with and without fallback, and what fails."""
    c = counts(results)
    compared = len(results) - c["skipped"]
    barrier = ("a barrier after every sample" if not batch else "one program per OpInfo" if group <= 1
               else f"{group} OpInfos per program (one failing in its group runs again alone)")
    lines = [
        f"OpInfos run: {len(results)}: every OpInfo supporting float32 on the CPU, its first {samples} "
        f"samples, {barrier} (torch {torch.__version__.split('+')[0]}).",
        "",
        "| result | OpInfos |",
        "|---|---|",
        f"| match eager, no fallback | {c['pass_no_fallback']} |",
        f"| match eager, counting CPU fallbacks | {c['pass_no_fallback'] + c['pass_with_fallback']} |",
        f"| wrong values | {c['mismatch']} |",
        f"| error on the lazy device | {c['error']} |",
        f"| skipped: nothing comparable (eager raised, or no element type) | {c['skipped']} |",
        "",
        f"Of the {compared} OpInfos with comparable samples, {c['pass_no_fallback']} run entirely on the "
        f"lazy device and {c['pass_no_fallback'] + c['pass_with_fallback']} give eager's results.",
    ]
    for status, what in (("mismatch", "Wrong values"), ("error", "Errors")):
        names = [r.name for r in results.values() if r.status == status]
        if names:
            lines += ["", f"{what}: " + ", ".join(f"`{n}`" for n in names) + "."]
    return "\n".join(lines)


def write_readme(text: str, path: str = README) -> None:
    """Replace the text between the markers; with none yet, add an "OpInfo coverage"
    section at the end of the guide."""
    with open(path) as f:
        readme = f.read()
    block = f"{BEGIN}\n{text}\n{END}"
    if BEGIN in readme and END in readme:
        readme = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda m: block, readme, flags=re.S)
    else:
        section = (
            "## OpInfo coverage\n\n"
            "`python -m lazycore.frontends.torch.opinfo --write-readme` runs PyTorch's OpInfo database\n"
            "(`op_db`) on the lazy device against eager CPU and writes the counts below;\n"
            "`tests/torch/test_opinfo.py` runs it as tests (no OpInfo may give a wrong value).\n\n"
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
    p.add_argument("--batch", action="store_true", help="one barrier per OpInfo, not per sample (faster)")
    p.add_argument("--group", type=int, default=1, help="with --batch: OpInfos per program (default 1)")
    p.add_argument("--dtype", default="float32", help="the samples' element type (torch's name: complex64, int64 ...)")
    p.add_argument("--write-readme", action="store_true", help="record the counts in docs/guides/torch.md")
    p.add_argument("--readme", default=README, help=f"the README to write (default: {README})")
    p.add_argument("-v", "--verbose", action="store_true", help="print every OpInfo's result as it runs")
    a = p.parse_args(argv)
    if a.write_readme and (a.ops or a.limit is not None or a.dtype != "float32"):
        p.error("--write-readme records the whole float32 sweep; drop --ops/--limit/--dtype")
    dtype = getattr(torch, a.dtype, None)
    if not isinstance(dtype, torch.dtype):
        p.error(f"--dtype: torch has no dtype {a.dtype!r}")
    names = [n.strip() for n in a.ops.split(",") if n.strip()] if a.ops else None

    def progress(r):
        if a.verbose:
            print(f"{r.status:20s} {r.seconds:6.2f}s {r.name} {r.detail}", flush=True)

    start = time.perf_counter()
    results = sweep(names, a.limit, a.samples, progress, a.batch, dtype, a.group)
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
    c = counts(results)
    for k, v in c.items():
        print(f"{k:20s} {v}")
    print(f"({len(results)} OpInfos in {took:.0f} s)")
    if a.write_readme:
        write_readme(summary(results, a.samples, a.batch, a.group), a.readme)
        print(f"wrote {a.readme}")
    return 1 if c["mismatch"] else 0


if __name__ == "__main__":
    sys.exit(main())
