"""torch.cond, torch._higher_order_ops.while_loop and scan on lazy tensors
record one loop or branch of the lazy graph, with eager torch's results
(eager CPU runs the same calls through dynamo) and its error types."""

from __future__ import annotations

import pytest
import torch
import torch.utils._pytree as pytree
from torch._higher_order_ops import scan, while_loop
from torch._higher_order_ops.cond import cond_op
from torch._higher_order_ops.scan import scan_op
from torch._higher_order_ops.while_loop import while_loop_op

import lazycore.torch as ltorch
from lazycore.observe import metrics
from lazycore.observe.testing import capture


def compiles() -> int:
    return metrics.counters()["compiles"]


def test_cond_matches_eager_with_one_program(dev, clean_runtime):
    torch.manual_seed(0)
    a, w = torch.randn(3, 4), torch.randn(4)
    x, wl = a.to(dev), w.to(dev)
    for shift in (-10.0, 10.0):  # the second pred runs the first program
        with capture(fresh_cache=False) as cap:
            got = torch.cond((x.sum() + shift) > 0, lambda t: (t * wl).tanh(), lambda t: t.relu() - 1, (x,))
            got = got.cpu()
            if shift < 0:
                assert cap.text("stablehlo").count('"stablehlo.case"') == 1
        want = torch.cond((a.sum() + shift) > 0, lambda t: (t * w).tanh(), lambda t: t.relu() - 1, (a,))
        torch.testing.assert_close(got, want)
    assert compiles() == 1


def test_cond_with_a_one_element_pred_and_several_operands(dev, clean_runtime):
    a, b = torch.arange(4.0), torch.tensor(2.0)
    for flag in (True, False):
        p = torch.tensor([flag])
        want = torch.cond(p, lambda s, t: (s * t, s.sum()), lambda s, t: (s + t, t * 0), (a, b))
        got = torch.cond(p.to(dev), lambda s, t: (s * t, s.sum()), lambda s, t: (s + t, t * 0), (a.to(dev), b.to(dev)))
        for g, w in zip(got, want):
            torch.testing.assert_close(g.cpu(), w)


def test_while_loop_matches_eager_and_is_one_loop(dev, clean_runtime):
    def cond_fn(i, v):
        return i < 50

    def body_fn(i, v):
        return i + 1, v * 1.01 + 0.5

    want = while_loop(cond_fn, body_fn, (torch.tensor(0), torch.ones(3)))
    with capture() as cap:
        got = while_loop(cond_fn, body_fn, (torch.tensor(0, device=dev), torch.ones(3, device=dev)))
        got = [g.cpu() for g in got]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    text = cap.text("stablehlo")
    assert text.count("stablehlo.while") == 1 and text.count("stablehlo.multiply") == 1
    assert compiles() == 1


@pytest.mark.parametrize("dim,reverse", [(0, False), (1, False), (0, True)])
def test_scan_matches_eager(dev, clean_runtime, dim, reverse):
    torch.manual_seed(1)
    xs = torch.randn(5, 6, 3)
    w = torch.randn(3, 3) * 0.3

    def step(c, x):
        h = torch.tanh(c @ w + x[..., :3] if x.shape[-1] >= 3 else c)
        return h, (h.sum(-1), h * 2)

    init = torch.zeros(6 if dim == 0 else 5, 3)
    want_c, want_ys = scan(step, init, xs, dim=dim, reverse=reverse)
    w = w.to(dev)
    got_c, got_ys = scan(step, init.to(dev), xs.to(dev), dim=dim, reverse=reverse)
    got_ys = [y.contiguous() for y in got_ys]  # (stacked along dim: a view) one program for all
    torch.testing.assert_close(got_c.cpu(), want_c, rtol=1e-5, atol=1e-5)
    for g, e in zip(got_ys, want_ys):
        assert g.shape == e.shape
        torch.testing.assert_close(g.cpu(), e, rtol=1e-5, atol=1e-5)
    assert compiles() == 1


def test_the_operators_called_directly_record_loops_too(dev, clean_runtime):
    x = torch.arange(4.0, device=dev)
    with torch.no_grad():
        out = cond_op(x.sum() > 2, lambda a: (a * 2,), lambda a: (a - 1,), (x,))
        i, v = while_loop_op(lambda i, v, k: i < 3, lambda i, v, k: (i + 1, v * k),
                             (torch.tensor(0, device=dev), x), (torch.tensor(3.0, device=dev),))
        c, y = scan_op(lambda c, r: [c + r, c * r], [torch.zeros(4, device=dev)], [x.reshape(1, 4).expand(3, 4)], [])
    torch.testing.assert_close(out[0].cpu(), torch.arange(4.0) * 2)
    assert int(i) == 3
    torch.testing.assert_close(v.cpu(), torch.arange(4.0) * 27)
    torch.testing.assert_close(c.cpu(), torch.arange(4.0) * 3)
    torch.testing.assert_close(y.cpu(), torch.stack([torch.arange(4.0) * k * torch.arange(4.0) for k in range(3)]))


