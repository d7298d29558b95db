"""Benchmark 9: automatic step barriers and the learned scalar policy (issue 22), registered in ``run.py``.

Step time (median ms, same-run ratios to eager) of benchmark 2's MLP trained
with SGD and momentum: eager torch (the baseline); lazycore with ``mark_step()`` after
each step; lazycore with no ``mark_step`` at all (the automatic barrier after
``optimizer.step()``). The same for a NumPy gradient-descent loop updating its
weights in place (NumPy; lazycore.numpy with ``mark_step()``; lazycore.numpy
without, cut where its graph repeats). Compile counts of each lazy loop over
a fixed number of steps from an empty cache, and the compiles of ``x * k``
for k = 0..4 (torch and NumPy; the learned scalar policy: 2, where baking 0
and 1 compiled 3) and of ``x.expand(3, k)`` for k = 1..4 (shapes stay baked: 4).
"""

from __future__ import annotations

import numpy

COUNT_STEPS = 8
"""Steps of the loops whose compiles are counted."""


def _gd_data(quick):
    rng = numpy.random.default_rng(0)
    n, d = (256, 32) if quick else (4096, 256)
    X = rng.standard_normal((n, d)).astype(numpy.float32)
    y = (X @ rng.standard_normal(d).astype(numpy.float32)).astype(numpy.float32)
    return X, y


def _gd(np, X, y, mark):
    """A gradient-descent step function over in-place weights (and the weights)."""
    import lazycore

    X, y = np.asarray(X), np.asarray(y)
    w = np.asarray(numpy.zeros(X.shape[1], numpy.float32))
    b = np.asarray(numpy.zeros(1, numpy.float32))
    n = X.shape[0]

    def step(w=w, b=b):
        err = X @ w + b - y
        w -= 0.01 * (X.T @ err / n)
        b -= 0.01 * err.mean()
        if mark:
            lazycore.mark_step()

    return step, (w, b)


def _counted(fn) -> dict:
    """Compiles, cache hits and executions while ``fn`` runs (then a waited barrier)."""
    import lazycore

    names = ("compiles", "cache_hits", "executions")
    c0 = dict(lazycore.metrics.counters())
    fn()
    lazycore.mark_step(wait=True)
    c = lazycore.metrics.counters()
    return {k: c[k] - c0[k] for k in names}


def _compare(kit, B, hand: dict, auto: dict, extra: int) -> None:
    """The automatic loop's counts against the hand-placed loop's (``extra``
    compiles allowed: the steps before a repetition is seen)."""
    ok = auto["compiles"] == hand["compiles"] + extra and auto["executions"] <= hand["executions"]
    for name, c, want in (("mark_step() each step", hand, hand["compiles"]),
                          ("no mark_step (automatic)", auto, hand["compiles"] + extra)):
        kit.row(B, f"{name}: {COUNT_STEPS} steps, {c['executions']} programs run",
                value={"compiles": c["compiles"], "expected": want, "cache_hits": c["cache_hits"]},
                unit="compiles", target=f"exactly {want}", note="PASS" if ok else "FAIL")
    if not ok:
        kit.FAILURES.append(f"{B}: automatic barriers {auto}, mark_step {hand}")


