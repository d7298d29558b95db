"""lazycore.torch.capture: a step traced twice, then replayed, computes what the
traced step computes, compiles nothing more, and traces again whenever what it
guards changes or the step does something a replay could not redo."""

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import lazycore
import lazycore.torch as ltorch
from _bits import BY_HAND  # (tests/ is on the path)
from lazycore.observe import metrics
from lazycore.trace.capture import CaptureWarning


def _model(dropout=0.0):
    torch.manual_seed(0)
    layers = [torch.nn.Linear(8, 16), torch.nn.ReLU()]
    if dropout:
        layers.append(torch.nn.Dropout(dropout))
    layers.append(torch.nn.Linear(16, 4))
    return torch.nn.Sequential(*layers)


def _batches(n=3, batch=5):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(batch, 8, generator=g), torch.randint(0, 4, (batch,), generator=g)) for _ in range(n)]


def _train(dev, captured, steps=10, make_opt=lambda ps: torch.optim.SGD(ps, lr=0.1), dropout=0.0, before=None,
           batches=None, stash=None):
    """Train from the same start, traced or captured; (losses, params, grads, the step)."""
    ltorch.manual_seed(0)
    model = _model(dropout).to(dev)
    opt = make_opt(model.parameters())
    batches = batches or _batches()

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if stash is not None:
            stash.append(loss.detach())
        return {"loss": loss, "tag": "train"}

    fn = ltorch.capture(step) if captured else step
    losses = []
    for i in range(steps):
        if before is not None:
            before(i, model, opt)
        x, y = batches[i % len(batches)]
        out = fn(x.to(dev), y.to(dev))
        assert out["tag"] == "train"
        ltorch.mark_step()
        losses.append(float(out["loss"].detach().cpu()))
    params = [p.detach().cpu().numpy() for p in model.parameters()]
    grads = [p.grad.cpu().numpy() for p in model.parameters()]
    return losses, params, grads, fn


def _same(a, b):
    assert a[0] == b[0]  # bitwise: a replay makes the traced step's very program
    for u, v in zip(a[1] + a[2], b[1] + b[2]):
        np.testing.assert_array_equal(u, v)


def test_a_replayed_training_step_equals_the_traced_one_and_compiles_nothing_new(dev):
    lazycore.cache.clear()
    metrics.reset()
    traced = _train(dev, False)
    compiles = metrics.counters()["compiles"]
    lazycore.cache.clear()
    metrics.reset()
    captured = _train(dev, True)
    _same(traced, captured)
    fn = captured[3]
    assert (fn.traces, fn.replays, fn.why) == (2, 8, None)  # replays from the third call
    assert metrics.counters()["compiles"] == compiles  # the traced step's programs, and no other


def test_a_replay_dispatches_no_op(dev, monkeypatch):
    *_, fn = _train(dev, True, steps=4)
    from lazycore.frontends.torch import dispatch

    calls = []
    real = dispatch.run
    x, y = (t.to(dev) for t in _batches()[0])
    monkeypatch.setattr("lazycore.frontends.torch.tensor._dispatch", lambda *a: calls.append(a) or real(*a))
    model_out = fn(x, y)
    ltorch.mark_step()
    assert fn.replays == 3 and calls == []
    assert model_out["loss"].requires_grad is False  # a replayed result has no autograd history


# CI: test_real_optimizers_replay_...[sgd-nesterov] takes the same path (SGD's buffers made at the first call, then replays)
@BY_HAND
def test_optimizer_state_made_on_the_first_step_then_replays(dev):
    mom = lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)  # noqa: E731
    traced, captured = _train(dev, False, make_opt=mom), _train(dev, True, make_opt=mom)
    _same(traced, captured)
    assert captured[3].replays == 8


_OPTIMIZERS = {
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.01),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01),
    "sgd-nesterov": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4),
    "rmsprop": lambda ps: torch.optim.RMSprop(ps, lr=0.01, momentum=0.5),
    "nadam": lambda ps: torch.optim.NAdam(ps, lr=0.01),
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n in ("adamw", "sgd-nesterov") else BY_HAND)
                                  for n in sorted(_OPTIMIZERS)])  # each optimizer's step: test_optimizer_replay.py
