"""A ``torch.compile``d function called with lazy tensors runs as written,
under any backend and with ``fullgraph=True`` too: lazycore traces its ops
(dynamo models lazycore's tensor as an opaque object, so its graph broke at
each op on one, and a fullgraph function raised "Failed to convert
args/kwargs to proxy" at its first). timm's ``Kron`` optimizer compiles its
preconditioner's helpers so, and failed at its first step on the lazy
device. A call of the same function with host tensors is still compiled."""

from __future__ import annotations

import pytest
import torch

import lazycore.torch as ltorch


@pytest.fixture
def dev():
    return ltorch.device()


def _counting_backend():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return backend, graphs


def _helper(a, bs, scale):
    out = torch.einsum("ij,jk->ik", a, bs[0])
    for b in bs[1:]:
        out = out @ b
    return (out * scale).tanh()


@pytest.mark.parametrize("fullgraph", [True, False], ids=["fullgraph", "breaks"])
def test_a_compiled_function_given_lazy_tensors_runs_as_written(dev, fullgraph):
    backend, graphs = _counting_backend()
    fn = torch.compile(_helper, backend=backend, fullgraph=fullgraph, dynamic=False)
    a, bs = torch.randn(3, 4), [torch.randn(4, 4) for _ in range(2)]
    got = fn(a.to(dev), [b.to(dev) for b in bs], 0.5)
    assert type(got) is type(a.to(dev)) and got.device.type == "lazy"
    torch.testing.assert_close(got.cpu(), _helper(a, bs, 0.5), rtol=1e-6, atol=1e-6)
    assert graphs == []  # dynamo traced nothing of it
    # the same code with host tensors is compiled as before
    torch.testing.assert_close(fn(a, bs, 0.5), _helper(a, bs, 0.5), rtol=1e-6, atol=1e-6)
    assert len(graphs) == 1
    ltorch.mark_step()


def test_the_default_backend_with_fullgraph(dev):
    fn = torch.compile(lambda x, y: torch.einsum("an,bn->ab", x, y).relu(), fullgraph=True)
    x, y = torch.randn(5, 3), torch.randn(2, 3)
    torch.testing.assert_close(fn(x.to(dev), y.to(dev)).cpu(), torch.einsum("an,bn->ab", x, y).relu())


def test_timm_kron_steps_as_eager(dev):
    kron = pytest.importorskip("timm.optim.kron")

    def run(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.Tanh(), torch.nn.Linear(6, 4)).to(device)
        # deterministic: its preconditioner's probe from a generator of the parameters' device
        opt = kron.Kron(model.parameters(), lr=1e-2, preconditioner_update_probability=1.0, deterministic=True)
        g = torch.Generator().manual_seed(1)
        with torch.compiler.set_stance("default" if device != "cpu" else "force_eager"):
            for _ in range(3):
                x = torch.randn(5, 8, generator=g).to(device)
                opt.zero_grad()
                model(x).square().mean().backward()
                opt.step()
                if device != "cpu":
                    ltorch.mark_step()
        return [p.detach().cpu() for p in model.parameters()]

    for got, want in zip(run(dev), run("cpu")):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
