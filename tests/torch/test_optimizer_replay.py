"""A traced ``optimizer.step()`` over lazy parameters replays a recording of
itself from its third call: the same nodes, so the same programs and bitwise
the same parameters as tracing it per op, for every torch.optim optimizer; it
traces again when a guard fails and stops trying when it cannot replay."""

import numpy as np
import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from _bits import BY_HAND  # (tests/ is on the path)
from lazycore.ir.config import override
from lazycore.frontends.torch import optim_replay
from lazycore.observe import metrics

O = torch.optim
OPTIMIZERS = {
    "sgd": (O.SGD, dict(lr=0.1)),
    "sgd_nesterov": (O.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    "adam": (O.Adam, dict(lr=0.01)),
    "adam_amsgrad": (O.Adam, dict(lr=0.01, amsgrad=True)),
    "adamw": (O.AdamW, dict(lr=0.01, weight_decay=0.01)),
    "rmsprop": (O.RMSprop, dict(lr=0.01, centered=True, momentum=0.5)),
    "adadelta": (O.Adadelta, dict(lr=1.0)),
    "adamax": (O.Adamax, dict(lr=0.01)),
    "nadam": (O.NAdam, dict(lr=0.01)),
    "radam": (O.RAdam, dict(lr=0.01)),
    "asgd": (O.ASGD, dict(lr=0.01)),
    "rprop": (O.Rprop, dict(lr=0.01)),
    "adagrad": (O.Adagrad, dict(lr=0.1, lr_decay=0.01)),
}
STEPS = 7


def _train(dev, make_opt, steps=STEPS, before=None):
    """(params, the optimizer, compiles) after ``steps`` traced steps from one start."""
    lazycore.cache.clear()
    metrics.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)).to(dev)
    opt = make_opt(model.parameters())
    g = torch.Generator().manual_seed(1)
    for i in range(steps):
        if before is not None:
            before(i, model, opt)
        x = torch.randn(4, 8, generator=g).to(dev)
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        if dev != "cpu":
            ltorch.mark_step()
    return [p.detach().cpu().numpy() for p in model.parameters()], opt, metrics.counters()["compiles"]


def _replayed(opt):
    r = optim_replay._REPLAYED.get(opt)
    return (r.captured.replays, r.captured.why) if r is not None else None


# CI (adamw, adamax, nadam, radam): [adam], [adam_amsgrad]; test_a_changed_hyperparameter_... (AdamW), test_optim_corners' traced
@pytest.mark.parametrize("name", [pytest.param(n, marks=BY_HAND) if n in ("adamw", "adamax", "nadam", "radam") else n
                                  for n in OPTIMIZERS])
def test_every_optimizer_replays_its_traced_step_exactly(dev, name):
    cls, kw = OPTIMIZERS[name]
    make = lambda ps: cls(ps, **kw)  # noqa: E731
    with override(replay_optimizer=False):
        traced, opt0, compiles = _train(dev, make)
    assert optim_replay._REPLAYED.get(opt0) is None
    replayed, opt, compiles_replayed = _train(dev, make)
    for a, b in zip(traced, replayed):
        np.testing.assert_array_equal(a, b)  # the same nodes: the same program
    assert compiles_replayed == compiles
    eager = _train("cpu", make)[0]
    for a, b in zip(eager, replayed):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    replays, why = _replayed(opt)
    # the first step makes the state (traced plainly), the next two are compared
    # (SGD with momentum too: its momentum is a device input, not a constant its
    # second step, the first to update the buffers, would make first). (Adagrad's
    # step counters, CPU tensors it reads as Python numbers, live on the device
    # from its first step: it replays as the others do.)
    assert replays == STEPS - 3, why


@pytest.mark.parametrize("name", ["adamw", "sgd", *(pytest.param(n, marks=BY_HAND)
                                                    for n in ("rmsprop", "adagrad", "adadelta"))])
def test_a_scheduled_learning_rate_is_read_by_the_replayed_step(dev, name):
    def make(ps):
        opt = O.AdamW(ps, lr=0.01) if name == "adamw" else OPTIMIZERS[name][0](ps, **OPTIMIZERS[name][1])
        # (cycled betas, OneCycleLR's default, are hyperparameters: a new value traces again)
        opt.sched = O.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=STEPS + 1, cycle_momentum=False)
        return opt

    def before(i, model, opt):
        if i:
            opt.sched.step()

    with override(replay_optimizer=False):
        traced, _, compiles = _train(dev, make, before=before)
    replayed, opt, compiles_replayed = _train(dev, make, before=before)
    for a, b in zip(traced, replayed):
        np.testing.assert_array_equal(a, b)
    assert compiles_replayed == compiles
    assert _replayed(opt) == (STEPS - 3, None)  # a new rate every step, and no trace for it
    eager = _train("cpu", make, before=before)[0]
    for a, b in zip(eager, replayed):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_a_changed_hyperparameter_or_a_missing_gradient_traces_again(dev):
    def before(i, model, opt):
        if i == 4:
            opt.param_groups[0]["weight_decay"] = 0.5
        if i >= 8:
            model[0].weight.requires_grad_(False)  # no gradient from now on
            model[0].weight.grad = None

    make = lambda ps: O.AdamW(ps, lr=0.01)  # noqa: E731
    with override(replay_optimizer=False):
        traced = _train(dev, make, steps=12, before=before)[0]
    replayed, opt, _ = _train(dev, make, steps=12, before=before)
    for a, b in zip(traced, replayed):
        np.testing.assert_array_equal(a, b)
    eager = _train("cpu", make, steps=12, before=before)[0]
    for a, b in zip(eager, replayed):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    captured = optim_replay._REPLAYED[opt].captured
    # step 0 plain; 1-2 traced, 3 replayed; 4-5 traced (a new weight decay: 4 makes its
    # constant, 5 finds it made, and the two agree: a recording's constants are keyed by
    # value, not by age), 6-7 replayed; 8-9 traced (a gradient fewer), 10-11 replayed
    assert (captured.traces, captured.replays) == (6, 5)


