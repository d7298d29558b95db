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


class _OneCycleWithDecay(torch.optim.lr_scheduler.OneCycleLR):
    """OneCycleLR that sets the weight decay too, as a user's schedule may."""

    def step(self, *args, **kwargs):
        super().step(*args, **kwargs)
        for group in self.optimizer.param_groups:
            group["weight_decay"] = 1e-3 * self.last_epoch


def _sgd_train(dev, captured, steps=6):
    """SGD with momentum, whose learning rate, momentum and weight decay a
    scheduler sets, stepped inside the step (the rate and the momentum are
    program inputs; the weight decay is a Python number SGD reads)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = _OneCycleWithDecay(opt, max_lr=0.5, total_steps=20)

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


class _Cfg:
    def __init__(self, scale):
        self.scale = scale


class _Slotted:
    __slots__ = ("scale", "__weakref__")

    def __init__(self, scale):
        self.scale = scale


class _ClassLevel:
    scale = 2.0


def _calls(fn, dev, change, n=4):
    """``fn`` called ``n`` times (recorded, then replayed), then after
    ``change()``: the last result, as a list. The last of the ``n`` calls
    replayed, and the call after the change traced."""
    x = torch.ones(2, device=dev)
    for _ in range(n):
        replays = fn.replays
        fn(x)
        ltorch.mark_step()
    assert fn.replays == replays + 1, fn.why
    change()
    traces = fn.traces
    out = fn(x)
    ltorch.mark_step()
    assert fn.traces == traces + 1
    return out.cpu().tolist()


_CFG = _Cfg(2.0)
_HOLDER = _Cfg(_Cfg(2.0))
_SLOTTED = _Slotted(2.0)


def _inner(c):
    return c.scale


def _step_through_a_local_and_a_helper(x):
    c = _CFG
    return x * _inner(c)


def _step_reading_a_global_object(x):
    return x * _CFG.scale


def _step_through_a_chain(x):
    return x * _HOLDER.scale.scale


def _step_through_slots(x):
    s = _SLOTTED
    return x * s.scale


def _set(obj, name, value):
    return lambda: setattr(obj, name, value)


def _patterns():
    """(step, the change after recording, restore)"""
    return {
        "local-in-helper": (_step_through_a_local_and_a_helper, _set(_CFG, "scale", 100.0), _set(_CFG, "scale", 2.0)),
        "global-object": (_step_reading_a_global_object, _set(_CFG, "scale", 100.0), _set(_CFG, "scale", 2.0)),
        "chain-value": (_step_through_a_chain, _set(_HOLDER.scale, "scale", 100.0),
                        _set(_HOLDER.scale, "scale", 2.0)),
        "chain-link-replaced": (_step_through_a_chain, _set(_HOLDER, "scale", _Cfg(100.0)),
                                _set(_HOLDER, "scale", _Cfg(2.0))),
        "slots": (_step_through_slots, _set(_SLOTTED, "scale", 100.0), _set(_SLOTTED, "scale", 2.0)),
    }


@pytest.mark.parametrize("pattern", sorted(_patterns()))
def test_an_attribute_reached_through_locals_helpers_and_chains_is_guarded(dev, pattern):
    """The issue's pattern (``c = cfg; inner(c)`` reading ``c.scale``) and its
    kin: a changed value retraces, it is not replayed stale."""
    fn, change, restore = _patterns()[pattern]
    step = ltorch.capture(fn)
    try:
        got = _calls(step, dev, change)
        assert got == fn(torch.ones(2)).tolist() == [100.0, 100.0]
    finally:
        restore()


def test_an_attribute_of_an_object_in_a_closure_cell_is_guarded(dev):
    cfg = _Cfg(2.0)

    def helper():
        return cfg

    @ltorch.capture
    def step(x):
        c = helper()
        return x * c.scale

    got = _calls(step, dev, _set(cfg, "scale", 100.0))
    assert got == [100.0, 100.0]


def test_a_class_attribute_read_through_an_instance_is_guarded(dev):
    obj = _ClassLevel()

    @ltorch.capture
    def step(x):
        o = obj
        return x * o.scale

    try:
        got = _calls(step, dev, _set(_ClassLevel, "scale", 100.0))
    finally:
        _ClassLevel.scale = 2.0
    assert got == [100.0, 100.0]


def test_an_instance_attribute_shadowing_the_class_one_later_is_seen(dev):
    obj = _ClassLevel()

    @ltorch.capture
    def step(x):
        o = obj
        return x * o.scale

    got = _calls(step, dev, _set(obj, "scale", 100.0))
    assert got == [100.0, 100.0]


def test_an_attribute_of_a_hashable_argument_object_is_guarded(dev):
    cfg = _Cfg(2.0)

    @ltorch.capture
    def step(x, c):
        return x * c.scale

    x = torch.ones(2, device=dev)
    for _ in range(4):
        step(x, cfg)
        ltorch.mark_step()
    assert step.replays >= 1
    cfg.scale = 100.0
    traces = step.traces
    assert step(x, cfg).cpu().tolist() == [100.0, 100.0]
    assert step.traces == traces + 1


def test_unchanged_attribute_reads_and_objects_the_step_makes_keep_replaying(dev):
    """Guards on objects made inside the step (gone after it) pass, and
    attributes that do not change cost no retrace."""

    class Batch:
        def __init__(self, x):
            self.x = x
            self.k = 3.0

    @ltorch.capture
    def step(x):
        b = Batch(x)
        return b.x * b.k * _CFG.scale

    x = torch.ones(2, device=dev)
    for _ in range(7):
        out = step(x)
        ltorch.mark_step()
    assert out.cpu().tolist() == [6.0, 6.0]
    assert step.traces <= 3 and step.replays == 7 - step.traces, step.why


def test_attribute_guards_under_a_tracer_already_running_and_the_tracer_keeps_its_events(dev):
    """A debugger or coverage (``sys.settrace``) before the call: the reads are
    still watched, and the tracer still gets its line events."""
    import sys

    lines = []

    def tracer(frame, event, arg):
        if frame.f_code is _step_through_a_local_and_a_helper.__code__ and event == "line":
            lines.append(frame.f_lineno)
        return tracer

    step = ltorch.capture(_step_through_a_local_and_a_helper)
    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        got = _calls(step, dev, _set(_CFG, "scale", 100.0))
    finally:
        sys.settrace(old)
        _CFG.scale = 2.0
    assert got == [100.0, 100.0]
    assert lines  # (the traced calls ran the step's lines under the tracer)


_LIBRARY = """
import torch