def test_real_optimizers_replay_from_the_third_call_and_match_eager(dev, name):
    """The lazy device is capturable: step counters and bias corrections live
    on it, so Adam's step is one graph every call (the first call makes the
    optimizer state and stands in for the confirming trace of the second)."""
    make = _OPTIMIZERS[name]
    traced, captured = _train(dev, False, make_opt=make), _train(dev, True, make_opt=make)
    _same(traced, captured)
    fn = captured[3]
    assert (fn.traces, fn.replays) == (2, 8), fn.why
    eager = _train(torch.device("cpu"), False, make_opt=make)
    np.testing.assert_allclose(captured[0], eager[0], rtol=1e-5)
    for u, v in zip(captured[1], eager[1]):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)


def test_an_optimizer_over_lazy_parameters_is_made_capturable(dev):
    model = _model().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    assert opt.param_groups[0]["capturable"] is False
    model(torch.randn(2, 8).to(dev)).sum().backward()
    opt.step()
    assert opt.param_groups[0]["capturable"] is True
    assert all(s["step"].device == dev for s in opt.state.values())
    cpu = torch.optim.Adam(_model().parameters(), lr=0.01)
    cpu.step()  # a CPU optimizer is left as it is
    assert cpu.param_groups[0]["capturable"] is False


def test_a_python_number_that_changes_every_call_never_replays(dev):
    scale = [1.0]

    def bump(i, model, opt):
        scale[0] = 1.0 + 0.5 * i

    ltorch.manual_seed(0)
    model = _model().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    @ltorch.capture
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y) * scale[0]
        loss.backward()
        opt.step()
        return loss

    for i, (x, y) in enumerate(_batches(6)):
        bump(i, model, opt)
        step(x.to(dev), y.to(dev))
        ltorch.mark_step()
    assert step.replays == 0 and "closed-over 'scale'" in step.why and "changed between calls" in step.why


def test_a_number_library_code_computes_differently_in_the_first_two_calls_is_not_trusted(dev):
    """No guard sees a number made behind a call (here ``next`` of a counter);
    the first call stands in for a confirming trace only when the second
    baked the numbers it baked, so this step traces every call and stays eager's."""
    import itertools

    results = {}
    for device in (torch.device("cpu"), dev):
        counter = itertools.count(1)
        torch.manual_seed(0)
        model = _model().to(device)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y) * next(counter)
            loss.backward()
            opt.step()
            return loss.detach()

        fn = ltorch.capture(step) if device == dev else step
        losses = []
        for x, y in _batches(5):
            losses.append(float(fn(x.to(device), y.to(device)).cpu()))
            if device == dev:
                ltorch.mark_step()
        results[device.type] = (losses, fn)
    losses, fn = results["lazy"]
    np.testing.assert_allclose(losses, results["cpu"][0], rtol=1e-5)
    assert fn.replays == 0 and "differed" in fn.why, fn.why


class _Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _model()
        self.inner[1] = torch.nn.LeakyReLU(0.01)
        self.scale = 1.0

    def forward(self, x):
        return self.inner(x) * self.scale * _GLOBAL_SCALE


_GLOBAL_SCALE = 1.0


@pytest.mark.parametrize("where", ["closure", "global", "attribute", "torch module attribute"])
def test_a_python_value_changed_after_recording_retraces_instead_of_replaying_stale(dev, where):
    """torch.compile's guards on what the step read: a closed-over number, a
    module global, an attribute of a user module; checked before a replay."""
    global _GLOBAL_SCALE
    results = {}
    for device in (torch.device("cpu"), dev):
        torch.manual_seed(0)
        model = _Scaled().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        closed = 1.0

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y) * closed
            loss.backward()
            opt.step()
            return loss.detach()

        fn = ltorch.capture(step) if device == dev else step
        losses = []
        _GLOBAL_SCALE = 1.0
        try:
            for i, (x, y) in enumerate(_batches(10)):
                if i == 6:  # after the recording replayed four times
                    before = fn.replays if device == dev else None
                    if where == "closure":
                        closed = 3.0
                    elif where == "global":
                        _GLOBAL_SCALE = 0.5
                    elif where == "attribute":
                        model.scale = 2.0
                    else:  # read by torch's own code: LeakyReLU.forward reads self.negative_slope
                        model.inner[1].negative_slope = 0.5
                losses.append(float(fn(x.to(device), y.to(device)).cpu()))
                if device == dev:
                    ltorch.mark_step()
        finally:
            _GLOBAL_SCALE = 1.0
        results[device.type] = (losses, fn, before)
    losses, fn, before = results["lazy"]
    np.testing.assert_allclose(losses, results["cpu"][0], rtol=1e-5)  # never the old value
    assert before == 4 and fn.replays > before  # the new value is recorded and replays in its turn