def test_errors_are_torchs_runtime_errors(dev, clean_runtime):
    x = torch.arange(4.0).to(dev)
    with pytest.raises(RuntimeError, match="identical types"):
        while_loop(lambda v: v.sum() < 10, lambda v: (v.double(),), (x,))
    with pytest.raises(RuntimeError, match="identical types"):
        torch.cond(x.sum() > 2, lambda a: a * 2, lambda a: a.sum(), (x,))
    # eager CPU raises RuntimeErrors for these too (through dynamo)
    with pytest.raises(RuntimeError):
        while_loop(lambda v: v.sum() < 10, lambda v: (v.double(),), (x.cpu(),))
    assert compiles() == 0
    with pytest.raises(RuntimeError, match="single-element"):  # torch's check (its message prints pred)
        torch.cond(x > 2, lambda a: a, lambda a: a, (x,))


def _cond_grads(device, shift, W0, x0):
    W, x = W0.clone().to(device).requires_grad_(), x0.clone().to(device).requires_grad_()
    out = torch.cond(x.sum() + shift > 0, lambda a: (a @ W).sin(), lambda a: (a * 2).cos(), (x,))
    (out * out).sum().backward()
    return out.detach().cpu(), W.grad.cpu(), x.grad.cpu()


def test_gradients_through_cond_reach_operands_and_closed_over_parameters(dev, clean_runtime):
    """As eager's cond (dynamo lifts what a branch closes over): the branch
    not taken gives zeros; the backward is one more cond on the same pred."""
    torch.manual_seed(0)
    W0, x0 = torch.randn(3, 3), torch.randn(2, 3)
    for shift in (10.0, -10.0):
        want = _cond_grads("cpu", shift, W0, x0)
        with capture() as cap:
            got = _cond_grads(dev, shift, W0, x0)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)
        assert cap.text("stablehlo").count('"stablehlo.case"') == 2  # forward and backward
    assert not want[1].any()  # the false branch does not read W


def _while_grads(device, limit, x0, w0):
    x, w = x0.clone().to(device).requires_grad_(), w0.clone().to(device).requires_grad_()
    i, y = while_loop(lambda i, y: (i < limit) & (y.abs().sum() < 8), lambda i, y: (i + 1, (y * w).sin() * 2),
                      (torch.tensor(0, device=device), x))
    (y * y).sum().backward()
    return y.detach().cpu(), x.grad.cpu(), w.grad.cpu()


def test_gradients_through_while_loop_reach_carries_and_closed_over_parameters(dev, clean_runtime):
    """The trip count is a value: the backward reads it, then runs a scan
    forward and one in reverse (three loops in all)."""
    torch.manual_seed(0)
    x0, w0 = torch.randn(2, 3), torch.randn(3)
    for limit in (1, 3, 6):
        for g, w in zip(_while_grads(dev, limit, x0, w0), _while_grads("cpu", limit, x0, w0)):
            torch.testing.assert_close(g, w)
    # no step: y is x. (Eager torch 2.13 gives other gradients here, as if one
    # step had run: a bug of its while_loop autograd; these are d(y*y)/dx = 2x, 0.)
    y, gx, gw = _while_grads(dev, 0, x0, w0)
    torch.testing.assert_close(y, x0)
    torch.testing.assert_close(gx, 2 * x0)
    assert not gw.any()


def test_a_model_with_a_cond_trains_as_eager_one_program_per_step(dev, clean_runtime):
    """A gated layer whose pred depends on the data: both branches are taken
    over the steps, parameters of both train, and the step compiles once."""
    torch.manual_seed(0)

    class Gated(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.cond(x.mean() > 0, lambda t: self.a(t).tanh(), lambda t: self.b(t).relu(), (x,))

    eager = Gated()
    lazy = Gated().to(dev)
    lazy.load_state_dict({k: v.to(dev) for k, v in eager.state_dict().items()})
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (eager, lazy)]
    g = torch.Generator().manual_seed(1)
    batches = [torch.randn(3, 4, generator=g) + (1 if i % 2 else -1) for i in range(6)]
    c0 = None
    for i, x in enumerate(batches):
        for m, opt, xx in ((eager, opts[0], x), (lazy, opts[1], x.to(dev))):
            opt.zero_grad()
            m(xx).square().sum().backward()
            opt.step()
        ltorch.mark_step()
        if i == 1:
            c0 = compiles()
    for (k, v), w in zip(lazy.state_dict().items(), eager.state_dict().values()):
        torch.testing.assert_close(v.cpu(), w, rtol=1e-5, atol=1e-6)
    assert compiles() == c0  # steps 3..6 compiled nothing new