class Scaled(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config

    def forward(self, x):
        return x * self.config.scale
"""


class _Config:
    def __init__(self, scale):
        self.scale = scale


def test_a_config_library_code_reads_at_every_call_is_guarded(dev):
    """Library code (here compiled as ``<library>``, which capture does not
    watch, as an installed package's) reading its module's config at every
    call (transformers' ``self.config.output_hidden_states``): a change after
    recording traces again."""
    space = {}
    exec(compile(_LIBRARY, "<library>", "exec"), space)
    config = _Config(2.0)
    model = space["Scaled"](config)

    @ltorch.capture
    def step(x):
        return model(x)

    got = _calls(step, dev, _set(config, "scale", 100.0))
    assert got == model(torch.ones(2)).tolist() == [100.0, 100.0]


def test_an_attribute_of_a_closed_over_object_and_of_a_class_is_guarded(dev):
    cfg = _Cfg(2.0)

    @ltorch.capture
    def through_a_cell(x):
        return x * cfg.scale

    @ltorch.capture
    def on_the_class(x):
        return x * _ClassLevel.scale

    assert _calls(through_a_cell, dev, _set(cfg, "scale", 100.0)) == [100.0, 100.0]
    try:
        assert _calls(on_the_class, dev, _set(_ClassLevel, "scale", 100.0)) == [100.0, 100.0]
    finally:
        _ClassLevel.scale = 2.0


_SCALES = [2.0]


def test_a_list_changed_in_place_is_not_taken_as_unchanged_by_its_identity(dev):
    """Guards skip taking a snapshot again for the very object they read when
    it is immutable (a number, a tuple of numbers); a list is the same object
    after an in-place change, and is compared by value."""

    @ltorch.capture
    def step(x):
        return x * _SCALES[0]

    try:
        assert _calls(step, dev, lambda: _SCALES.__setitem__(0, 100.0)) == [100.0, 100.0]
    finally:
        _SCALES[0] = 2.0


def test_a_momentum_leaving_and_reaching_zero_is_named_in_why_and_the_warning(dev):
    """SGD's momentum is a program input while it is not 0 and a guarded
    number at 0, so the two calls' guarded hyperparameters differ in length:
    compared by position, the reason named the ones after it (maximize,
    foreach, differentiable) though they never changed."""
    import warnings

    from lazycore.trace.capture import CaptureWarning

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.0)

    @ltorch.capture
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    whys = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CaptureWarning)
        for i, (x, y) in enumerate(_batches(9)):
            opt.param_groups[0]["momentum"] = 0.9 if i % 2 else 0.0
            step(x.to(dev), y.to(dev))
            ltorch.mark_step()
            whys.append(step.why)
    told = [str(w.message) for w in caught if issubclass(w.category, CaptureWarning)]
    assert len(told) == 1, told
    # (from the fourth call each recorded call is refused for this reason; a call after a
    # plain one, once it stopped recording, has nothing to be compared with: None)
    named = [why for why in whys[3:] if why is not None]
    assert len(named) >= 4, whys
    for why in named + told:
        assert "momentum changed between calls" in why, why
        assert not any(k in why for k in ("maximize", "foreach", "differentiable", "fused", "dampening")), why
    assert "between 0.0 and a value its program reads" in named[-1], named[-1]