def test_a_new_learning_rate_from_a_scheduler_is_an_input_of_the_replay(dev):
    """SGD's learning rate is a device value the program reads (as Adam's):
    a new one replays, with the new rate."""
    def schedule(i, model, opt):
        if i == 6:
            opt.param_groups[0]["lr"] = 0.05

    traced, captured = _train(dev, False, before=schedule), _train(dev, True, before=schedule)
    _same(traced, captured)
    assert captured[3].traces == 2 and captured[3].why is None  # (the first step finds the parameters)


def test_a_new_hyperparameter_the_program_bakes_traces_again(dev):
    def schedule(i, model, opt):
        if i == 6:
            opt.param_groups[0]["weight_decay"] = 0.01

    traced, captured = _train(dev, False, before=schedule), _train(dev, True, before=schedule)
    _same(traced, captured)
    assert captured[3].traces == 4  # 2 before the change (the first step finds the parameters), 2 after


def test_train_and_eval_mode_each_keep_a_recording(dev):
    def mode(i, model, opt):
        model.train(i % 4 != 3)

    traced = _train(dev, False, steps=16, dropout=0.3, before=mode)
    captured = _train(dev, True, steps=16, dropout=0.3, before=mode)
    _same(traced, captured)  # dropout draws the same numbers: the RNG state is updated by the replay
    assert captured[3].replays >= 8


def test_reseeding_between_replays_draws_the_new_seeds_stream(dev):
    # the generator's state stays one object, given the new seed's words: the
    # step keeps replaying and draws what the traced step draws after the seed
    def reseed(i, model, opt):
        if i == 7:
            ltorch.manual_seed(5)

    traced = _train(dev, False, dropout=0.3, before=reseed)
    captured = _train(dev, True, dropout=0.3, before=reseed)
    _same(traced, captured)
    assert captured[3].traces == 2 and captured[3].replays == 8


def test_new_batch_sizes_record_once_each(dev):
    sizes = [_batches(1, b)[0] for b in (5, 7, 9)]
    traced = _train(dev, False, steps=18, batches=sizes)
    captured = _train(dev, True, steps=18, batches=sizes)
    _same(traced, captured)
    # twice each: the first size's first call finds the parameters and stands in for the confirming trace
    assert captured[3].traces == 6 and captured[3].replays == 12


def test_a_tensor_kept_outside_the_step_is_refused_and_traced(dev):
    kept_t, kept_c = [], []
    traced = _train(dev, False, stash=kept_t)
    captured = _train(dev, True, stash=kept_c)
    _same(traced, captured)
    fn = captured[3]
    assert fn.replays == 0 and "keeps 1 tensor" in fn.why
    assert len(kept_c) == 10


def test_a_step_that_looks_at_a_value_is_refused(dev):
    model = _model().to(dev)
    seen = []

    @ltorch.capture
    def step(x):
        y = model(x).sum()
        seen.append(y.item())  # a barrier inside the step
        return y

    x = torch.ones(2, 8).to(dev)
    for _ in range(4):
        step(x)
    assert step.replays == 0 and "barrier" in step.why and len(seen) == 4


def test_a_step_that_uploads_host_data_is_refused(dev):
    @ltorch.capture
    def step(x):
        return x + torch.tensor([1.0, 2.0]).to(dev)

    x = torch.ones(2).to(dev)
    for _ in range(4):
        out = step(x)
    assert step.replays == 0 and "host data" in step.why
    np.testing.assert_array_equal(out.cpu().numpy(), [2.0, 3.0])


def test_a_result_whose_backward_is_not_in_the_step_is_refused(dev):
    model = _model().to(dev)
    fwd = ltorch.capture(lambda x: model(x).sum())
    x = torch.ones(2, 8).to(dev)
    for _ in range(4):
        loss = fwd(x)
        loss.backward()  # needs the autograd graph a replay would not have
    assert fwd.replays == 0 and "autograd history" in fwd.why


