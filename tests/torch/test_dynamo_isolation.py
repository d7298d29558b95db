"""What torch.compile(backend="lazycore") does in a process leaves the lazy
device's traced and captured steps as they were (issue 41, benchmark 7): its
first graph registers the lowering of ``prims.fma`` (an op torch._inductor
makes), and a registry change used to drop every recorded lowering, so the
next traced step made its constants anew and the captured halves of
``clip_grad_norm_`` saw two traced calls differ, stopped recording with a
CaptureWarning, and the step compiled programs again after warm-up."""

import warnings

import torch
import torch.nn.functional as F

from _bits import BY_HAND
from isolated import run_isolated


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))


def _runner(model, batches, after=None, wrap=None):
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss

    if wrap is not None:
        step = wrap(step)
    it = [0]

    def one():
        x, y = batches[it[0] % len(batches)]
        it[0] += 1
        out = step(x, y)
        if after is not None:
            after()
        return out

    return one


def traced_steps_after_the_dynamo_backend():
    """The body run in a fresh process: the backend's first graph comes after
    the lazy device traced and captured steps, as in benchmark 7."""
    import lazycore
    import lazycore.torch as ltorch
    from lazycore.observe import metrics
    from lazycore.trace.capture import CaptureWarning

    warnings.simplefilter("error", category=CaptureWarning)
    dev = ltorch.device()
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(16, 8, generator=g), torch.randint(0, 4, (16,), generator=g)) for _ in range(4)]
    lazy = [(x.to(dev), y.to(dev)) for x, y in data]
    waiting = _runner(_mlp().to(dev), lazy, after=lambda: ltorch.mark_step(wait=True))
    pipelined = _runner(_mlp().to(dev), lazy, after=ltorch.mark_step)
    captured = _runner(_mlp().to(dev), lazy, after=ltorch.mark_step, wrap=ltorch.capture)
    ltorch.mark_step(wait=True)
    lazycore.cache.clear()
    for one in (waiting, pipelined, captured):
        one()
        ltorch.mark_step(wait=True)
    compiled = _runner(_mlp(), data, wrap=lambda s: torch.compile(s, backend="lazycore"))
    compiled()
    clip = torch.nn.utils.clip_grad
    norm, scaling = clip._get_total_norm.replayed, clip._clip_grads_with_norm_.replayed
    compiles, replays = [], []
    for _ in range(8):
        c0, r0 = metrics.counters()["compiles"], (norm.captured.replays, scaling.captured.replays)
        waiting()
        compiles.append(metrics.counters()["compiles"] - c0)
        replays.append((norm.captured.replays - r0[0], scaling.captured.replays - r0[1]))
    assert not norm.stopped and not scaling.stopped, (norm.captured.why, scaling.captured.why)
    # the first call after the others is the step's first steady one; the second
    # confirms the clipping's recordings, which every call after replays
    assert replays[2:] == [(1, 1)] * 6, (replays, norm.captured.why, scaling.captured.why)
    assert compiles[2:] == [0] * 6, compiles


# CI: test_registering_a_lowering_no_call_reached_keeps_the_recorded_ones checks the fix itself
@BY_HAND
def test_the_dynamo_backend_leaves_traced_and_captured_steps_replaying():
    run_isolated(__file__, "traced_steps_after_the_dynamo_backend", timeout=900)


def test_registering_a_lowering_no_call_reached_keeps_the_recorded_ones():
    from lazycore.frontends.torch import dispatch, lowering

    import lazycore.torch as ltorch

    dev = ltorch.device()
    dispatch.forget()  # other tests in this process may have called the op below: start from no calls
    (torch.ones(3, device=dev) * 2.5).cpu()
    recorded = len(dispatch._META)
    assert recorded > 0
    never_called = torch.ops.aten.special_chebyshev_polynomial_t.default
    assert lowering.lookup(never_called) is None
    try:
        lowering.register(never_called, lambda ctx, x, n: NotImplemented)
        assert len(dispatch._META) == recorded, "a lowering for an op no call reached dropped the recordings"
    finally:
        lowering.unregister(never_called)
    assert len(dispatch._META) == recorded
    # one that calls reached is looked up again: what was recorded without it goes
    mul = torch.ops.aten.mul.Tensor
    before = lowering.LOWERINGS.get(mul)
    assert before is not None
    try:
        lowering.register(mul, before)
        assert len(dispatch._META) == 0
    finally:
        lowering.register(mul, before)


def test_two_models_clipped_in_turn_both_replay_their_clipping():
    """clip_grad_norm_'s halves are one captured function each for the process:
    a model's traced calls before its clipping replays must not count against
    another's (a GAN's generator and discriminator, clipped in turn)."""
    import lazycore.torch as ltorch

    dev = ltorch.device()
    clip = torch.nn.utils.clip_grad
    norm, scaling = clip._get_total_norm.replayed, clip._clip_grads_with_norm_.replayed
    steps = []
    for width, (i, o) in ((11, (5, 3)), (13, (6, 2))):  # layouts no other test clips
        torch.manual_seed(width)
        model = torch.nn.Sequential(torch.nn.Linear(i, width), torch.nn.Tanh(), torch.nn.Linear(width, o)).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x = torch.randn(4, i).to(dev)
        steps.append((model, opt, x))
    replays = []
    for _ in range(8):
        for model, opt, x in steps:
            opt.zero_grad()
            model(x).square().mean().backward()
            r0 = norm.captured.replays, scaling.captured.replays
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            replays.append((norm.captured.replays - r0[0], scaling.captured.replays - r0[1]))
            opt.step()
            ltorch.mark_step()
    assert replays[-6:] == [(1, 1)] * 6, replays