def bench(args, kit):
    """Benchmark 9; ``kit``: run.py's module (row, in_blocks, maxdiff, set_ratios, model helpers)."""
    import torch

    import lazycore
    import lazycore.numpy as lnp
    import lazycore.torch as ltorch
    from lazycore.ir.context import TRACE

    dev = ltorch.device()
    warm, steps = args.warmup, args.steps
    settle = lambda: lazycore.mark_step(wait=True)  # noqa: E731

    # --- torch: an MLP with SGD and momentum --------------------------------------------------------------------
    B = "9 automatic step barriers: torch MLP + SGD momentum (ms/step)"
    cfg = kit._mlp_config(args)
    x, y = kit._make_data(cfg, k=1)[0]
    runs = {}
    for name, where in (("eager torch", "cpu"), ("lazycore, mark_step() each step", dev),
                        ("lazycore, no mark_step (automatic)", dev)):
        model = kit._make_model(cfg).to(where)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        xs, ys = x.to(where), y.to(where)
        hand = name.startswith("lazycore, mark_step")

        def fn(model=model, opt=opt, xs=xs, ys=ys, hand=hand):
            kit._torch_step(model, opt, xs, ys)
            if hand:
                ltorch.mark_step()

        runs[name] = (fn, model)
    times, _ = kit.in_blocks({n: f for n, (f, _) in runs.items()}, warm, steps,
                             settle={n: settle for n in runs if n != "eager torch"})
    ref = [p.detach().numpy() for p in runs["eager torch"][1].parameters()]
    for name, (_, model) in runs.items():
        diff = max(kit.maxdiff(p.detach().cpu().numpy(), r) for p, r in zip(model.parameters(), ref))
        kit.row(B, name, times[name], baseline=name == "eager torch", diff=diff, tol=1e-4)
    kit.set_ratios(B)

    def torch_loop(hand):
        model = kit._make_model(cfg).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        xs, ys = x.to(dev), y.to(dev)
        settle()
        lazycore.cache.clear()

        def loop():
            for _ in range(COUNT_STEPS):
                kit._torch_step(model, opt, xs, ys)
                if hand:
                    ltorch.mark_step()

        return _counted(loop)

    _compare(kit, B, torch_loop(True), torch_loop(False), 0)

    # --- NumPy: gradient descent ----------------------------------------------------------------------
    B = "9 automatic step barriers: NumPy gradient descent (ms/step)"
    X, Y = _gd_data(args.quick)
    gds = {"NumPy": _gd(numpy, X, Y, False), "lazycore.numpy, mark_step() each step": _gd(lnp, X, Y, True),
           "lazycore.numpy, no mark_step (automatic)": _gd(lnp, X, Y, False)}
    times, _ = kit.in_blocks({n: s for n, (s, _) in gds.items()}, warm, steps,
                             settle={n: settle for n in gds if n != "NumPy"})
    ref = gds["NumPy"][1][0]
    for name, (_, (w, _)) in gds.items():
        kit.row(B, name, times[name], baseline=name == "NumPy", diff=kit.maxdiff(numpy.asarray(w), ref), tol=1e-3)
    kit.set_ratios(B)

    def gd_loop(mark):
        TRACE.cutter.reset()
        step, _ = _gd(lnp, X, Y, mark)
        settle()
        lazycore.cache.clear()

        def loop():
            for _ in range(COUNT_STEPS):
                step()

        return _counted(loop)

    _compare(kit, B, gd_loop(True), gd_loop(False), 1)

    # --- the learned scalar policy -----------------------------------------------------------------------
    B = "9 learned scalar policy (compiles)"
    xt = torch.arange(6.0, device=dev)
    an = lnp.arange(6.0)
    settle()
    lazycore.cache.clear()
    for variant, fn, want in (
            ("torch x * k, k = 0..4", lambda: [(xt * k).cpu() for k in range(5)], 2),
            ("NumPy a * k, k = 0..4", lambda: [numpy.asarray(an * k) for k in range(5)], 2),
            ("torch x[:1].expand(3, k), k = 1..4 (a shape: baked)",
             lambda: [xt[:1].expand(3, k).cpu() for k in range(1, 5)], 4)):
        c = _counted(fn)
        got = c["compiles"]
        kit.row(B, variant, value={"compiles": got, "expected": want, "cache_hits": c["cache_hits"]},
                unit="compiles", target=f"exactly {want}", note="PASS" if got == want else f"FAIL: {got} compiles")
        if got != want:
            kit.FAILURES.append(f"{B} / {variant}: {got} compiles, expected {want}")
