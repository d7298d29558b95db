"""zoo_harness.referee, the float64 referee element by element (issue 39), on
a small network with AdamW: two convolutions whose biases feed batch norms
(gradient 0 in exact arithmetic, so float32's rounding picks the sign of
AdamW's ``lr``-sized first update). A second float32 run that sums in
another order (eager channels-last, or the lazy device) parts from eager
there by several ``lr`` while every other element agrees to 1e-6; the
referee holds those elements (and the running means downstream) to the
float64 run, and still fails on a wrong gradient scale, a wrong later step,
a noise element or buffer moved too far.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

import zoo_harness as zh

NOISY = {"0.bias", "3.bias"}  # the biases before batch norms


def _run(dtype=torch.float32, channels_last=False, device="cpu", hook=None, steps=4):
    """``dict(state, grads, before)`` after ``steps`` AdamW steps; ``hook(model,
    step)`` runs between backward and the optimizer's step."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 5)).to(dtype)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(device=device, memory_format=fmt)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    g = torch.Generator().manual_seed(1)
    each = lambda: None  # noqa: E731
    if device != "cpu":
        import lazycore.torch as ltorch

        each = ltorch.mark_step
    with zh.FirstStepGrads(initial=dtype == torch.float64) as cap:
        for step in range(steps):
            x = torch.randn(4, 3, 12, 12, generator=g).to(dtype).to(device=device, memory_format=fmt)
            y = torch.randint(0, 5, (4,), generator=g).to(device)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            if hook is not None:
                hook(model, step)
            opt.step()
            each()
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    return dict(state=state, grads=cap.grads, before=cap.before)


_CACHE = {}


def _pair():
    """(eager, float64) runs, made once."""
    if not _CACHE:
        _CACHE["eager"], _CACHE["f64"] = _run(), _run(torch.float64)
    return _CACHE["eager"], _CACHE["f64"]


def test_first_step_grads_are_the_model_s_gradients_before_the_first_step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    inner = nn.Linear(2, 2)  # called too, holds none of the optimizer's parameters
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(1))
    with zh.FirstStepGrads(initial=True) as cap:
        for _ in range(2):
            inner(torch.zeros(1, 2))
            loss = model(x).square().sum()
            opt.zero_grad()
            loss.backward()
            if cap.grads is None:
                want = {k: p.grad.double().clone() for k, p in model.named_parameters()}
                before = {k: p.detach().double().clone() for k, p in model.named_parameters()}
            opt.step()
    assert set(cap.grads) == set(want) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    for k in want:
        assert torch.equal(cap.grads[k], want[k]) and torch.equal(cap.before[k], before[k]), k
        assert cap.grads[k].dtype == torch.float64


def test_another_summation_order_is_refereed_at_the_noise_elements_only():
    """Eager channels-last against eager: the plain eager bound fails at the
    biases before batch norms (5.0e-3 at 3.bias), the referee moves exactly
    those to float64 and passes."""
    eager, f64 = _pair()
    other = _run(channels_last=True)
    plain, worst = zh._state_diff(other["state"], eager["state"])
    assert plain > 1e-4 and worst in NOISY, (plain, worst)  # the check the referee replaces fails
    r = zh.referee(other, eager, f64)
    r.check()
    assert r.noise == {"0.bias": (8, 8), "3.bias": (16, 16)}, r.moved()
    assert set(r.buffers) <= {"1.running_mean", "4.running_mean"}, r.buffers
    assert r.state_diff < 1e-5, (r.state_worst, r.state_diff)


def test_lazy_run_is_refereed(dev):
    """The same network on the lazy device: as eager at every element but the
    noise ones, those as near float64 as the rule asks, no gradient off."""
    eager, f64 = _pair()
    lazy = _run(device=dev)
    r = zh.referee(lazy, eager, f64)
    r.check()
    assert set(r.noise) == NOISY, r.moved()


def _scaled(name, scale, steps=range(1)):
    def hook(model, step):
        if step in steps:
            model.get_parameter(name).grad.mul_(scale)

    return hook


def test_a_wrong_gradient_scale_fails_though_the_end_state_hides_it():
    """3.weight's first gradient 0.1% too large: AdamW's update is nearly
    scale invariant, so the end state stays within the eager bound (outside
    the noise elements, whose distances the referee passes too), but the
    first-step gradient check fails at that parameter alone."""
    eager, f64 = _pair()
    bad = _run(hook=_scaled("3.weight", 1.001))
    r = zh.referee(bad, eager, f64)
    assert r.state_diff < 1e-4, (r.state_worst, r.state_diff)  # the end state alone passes it
    assert set(r.grad_bad) == {"3.weight"}, r.grad_bad
    try:
        r.check()
    except AssertionError as e:
        assert "first-step gradients" in str(e)
    else:
        raise AssertionError("a wrong gradient scale passed")


def test_a_wrong_later_step_fails():
    """8.weight's third gradient negated: no first-step gradient is off, the
    end state parts from eager's at a parameter that is not noise."""
    eager, f64 = _pair()
    bad = _run(hook=_scaled("8.weight", -1.0, steps=[2]))
    r = zh.referee(bad, eager, f64)
    assert not r.grad_bad and r.state_worst == "8.weight" and r.state_diff > 1e-4, (r.state_worst, r.state_diff)
    try:
        r.check()
    except AssertionError as e:
        assert "from eager" in str(e)
    else:
        raise AssertionError("a wrong step passed")


def _moved(run, name, delta, index=None):
    state = dict(run["state"])
    state[name] = state[name].clone()
    if index is None:
        state[name] += delta
    else:
        state[name][index] += delta
    return dict(run, state=state)


def test_a_noise_element_or_buffer_too_far_fails():
    """Off eager's answer where the referee decides: one noise element past
    twice the optimizer's reach (1e-2 against float64's largest movement of
    4e-3), every noise element moved 4 lr (the mean), a running mean 5e-3."""
    eager, f64 = _pair()
    other = _run(channels_last=True)
    zh.referee(other, eager, f64).check()
    for bad, what in [(_moved(other, "3.bias", 1e-2, 0), "optimizer's reach"),
                      (_moved(_moved(other, "3.bias", 4e-3), "0.bias", 4e-3), "mean distance"),
                      (_moved(other, "4.running_mean", 5e-3), "buffers")]:
        try:
            zh.referee(bad, eager, f64).check()
        except AssertionError as e:
            assert what in str(e), (what, e)
        else:
            raise AssertionError(f"passed: {what}")
