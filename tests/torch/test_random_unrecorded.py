"""An op that draws from the RNG runs its lowering without a recording
(frontends/torch/dispatch.py, ``_draws``): it reads and advances the device's
generator state, so every recording of it was refused, and watching for that
cost each draw more than its nodes (a GPT-2 training step's dropouts)."""

import numpy as np
import torch

import lazycore.torch as ltorch
from lazycore.frontends.torch import dispatch


def test_draws_are_not_recorded_and_stay_fresh(dev, monkeypatch):
    recorded = []
    real = dispatch.record_call

    def counting(fn, inputs, args, kwargs, floats=True):
        recorded.append(args[0].func)
        return real(fn, inputs, args, kwargs, floats)

    monkeypatch.setattr(dispatch, "record_call", counting)
    ltorch.manual_seed(0)
    x = torch.ones(4, 256, device=dev)
    draws = [torch.rand_like(x) for _ in range(3)] + [torch.rand(4, 256, device=dev) for _ in range(2)]
    kept = [torch.nn.functional.dropout(x, 0.5) for _ in range(2)]
    assert not [f for f in recorded if torch.Tag.nondeterministic_seeded in f.tags]
    values = [d.cpu().numpy() for d in draws]
    for i in range(len(values)):
        assert 0 <= values[i].min() and values[i].max() < 1
        for j in range(i):
            assert not np.array_equal(values[i], values[j])
    a, b = (k.cpu().numpy() for k in kept)
    assert set(np.unique(a)) <= {0.0, 2.0} and not np.array_equal(a, b)
    torch.ones(5, 91, device=dev) * 0.37  # (a signature met nowhere else) a lowering that draws nothing is recorded
    assert torch.ops.aten.mul.Tensor in recorded
