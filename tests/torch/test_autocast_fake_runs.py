"""``torch.autocast("lazy")`` decides a call by running it on fake CPU tensors
(frontends/torch/autocast.py); those runs are lazycore's, not the user's.

- What autograd saves in them must not reach the user's
  ``saved_tensors_hooks``. Non-reentrant activation checkpointing (timm's
  ``set_grad_checkpointing()``, transformers' ``gradient_checkpointing_enable()``
  with ``use_reentrant=False``) counts the tensors its hooks pack in the
  forward and in the recomputation; under bfloat16 autocast the forward's
  count had the fake runs' packs in it and the backward raised
  ``CheckpointError`` (hunt 32: a tiny ViT with ``set_grad_checkpointing()``
  saved 62 tensors in the forward, 24 in the recomputation).
- They must choose kernels as the lazy device does: SDPA's CPU flash kernel
  was recorded and replayed, its backward fell back and raised on mixed types.

Each test uses shapes no other test records, so the autocast plans are made
here (the fake runs happen in the forward, not in the recomputation).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def _model(device):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(7, 13), nn.GELU(), nn.Linear(13, 3)).to(device)


def _x(device):
    return torch.randn(5, 7, generator=torch.Generator().manual_seed(1)).to(device)


def test_user_pack_hook_sees_eager_count(dev, no_fallback):
    def packed(device):
        model, x = _model(device), _x(device).requires_grad_()
        seen = []

        def pack(t):
            seen.append(tuple(t.shape))
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with torch.autocast(device.type, dtype=torch.bfloat16):
                y = model(x)
        y.float().sum().backward()
        return sorted(seen), model[0].weight.grad

    want_seen, want_grad = packed(torch.device("cpu"))
    got_seen, got_grad = packed(dev)
    assert got_seen == want_seen
    assert torch.equal(got_grad.cpu(), want_grad)


def test_non_reentrant_checkpoint_under_autocast_as_eager(dev, no_fallback):
    def step(device):
        model = _model(device)
        model[1] = nn.ReLU()  # another call signature than the test above
        x = _x(device)[:4].requires_grad_()
        with torch.autocast(device.type, dtype=torch.bfloat16):
            y = checkpoint(model, x, use_reentrant=False)
            loss = F.cross_entropy(y, torch.tensor([0, 2, 1, 0]).to(device))
        loss.backward()
        return loss.detach().float(), [p.grad for p in model.parameters()] + [x.grad]

    want_loss, want = step(torch.device("cpu"))
    got_loss, got = step(dev)
    # the float32 loss after bfloat16 logits: within the hunts' 1e-5 (not eager's bits: log_softmax's sums)
    torch.testing.assert_close(got_loss.cpu(), want_loss, rtol=1e-5, atol=0)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-6)


def test_sdpa_under_autocast_decides_as_the_lazy_device(dev, no_fallback):
    """The fake CPU mirrors picked SDPA's flash kernel: the replay ran it and its
    backward went to eager's kernel (a fallback), which raised on autocast's
    mixed types ("expected scalar type Float but found BFloat16": every
    transformers Llama step under ``torch.autocast(..., torch.bfloat16)``). The
    lazy device computes SDPA as the math ops; bfloat16, so within two of its
    ulps of eager's flash kernel."""

    def step(device):
        g = torch.Generator().manual_seed(2)
        q, k, v = [torch.randn(2, 3, 5, 8, generator=g).to(device).requires_grad_() for _ in range(3)]
        with torch.autocast(device.type, dtype=torch.bfloat16):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        assert o.dtype == torch.bfloat16
        (o.float() * torch.linspace(-1, 1, 8).to(device)).sum().backward()
        return [o.detach().float(), q.grad, k.grad, v.grad]

    for got, want in zip(step(dev), step(torch.device("cpu"))):
        torch.testing.assert_close(got.cpu(), want, rtol=2 ** -6, atol=2 ** -6)