def test_in_place_updates_of_arguments_and_views_replay(dev):
    @ltorch.capture
    def step(acc, x, scale):
        acc.t().mul_(scale)  # through a view: reaches acc itself
        acc.add_(x)
        return acc[0], x.sum()

    a_t, a_c = torch.zeros(3, 3), torch.zeros(3, 3).to(dev)
    for i in range(6):
        x = torch.full((3, 3), float(i)) + torch.eye(3)
        row_t, s_t = a_t[0], None
        a_t.t().mul_(0.5)
        a_t.add_(x)
        row_c, s_c = step(a_c, x.to(dev), 0.5)
        ltorch.mark_step()
        np.testing.assert_array_equal(a_c.cpu().numpy(), a_t.numpy())
        np.testing.assert_array_equal(row_c.cpu().numpy(), a_t[0].numpy())
        assert float(s_c.cpu()) == float(x.sum())
    # from the third call: the first call's constants (made) and the second's (found
    # made) are the same values, keyed as such
    assert step.replays == 4
    row_c[1] = 42.0  # the returned row is still a view of the argument
    assert float(a_c[0, 1].cpu()) == 42.0


def test_a_guard_that_fails_changes_nothing(dev):
    model = _model().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    @ltorch.capture
    def step(x):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()

    x = torch.ones(2, 8).to(dev)
    for _ in range(4):
        step(x)
        ltorch.mark_step()
    assert step.replays == 2
    before = [p.detach().cpu().numpy() for p in model.parameters()]
    model[0].weight.requires_grad_(False)  # a guard: the next call traces
    step(x)
    ltorch.mark_step()
    assert step.replays == 2 and model[0].weight.grad is None  # zero_grad dropped it, backward skipped it
    after = [p.detach().cpu().numpy() for p in model.parameters()]
    np.testing.assert_array_equal(after[0], before[0])  # frozen: traced, not replayed
    assert not np.array_equal(after[2], before[2])


def test_bad_arguments_raise_eager_errors_at_the_call(dev):
    model = _model().to(dev)
    fwd = ltorch.capture(lambda x: model(x).detach())
    for _ in range(4):
        fwd(torch.ones(2, 8).to(dev))
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied \\(2x9 and 8x16\\)"):  # eager's message
        fwd(torch.ones(2, 9).to(dev))
    assert fwd.replays == 2


def test_lazycore_debug_says_what_capture_decided(dev, capsys):
    from lazycore.observe import debug
    from lazycore.ir.config import override

    def schedule(i, model, opt):
        if i == 5:
            opt.param_groups[0]["weight_decay"] = 0.01  # (a new lr is an input: no new trace)

    debug.reset()
    with override(debug=1):
        _train(dev, True, steps=6, before=schedule)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "capture" in ln]
    assert lines[0].startswith("[lazycore] capture _train.<locals>.step: recorded (")
    assert lines[1] == ("[lazycore] capture _train.<locals>.step: traced again: "
                        "an optimizer's hyperparameters or state tensors changed")


_SCHEDULERS = {
    "lambda": lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1.0 + 0.1 * s)),
    "cosine": lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5),
    "onecycle": lambda opt: torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=20,
                                                                cycle_momentum=False),
    "sequential": lambda opt: torch.optim.lr_scheduler.SequentialLR(
        opt, [torch.optim.lr_scheduler.LinearLR(opt, 0.1, total_iters=3),
              torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)], milestones=[3]),
}


