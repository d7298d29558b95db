"""An op whose arguments are views replays one recording: the views' reads
and the op together (frontends/torch/dispatch.py ``_with_views``), where each
view read was a replay of its own (~2 us each; T5's tiny training step made
~350 of them, issue 40 (b)). The nodes, their digests and the values are
what the separate replays make."""

import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from lazycore.ir.config import override
from lazycore.trace import recipes
from lazycore.frontends.torch.tensor import read


@pytest.fixture
def replays(monkeypatch):
    """Counts recordings replayed (:meth:`Recipe.replay`) while a function runs."""
    calls = [0]
    original = recipes.Recipe.replay

    def counted(self, *args, **kwargs):
        calls[0] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(recipes.Recipe, "replay", counted)

    def count(f):
        calls[0] = 0
        f()
        return calls[0]

    return count


def _host(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_an_op_on_views_is_one_replay(dev, replays):
    x, w = _host(6, 4).to(dev), _host(5, 4, seed=1).to(dev)
    got = []
    for _ in range(3):  # recorded, recorded with its views, replayed
        got.append(replays(lambda: torch.mm(x, w.t())))
        got.append(replays(lambda: torch.mm(w.t().t(), x.t())))  # two views, two steps in one
        got.append(replays(lambda: torch.add(x.view(24), x.t().t().reshape(24))))  # one storage twice
        got.append(replays(lambda: torch.nn.functional.gelu(x.t())))  # a recorded decomposition
        ltorch.mark_step()
    assert got[-4:] == [1, 1, 1, 1], got  # [2, 3, 3, 2] before: a replay per view read, then the op's


CASES = [
    ("t", lambda a: torch.mm(a[0], a[1].t())),
    ("t().t()", lambda a: torch.mm(a[1].t().t(), a[0].t())),
    ("view and permute", lambda a: a[0].view(2, 3, 4).permute(2, 0, 1) * a[0].t().reshape(4, 2, 3)),
    ("expand", lambda a: a[0][:, :1].expand(6, 4) + a[0]),
    ("select", lambda a: a[0][2] * a[1][1]),
    ("slices of one storage", lambda a: a[0][1:5:2] - a[0][::3]),
    ("a decomposition of a view", lambda a: torch.nn.functional.gelu(a[0].t()[1:3]) + a[1][:2, :2].sum()),
    ("transpose of a slice, in place", lambda a: a[0].clone()[1:4].t().add_(a[1][:4, :3])),
]


@pytest.mark.parametrize("name,f", CASES, ids=[c[0] for c in CASES])
def test_values_digests_and_programs_are_the_separate_reads(dev, name, f):
    host = [_host(6, 4), _host(5, 4, seed=1)]
    want = f(host)
    lazy = [h.to(dev) for h in host]
    with override(replay=False):  # each view read and op traced, no recording
        t = f(lazy)
        traced = read(t).value.node.digest
    traced_values = t.cpu()
    torch.testing.assert_close(traced_values, want, rtol=1e-6, atol=1e-6)  # (a product's sums: XLA's order)
    compiles = None
    for i in range(4):
        got = f(lazy)
        assert read(got).value.node.digest == traced
        assert got.shape == want.shape and got.stride() == want.stride()
        torch.testing.assert_close(got.cpu(), traced_values, rtol=0, atol=0)
        if i == 1:
            compiles = lazycore.metrics.counters()["compiles"]
    assert lazycore.metrics.counters()["compiles"] == compiles


def test_a_training_step_through_linear_layers_keeps_its_program(dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    eager = [p.detach().clone() for p in model.parameters()]
    lazy = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).to(dev)
    with torch.no_grad():
        for p, e in zip(lazy.parameters(), eager):
            p.copy_(e.to(dev))
    ref = [e.clone().requires_grad_() for e in eager]
    x = _host(5, 8, seed=2)
    opt, ref_opt = torch.optim.SGD(lazy.parameters(), lr=0.1), torch.optim.SGD(ref, lr=0.1)
    xl = x.to(dev)
    compiles = []
    for _ in range(4):
        opt.zero_grad()
        lazy(xl).square().mean().backward()
        opt.step()
        ltorch.mark_step()
        compiles.append(lazycore.metrics.counters()["compiles"])
        ref_opt.zero_grad()
        h = torch.nn.functional.gelu(x @ ref[0].t() + ref[1])
        (h @ ref[2].t() + ref[3]).square().mean().backward()
        ref_opt.step()
    assert compiles[-1] == compiles[-2] == compiles[-3], compiles
    for p, r in zip(lazy.parameters(), ref):
        torch.testing.assert_close(p.detach().cpu(), r.detach(), rtol=1e-6, atol=1e-6)


def test_rows_picked_by_a_number_keep_the_first_steps_program(dev):
    """A row picked by a number (``grads[i]``, a select) is read as the scalar policy says,
    baked or a parameter by what its place has seen so far: its read recorded inside the
    op's recording at the second step made a dynamic_slice of a parameter where the first
    step's separate read had made a static slice, so the second step compiled again (a
    scan over a stack of layers' SGD update; compiles [1, 1, 0, 0] before). Such views
    are read apart."""
    grads = _host(4, 3, 5).to(dev)
    params = [_host(3, 5, seed=i + 1).to(dev) for i in range(4)]
    want = [_host(3, 5, seed=i + 1) for i in range(4)]
    compiles = []
    for _ in range(4):
        for i in range(4):
            params[i] = params[i] - grads[i]
            want[i] = want[i] - grads.cpu()[i]
        before = lazycore.metrics.counters()["compiles"]
        ltorch.mark_step()
        compiles.append(lazycore.metrics.counters()["compiles"] - before)
    assert compiles == [1, 0, 0, 0], compiles
    for p, w in zip(params, want):
        assert torch.equal(p.cpu(), w)
