"""Every scheduler of ``torch.optim.lr_scheduler`` and every ``get_*_schedule*``
of transformers, each with SGD (momentum), Adam, AdamW and RMSprop: a small
training step under ``lazycore.torch.capture``, stepped 10 times with the
scheduler stepped between calls (or inside the step, after ``opt.step()``:
the capture steps it again at each replay), traces at most three times and
replays the rest, and ends with eager's parameters. What a scheduler changes (the rate;
OneCycleLR and CyclicLR also ``betas[0]`` or ``momentum``) is an input of the
step, not a reason to trace it again (lazycore.frontends.torch.optim).

ReduceLROnPlateau and transformers' GreedyLR decide from the loss, which
their ``step(loss)`` reads as a Python number (``float(metrics)``): eager
reads it too. The read is a barrier outside the captured step; the rate it
may set is an input like any other, so it traces nothing again. (Stepped
inside the step, the read is a barrier there: the capture refuses it and
traces every call, saying so.)

CI runs each scheduler with one of the optimizers in turn;
``LAZYCORE_TEST_FULL=1`` runs the whole cross product.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import lazycore.torch as ltorch
from lazycore.observe import metrics
from _bits import FULL  # (tests/ is on the path)

O = torch.optim
S = torch.optim.lr_scheduler
STEPS = 10

OPTIMIZERS = {
    "sgd_momentum": lambda ps: O.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-3),
    "adam": lambda ps: O.Adam(ps, lr=1e-2),
    "adamw": lambda ps: O.AdamW(ps, lr=1e-2, weight_decay=0.01),
    "rmsprop": lambda ps: O.RMSprop(ps, lr=1e-2, momentum=0.5),
}


def _transformers(name, **kwargs):
    def make(opt):
        transformers = pytest.importorskip("transformers")
        return getattr(transformers, name)(opt, **kwargs)

    return make


_WARMUP = dict(num_warmup_steps=3, num_training_steps=STEPS)

SCHEDULERS = {
    "LambdaLR": lambda opt: S.LambdaLR(opt, lambda s: 1.0 / (1.0 + s)),
    "MultiplicativeLR": lambda opt: S.MultiplicativeLR(opt, lambda s: 0.8),
    "StepLR": lambda opt: S.StepLR(opt, step_size=2, gamma=0.5),
    "MultiStepLR": lambda opt: S.MultiStepLR(opt, milestones=[2, 5, 7], gamma=0.5),
    "ConstantLR": lambda opt: S.ConstantLR(opt, factor=0.25, total_iters=4),
    "LinearLR": lambda opt: S.LinearLR(opt, start_factor=0.1, total_iters=6),
    "ExponentialLR": lambda opt: S.ExponentialLR(opt, gamma=0.8),
    "PolynomialLR": lambda opt: S.PolynomialLR(opt, total_iters=8, power=2.0),
    "CosineAnnealingLR": lambda opt: S.CosineAnnealingLR(opt, T_max=8, eta_min=1e-4),
    "ChainedScheduler": lambda opt: S.ChainedScheduler([S.ConstantLR(opt, factor=0.5, total_iters=3),
                                                        S.ExponentialLR(opt, gamma=0.9)]),
    "SequentialLR": lambda opt: S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.1, total_iters=3),
                                                     S.CosineAnnealingLR(opt, T_max=6)], milestones=[3]),
    # (patience 0 and a 10% threshold: the rate halves within the run)
    "ReduceLROnPlateau": lambda opt: S.ReduceLROnPlateau(opt, factor=0.5, patience=0, threshold=0.1),
    "CyclicLR": lambda opt: S.CyclicLR(opt, base_lr=1e-3, max_lr=1e-2, step_size_up=3),  # (cycle_momentum)
    "OneCycleLR": lambda opt: S.OneCycleLR(opt, max_lr=1e-2, total_steps=STEPS + 1),  # (cycle_momentum)
    "CosineAnnealingWarmRestarts": lambda opt: S.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2),
    # transformers' (LambdaLR but for the two that read the loss), warm-up from a rate of 0
    "constant": _transformers("get_constant_schedule"),
    "constant_with_warmup": _transformers("get_constant_schedule_with_warmup", num_warmup_steps=3),
    "linear_with_warmup": _transformers("get_linear_schedule_with_warmup", **_WARMUP),
    "cosine_with_warmup": _transformers("get_cosine_schedule_with_warmup", **_WARMUP),
    "cosine_with_hard_restarts": _transformers("get_cosine_with_hard_restarts_schedule_with_warmup", num_cycles=2,
                                               **_WARMUP),
    "polynomial_decay": _transformers("get_polynomial_decay_schedule_with_warmup", power=2.0, **_WARMUP),
    "inverse_sqrt": _transformers("get_inverse_sqrt_schedule", num_warmup_steps=3),
    "cosine_with_min_lr": _transformers("get_cosine_with_min_lr_schedule_with_warmup", min_lr_rate=0.1,
                                        **_WARMUP),
    "cosine_with_min_lr_lr_rate": _transformers("get_cosine_with_min_lr_schedule_with_warmup_lr_rate",
                                                min_lr_rate=0.1, warmup_lr_rate=0.2, **_WARMUP),
    "wsd": _transformers("get_wsd_schedule", num_warmup_steps=2, num_decay_steps=4, num_training_steps=STEPS),
    "reduce_on_plateau": _transformers("get_reduce_on_plateau_schedule", factor=0.5, patience=0, threshold=0.1),
    "greedy": _transformers("get_greedy_schedule", factor=0.5, patience=0, threshold=0.1, warmup=0, cooldown=0),
}
READS_THE_LOSS = ("ReduceLROnPlateau", "reduce_on_plateau", "greedy")
CONSTANT = ("constant",)
"""(a rate that does not change: the one schedule here that sets none)"""


def _batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(6, 8, generator=g), torch.randint(0, 4, (6,), generator=g)) for _ in range(STEPS)]


def _hyper(opt):
    group = opt.param_groups[0]
    return group["lr"], group.get("momentum"), group.get("betas", (None,))[0]


def _train(dev, optimizer, scheduler, captured, inside=False):
    """(losses, parameters, each step's hyperparameters, compiles after each step, the step function)."""
    metrics.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).to(dev)
    opt = OPTIMIZERS[optimizer](model.parameters())
    sched = SCHEDULERS[scheduler](opt)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if inside:
            sched.step()
        return loss.detach()

    fn = ltorch.capture(step) if captured else step
    losses, hyper, compiles = [], [], []
    for x, y in _batches():
        hyper.append(_hyper(opt))
        loss = fn(x.to(dev), y.to(dev))
        if scheduler in READS_THE_LOSS:
            sched.step(loss)  # (float(loss): a read, as eager's)
        elif not inside:
            sched.step()
        if dev.type == "lazy":
            ltorch.mark_step()
            c = metrics.counters()
            compiles.append(c["compiles"] + c["disk_cache_hits"])
        losses.append(float(loss.cpu()))
    return losses, [p.detach().cpu().numpy() for p in model.parameters()], hyper, compiles, fn