def _adamw_train(dev, captured, *, tensor_lr=False, accumulate=1, steps=8, schedule="lambda", inside=False,
                 extra=None):
    """AdamW, clip_grad_norm_, a learning-rate scheduler stepped outside the
    step (or ``inside`` it, after the optimizer), and ``accumulate``
    micro-batches per step; (losses, params, the step)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                torch.nn.Linear(16, 4)).to(dev)
    lr = torch.tensor(3e-3, device=dev) if tensor_lr else 3e-3
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = _SCHEDULERS[schedule](opt)

    def step(*batches):
        opt.zero_grad()
        total = 0.0
        for x, y in zip(batches[::2], batches[1::2]):
            loss = F.cross_entropy(model(x), y) / accumulate
            loss.backward()
            total = total + loss.detach()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if extra is not None:
            extra(opt, sched)
        opt.step()
        if inside:
            sched.step()
        return total

    fn = ltorch.capture(step) if captured else step
    data = _batches(steps * accumulate)
    losses = []
    for i in range(steps):
        flat = [t.to(dev) for xy in data[i * accumulate:(i + 1) * accumulate] for t in xy]
        loss = fn(*flat)
        if not inside:
            sched.step()
        if dev.type == "lazy":
            ltorch.mark_step()
        losses.append(float(loss.cpu()))
    return losses, [p.detach().cpu().numpy() for p in model.parameters()], fn


def _close_to_eager(got, eager):
    np.testing.assert_allclose(got[0], eager[0], rtol=1e-5)
    for u, v in zip(got[1], eager[1]):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("tensor_lr,accumulate", [
    pytest.param(False, 1, id="False-1"), pytest.param(False, 3, id="False-3", marks=BY_HAND),
    pytest.param(True, 1, id="True-1", marks=BY_HAND), pytest.param(True, 3, id="True-3")])
def test_adamw_with_clipping_accumulation_and_a_scheduler_replays(dev, accumulate, tensor_lr):
    """The learning rate a scheduler sets is an input of the program (a float
    one is swapped for a device value while the optimizer steps)."""
    eager = _adamw_train(torch.device("cpu"), False, tensor_lr=tensor_lr, accumulate=accumulate)
    got = _adamw_train(dev, True, tensor_lr=tensor_lr, accumulate=accumulate)
    assert (got[2].traces, got[2].replays) == (2, 6), got[2].why
    _close_to_eager(got, eager)


@pytest.mark.parametrize("schedule", sorted(_SCHEDULERS))
def test_a_scheduler_stepped_inside_the_step_is_stepped_again_by_each_replay(dev, schedule):
    eager = _adamw_train(torch.device("cpu"), False, schedule=schedule, inside=True, steps=10)
    got = _adamw_train(dev, True, schedule=schedule, inside=True, steps=10)
    assert (got[2].traces, got[2].replays) == (2, 8), got[2].why
    _close_to_eager(got, eager)


def test_two_traced_calls_that_differ_otherwise_than_by_a_number_say_where(dev):
    """Two traced calls that made different recordings name the part that
    differed: arguments aliased in one call and not in the other are no
    Python number changing (the catch-all reason, left for a graph whose
    nodes or constants differ)."""
    @ltorch.capture
    def step(a, b):
        return a * 2 + b

    x, y = torch.ones(3).to(dev), torch.full((3,), 3.0).to(dev)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CaptureWarning)  # (three refusals in a row: said once)
        for i in range(4):
            out = step(x, x if i % 2 else y)
            np.testing.assert_allclose(out.cpu().numpy(), np.full(3, 3.0 if i % 2 else 5.0))
    assert step.replays == 0
    assert "alias" in step.why and "Python number" not in step.why, step.why


def test_a_scheduler_given_the_loss_inside_the_step_says_to_step_it_outside(dev):
    """ReduceLROnPlateau.step(loss) reads the loss as a Python number, as eager
    does: inside a captured step that is a barrier, so every call is traced,
    with eager's values, and the reason says how to make it replay (stepped
    after the step with the loss it returns, the rate it sets is an input:
    tests/torch/test_optim_schedulers_replay.py)."""
    def train(dev, captured):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0, threshold=0.1)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            sched.step(loss)
            return loss.detach()

        fn = ltorch.capture(step) if captured else step
        losses, rates = [], []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CaptureWarning)  # (three refusals in a row: said once)
            for x, y in _batches(6):
                losses.append(float(fn(x.to(dev), y.to(dev)).cpu()))
                rates.append(opt.param_groups[0]["lr"])
        return losses, [p.detach().cpu().numpy() for p in model.parameters()], fn, rates

    eager = train(torch.device("cpu"), False)
    got = train(dev, True)
    assert got[2].replays == 0
    assert "barrier" in got[2].why and "ReduceLROnPlateau.step was given a tensor" in got[2].why, got[2].why
    assert "scheduler.step(loss)" in got[2].why
    assert got[3] == eager[3] and len(set(eager[3])) > 1  # (the rate halves within the run, as eager's)
    _close_to_eager(got, eager)


def test_a_learning_rate_set_by_hand_inside_the_step_is_never_replayed_stale(dev):
    def halve(opt, sched):
        opt.param_groups[0]["lr"] *= 0.5

    eager = _adamw_train(torch.device("cpu"), False, extra=halve)
    got = _adamw_train(dev, True, extra=halve)
    assert got[2].replays == 0 and "other than by stepping a scheduler" in got[2].why
    _close_to_eager(got, eager)


def test_a_scheduler_stepped_before_the_optimizer_is_refused(dev):
    got = _adamw_train(dev, True, extra=lambda opt, sched: sched.step())
    assert got[2].replays == 0 and "before its optimizer" in got[2].why


def test_momentum_cycled_by_one_cycle_is_an_input_and_replays(dev):
    """OneCycleLR's default also cycles Adam's beta1: like the learning rate,
    a device value the program reads (tests/torch/test_capture_guards.py)."""
    _SCHEDULERS["onecycle-momentum"] = lambda opt: torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2,
                                                                                        total_steps=20)
    try:
        eager = _adamw_train(torch.device("cpu"), False, schedule="onecycle-momentum")
        got = _adamw_train(dev, True, schedule="onecycle-momentum")
    finally:
        del _SCHEDULERS["onecycle-momentum"]
    assert (got[2].traces, got[2].replays) == (2, 6), got[2].why
    _close_to_eager(got, eager)


def test_a_replay_is_one_call_node_and_the_barrier_walks_it(dev):
    """A replayed step is one ``call`` node over its inputs: the barrier's graph
    is that node and the leaves, not the step's ops; the values are the traced
    step's, bitwise."""
    lazycore.cache.clear()
    metrics.reset()
    traced = _train(dev, False)
    metrics.reset()
    captured = _train(dev, True)
    _same(traced, captured)
    steady = metrics.graph_sizes()[2:10]  # the replays' barriers
    assert len(steady) == 8 and all(nodes <= 1 + params for nodes, _, params in steady), steady


