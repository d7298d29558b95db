"""A captured step's results and gradients made from its arguments are the
call's arguments at every replay, not the recorded call's.

A step that sets ``p.grad = g`` from its argument, or returns a view of an
argument it updated, described that tensor by the recorded call's storage:
replays handed back the recorded call's gradient (stale, silently), and a
view of an argument was keyed by that storage's id, so such a step never
replayed (or replayed by an id reused after garbage collection)."""

import torch

import lazycore.torch as ltorch


def test_gradient_set_from_an_argument_is_the_calls_argument():
    dev = ltorch.device()
    p = torch.nn.Parameter(torch.zeros(3, device=dev))
    opt = torch.optim.SGD([p], lr=0.1)

    @ltorch.capture
    def step(g):
        p.grad = g
        opt.step()

    e = torch.nn.Parameter(torch.zeros(3))
    eopt = torch.optim.SGD([e], lr=0.1)
    for i in range(1, 8):
        g = torch.full((3,), float(i), device=dev)
        step(g)
        e.grad = torch.full((3,), float(i))
        eopt.step()
        assert p.grad.tolist() == [float(i)] * 3
        assert torch.equal(p.detach().cpu(), e.detach())
    assert step.replays >= 4


def test_view_of_an_updated_argument_replays_with_the_calls_argument():
    dev = ltorch.device()

    @ltorch.capture
    def f(x):
        x.add_(1)
        return x[1:]

    for i in range(1, 8):
        x = torch.full((3,), float(i), device=dev)
        y = f(x)
        assert y.tolist() == [i + 1.0] * 2
        assert x.tolist() == [i + 1.0] * 3
        y.mul_(2)  # a view: writes reach the argument, as eager's
        assert x.tolist() == [i + 1.0, 2 * (i + 1.0), 2 * (i + 1.0)]
    assert f.replays >= 4
