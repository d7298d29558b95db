"""``torch.Generator(device="lazy")``: a private random stream on the lazy device.

PyTorch makes a device's generator through its accelerator hooks, which the
``lazy`` type has none of: ``torch.Generator(device=lazy)`` raised "lazy
device type not an accelerator", and timm's ``ModelEmaV3``, which makes one
for its model's device, could not be built. A lazy generator is a CPU
generator's stream whose device is the lazy device: a random op given it
draws eager's numbers for that seed and state."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch

import lazycore.torch as ltorch


@pytest.fixture
def dev():
    return ltorch.device()


def test_a_generator_of_the_lazy_device_is_made_and_seeded(dev):
    g = torch.Generator(device=dev)
    assert g.device == torch.device("lazy", 0)
    assert torch.Generator(device="lazy").device == torch.device("lazy", 0)
    assert isinstance(g, torch.Generator) and isinstance(g, torch._C.Generator)
    assert g.manual_seed(7) is g and g.initial_seed() == 7
    assert g.seed() == g.initial_seed()
    with pytest.raises(RuntimeError, match="Invalid device ordinal"):
        torch.Generator(device=torch.device("lazy", torch.lazy.device_count()))


def test_torchs_own_generators_are_unchanged():
    g = torch.Generator()
    assert type(g) is torch._C.Generator and g.device == torch.device("cpu")
    assert type(torch.Generator("cpu")) is torch._C.Generator
    with pytest.raises(RuntimeError, match="not an accelerator"):  # (torch's own refusal, unchanged)
        torch.Generator(device="meta")
    assert isinstance(torch.default_generator, torch.Generator)
    assert issubclass(torch._C.Generator, torch.Generator)
    assert not isinstance(object(), torch.Generator)


@pytest.mark.parametrize("draw", [
    lambda d, g: torch.randint(0, 1 << 16, (64,), dtype=torch.int32, device=d, generator=g),
    lambda d, g: torch.randn(5, 3, device=d, generator=g),
    lambda d, g: torch.rand(17, device=d, dtype=torch.float64, generator=g),
    lambda d, g: torch.empty(9, device=d).normal_(2.0, 3.0, generator=g),
    lambda d, g: torch.empty(9, device=d).uniform_(-1.0, 1.0, generator=g),
    lambda d, g: torch.bernoulli(torch.full((33,), 0.3, device=d), generator=g),
    lambda d, g: torch.randperm(12, device=d, generator=g),
], ids=["randint", "randn", "rand64", "normal_", "uniform_", "bernoulli", "randperm"])
def test_its_draws_are_eagers_for_the_same_seed(dev, draw):
    lazy, cpu = torch.Generator(device=dev).manual_seed(3), torch.Generator().manual_seed(3)
    state = torch.get_rng_state()
    for _ in range(2):  # (the stream moves on: the second draw is eager's second)
        torch.testing.assert_close(draw(dev, lazy).cpu(), draw("cpu", cpu), rtol=0, atol=0)
    assert torch.equal(torch.get_rng_state(), state)  # the default CPU generator did not move


def test_its_state_is_read_and_set(dev):
    g = torch.Generator(device=dev).manual_seed(11)
    state = g.get_state()
    first = torch.randn(6, device=dev, generator=g).cpu()
    assert not torch.equal(torch.randn(6, device=dev, generator=g).cpu(), first)
    g.set_state(state)
    torch.testing.assert_close(torch.randn(6, device=dev, generator=g).cpu(), first, rtol=0, atol=0)


def test_a_copy_is_a_generator_of_the_lazy_device_at_the_same_point(dev):
    g = torch.Generator(device=dev).manual_seed(5)
    torch.rand(3, device=dev, generator=g)
    for other in (copy.deepcopy(g), pickle.loads(pickle.dumps(g))):
        assert other.device == g.device and other is not g
        torch.testing.assert_close(torch.rand(4, device=dev, generator=other).cpu(),
                                   torch.rand(4, device=dev, generator=copy.deepcopy(g)).cpu(), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_timm_model_ema_v3_updates_as_eager(dev, dtype):
    timm_ema = pytest.importorskip("timm.utils.model_ema")

    def run(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
        model = model.to(device=device, dtype=dtype)
        ema = timm_ema.ModelEmaV3(model, decay=0.9)  # bfloat16: stochastic rounding from its own generator
        for step in range(3):
            with torch.no_grad():
                for p in model.parameters():
                    p.mul_(0.5).add_(0.25)
            ema.update(model, step=step + 5)
        return [p.detach().cpu() for p in ema.module.parameters()]

    for got, want in zip(run(dev), run("cpu")):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
