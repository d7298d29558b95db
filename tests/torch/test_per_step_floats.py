"""Python floats a training loop computes every step (issue 39: no compile after
warm-up). Mixup's lambda (drawn by NumPy each step) and a warm-up schedule's
learning rate are program parameters from their first step: they compile
nothing after warm-up. An EMA's weight that is 1.0 for its first updates
(timm's ModelEmaV3: decay 0 until ``update_after_step + 1``, then 0.9) still
compiles at the step it changes: the lerp lowering (frontends/torch/ops/nn.py
``_lerp``) picks its formula by the Python weight's value on the host, and the
scalar policy bakes 1.0 until its place has seen another value."""

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime")


def _batches(n=6):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)) for _ in range(n)]


def _mixup_step(model, opt, sched, x, y, lam):
    # timm's Mixup._mix_batch (mixup branch) and mixup_target, soft-target cross-entropy
    x_flipped = x.flip(0).mul_(1.0 - lam)
    x.mul_(lam).add_(x_flipped)
    t = F.one_hot(y, 4).float()
    t = t * lam + t.flip(0) * (1.0 - lam)
    loss = torch.sum(-t * F.log_softmax(model(x), dim=-1), dim=-1).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    sched.step()
    return loss.detach()


def _train(device, each, step_of):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, s / 3))  # linear warm-up from lr 0
    rng = np.random.default_rng(0)
    losses, compiles = [], []
    for x, y in _batches():
        c0 = metrics.counters().get("compiles", 0)
        lam = float(rng.beta(0.8, 0.8))
        losses.append(step_of(model, opt, sched, x.to(device), y.to(device), lam))
        each()
        compiles.append(metrics.counters().get("compiles", 0) - c0)
    return [float(v.cpu()) for v in losses], model, compiles


def test_mixup_lambda_and_a_warmup_lr_compile_nothing_after_warmup(dev):
    import lazycore.torch as ltorch

    want, eager, _ = _train("cpu", lambda: None, _mixup_step)
    got, lazy, compiles = _train(dev, ltorch.mark_step, _mixup_step)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=0)
    for p, q in zip(lazy.parameters(), eager.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6)
    assert sum(compiles[2:]) == 0, compiles


def test_an_ema_weight_of_one_then_a_tenth_compiles_nothing_after_warmup(dev):
    import lazycore.torch as ltorch

    def run(device, each):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
        ema = [p.detach().clone() for p in model.parameters()]
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        compiles = []
        for i, (x, y) in enumerate(_batches()):
            c0 = metrics.counters().get("compiles", 0)
            F.cross_entropy(model(x.to(device)), y.to(device)).backward()
            opt.step()
            opt.zero_grad()
            decay = 0.0 if i < 2 else 0.9  # timm's ModelEmaV3.get_decay(step), update_after_step=0
            with torch.no_grad():
                torch._foreach_lerp_(ema, [p.detach() for p in model.parameters()], weight=1.0 - decay)
            each()
            compiles.append(metrics.counters().get("compiles", 0) - c0)
        return ema, compiles

    want, _ = run("cpu", lambda: None)
    got, compiles = run(dev, ltorch.mark_step)
    for a, b in zip(got, want):
        torch.testing.assert_close(a.cpu(), b, rtol=1e-5, atol=1e-6)
    assert sum(compiles[2:]) == 0, compiles
