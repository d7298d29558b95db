"""A loop's programs are the ones it compiles alone, whatever optimizer an
earlier loop left on the lazy device (lazycore.frontends.torch.optim's device
rates, capture's refresh_unfilled).

An optimizer made over lazy parameters gets its device learning rate (and
Adam's ``betas[0]``) as device data at once; a captured call (the optimizer
step optim_replay traces, or the user's step under ``ltorch.capture``) fills
the rates no step has filled yet, so that one it meets for the first time
reads them as inputs. It filled every such optimizer's, among them one the
step never meets: an earlier loop's (a test before this one in the same
process, dead in a reference cycle until the garbage collector runs) or one
made up front for a later phase. A filled rate is pending work, so the traced
step's program had two more outputs than the next step's, and the next step
compiled again (hunt 27's reinforce_categorical_normal: [1, 1, 1, 0] after
the file's earlier loops, [1, 1, 0, 0] alone, by when the collector ran)."""

import pytest
import torch
import torch.nn.functional as F

import lazycore
import lazycore.torch as ltorch
from lazycore.observe import metrics

STEPS = 5


def _loop(dev, mode):
    """Each step's compiles and each barrier's (nodes, outputs, parameters)."""
    lazycore.cache.clear()
    metrics.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(1)

    def body(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    step = ltorch.capture(body) if mode == "captured" else body
    compiles, losses = [], []
    for _ in range(STEPS):
        x, y = torch.randn(5, 6, generator=g), torch.randint(0, 3, (5,), generator=g)
        losses.append(step(x.to(dev), y.to(dev)).detach())
        c0 = metrics.counters().get("compiles", 0)
        ltorch.mark_step()
        compiles.append(metrics.counters().get("compiles", 0) - c0)
    return compiles, metrics.graph_sizes(), [float(v) for v in losses]


@pytest.mark.parametrize("mode", ["traced", "captured"])
def test_an_optimizer_the_loop_never_steps_changes_none_of_its_programs(mode):
    dev = ltorch.device()
    alone = _loop(dev, mode)
    # another loop's optimizer, made over lazy parameters and never stepped, still alive
    torch.manual_seed(2)
    eager = torch.nn.Linear(3, 2)
    other = torch.nn.Linear(3, 2)
    other.load_state_dict(eager.state_dict())
    other = other.to(dev)
    unstepped = torch.optim.AdamW(other.parameters(), lr=1e-2)
    ltorch.mark_step()
    after = _loop(dev, mode)
    assert after[0] == alone[0], (after[0], alone[0])  # compiles per step
    assert after[1] == alone[1], (after[1], alone[1])  # every barrier's graph: no rate of the other's among its outputs
    assert after[2] == alone[2]
    # and its own first step, later, is eager's (its rates were left as it made them)
    reference = torch.optim.AdamW(eager.parameters(), lr=1e-2)
    for m, o in ((eager, reference), (other, unstepped)):
        m(torch.ones(1, 3, device=m.weight.device)).square().sum().backward()
        o.step()
    ltorch.mark_step()
    for a, b in zip(other.parameters(), eager.parameters()):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), rtol=1e-6, atol=1e-7)
