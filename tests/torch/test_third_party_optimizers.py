"""Optimizers from other libraries on the lazy device: they step with eager's
values. torch.optim's own step functions are made capturable there (their
step counters live on the device); another library's optimizer with a
``capturable`` flag checks its own list of devices and would refuse a
capturable step on the lazy one (timm's NAdamW raised "If capturable=True,
params and state_steps must be on supported devices"), so it is left as the
user made it."""

import pytest
import torch

import lazycore

timm_optim = pytest.importorskip("timm.optim")


@pytest.mark.parametrize("name", ["nadamw", "cadamw", "cnadamw", "adamw", "radam"])
def test_timm_optimizer_steps_with_eagers_values(clean_runtime, name):
    import lazycore.torch as ltorch

    dev = ltorch.device()
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    lazy = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    lazy.load_state_dict(eager.state_dict())
    lazy.to(dev)
    opt_e = timm_optim.create_optimizer_v2(eager, opt=name, lr=1e-2, weight_decay=0.01)
    opt_l = timm_optim.create_optimizer_v2(lazy, opt=name, lr=1e-2, weight_decay=0.01)
    x = torch.randn(4, 8)
    for _ in range(3):
        for model, opt, inp in ((eager, opt_e, x), (lazy, opt_l, x.to(dev))):
            opt.zero_grad()
            model(inp).square().mean().backward()
            opt.step()
        lazycore.mark_step()
    for a, b in zip(eager.parameters(), lazy.parameters()):
        torch.testing.assert_close(b.detach().cpu(), a.detach(), rtol=1e-5, atol=1e-6)
    if not type(opt_l).__module__.startswith("torch.optim."):  # timm's own class: left as the user made it
        assert opt_l.param_groups[0].get("capturable") == opt_e.param_groups[0].get("capturable")
