"""A fallback writes back every tensor of a list argument its schema marks as
written (issue 41: never silent).

``torch.amp.GradScaler.unscale_`` calls ``_amp_foreach_non_finite_check_and_unscale_``
(``Tensor(a!)[] self``): run through eager's CPU kernel on host copies, the
unscaled gradients were never written back to the lazy ones, so every step
clipped and applied gradients still multiplied by the scale, with no error;
``found_inf``, a single written tensor, was. (GradScaler's kernels are lowered since:
tests/torch/test_grad_scaler.py; the bridge is tested here directly.)
"""

from __future__ import annotations

import torch

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
