"""Python numbers that change between a loop's steps are program inputs, not
recompiles (issue 39): after the warm-up steps a loop compiles nothing.

The scalar policy (lazycore.trace.scalar_policy) bakes 0 and 1 at a place
of the step's graph until the place has seen a second value. Two ways that
lost a compile after the warm-up in real loops (tests/consumers/cases_hunt27.py):

* PPO's minibatch ``torch.arange(i % 2, 32, 2)``: arange's start was
  always a constant, and the loop's steady positions are first met at its
  second step (the first step's log also holds the rollout), so the start
  took 0 in the first step, 1 in the second (a new place: baked) and 0
  again in the third: compiles [1, 1, 1, 0]. Now the start is a number of
  the policy, and a new position whose instruction made another value
  before is a parameter at once: [1, 1, 0, 0].
* timm's ADOPT clips ``(step - 1) ** 0.25``: 1.0 at its second step, 1.19
  at its third. A clamp bound of 1 folds nothing, yet was baked, then
  promoted with a compile. Now clamp's number bounds are parameters.

Each loop runs eagerly on the CPU too: the lazy answers are eager's.
"""

import pytest
import torch

import lazycore

pytestmark = pytest.mark.usefixtures("clean_runtime")


def _compiles():
    c = lazycore.metrics.counters()
    return c.get("compiles", 0) + c.get("stack_compiles", 0)


def _run(step, device, steps):
    """``step(i)`` for each ``i`` with a barrier after it on the lazy device; the compiles per step."""
    import lazycore.torch as ltorch

    counts = []
    for i in range(steps):
        c0 = _compiles()
        step(i)
        if device.type != "cpu":
            ltorch.mark_step()
        counts.append(_compiles() - c0)
    return counts


def _alternating_minibatch(device):
    """PPO's loop in small: a first step holding work from before the loop,
    then minibatches ``arange(i % 2, 32, 2)`` of one batch."""
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(4, 3).to(device))
    opt = torch.optim.SGD([w], lr=0.1)
    x = torch.randn(32, 4).to(device) * 2  # pending in the first step only, as a rollout's forward pass
    losses = []

    def step(i):
        idx = torch.arange(i % 2, 32, 2, device=device)
        loss = (x[idx] @ w).tanh().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())

    counts = _run(step, device, 5)
    return counts, [t.cpu() for t in losses] + [w.detach().cpu()]


def _growing_clip(device):
    """ADOPT's clip in small: no clip at the first step, then ``(step - 1) ** 0.25``."""
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(8, 4).to(device))
    x = torch.randn(16, 8).to(device) * 3
    out = []

    def step(i):
        (x @ w).square().mean().backward()
        with torch.no_grad():
            g = w.grad
            if i > 0:
                clip = i ** 0.25  # 1.0, 1.19, 1.32, ...
                g = g.clamp(-clip, clip)
                out.append(g.clone())
            w.sub_(0.1 * g)
        w.grad = None

    counts = _run(step, device, 5)
    return counts, [t.cpu() for t in out] + [w.detach().cpu()]


@pytest.mark.parametrize("loop", [_alternating_minibatch, _growing_clip])
def test_no_compile_after_warmup(dev, loop):
    counts, lazy = loop(dev)
    _, eager = loop(torch.device("cpu"))
    assert counts[2:] == [0] * (len(counts) - 2), counts
    for a, b in zip(lazy, eager):  # (matrix products round as XLA's, not MKL's: float tolerance)
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def _parameters_behind(t) -> int:
    """The Python-number parameters (``Scalar`` leaves) ``t``'s pending value is made from."""
    from lazycore.frontends.torch.tensor import read
    from lazycore.ir.graph import Node, Scalar, operand_values

    todo, seen, found = [read(t).value.node], set(), 0
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        found += type(n) is Scalar
        if type(n) is Node:
            todo.extend(v[0] for v in operand_values(n))
    return found


def test_a_constant_arange_stays_baked(dev):
    """An arange whose numbers never change keeps them as constants (an
    index made from it keeps XLA's static slice); a start that changed is a
    parameter from then on."""
    for start in (1, 1, 1):
        idx = torch.arange(start, 9, 2, device=dev)
        assert _parameters_behind(idx) == 0
        assert torch.equal(idx.cpu(), torch.arange(start, 9, 2))
    found = []
    for start in (0, 1, 0):
        idx = torch.arange(start, 8, 2, device=dev)  # (another line: a place of its own)
        found.append(_parameters_behind(idx))
        assert torch.equal(idx.cpu(), torch.arange(start, 8, 2))
    assert found == [0, 1, 1], found


def test_timm_adopt_no_compile_after_warmup(dev):
    """timm's ADOPT (its clip ``(step - 1) ** 0.25`` from a CPU step counter)
    on the lazy device: eager's parameters, no compile after the warm-up."""
    timm_optim = pytest.importorskip("timm.optim")
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    lazy = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    lazy.load_state_dict(eager.state_dict())
    lazy.to(dev)
    x = torch.randn(4, 8)
    runs = {}
    for model, inp, device in ((eager, x, torch.device("cpu")), (lazy, x.to(dev), dev)):
        opt = timm_optim.create_optimizer_v2(model, opt="adopt", lr=1e-2, weight_decay=0.01)

        def step(i, model=model, opt=opt, inp=inp):
            opt.zero_grad()
            model(inp).square().mean().backward()
            opt.step()

        runs[device.type] = _run(step, device, 5)
    assert runs["lazy"][2:] == [0, 0, 0], runs["lazy"]
    for a, b in zip(eager.parameters(), lazy.parameters()):
        torch.testing.assert_close(b.detach().cpu(), a.detach(), rtol=1e-5, atol=1e-6)
