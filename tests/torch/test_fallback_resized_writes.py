"""A fallback whose kernel resizes an argument it writes (hunt 35).

The x86 QAT qconfig's ``FusedMovingAvgObsFakeQuantize`` keeps its per-channel
observer's ``min_val``/``max_val`` as empty tensors until the first call, and
``aten._fused_moving_avg_obs_fq_helper`` (no lowering: a fallback) resizes them
(and ``scale``/``zero_point``) to the channel count. The host copies of lazy
arguments lay on NumPy arrays' memory, which cannot grow ("Trying to resize
storage that is not resizable": every QAT model prepared with the default x86
qconfig failed its first forward), and the written-back value had a shape the
lazy buffer could not take.
"""

from __future__ import annotations

import torch

from lazycore.observe import metrics


def _fake_quant(device):
    import torch.ao.quantization as tq

    torch.manual_seed(0)
    fq = tq.get_default_qat_qconfig("x86").weight().to(device)
    x = torch.randn(5, 3).to(device).requires_grad_()
    y = fq(x)
    (y * torch.arange(3.0).to(device)).sum().backward()
    return y.detach().cpu(), x.grad.cpu(), {k: v.cpu() for k, v in fq.state_dict().items()}


def test_fused_observer_buffers_grow_as_eager(dev):
    want = _fake_quant(torch.device("cpu"))
    metrics.reset()
    got = _fake_quant(dev)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert want[2]["activation_post_process.min_val"].shape == (5,)  # the buffers did grow
    for k, v in want[2].items():
        assert got[2][k].shape == v.shape and torch.equal(got[2][k], v), k
    assert metrics.fallbacks()  # the op itself is still eager's kernel on the host
