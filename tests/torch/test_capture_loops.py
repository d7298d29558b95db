"""Captured steps holding loops and branches replay like any other step: the
recorded loop node is made again on the new inputs, sharing its traced
bodies, and the step's program is compiled once."""

from __future__ import annotations

import torch
from torch._higher_order_ops import scan

import lazycore
import lazycore.torch as ltorch
from lazycore.observe import metrics


def compiles() -> int:
    return metrics.counters()["compiles"]


def test_a_captured_fori_loop_replays_with_the_new_inputs(dev, clean_runtime):
    torch.manual_seed(0)
    w = torch.randn(4, 4) * 0.3
    wl = w.to(dev)

    @ltorch.capture
    def step(x, k):
        return lazycore.fori_loop(0, k, lambda i, v: torch.tanh(v @ wl + 1.0), x)

    for i in range(6):
        x = torch.randn(3, 4)
        got = step(x.to(dev), 5).cpu()
        want = x
        for _ in range(5):
            want = torch.tanh(want @ w + 1.0)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert step.why is None
    assert step.replays >= 3
    assert compiles() == 1


def test_a_captured_branch_follows_the_data_at_every_replay(dev, clean_runtime):
    @ltorch.capture
    def step(x):
        return torch.cond(x.sum() > 0, lambda t: t.exp(), lambda t: t.sin() - 1, (x,))

    g = torch.Generator().manual_seed(3)
    for i in range(8):
        x = torch.randn(5, generator=g) + (2.0 if i % 2 else -2.0)  # the branch taken alternates
        got = step(x.to(dev)).cpu()
        want = x.exp() if x.sum() > 0 else x.sin() - 1
        torch.testing.assert_close(got, want)
    assert step.why is None
    assert step.replays >= 5
    assert compiles() == 1


def _stack(seed: int, n: int = 3):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(5, 5, generator=g) * 0.4 for _ in range(n)], [torch.randn(5, generator=g) * 0.1
                                                                      for _ in range(n)]


def _layer(h, params):
    W, b = params
    h = torch.tanh(h @ W + b)
    return h, h.sum()


def test_a_captured_adam_step_through_a_scanned_stack_matches_eager(dev, clean_runtime):
    """Forward loop, backward loop and Adam's update in one captured step:
    replayed from the third call, losses and weights as eager's unrolled layers."""
    Ws, bs = _stack(0)
    eager = [p.clone().requires_grad_() for p in Ws + bs]
    lazy = [p.to(dev).requires_grad_() for p in Ws + bs]
    opt_e = torch.optim.Adam(eager, lr=0.05)
    opt_l = torch.optim.Adam(lazy, lr=0.05)

    @ltorch.capture
    def step(x):
        opt_l.zero_grad()
        h, ys = scan(_layer, x, (torch.stack(lazy[:3]), torch.stack(lazy[3:])))
        loss = h.pow(2).sum() + ys.sum()
        loss.backward()
        opt_l.step()
        return loss

    g = torch.Generator().manual_seed(1)
    for i in range(7):
        x = torch.randn(2, 5, generator=g)
        opt_e.zero_grad()
        h, sums = x, []
        for W, b in zip(eager[:3], eager[3:]):
            h, s = _layer(h, (W, b))
            sums.append(s)
        loss_e = h.pow(2).sum() + torch.stack(sums).sum()
        loss_e.backward()
        opt_e.step()

        loss_l = step(x.to(dev))
        ltorch.mark_step()
        torch.testing.assert_close(loss_l.detach().cpu(), loss_e.detach(), rtol=1e-5, atol=1e-5)
    for p_l, p_e in zip(lazy, eager):
        torch.testing.assert_close(p_l.detach().cpu(), p_e.detach(), rtol=1e-4, atol=1e-5)
    assert step.why is None
    assert step.replays >= 4  # from the third call on
    assert step.traces <= 3


def test_a_replayed_loop_compiles_nothing_new(dev, clean_runtime):
    """The replayed loop node hashes as the traced one: the programs the
    traced calls compiled serve every replay."""
    Ws, bs = _stack(2)
    lazy = [p.to(dev) for p in Ws + bs]

    @ltorch.capture
    def step(x):
        return scan(_layer, x, (torch.stack(lazy[:3]), torch.stack(lazy[3:])))

    g = torch.Generator().manual_seed(4)
    counts = []
    for i in range(6):
        x = torch.randn(2, 5, generator=g)
        before = compiles()
        h, ys = step(x.to(dev))
        got_h, got_ys = h.cpu(), ys.cpu()
        counts.append(compiles() - before)
        want_h, want_ys = x, []
        for W, b in zip(Ws, bs):
            want_h, s = _layer(want_h, (W, b))
            want_ys.append(s)
        torch.testing.assert_close(got_h, want_h, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(got_ys, torch.stack(want_ys), rtol=1e-5, atol=1e-5)
    assert step.replays >= 3
    assert sum(counts[1:]) == 0, counts
