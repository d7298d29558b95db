"""torch.optim's optimizers over lazy parameters at boundary values and under
common learning-rate schedules: a few steps, traced (a mark_step each step)
and captured (``lazycore.torch.capture`` around the step), compared with the
same steps of eager PyTorch on the CPU after every step, at float32 tolerance
and with NaN exactly where eager has NaN.

The boundary values: a learning rate of 0 (where a warm-up schedule starts),
weight decay, betas of 0 and close to 1, a tiny and a zero eps, and
gradients that are zero, NaN or infinite, missing (a parameter without a
gradient) or zero in the rows of an Embedding the batch did not use. CI runs
a representative subset; ``LAZYCORE_TEST_FULL=1`` runs the whole cross
product (every optimizer with every boundary, gradient kind and mode).
"""

import inspect
import math

import pytest
import torch
import torch.nn.functional as F

import lazycore.torch as ltorch
from lazycore.observe import metrics
from _bits import FULL  # (tests/ is on the path)

O = torch.optim
STEPS = 4

OPTIMIZERS = {
    "sgd": (O.SGD, dict(lr=0.1)),
    "sgd_momentum_dampening": (O.SGD, dict(lr=0.1, momentum=0.9, dampening=0.5)),
    "sgd_nesterov": (O.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
    "adam": (O.Adam, dict(lr=0.1)),
    "adam_amsgrad_maximize": (O.Adam, dict(lr=0.1, amsgrad=True, maximize=True)),
    "adam_foreach": (O.Adam, dict(lr=0.1, foreach=True)),
    "adamw": (O.AdamW, dict(lr=0.1)),
    "adamw_amsgrad_foreach": (O.AdamW, dict(lr=0.1, amsgrad=True, foreach=True)),
    "rmsprop": (O.RMSprop, dict(lr=0.1)),
    "rmsprop_centered_momentum": (O.RMSprop, dict(lr=0.1, centered=True, momentum=0.5)),
    "adagrad": (O.Adagrad, dict(lr=0.1, lr_decay=0.01)),
    "adadelta": (O.Adadelta, dict(lr=1.0)),
    "adamax": (O.Adamax, dict(lr=0.1)),
    "nadam": (O.NAdam, dict(lr=0.1)),
    "nadam_decoupled": (O.NAdam, dict(lr=0.1, decoupled_weight_decay=True)),
    "radam": (O.RAdam, dict(lr=0.1)),
    "radam_decoupled": (O.RAdam, dict(lr=0.1, decoupled_weight_decay=True)),
    "asgd": (O.ASGD, dict(lr=0.1, t0=2)),
    "rprop": (O.Rprop, dict(lr=0.1)),
}
OPTIMIZERS.update({  # the foreach implementations (eager's are the same numbers as the single-tensor ones)
    f"{name}_foreach": (OPTIMIZERS[name][0], {**OPTIMIZERS[name][1], "foreach": True})
    for name in ("sgd_momentum_dampening", "rmsprop_centered_momentum", "adagrad", "adadelta", "adamax", "nadam",
                 "radam", "asgd", "rprop")
})

# the boundary values, each applied where the optimizer has the hyperparameter
BOUNDARIES = {
    "defaults": {},
    "lr0": dict(lr=0.0),
    "weight_decay": dict(weight_decay=0.1),
    "lr0_weight_decay": dict(lr=0.0, weight_decay=0.1),
    "betas_0_9999": dict(betas=(0.0, 0.9999), rho=0.9999, alpha=0.9999),
    "betas_9999_0": dict(betas=(0.9999, 0.0)),
    "eps_tiny": dict(eps=1e-30),
    "eps0": dict(eps=0.0),
}

GRADS = ("random", "zero", "nonfinite", "embedding", "missing")


def _kwargs(cls, base, boundary):
    accepted = inspect.signature(cls.__init__).parameters
    kw = dict(base)
    for k, v in BOUNDARIES[boundary].items():
        if k in accepted:
            kw[k] = v
    return kw


def _applies(cls, boundary):
    accepted = inspect.signature(cls.__init__).parameters
    keys = BOUNDARIES[boundary]
    return not keys or any(k in accepted for k in keys if k != "lr") or keys.keys() == {"lr"}


def _params():
    g = torch.Generator().manual_seed(0)
    return {"weight": torch.randn(2, 3, generator=g), "bias": torch.randn(3, generator=g),
            "table": torch.randn(5, 2, generator=g)}


def _grads(kind, step):
    """The gradients of each parameter at ``step`` (``None``: no gradient)."""
    g = torch.Generator().manual_seed(100 + step)
    grads = {k: torch.randn(v.shape, generator=g) for k, v in _params().items()}
    if kind == "zero":
        grads = {k: torch.zeros_like(v) for k, v in grads.items()}
    elif kind == "nonfinite" and step == 1:
        grads["weight"][0, 1] = math.nan
        grads["weight"][1, 2] = math.inf
        grads["bias"][0] = -math.inf
    elif kind == "missing":
        grads["bias"] = None
    return grads


def _loss(params, grads, kind, rows_used):
    """A loss whose gradient with respect to each parameter is its ``grads``
    entry (exactly: the gradient of ``sum(p * g)`` is ``g``), and, for
    ``embedding``, the table's rows 0 and 3 looked up as an Embedding does."""
    loss = 0
    for name, p in params.items():
        g = grads[name]
        if g is None:
            continue
        if name == "table" and kind == "embedding":
            rows = F.embedding(rows_used, p)
            loss = loss + (rows * g[:3].to(p.device)).sum()
        else:
            loss = loss + (p * g.to(p.device)).sum()
    return loss


def _run(dev, make_opt, kind, mode, make_sched=None, steps=STEPS):
    """The parameters (on the CPU) after each of ``steps`` steps, from one
    start, the step (captured or not) and the compiles so far after each."""
    params = {k: v.clone().to(dev).requires_grad_() for k, v in _params().items()}
    opt = make_opt(list(params.values()))
    sched = make_sched(opt) if make_sched else None
    rows_used = torch.tensor([0, 3, 0], device=dev)  # (made outside the step: a capture refuses host data in it)

    def step(*flat):
        grads = dict(zip(params, flat[:len(params)]))
        grads = {k: (None if kind == "missing" and k == "bias" else v) for k, v in grads.items()}
        opt.zero_grad()
        _loss(params, grads, kind, rows_used).backward()
        opt.step()

    fn = ltorch.capture(step) if mode == "captured" else step
    seen, compiles = [], []
    for i in range(steps):
        grads = _grads(kind, i)
        flat = [(torch.zeros(()) if g is None else g).to(dev) for g in grads.values()]
        fn(*flat)
        if sched is not None:
            sched.step()
        if dev.type == "lazy":
            ltorch.mark_step()
        seen.append({k: p.detach().cpu().clone() for k, p in params.items()})
        compiles.append(metrics.counters()["compiles"])
    return seen, fn, compiles


def _compare(got, eager):
    for i, (a, b) in enumerate(zip(got, eager)):
        for name in b:
            torch.testing.assert_close(a[name], b[name], equal_nan=True,
                                       msg=lambda m, i=i, name=name: f"step {i}, {name}: {m}")


def _check(dev, make_opt, kind, mode, make_sched=None, steps=STEPS):
    eager = _run(torch.device("cpu"), make_opt, kind, "traced", make_sched, steps)[0]
    got, fn, compiles = _run(dev, make_opt, kind, mode, make_sched, steps)
    _compare(got, eager)
    return fn, compiles


def _cases():
    """(optimizer, boundary, gradients, mode): the representative subset CI
    runs, or with LAZYCORE_TEST_FULL=1 every combination that applies."""
    if FULL:
        return [(o, b, g, m) for o in OPTIMIZERS for b in BOUNDARIES for g in GRADS for m in ("traced", "captured")
                if _applies(OPTIMIZERS[o][0], b)]
    return [  # each optimizer once or twice, each boundary, gradient kind and mode several times
        ("adam", "lr0", "embedding", "traced"),
        ("adam", "eps_tiny", "zero", "traced"),
        ("adam_amsgrad_maximize", "lr0_weight_decay", "zero", "captured"),
        ("adam_foreach", "betas_0_9999", "random", "captured"),
        ("adamw", "lr0_weight_decay", "embedding", "captured"),
        ("adamw_amsgrad_foreach", "defaults", "nonfinite", "traced"),
        ("adamax", "eps0", "embedding", "traced"),
        ("nadam", "betas_0_9999", "random", "captured"),
        ("nadam", "betas_9999_0", "random", "traced"),
        ("nadam_decoupled", "lr0_weight_decay", "embedding", "traced"),
        ("radam", "betas_0_9999", "random", "captured"),
        ("radam_decoupled", "lr0", "nonfinite", "traced"),
        ("radam_foreach", "betas_0_9999", "embedding", "traced"),
        ("asgd_foreach", "lr0", "random", "captured"),
        ("asgd", "weight_decay", "missing", "captured"),
        ("rprop", "lr0", "nonfinite", "traced"),
        ("rmsprop", "lr0", "missing", "captured"),
        ("rmsprop_centered_momentum", "eps0", "embedding", "traced"),
        ("adadelta", "betas_0_9999", "embedding", "traced"),
        ("adagrad", "weight_decay", "missing", "traced"),
        ("sgd", "lr0", "embedding", "traced"),
        ("sgd_momentum_dampening", "weight_decay", "nonfinite", "captured"),
        ("sgd_nesterov", "lr0", "missing", "traced"),
    ]


@pytest.mark.parametrize("opt_name,boundary,kind,mode", _cases())
def test_optimizer_at_a_boundary_matches_eager(dev, opt_name, boundary, kind, mode):
    cls, base = OPTIMIZERS[opt_name]
    kw = _kwargs(cls, base, boundary)
    _check(dev, lambda ps: cls(ps, **kw), kind, mode)


def test_lr0_adam_leaves_parameters_without_gradient_unchanged(dev):
    """The issue's case: Adam at lr 0 over an Embedding; rows the batch did
    not use (zero gradient, zero second moment) stay what they were."""
    torch.manual_seed(0)
    emb = torch.nn.Embedding(6, 3)
    start = emb.weight.detach().clone()
    emb = emb.to(dev)
    opt = O.Adam(emb.parameters(), lr=0.0)
    emb(torch.tensor([0, 1], device=dev)).sum().backward()
    opt.step()
    ltorch.mark_step()
    torch.testing.assert_close(emb.weight.detach().cpu(), start, rtol=0, atol=0)


def _transformers(name):
    def make(opt):
        import transformers

        return getattr(transformers, name)(opt, num_warmup_steps=2, num_training_steps=6)

    return make


SCHEDULED_STEPS = 6
"""(SGD with momentum, captured, compares its third and fourth calls: replays from the fifth)"""

SCHEDULES = {
    "linear_warmup": _transformers("get_linear_schedule_with_warmup"),
    "cosine_warmup": _transformers("get_cosine_schedule_with_warmup"),
    "onecycle": lambda opt: O.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=SCHEDULED_STEPS + 1, cycle_momentum=False),
    "onecycle_momentum": lambda opt: O.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=SCHEDULED_STEPS + 1),
    "cosine": lambda opt: O.lr_scheduler.CosineAnnealingLR(opt, T_max=3),
    "lambda": lambda opt: O.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1.0 + s)),
}
READS_LR = (O.Adam, O.Adamax, O.NAdam, O.RAdam, O.ASGD, O.Rprop, O.SGD, O.RMSprop, O.Adagrad, O.Adadelta)
"""Optimizers whose step reads a scheduled rate as a program input (every
one here but LBFGS, lazycore.frontends.torch.optim)."""
SCHEDULED = ("adamw", "adam_amsgrad_maximize", "sgd_nesterov", "adamax", "nadam", "radam", "rmsprop", "asgd")


