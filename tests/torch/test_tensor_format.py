"""``format()`` of a lazy tensor is eager's (issue 39, hunt 33).

Eager formats a 0-d tensor as its Python number: ``f"{loss:.4f}"`` in a
user's log line, and transformers' Switch Transformers names the expert it
runs ``self[f"expert_{expert_idx[0]}"]``. torch's ``Tensor.__format__`` does
that only when ``type(self) is Tensor``, so the lazy subclass fell to
``object.__format__``: the repr (``expert_tensor(0, device='lazy:0')``, a
``KeyError`` in Switch Transformers' forward) and a ``TypeError`` for any
format spec. Other tensors (not 0-d, parameters) keep object's format, as
eager's.
"""

import pytest
import torch

import lazycore.torch as ltorch


@pytest.fixture
def dev():
    return ltorch.device()


@pytest.mark.parametrize("spec", ["", ".4f", ">10.2e", "+", "08.3f"])
def test_float_scalar_formats_as_its_number(dev, spec):
    x = torch.tensor(0.123456)
    assert format(x.to(dev), spec) == format(x, spec)
    y = torch.tensor([1.5, -2.25], requires_grad=True)
    loss = (y * y).sum()  # a 0-d result that requires grad: eager formats it too
    assert format((y.detach().to(dev).requires_grad_() ** 2).sum(), spec) == format(loss, spec)


def test_integer_element_names_a_module(dev):
    idx = torch.tensor([[3], [1]])
    assert f"expert_{idx.to(dev)[0][0]}" == f"expert_{idx[0][0]}" == "expert_3"
    assert f"{idx.to(dev)[1, 0]:03d}" == "001"
    assert f"{torch.tensor(True).to(dev)}" == "True"


def test_other_tensors_keep_objects_format(dev):
    v = torch.tensor([1.0, 2.0])
    assert f"{v.to(dev)}" == str(v.to(dev))
    with pytest.raises(TypeError):
        format(v, ".2f")
    with pytest.raises(TypeError):
        format(v.to(dev), ".2f")
    p = torch.nn.Linear(1, 1).to(dev).bias.view(())  # a view: a plain tensor, formats as a number
    assert format(p, ".3f") == format(float(p.detach()), ".3f")
    scale = torch.nn.Module()
    scale.s = torch.nn.Parameter(torch.tensor(2.0))
    eager = format(scale.s, "")
    with pytest.raises(TypeError):
        format(scale.s, ".2f")
    scale.to(dev)
    assert scale.s.device.type == "lazy" and isinstance(scale.s, torch.nn.Parameter)
    lazy = format(scale.s, "")
    assert eager.startswith("Parameter containing") and not lazy[0].isdigit(), (eager, lazy)
    with pytest.raises(TypeError):
        format(scale.s, ".2f")