def _cases():
    if FULL:
        return [(s, o, w) for s in SCHEDULERS for o in OPTIMIZERS
                for w in ("outside",) + ("inside",) * (s not in READS_THE_LOSS)]
    names = list(OPTIMIZERS)
    return [(s, names[i % len(names)], "outside") for i, s in enumerate(SCHEDULERS)] + [
        ("OneCycleLR", "sgd_momentum", "inside"), ("CyclicLR", "rmsprop", "inside"),
        ("SequentialLR", "adamw", "inside"), ("linear_with_warmup", "adam", "inside")]


@pytest.mark.parametrize("scheduler,optimizer,where", _cases())
def test_a_scheduled_step_replays_with_eagers_parameters(dev, scheduler, optimizer, where):
    eager = _train(torch.device("cpu"), optimizer, scheduler, False, where == "inside")
    losses, params, hyper, compiles, fn = _train(dev, optimizer, scheduler, True, where == "inside")
    assert hyper == eager[2]
    assert len({h[0] for h in hyper}) > 1 or scheduler in CONSTANT  # (the schedule changes the rate)
    # the first call makes the optimizer's state, the next two are compared (SGD with momentum:
    # its first call makes the buffers, which the second updates), then every call replays
    assert fn.traces <= 3 and fn.replays == STEPS - fn.traces, (fn.traces, fn.why)
    # a new rate is a new input: no program compiled after the warm-up
    assert compiles[-1] == compiles[2], compiles
    np.testing.assert_allclose(losses, eager[0], rtol=1e-5)
    for u, v in zip(params, eager[1]):
        assert np.isfinite(u).all()
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)


def test_every_scheduler_of_torch_is_here():
    """A scheduler torch adds is added here too."""
    ours = {n for n in SCHEDULERS}
    theirs = {n for n, c in vars(S).items() if isinstance(c, type) and issubclass(c, S.LRScheduler)
              and c is not S.LRScheduler and not n.startswith("_")}
    assert theirs <= ours, theirs - ours

