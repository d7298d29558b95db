"""``param.data = value`` where ``value`` is on the lazy device and ``param``
is not (timm's ``reparameterize_model``: RepVGG/MobileOne blocks make a CPU
``nn.Conv2d`` and set its ``weight.data`` to the folded kernel), as torch does
from CPU to CUDA: the Parameter keeps its identity, its ``requires_grad`` and
its module slot, and holds the lazy value. torch refused it (a wrapper
subclass is no dense tensor to ``set_data``): RuntimeError before."""

import torch

import lazycore.torch as ltorch


def test_cpu_parameter_takes_lazy_data():
    dev = ltorch.device()
    conv = torch.nn.Conv2d(2, 3, 3, bias=True)
    w, b = conv.weight, conv.bias
    kernel = torch.randn(3, 2, 3, 3, generator=torch.Generator().manual_seed(0))
    conv.weight.data = kernel.to(dev) * 2
    conv.bias.data = torch.zeros(3).to(dev)
    assert conv.weight is w and conv.bias is b
    assert isinstance(w, torch.nn.Parameter) and w.requires_grad and w.device == dev
    assert dict(conv.named_parameters())["weight"] is w
    x = torch.randn(1, 2, 5, 5, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(conv(x.to(dev)).cpu(), torch.nn.functional.conv2d(x, kernel * 2))
    plain = torch.zeros(2)
    plain.data = torch.ones(2).to(dev)  # a plain tensor too, without requires_grad
    assert plain.device == dev and not plain.requires_grad and plain.cpu().tolist() == [1.0, 1.0]


def test_cpu_to_cpu_data_is_torch_own():
    t = torch.zeros(2, requires_grad=True)
    t.data = torch.ones(2, dtype=torch.float64)  # torch's rule unchanged (a dtype change is allowed)
    assert t.dtype == torch.float64 and t.requires_grad


def test_lazy_parameter_takes_cpu_data():
    """The other way, as torch from CUDA to CPU: the lazy Parameter keeps its
    identity and becomes a CPU one holding the value (RuntimeError before)."""
    lin = torch.nn.Linear(3, 2).to(ltorch.device())
    w = lin.weight
    lin.weight.data = torch.ones(2, 3)
    assert lin.weight is w and isinstance(w, torch.nn.Parameter) and w.requires_grad
    assert w.device == torch.device("cpu") and w.tolist() == [[1.0] * 3] * 2
