"""Adam's and AdamW's multi-tensor form on the lazy device
(lazycore.frontends.torch.optim_foreach) against the per-parameter form it
replaces (torch's single-tensor eager branch with device scalars): the same
parameters and state bit for bit after every step, traced and captured,
under a schedule that reaches lr 0 and cycles beta1, with the group's
counters at different steps; and fewer recorded nodes per step."""

import pytest
import torch

import lazycore.frontends.torch.optim as lazy_optim
import lazycore.torch as ltorch
from _bits import BY_HAND  # (tests/ is on the path)
from lazycore.observe import metrics

O = torch.optim


def _params():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(4, 3, generator=g), torch.randn(3, generator=g), torch.randn(2, 5, generator=g)]


def _run(dev, make_opt, mode, steps=5, late=False):
    """Each step's parameters and optimizer state on the host. ``late``: the
    last parameter gets its first gradient at the third step (its counter
    lags the others')."""
    params = [p.clone().to(dev).requires_grad_() for p in _params()]
    opt = make_opt(params)
    sched = O.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=steps + 1)  # lr 0.004 -> ~0, beta1 cycled

    def step(*grads):
        for p, g in zip(params, grads):
            p.grad = g
        opt.step()

    fn = ltorch.capture(step) if mode == "captured" else step
    seen = []
    for i in range(steps):
        g = torch.Generator().manual_seed(10 + i)
        grads = [torch.randn(p.shape, generator=g).to(dev) for p in params]
        if late and i < 2:
            grads[-1] = None
        fn(*grads)
        sched.step()
        ltorch.mark_step()
        state = [{k: v.detach().cpu().clone() for k, v in opt.state[p].items()} for p in params]
        seen.append(([p.detach().cpu().clone() for p in params], state))
    return seen


CASES = {
    "adamw": (O.AdamW, dict(lr=0.1, weight_decay=0.1)),
    "adam_l2_amsgrad_maximize": (O.Adam, dict(lr=0.1, weight_decay=0.1, amsgrad=True, maximize=True)),
    "adam_betas_0_9999": (O.Adam, dict(lr=0.1, betas=(0.0, 0.9999), eps=0.0)),
}


@pytest.mark.parametrize("mode", ["traced", "captured"])
@pytest.mark.parametrize("name", list(CASES))
def test_multi_tensor_form_matches_the_per_parameter_form(dev, monkeypatch, name, mode):
    cls, kw = CASES[name]
    make = lambda ps: cls(ps, **kw)  # noqa: E731
    got = _run(dev, make, mode, late=True)
    monkeypatch.setitem(lazy_optim._MULTI_TENSOR, "torch.optim.adam", None)
    want = _run(dev, make, mode, late=True)
    for i, ((gp, gs), (wp, ws)) in enumerate(zip(got, want)):
        for a, b in zip(gp + [t for s in gs for t in s.values()], wp + [t for s in ws for t in s.values()]):
            torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True, msg=lambda m, i=i: f"step {i}: {m}")


def test_multi_tensor_form_records_fewer_nodes(dev, monkeypatch):
    """The optimizer step of ten parameters (replayed from the fourth call)
    makes fewer nodes than the per-parameter form's (the group's
    hyperparameter math once)."""
    def recorded():
        params = [torch.nn.Parameter(torch.randn(3 + k, 4).to(dev)) for k in range(10)]
        opt = O.AdamW(params, lr=1e-3, weight_decay=0.01)
        for _ in range(4):
            for p in params:
                p.grad = torch.ones_like(p)
            ltorch.mark_step()
            opt.step()
            ltorch.mark_step(wait=True)
        return metrics.graph_sizes()[-1][0]  # (the step's own graph: the gradients were inputs)

    fewer = recorded()
    monkeypatch.setitem(lazy_optim._MULTI_TENSOR, "torch.optim.adam", None)
    more = recorded()
    assert fewer <= more - 4 * 10, (fewer, more)  # (measured: 476 and 530)


# --- Adamax, NAdam and RAdam: against eager on the CPU ----------------------------------------

def _steps(dev, cls, kw, mode, steps, nonfinite):
    """Each step's parameters and state on the host, under a warm-up from lr 0, the last
    parameter's first gradient at the third step, and, with ``nonfinite``, NaN and
    infinite gradients at the second."""
    params = [p.clone().to(dev).requires_grad_() for p in _params()]
    opt = cls(params, **kw)
    sched = O.lr_scheduler.LambdaLR(opt, lambda i: min(1.0, i / 3))  # lr 0 at the first step

    def step(*grads):
        for p, g in zip(params, grads):
            p.grad = g
        opt.step()

    fn = ltorch.capture(step) if mode == "captured" else step
    seen = []
    for i in range(steps):
        g = torch.Generator().manual_seed(10 + i)
        grads = [torch.randn(p.shape, generator=g) for p in params]
        if nonfinite and i == 1:
            grads[0][0, 1], grads[0][1, 2], grads[1][0] = float("nan"), float("inf"), float("-inf")
        grads = [x.to(dev) for x in grads]
        if i < 2:
            grads[-1] = None
        fn(*grads)
        sched.step()
        if dev.type == "lazy":
            ltorch.mark_step()
        state = [{k: v.detach().cpu().clone() for k, v in opt.state[p].items()} for p in params]
        seen.append(([p.detach().cpu().clone() for p in params], state))
    return seen


