"""Optimizer-in-backward (one optimizer a parameter, stepped from
``register_post_accumulate_grad_hook``, as PyTorch's tutorial writes it):
eager's values, and the training step is one program, ended with the
backward, not one program per optimizer."""

import pytest
import torch

import lazycore
import lazycore.torch as ltorch


def _train(dev, steps, mark):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    model.to(dev)
    opts = {p: torch.optim.AdamW([p], lr=1e-2, weight_decay=0.1) for p in model.parameters()}

    def hook(p):
        opts[p].step()
        opts[p].zero_grad()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(hook)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(32, 8, generator=gen).to(dev)
    y = torch.randint(0, 4, (32,), generator=gen).to(dev)
    programs, losses = [], []
    for _ in range(steps):
        before = lazycore.metrics.counters().get("executions", 0)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if mark:
            lazycore.mark_step()
        losses.append(loss.detach())
        if dev != "cpu":
            # read after the step's program ran: the loss of this step
            lazycore.mark_step()
        programs.append(lazycore.metrics.counters().get("executions", 0) - before)
    return [float(v.cpu()) for v in losses], [p.detach().cpu() for p in model.parameters()], programs


@pytest.mark.parametrize("mark", [True, False], ids=["mark_step", "automatic barriers"])
def test_optimizer_in_backward_is_one_program_a_step_with_eagers_values(mark):
    ref_losses, ref_params, _ = _train("cpu", 4, mark=False)
    losses, params, programs = _train(ltorch.device(), 4, mark)
    assert losses == pytest.approx(ref_losses, rel=1e-5)
    for p, r in zip(params, ref_params):
        torch.testing.assert_close(p, r, rtol=1e-5, atol=1e-6)
    # was 3 a step: every optimizer's step() ended the training step inside the backward
    assert programs[1:] == [1, 1, 1]
