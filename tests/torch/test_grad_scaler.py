"""``torch.amp.GradScaler`` on the lazy device (issue 39/41): its two kernels,
``_amp_foreach_non_finite_check_and_unscale_`` and ``_amp_update_scale_``, give
eager's gradients, ``found_inf``, scale and growth tracker with no fallback, and
a training loop with a skipped (inf) step keeps eager's values with two programs
a step (the scaler reads ``found_inf`` before the optimizer step, as on CUDA);
they were fallbacks, five programs a step.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import lazycore
from lazycore.observe import metrics


@pytest.mark.parametrize("shape", [(), (1,)], ids=["0-d", "1-element"])
def test_unscale_gives_eagers_gradients_and_found_inf(shape, dev, no_fallback):
    grads = [torch.tensor([1.0, 2.0]), torch.tensor([[4.0, float("inf")], [1.0, -2.0]]).bfloat16(),
             torch.tensor([float("nan"), 3.0], dtype=torch.float64), torch.zeros(0)]
    found, inv = torch.zeros(shape), torch.full(shape, 0.3)
    lazy, lazy_found = [g.to(dev) for g in grads], found.to(dev)
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)
    torch._amp_foreach_non_finite_check_and_unscale_(lazy, lazy_found, inv.to(dev))
    for got, want in zip(lazy, grads):
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(lazy_found.cpu(), found)
    clean = [torch.tensor([1.0, 2.0])]
    found = torch.zeros(shape)
    lazy_found = found.to(dev)
    torch._amp_foreach_non_finite_check_and_unscale_([clean[0].to(dev)], lazy_found, inv.to(dev))
    assert torch.equal(lazy_found.cpu(), found)  # no non-finite value: found_inf stays 0


@pytest.mark.parametrize("found, tracker, scale", [
    (0.0, 0, 8.0),      # a clean step: the tracker counts it
    (0.0, 1, 8.0),      # the growth interval reached: the scale grows
    (0.0, 1, 3.0e38),   # growing would overflow: the scale stays
    (1.0, 1, 8.0),      # a skipped step: the scale backs off
])
def test_update_scale_gives_eagers_scale_and_tracker(found, tracker, scale, dev, no_fallback):
    s, t, f = torch.full((1,), scale), torch.full((), tracker, dtype=torch.int32), torch.full((1,), found)
    ls, lt = s.to(dev), t.to(dev)
    torch._amp_update_scale_(s, t, f, 2.0, 0.3, 2)
    torch._amp_update_scale_(ls, lt, f.to(dev), 2.0, 0.3, 2)
    assert torch.equal(ls.cpu(), s) and torch.equal(lt.cpu(), t), (ls.cpu(), s, lt.cpu(), t)


def test_grad_scaler_training_gives_eagers_values(dev, no_fallback):
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)) for _ in range(4)]
    batches[1] = (batches[1][0] * float("inf"), batches[1][1])  # a skipped step: inf gradients
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    eager = copy.deepcopy(model)
    lazy = model.to(dev)

    programs: list = []

    def train(m, device):
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        scaler = torch.amp.GradScaler(device.type, init_scale=2.0 ** 10, growth_interval=2)
        for x, y in batches:
            before = metrics.counters().get("executions", 0)
            scaler.scale(F.cross_entropy(m(x.to(device)), y.to(device))).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            lazycore.mark_step()
            if device.type == "lazy":
                programs.append(metrics.counters().get("executions", 0) - before)
        return float(scaler.get_scale())

    assert train(lazy, dev) == train(eager, torch.device("cpu"))
    for (name, p), q in zip(lazy.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6, msg=name)
    assert max(programs) <= 2, programs