EAGER_CASES = {
    "adamax": (O.Adamax, dict(lr=0.1)),
    "adamax_l2_maximize": (O.Adamax, dict(lr=0.1, weight_decay=0.1, maximize=True)),
    "adamax_eps0": (O.Adamax, dict(lr=0.1, eps=0.0)),
    "nadam": (O.NAdam, dict(lr=0.1)),
    "nadam_decoupled_maximize": (O.NAdam, dict(lr=0.1, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    "nadam_l2_betas_0_9999": (O.NAdam, dict(lr=0.1, weight_decay=0.1, betas=(0.0, 0.9999))),
    "radam": (O.RAdam, dict(lr=0.1)),  # rectified from the seventh step
    "radam_decoupled_maximize": (O.RAdam, dict(lr=0.1, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    "radam_l2_beta2_0_5": (O.RAdam, dict(lr=0.1, weight_decay=0.1, betas=(0.9, 0.5))),  # never rectified
}


@pytest.mark.parametrize("mode", ["traced", "captured"])
@pytest.mark.parametrize("name", list(EAGER_CASES))
def test_multi_tensor_forms_give_eager_values(dev, name, mode):
    """Adamax's, NAdam's and RAdam's forms against eager after every step (RAdam's both
    sides of rho_t > 5), NaN and infinities where eager has them: Adamax's bit for bit;
    NAdam's and RAdam's within a few float32 roundings (eager's fused addcmul_ and its
    sqrt round otherwise: optim_foreach's module doc), their step counters exactly."""
    cls, kw = EAGER_CASES[name]
    steps, nonfinite = (8 if cls is O.RAdam else 5), "l2" in name
    want = _steps(torch.device("cpu"), cls, kw, "traced", steps, nonfinite)
    got = _steps(dev, cls, kw, mode, steps, nonfinite)
    tol = 0 if cls is O.Adamax else 1e-6
    for i, ((gp, gs), (wp, ws)) in enumerate(zip(got, want)):
        for a, b in zip(gp + [t for s in gs for t in s.values()], wp + [t for s in ws for t in s.values()]):
            torch.testing.assert_close(a, b, rtol=tol, atol=tol, equal_nan=True,
                                       msg=lambda m, i=i: f"step {i}: {m}")
            assert torch.equal(a.isnan(), b.isnan()) and torch.equal(a.isinf(), b.isinf())
        for s, t in zip(gs, ws):
            assert s.keys() == t.keys() and ("step" not in s or torch.equal(s["step"], t["step"]))


# CI (NAdam, RAdam): [Adamax] takes the same path (a multi-tensor form's group math once, as many programs)
@pytest.mark.parametrize("cls", [O.Adamax, pytest.param(O.NAdam, marks=BY_HAND), pytest.param(O.RAdam, marks=BY_HAND)],
                         ids=lambda c: c.__name__)
def test_multi_tensor_forms_record_fewer_nodes_and_compile_as_often(dev, monkeypatch, cls):
    """Ten parameters' step (replayed from the fourth call) makes fewer nodes than the
    per-parameter form's (measured: Adamax 319 and 328, NAdam 626 and 665, RAdam 618
    and 628, whose per-parameter form is torch's capturable branch), and as many programs."""
    def recorded():
        params = [torch.nn.Parameter(torch.randn(3 + k, 4).to(dev)) for k in range(10)]
        opt = cls(params, lr=1e-3, weight_decay=0.01)
        for p in params:  # (the gradients' own program, compiled before either form is counted)
            p.grad = torch.ones_like(p)
        ltorch.mark_step(wait=True)
        before = metrics.counters()["compiles"]
        for _ in range(4):
            for p in params:
                p.grad = torch.ones_like(p)
            ltorch.mark_step()
            opt.step()
            ltorch.mark_step(wait=True)
        return metrics.graph_sizes()[-1][0], metrics.counters()["compiles"] - before

    fewer, compiles = recorded()
    monkeypatch.setitem(lazy_optim._MULTI_TENSOR, "torch.optim." + cls.__name__.lower(), None)
    more, per_parameter_compiles = recorded()
    assert fewer <= more - 8, (fewer, more)
    assert compiles == per_parameter_compiles
