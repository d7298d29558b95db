"""A fallback writes back every tensor of a list argument its schema marks as
written (issue 41: never silent).

``torch.amp.GradScaler.unscale_`` calls ``_amp_foreach_non_finite_check_and_unscale_``
(``Tensor(a!)[] self``): run through eager's CPU kernel on host copies, the
unscaled gradients were never written back to the lazy ones, so every step
clipped and applied gradients still multiplied by the scale, with no error;
``found_inf``, a single written tensor, was.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

import lazycore
from lazycore.frontends.torch import fallback


def test_a_written_list_argument_is_written_back(dev):
    grads = [torch.tensor([1.0, 2.0]), torch.tensor([[4.0, float("inf")], [-8.0, 0.5]])]
    found, inv = torch.zeros(()), torch.full((), 0.25)
    lazy = [g.to(dev) for g in grads]
    lazy_found = found.to(dev)
    op = torch.ops.aten._amp_foreach_non_finite_check_and_unscale_.default
    op(grads, found, inv)
    fallback.run(op, (lazy, lazy_found, inv.to(dev)), {})  # eager's kernel, whatever lowers the op
    for got, want in zip(lazy, grads):
        assert torch.equal(got.cpu(), want)
    assert torch.equal(lazy_found.cpu(), found)


def test_grad_scaler_training_gives_eagers_values(dev):
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)) for _ in range(4)]
    batches[1] = (batches[1][0] * float("inf"), batches[1][1])  # a skipped step: inf gradients
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    eager = copy.deepcopy(model)
    lazy = model.to(dev)

    def train(m, device):
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        scaler = torch.amp.GradScaler(device.type, init_scale=2.0 ** 10, growth_interval=2)
        for x, y in batches:
            scaler.scale(F.cross_entropy(m(x.to(device)), y.to(device))).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            lazycore.mark_step()
        return float(scaler.get_scale())

    assert train(lazy, dev) == train(eager, torch.device("cpu"))
    for (name, p), q in zip(lazy.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6, msg=name)
