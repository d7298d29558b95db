"""A batch norm's gradient when the gradient reaching it has transposed strides.

torch 2.13.0's eager CPU batch norm backward (training, batch 1) gives wrong
weight and bias gradients when ``grad_output`` arrives with channels-last-like
strides over a contiguous input: timm's EfficientFormer feeds a Meta4D block's
output to ``flatten(2).transpose(1, 2)``, so every batch norm before it gets a
wrong gradient in eager (float64 included), where a ``.contiguous()`` hook on
the batch norm's output, or central differences, give the true one. lazycore's
gradient is the true one; hunt 30v's EfficientFormer loop is a strict xfail for
that reason (eager cannot referee it)."""

import torch

import lazycore.torch as ltorch


def _grads(device, dtype, contiguous_hook=False):
    torch.manual_seed(0)
    x = torch.randn(1, 4, 3, 3).to(dtype).to(device)
    w = torch.ones(4, dtype=dtype, device=device, requires_grad=True)
    b = torch.zeros(4, dtype=dtype, device=device, requires_grad=True)
    y = torch.nn.functional.batch_norm(x, None, None, w, b, training=True)
    if contiguous_hook:
        y.register_hook(lambda g: g.contiguous())
    (x + y).flatten(2).transpose(1, 2).mean(1).pow(2).sum().backward()
    return w.grad.cpu().double(), b.grad.cpu().double()


def test_batch_norm_gradient_through_a_transposed_view_is_the_true_one():
    true_w, true_b = _grads("cpu", torch.float64, contiguous_hook=True)
    # the mean over positions of a batch norm's output is its bias: the weight's gradient is 0
    assert true_w.abs().max() < 1e-12
    w, b = _grads(ltorch.device(), torch.float32)
    torch.testing.assert_close(w, true_w, rtol=0, atol=1e-6)
    torch.testing.assert_close(b, true_b, rtol=1e-6, atol=1e-6)
