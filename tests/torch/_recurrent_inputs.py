"""Inputs for the recurrent layers' tests (test_recurrent_loops, test_packed_sequences)."""

from __future__ import annotations

import torch


def inputs(module, steps: int = 6, batch: int = 3):
    """An input and initial states for ``module``, on the CPU."""
    dirs = 2 if module.bidirectional else 1
    x = torch.randn((batch, steps, 5) if module.batch_first else (steps, batch, 5))
    h0 = torch.randn(module.num_layers * dirs, batch, getattr(module, "proj_size", 0) or 4)
    hx = (h0, torch.randn(module.num_layers * dirs, batch, 4)) if isinstance(module, torch.nn.LSTM) else h0
    return x, hx


def on(device, x, hx):
    """``x`` and ``hx`` on ``device``, as leaves that require grad."""
    leaf = (lambda t: t.to(device).requires_grad_())
    return leaf(x), (tuple(leaf(t) for t in hx) if isinstance(hx, tuple) else leaf(hx))
