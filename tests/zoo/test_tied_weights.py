"""``model.to(lazy)`` keeps parameters two modules share one Parameter (issue 39).

torch makes a new Parameter per module when the converted tensor is a
wrapper subclass, so GPT-2's ``lm_head.weight is transformer.wte.weight``
came out False on the lazy device and the two copies trained apart."""

import copy
import weakref

import pytest
import torch

import lazycore.torch as ltorch


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight
        self.norm = torch.nn.LayerNorm(4)

    def forward(self, ids):
        return self.head(self.norm(self.emb(ids)))


def _tied_model():
    torch.manual_seed(0)
    return Tied()


def test_to_lazy_and_back_keeps_a_shared_parameter_one_object(dev):
    m = _tied_model()
    w, b = m.emb.weight, m.norm.bias
    m.to(dev)
    assert m.head.weight is m.emb.weight
    # the very Parameter objects the module held (as on CUDA): an optimizer made before .to sees them
    assert m.emb.weight is w and m.norm.bias is b
    assert isinstance(w, torch.nn.Parameter) and w.device == dev and w.requires_grad
    assert [n for n, _ in m.named_parameters()] == ["emb.weight", "norm.weight", "norm.bias"]
    m.cpu()
    assert m.head.weight is m.emb.weight is w
    assert type(w) is torch.nn.Parameter and w.device.type == "cpu"


def test_a_tied_model_trains_one_copy_as_eager(dev):
    m = _tied_model()
    eager = copy.deepcopy(m)
    m.to(dev)
    ids = torch.tensor([[1, 2, 3], [4, 5, 1]])
    for model, x in ((eager, ids), (m, ids.to(dev))):
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        for _ in range(2):
            loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten())
            loss.backward()
            opt.step()
            opt.zero_grad()
        ltorch.mark_step()
    assert m.head.weight is m.emb.weight
    torch.testing.assert_close(m.emb.weight.detach().cpu(), eager.emb.weight.detach(), rtol=1e-5, atol=1e-6)


def test_an_optimizer_made_before_to_steps_the_lazy_parameters(dev):
    m = _tied_model()
    opt = torch.optim.SGD(m.parameters(), lr=1.0)
    m.to(dev)
    before = m.emb.weight.detach().cpu().clone()
    m(torch.tensor([[1, 2]]).to(dev)).sum().backward()
    opt.step()
    ltorch.mark_step()
    assert not torch.equal(m.emb.weight.detach().cpu(), before)


def test_a_parameter_with_a_weak_reference_still_comes_back_tied(dev):
    # swap_tensors refuses a tensor something holds weakly: torch's own rule runs, ties are restored
    m = _tied_model()
    keep = weakref.ref(m.emb.weight)
    m.to(dev)
    assert m.head.weight is m.emb.weight
    assert m.emb.weight.device == dev
    assert keep() is not None and keep().device.type == "cpu"  # as torch leaves it: a new Parameter
    m.cpu()
    assert m.head.weight is m.emb.weight


def test_a_gradient_moves_with_its_parameter(dev):
    m = _tied_model()
    m(torch.tensor([[1, 2]])).sum().backward()
    g = m.emb.weight.grad.clone()
    m.to(dev)
    assert m.head.weight.grad is m.emb.weight.grad
    assert m.emb.weight.grad.device == dev
    torch.testing.assert_close(m.emb.weight.grad.cpu(), g)


def test_conversions_off_the_lazy_device_are_torchs():
    m = _tied_model()
    w = m.emb.weight
    m.double()
    assert m.emb.weight is w and m.head.weight is w and w.dtype == torch.float64
    m.to("meta")  # torch makes a new Parameter per module here; so does lazycore
    assert m.emb.weight is not w