def _layers(L=4, D=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return ([torch.randn(D, D, generator=g) * 0.5 for _ in range(L)], [torch.randn(D, generator=g) for _ in range(L)])


def test_training_through_a_scan_over_a_stack_of_layers_matches_eager(dev, clean_runtime):
    """Each layer has its own weights; the stack is scanned (one loop forward,
    one loop backward) and SGD steps match eager's unrolled layers."""
    import lazycore.torch as ltorch

    Ws, bs = _layers()
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(1))
    eager_W = [w.clone().requires_grad_() for w in Ws]
    eager_b = [b.clone().requires_grad_() for b in bs]
    lazy_W = [w.to(dev).requires_grad_() for w in Ws]
    lazy_b = [b.to(dev).requires_grad_() for b in bs]
    opt_e = torch.optim.SGD(eager_W + eager_b, lr=0.1)
    opt_l = torch.optim.SGD(lazy_W + lazy_b, lr=0.1)
    xl = x.to(dev)

    def layer(h, params):
        W, b = params
        h = torch.tanh(h @ W + b)
        return h, h.sum()

    compiled = []
    for step in range(4):
        opt_e.zero_grad()
        h, sums = x, []
        for W, b in zip(eager_W, eager_b):
            h, s = layer(h, (W, b))
            sums.append(s)
        loss_e = h.pow(2).sum() + torch.stack(sums).sum()
        loss_e.backward()
        grads_e = [p.grad.clone() for p in eager_W + eager_b]
        opt_e.step()

        opt_l.zero_grad()
        h, ys = scan(layer, xl, (torch.stack(lazy_W), torch.stack(lazy_b)))
        loss_l = h.pow(2).sum() + ys.sum()
        loss_l.backward()
        grads_l = [p.grad.clone() for p in lazy_W + lazy_b]
        opt_l.step()
        before = compiles()
        ltorch.mark_step()
        compiled.append(compiles() - before)

        torch.testing.assert_close(loss_l.detach().cpu(), loss_e.detach(), rtol=1e-5, atol=1e-5)
        for g_l, g_e in zip(grads_l, grads_e):
            torch.testing.assert_close(g_l.cpu(), g_e, rtol=1e-4, atol=1e-5)
    # one program (forward loop, backward loop, SGD update), run again by every later step
    assert compiled == [1, 0, 0, 0]


def test_scan_gradients_of_init_and_scanned_inputs(dev, clean_runtime):
    torch.manual_seed(3)
    init, xs = torch.randn(4), torch.randn(6, 4)

    def step(c, x):
        c = c * torch.sigmoid(x) + x
        return c, c.square()

    def grads(i, s, fn):
        i, s = i.clone().requires_grad_(), s.clone().requires_grad_()
        c, ys = fn(i, s)
        (c.sum() + ys.mean()).backward()
        return i.grad, s.grad

    def unrolled(i, s):
        c, ys = i, []
        for x in s:
            c, y = step(c, x)
            ys.append(y)
        return c, torch.stack(ys)

    want = grads(init, xs, unrolled)
    got = grads(init.to(dev), xs.to(dev), lambda i, s: scan(step, i, s, reverse=True))
    want_rev = grads(init, xs, lambda i, s: (lambda c, y: (c, y.flip(0)))(*unrolled(i, s.flip(0))))
    for g, w in zip(got, want_rev):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-6)
    got = grads(init.to(dev), xs.to(dev), lambda i, s: scan(step, i, s))
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-6)


def test_scan_with_pytree_carries_and_outputs_and_their_gradients(dev, clean_runtime):
    torch.manual_seed(4)
    init = {"a": torch.zeros(3), "b": torch.ones(2)}
    xs = (torch.randn(4, 3), torch.randn(4, 2))

    def f(c, x):
        a = c["a"] + x[0]
        b = c["b"] * 1.5 + x[1]
        return {"a": a, "b": b}, {"s": a.sum(), "t": (b - 1, b * 2)}

    want = scan(f, init, xs)
    got = scan(f, {k: v.to(dev) for k, v in init.items()}, tuple(x.to(dev) for x in xs))
    assert pytree.tree_structure(got) == pytree.tree_structure(want)
    for g, w in zip(pytree.tree_leaves(got), pytree.tree_leaves(want)):
        torch.testing.assert_close(g.cpu(), w)

    def g(c, x):
        c = {"u": c["u"] * torch.sin(x) + c["v"], "v": c["v"] + 1}
        return c, (c["u"].sum(), c["u"] * 3)

    def grads(a, x):
        a, x = a.clone().requires_grad_(), x.clone().requires_grad_()
        c, (s, u) = scan(g, {"u": a, "v": a * 2}, x)
        (c["u"].sum() + s.sum() + u.pow(2).sum() + c["v"].sum()).backward()
        return a.grad, x.grad

    a, x = torch.randn(4), torch.randn(5, 4)
    for got_g, want_g in zip(grads(a.to(dev), x.to(dev)), grads(a, x)):
        torch.testing.assert_close(got_g.cpu(), want_g, rtol=1e-5, atol=1e-6)