def _schedule_cases():
    if FULL:
        return [(o, s, m) for o in SCHEDULED for s in SCHEDULES for m in ("traced", "captured")]
    return [("adamw", "linear_warmup", "captured"), ("adamw", "cosine_warmup", "captured"),
            ("adam_amsgrad_maximize", "linear_warmup", "traced"), ("radam", "onecycle", "traced"),
            ("sgd_nesterov", "lambda", "captured"), ("asgd", "cosine", "traced")]


@pytest.mark.parametrize("opt_name,schedule,mode", _schedule_cases())
def test_scheduled_optimizer_matches_eager(dev, opt_name, schedule, mode):
    cls, base = OPTIMIZERS[opt_name]
    make_sched = SCHEDULES[schedule]
    if schedule == "onecycle_momentum" and "betas" not in inspect.signature(cls.__init__).parameters \
            and "momentum" not in base:
        pytest.skip("OneCycleLR cycles momentum only for optimizers that have it")
    fn, compiles = _check(dev, lambda ps: cls(ps, **base), "embedding", mode, make_sched, SCHEDULED_STEPS)
    if schedule != "onecycle_momentum" and issubclass(cls, READS_LR):
        # a new rate every step is an input: no new program for it, and no retrace of a capture
        assert compiles[-1] == compiles[1], compiles
        if mode == "captured":
            assert fn.replays >= 1, fn.why


@pytest.mark.parametrize("lr", [1.0] + [0.0] * FULL)
def test_lbfgs_matches_eager(dev, lr):
    """LBFGS steps with a closure (traced per op, reading the loss back)."""
    results = []
    for d in (torch.device("cpu"), dev):
        params = {k: v.clone().to(d).requires_grad_() for k, v in _params().items()}
        target = {k: (v * 0.5).to(d) for k, v in _params().items()}
        opt = O.LBFGS(list(params.values()), lr=lr, max_iter=2, history_size=2)

        def closure():
            opt.zero_grad()
            loss = sum(((p - target[k]) ** 2).sum() for k, p in params.items())
            loss.backward()
            return loss

        seen = []
        for _ in range(2):
            opt.step(closure)
            if d.type == "lazy":
                ltorch.mark_step()
            seen.append({k: p.detach().cpu().clone() for k, p in params.items()})
        results.append(seen)
    _compare(results[1], results[0])
