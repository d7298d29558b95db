"""lazycore.torch.capture's guards: every one is checked before the replay it
protects (never one call late), Python state reached through locals and
helpers included, and hyperparameters a scheduler changes every step are
program inputs rather than reasons to trace again."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import lazycore.torch as ltorch


def _batches(n, batch=5):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(batch, 8, generator=g), torch.randint(0, 4, (batch,), generator=g)) for _ in range(n)]


def _linear_warmup(opt):
    from transformers import get_linear_schedule_with_warmup

    return get_linear_schedule_with_warmup(opt, num_warmup_steps=3, num_training_steps=12)


_SCHEDULES = {
    "onecycle": lambda opt: torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=20),
    "cosine": lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6),
    "lambda": lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1.0 + 0.3 * s)),
    "linear-warmup": _linear_warmup,
}


def _train(dev, captured, schedule, inside, steps=10):
    """AdamW + clip_grad_norm_ + a scheduler stepped inside the step (after
    the optimizer) or outside it; the losses and the step function."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    sched = _SCHEDULES[schedule](opt)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if inside:
            sched.step()
        return loss.detach()

    fn = ltorch.capture(step) if captured else step
    losses = []
    for x, y in _batches(steps):
        loss = fn(x.to(dev), y.to(dev))
        if not inside:
            sched.step()
        if dev.type == "lazy":
            ltorch.mark_step()
        losses.append(float(loss.cpu()))
    return losses, [p.detach().cpu().numpy() for p in model.parameters()], fn


@pytest.mark.parametrize("inside", [True, False], ids=["stepped-inside", "stepped-outside"])
@pytest.mark.parametrize("schedule", sorted(_SCHEDULES))
def test_scheduled_adamw_with_clipping_matches_eager_at_every_step_and_replays(dev, schedule, inside):
    """OneCycleLR cycles beta1 as well as the learning rate (cycle_momentum):
    both are inputs of the program, so each replay reads this step's values."""
    eager = _train(torch.device("cpu"), False, schedule, inside)
    got = _train(dev, True, schedule, inside)
    np.testing.assert_allclose(got[0], eager[0], rtol=1e-6, atol=0)
    for u, v in zip(got[1], eager[1]):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)
    assert got[2].traces == 2 and got[2].replays == 8, got[2].why


def _sgd_train(dev, captured, steps=6):
    """SGD with momentum, whose learning rate and momentum OneCycleLR sets
    (Python numbers SGD reads: not program inputs), stepped inside the step."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.5, total_steps=20)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss.detach()

    fn = ltorch.capture(step) if captured else step
    losses = []
    for x, y in _batches(steps):
        losses.append(float(fn(x.to(dev), y.to(dev)).cpu()))
        if dev.type == "lazy":
            ltorch.mark_step()
    return losses, fn


def test_hyperparameters_a_scheduler_sets_after_the_step_are_guarded_as_the_step_used_them(dev):
    """The recorded call's optimizer stepped with this step's values, then the
    scheduler set the next step's: the guard holds the ones the step used, so
    the next call traces again rather than replaying the last step's numbers."""
    eager = _sgd_train(torch.device("cpu"), False)
    got = _sgd_train(dev, True)
    np.testing.assert_allclose(got[0], eager[0], rtol=1e-6, atol=0)
    assert got[1].replays == 0 and "changed between calls" in got[1].why
