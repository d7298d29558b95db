"""Benchmark 12: what checking indices held on the device costs a program whose
indices are in range (issue 41), registered in ``run.py``.

Two lazy steps, each traced with ``settings.index_checks`` on and off, timed in
this one process in mirrored blocks (``run.py``'s ``in_blocks``: on, off,
then off, on):

- benchmark 7's GPT training step (``gpt.py``: its token embedding and the
  cross-entropy targets are checked, forward and backward), pipelined
  (``mark_step()``), traced per op and under ``lazycore.torch.capture``, as
  benchmark 7's two lazycore rows (a captured step holding checks replays
  its nodes rather than one ``call`` node: lazycore.trace.capture);
- an indexing-heavy step: on a (64, 128) index batch into a (4096, 64) table,
  an embedding lookup, a gather along the rows, ``x[i]``, ``index_select``,
  an ``index_put_`` accumulate and a scatter_add, four times over, then a
  sum, with ``mark_step(wait=True)`` (every op's check is in the program
  and the step waits for its flags).

Rows: ms per step, checks off as the baseline; the results with checks on and
off are compared (they compute the same values).
"""

from __future__ import annotations

TOL = 1e-5


def _indexing_data(quick):
    import torch

    g = torch.Generator().manual_seed(3)
    rows, width, batch, seq = (256, 16, 8, 16) if quick else (4096, 64, 64, 128)
    table = torch.randn(rows, width, generator=g)
    idx = [torch.randint(0, rows, (batch, seq), generator=g) for _ in range(4)]
    return table, idx


def _indexing_step(table, idx):
    import torch
    import torch.nn.functional as F

    rows = table.shape[0]
    total = torch.zeros((), device=table.device)
    counts = torch.zeros(rows, device=table.device)
    for i in idx:
        flat = i.reshape(-1)
        e = F.embedding(i, table)                                   # (B, T, W)
        g = torch.gather(table, 0, flat[:, None].expand(-1, table.shape[1]))
        s = table[flat]
        sel = torch.index_select(table, 0, flat)
        counts.index_put_((flat,), torch.ones_like(flat, dtype=counts.dtype), accumulate=True)
        counts = counts.scatter_add(0, flat, torch.ones_like(flat, dtype=counts.dtype))
        total = total + e.sum() + g.sum() + s.sum() + sel.sum()
    return total + counts.sum()


def bench(args, kit):
    """Benchmark 12; ``kit``: run.py's module (row, in_blocks, maxdiff, set_ratios)."""
    import gpt
    import torch

    import lazycore.torch as ltorch
    from lazycore.ir.config import override

    dev = ltorch.device()
    warm, steps = args.warmup, args.steps

    # --- benchmark 7's step -------------------------------------------------------------------
    B = "12 index checks: GPT step (ms)"
    cfg = gpt._config(args.quick)
    data = gpt.make_data(cfg)
    ldata = [(x.to(dev), y.to(dev)) for x, y in data]
    variants, finals = {}, {}
    names = [(f"{how}, checks {on}", flag, wrap) for how, wrap in (("traced", None), ("capture", ltorch.capture))
             for on, flag in (("on", True), ("off", False))]
    for name, flag, wrap in names:
        torch.manual_seed(0)
        model = gpt.make_model(cfg).to(dev)
        with override(index_checks=flag):
            one, final, _ = gpt.torch_runner(model, ldata, after=ltorch.mark_step, wrap=wrap)

        def run(one=one, flag=flag):
            with override(index_checks=flag):
                one()

        variants[name], finals[name] = run, final
    times, _ = kit.in_blocks(variants, warm, steps,
                             settle={n: lambda: ltorch.mark_step(wait=True) for n in variants})
    ltorch.mark_step(wait=True)
    for how in ("traced", "capture"):
        base_loss, base_params = finals[f"{how}, checks off"]()
        for on in ("off", "on"):
            name = f"{how}, checks {on}"
            loss, params = finals[name]()
            diff = max([abs(loss - base_loss)] + [kit.maxdiff(p, q) for p, q in zip(params, base_params)])
            kit.row(B, name, times[name], baseline=name == "traced, checks off", diff=diff, tol=TOL,
                    target="<= 1.03x of its checks off" if on == "on" else None)
    kit.set_ratios(B)

    # --- an indexing-heavy step -----------------------------------------------------------------
    B = "12 index checks: indexing step (ms)"
    table, idx = _indexing_data(args.quick)
    ltable, lidx = table.to(dev), [i.to(dev) for i in idx]
    results: dict = {}

    def make(name, flag):
        def run():
            with override(index_checks=flag):
                results[name] = _indexing_step(ltable, lidx)
                ltorch.mark_step(wait=True)

        return run

    variants = {"checks on": make("checks on", True), "checks off": make("checks off", False)}
    times, _ = kit.in_blocks(variants, warm, steps)
    want = float(_indexing_step(table, idx))
    for name in ("checks off", "checks on"):
        got = float(results[name].cpu())
        kit.row(B, name, times[name], baseline=name == "checks off", diff=abs(got - want) / max(abs(want), 1.0),
                tol=TOL, target="<= 1.03x" if name == "checks on" else None,
                note="diff: relative to eager torch's sum")
    kit.set_ratios(B)