def test_hooks_run_at_every_replayed_step(dev):
    seen = []

    def make(ps):
        opt = O.Adam(ps, lr=0.01)
        opt.register_step_pre_hook(lambda o, a, k: seen.append("pre"))
        opt.register_step_post_hook(lambda o, a, k: seen.append("post"))
        return opt

    _, opt, _ = _train(dev, make)
    assert seen == ["pre", "post"] * STEPS
    assert _replayed(opt)[0] == STEPS - 3


def test_a_closure_step_is_traced_per_op(dev):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1).to(dev)
    opt = O.SGD(model.parameters(), lr=0.1)
    x = torch.randn(3, 4).to(dev)

    def closure():
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        return loss

    for _ in range(4):
        loss = opt.step(closure)
        ltorch.mark_step()
    assert optim_replay._REPLAYED.get(opt) is None
    assert torch.isfinite(loss.cpu())


# CI (inf-False): [2.0-False] takes the same path (both halves of the clipping replayed)
@pytest.mark.parametrize("norm_type,error_if_nonfinite", [(2.0, False), pytest.param(float("inf"), False, marks=BY_HAND),
                                                          (1.0, True)])
def test_gradient_clipping_replays_exactly(dev, norm_type, error_if_nonfinite):
    from torch.nn.utils import clip_grad_norm_  # (bound before: the patched halves are found inside it)

    norms = []

    def before(i, model, opt):
        if i:  # last step's gradients: clip them as a step would, before its update
            norms.append(clip_grad_norm_(model.parameters(), 0.05, norm_type, error_if_nonfinite))

    make = lambda ps: O.SGD(ps, lr=0.1, momentum=0.9)  # noqa: E731
    with override(replay_optimizer=False):
        traced, _, compiles = _train(dev, make, before=before)
        traced_norms = [float(n.cpu()) for n in norms]
    norms.clear()
    halves = (optim_replay._clip_grad._get_total_norm.replayed, optim_replay._clip_grad._clip_grads_with_norm_.replayed)
    replays = [h.captured.replays for h in halves]
    replayed, _, compiles_replayed = _train(dev, make, before=before)
    for a, b in zip(traced, replayed):
        np.testing.assert_array_equal(a, b)
    assert [float(n.cpu()) for n in norms] == traced_norms
    assert compiles_replayed == compiles
    # STEPS - 1 clips, replayed from the fourth at the latest (the first call makes
    # the constants later calls share; a recording an earlier test made with these
    # shapes replays sooner)
    norm_replays, scale_replays = (h.captured.replays - r for h, r in zip(halves, replays))
    assert scale_replays >= STEPS - 4
    assert norm_replays == 0 if error_if_nonfinite else norm_replays >= STEPS - 4  # (it reads the norm)
    norms.clear()
    eager = _train("cpu", make, before=before)[0]
    for a, b in zip(eager, replayed):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


class _HostCounter(O.Optimizer):
    """SGD whose rate decays with a step counter kept as a CPU tensor and read as a Python number."""

    def __init__(self, params, lr):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state.setdefault("n", torch.tensor(0.0))
                state["n"] += 1
                p.add_(p.grad, alpha=-group["lr"] / state["n"].item())


@pytest.mark.parametrize("make", [lambda ps: O.Adagrad(ps, lr=0.1, lr_decay=0.05), lambda ps: _HostCounter(ps, 0.1)],
                         ids=["adagrad", "host_counter"])
def test_a_captured_step_with_a_decaying_rate_replays_it_or_is_refused(dev, make):
    """A replay never uses the recorded call's decayed rate forever: Adagrad's
    step counters (CPU tensors in eager) live on the device, so its replays
    read the rate each step; an optimizer that keeps a counter in a host
    tensor and reads it as a Python number is refused."""
    results = []
    for d in ("cpu", dev):
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 1).to(d)
        opt = make(model.parameters())

        def step(x):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()

        fn = ltorch.capture(step) if d != "cpu" else step
        g = torch.Generator().manual_seed(1)
        for _ in range(8):
            fn(torch.randn(4, 8, generator=g).to(d))
            if d != "cpu":
                ltorch.mark_step()
        results.append([p.detach().cpu().numpy() for p in model.parameters()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    if isinstance(opt, O.Adagrad):
        assert fn.replays >= 5, (fn.traces, fn.why)
    else:
        assert fn.replays == 0 and "host tensors" in fn.why


def test_a_step_traced_under_cprofile_is_refused_not_broken(dev):
    """cProfile's profiler is C: the Python reads a capture guards cannot be
    watched next to it, so the step is traced per op (before, chaining it
    raised TypeError from inside the step) and the profile still counts."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    profile.enable()
    try:
        replayed, opt, _ = _train(dev, lambda ps: O.Adam(ps, lr=0.01))
    finally:
        profile.disable()
    with override(replay_optimizer=False):
        traced = _train(dev, lambda ps: O.Adam(ps, lr=0.01))[0]
    for a, b in zip(traced, replayed):
        np.testing.assert_array_equal(a, b)
    assert _replayed(opt) == (0, "a profiler (cProfile) was running: the Python state the step reads could not be "
                                 "watched")
    assert pstats.Stats(profile).total_calls > 1000
