"""A program's structure after warm-up does not depend on which call
recorded a lowering first (issue 39): Llama's step-3 recompile in small form,
and a schedule reaching lr = 0 (-0.0 as SGD's ``alpha``).

Each case runs in a fresh process (tests/isolated.py) so the recorded
lowerings and the scalar policy's places are empty, as in the zoo's first
model, and compares with eager torch."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _bits import BY_HAND  # noqa: E402
from isolated import run_isolated  # noqa: E402


def _two_signatures(device):
    """Two (6, 4) parameters trained by AdamW: p1's gradient is a plain
    tensor, p2's a transposed view, so ``exp_avg_sq.addcmul_(grad, grad,
    value=1 - beta2)`` reaches one lowering with two call signatures (one
    handle twice for p1; two handles read from the view for p2). Returns the
    compiles per step, the parameters and the optimizer states."""
    import lazycore
    import lazycore.torch as ltorch

    torch.manual_seed(0)
    p1 = torch.nn.Parameter(torch.randn(6, 4).to(device))
    p2 = torch.nn.Parameter(torch.randn(6, 4).to(device))
    opt = torch.optim.AdamW([p1, p2], lr=0.01)
    g1s = [torch.randn(6, 4).to(device) for _ in range(6)]
    g2s = [torch.randn(24).to(device) for _ in range(6)]
    compiles = []
    for g1, g2 in zip(g1s, g2s):
        c0 = lazycore.metrics.counters()["compiles"]
        p1.grad = g1 * 1.0
        p2.grad = (g2 * 1.0).view(6, 4)  # a view of a (24,) tensor: read anew for each use
        opt.step()
        if device != "cpu":
            ltorch.mark_step()
        compiles.append(lazycore.metrics.counters()["compiles"] - c0)
    states = [opt.state[p][k].detach().cpu() for p in (p1, p2) for k in ("exp_avg", "exp_avg_sq")]
    return compiles, [p1.detach().cpu(), p2.detach().cpu()] + states


def _cosine_to_zero(device, kind):
    """A Linear layer trained by SGD or RMSprop under CosineAnnealingLR whose
    lr reaches exactly 0.0 at step 5 (then rises again): compiles per step
    and the parameters."""
    import lazycore
    import lazycore.torch as ltorch

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3).to(device)
    opt = (torch.optim.SGD(model.parameters(), lr=0.1) if kind == "sgd"
           else torch.optim.RMSprop(model.parameters(), lr=0.01))
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    x, y = torch.randn(8, 4).to(device), torch.randn(8, 3).to(device)
    compiles, lrs = [], []
    for _ in range(7):
        c0 = lazycore.metrics.counters()["compiles"]
        lrs.append(opt.param_groups[0]["lr"])
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        sched.step()
        if device != "cpu":
            ltorch.mark_step()
        compiles.append(lazycore.metrics.counters()["compiles"] - c0)
    assert lrs[4] == 0.0, lrs
    return compiles, [p.detach().cpu() for p in model.parameters()]


def _check(compiles, warmup, lazy, eager):
    assert compiles[warmup:] == [0] * (len(compiles) - warmup), compiles
    for a, b in zip(lazy, eager):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def two_signatures_child():
    import lazycore.torch as ltorch

    compiles, lazy = _two_signatures(ltorch.device())
    _check(compiles, 2, lazy, _two_signatures("cpu")[1])


def cosine_sgd_child():
    import lazycore.torch as ltorch

    compiles, lazy = _cosine_to_zero(ltorch.device(), "sgd")
    _check(compiles, 2, lazy, _cosine_to_zero("cpu", "sgd")[1])


def cosine_rmsprop_child():
    import lazycore.torch as ltorch

    compiles, lazy = _cosine_to_zero(ltorch.device(), "rmsprop")
    _check(compiles, 2, lazy, _cosine_to_zero("cpu", "rmsprop")[1])


def test_one_lowering_two_signatures_no_compile_after_warmup():
    run_isolated(__file__, "two_signatures_child", timeout=300)


def test_sgd_cosine_schedule_to_zero_no_compile_after_warmup():
    run_isolated(__file__, "cosine_sgd_child", timeout=300)


# CI: test_sgd_cosine_schedule_to_zero_no_compile_after_warmup takes the same path (lr 0's -0.0, a position-free place)
@BY_HAND
def test_rmsprop_cosine_schedule_to_zero_no_compile_after_warmup():
    run_isolated(__file__, "cosine_rmsprop_child", timeout=300)