def test_with_calls_off_a_replay_makes_the_traced_nodes_and_compiles_nothing_new(dev):
    with lazycore.config.override(capture_calls=False):
        lazycore.cache.clear()
        metrics.reset()
        traced = _train(dev, False)
        compiles = metrics.counters()["compiles"]
        metrics.reset()
        captured = _train(dev, True)
        _same(traced, captured)
        assert captured[3].replays == 8
        assert metrics.counters()["compiles"] == 0  # every program the traced run's
        assert compiles > 0


def test_an_empty_tensor_made_inside_the_step_uploads_nothing_and_replays(dev):
    """transformers' key-value cache starts as ``torch.tensor([], device=...)``
    in every forward: nothing to copy, so no upload refuses the capture."""
    def body(x):
        empty = torch.tensor([], device=x.device)
        return torch.cat([empty, (x * 2).flatten()]).sum(), torch.zeros(0, 3, dtype=torch.int64).to(x.device)

    step = ltorch.capture(body)
    x = torch.ones(2, 8).to(dev)
    got = [step(x) for _ in range(6)]
    # (a new place's numbers settle within the first three calls: see the scalar policy)
    assert step.replays >= 3 and step.why is None, (step.traces, step.why)
    want = body(x)
    for total, empty in got:
        assert total.item() == want[0].item()
        assert empty.shape == (0, 3) and empty.dtype == torch.int64


def test_a_loss_module_made_inside_the_step_is_no_guard(dev):
    """transformers' BertForMaskedLM makes a ``CrossEntropyLoss()`` each call:
    a module the step makes and drops is its own code, and its being gone at
    the next call says nothing about the replay."""
    model = _model().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def body(x, y):
        opt.zero_grad()
        loss = torch.nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = ltorch.capture(body)
    losses = [step(x.to(dev), y.to(dev)).item() for x, y in _batches(n=6)]
    assert step.replays >= 3 and step.why is None, (step.traces, step.why)
    ref = _model()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for (x, y), got in zip(_batches(n=6), losses):
        ref_opt.zero_grad()
        loss = torch.nn.CrossEntropyLoss()(ref(x), y)
        loss.backward()
        ref_opt.step()
        assert abs(loss.item() - got) < 1e-5
