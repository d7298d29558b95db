"""Seeded random training programs, run on eager torch (CPU) and on lazycore side by side.

Where tests/fuzz_programs.py draws straight-line array programs, this draws
whole training steps: a small model stacked from torch.nn layers (Embedding,
sparse or dense, Linear, LayerNorm, BatchNorm1d in train mode, Dropout with
p=0, GELU/ReLU/Tanh, Conv1d, residual adds), a loss (cross_entropy or
mse_loss), an optimizer from torch.optim with hyperparameters drawn with a
bias to their boundary values (lr 0, weight decay 0, betas 0 and close to 1,
eps tiny or 0, momentum, nesterov, amsgrad, maximize, foreach), maybe a
learning-rate schedule (one that starts at lr 0 among them) and
clip_grad_norm_, gradients overwritten with zeros, NaN or Inf at some steps,
and parameters that get no gradient. The program runs several steps on the
CPU and on the lazy device, traced (a mark_step per step) or captured
(``lazycore.torch.capture`` around the step); after every step the loss,
every parameter and every buffer (BatchNorm's running statistics) must agree
with eager: float32 tolerance (rtol 1e-4), NaN and Inf exactly where eager has
them; an error must be eager's error, at the same step.

``python -m tests.fuzz_training 200`` (or ``LAZYCORE_FUZZ_TRAINING=200`` for the
test suite) runs a large budget by hand and prints the figures; the suite
runs a small one.
"""

from __future__ import annotations

import math
import random
import sys
import time
import traceback

import torch
import torch.nn.functional as F

O = torch.optim


class Mismatch(AssertionError):
    pass


# --- models ------------------------------------------------------------------------


class Residual(torch.nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, x):
        return x + self.body(x)


class Conv(torch.nn.Module):
    """[B, d] as a one-channel signal: Conv1d to ``channels``, back to d with a Linear."""

    def __init__(self, d, channels, kernel):
        super().__init__()
        self.conv = torch.nn.Conv1d(1, channels, kernel, padding=kernel // 2)
        self.out = torch.nn.Linear(channels * d, d)

    def forward(self, x):
        return self.out(self.conv(x.unsqueeze(1)).flatten(1))


class Tokens(torch.nn.Module):
    """Token ids [B, T] -> [B, d]: an Embedding, averaged over T."""

    def __init__(self, vocab, d, sparse, padding_idx):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d, sparse=sparse, padding_idx=padding_idx)

    def forward(self, ids):
        return self.emb(ids).mean(1)


class Model(torch.nn.Module):
    def __init__(self, first, body, head, unused):
        super().__init__()
        self.first = first
        self.body = torch.nn.Sequential(*body)
        self.head = head
        self.unused = unused  # a parameter the loss never reaches: its .grad stays None

    def forward(self, x):
        return self.head(self.body(self.first(x)))


ACTIVATIONS = {"gelu": torch.nn.GELU, "relu": torch.nn.ReLU, "tanh": torch.nn.Tanh}


# --- optimizers ---------------------------------------------------------------------

# name -> (class, {hyperparameter: choices}); the first choice of each is a
# boundary value where the optimizer has one, so a draw reaches them often.
OPTIMIZERS = {
    "sgd": (O.SGD, dict(lr=[0.0, 0.1, 0.01], momentum=[0.0, 0.9, 0.999], dampening=[0.0, 0.5],
                        nesterov=[False, True], weight_decay=[0.0, 0.1], maximize=[False, True],
                        foreach=[None, True, False])),
    "adam": (O.Adam, dict(lr=[0.0, 1e-2, 1e-3], betas=[(0.0, 0.9999), (0.9, 0.999), (0.9999, 0.0), (0.0, 0.0)],
                          eps=[1e-30, 1e-8, 0.0], weight_decay=[0.0, 0.1], amsgrad=[False, True],
                          maximize=[False, True], foreach=[None, True, False])),
    "adamw": (O.AdamW, dict(lr=[0.0, 1e-2, 1e-3], betas=[(0.0, 0.9999), (0.9, 0.999), (0.9999, 0.0)],
                            eps=[1e-30, 1e-8, 0.0], weight_decay=[0.0, 0.01, 0.1], amsgrad=[False, True],
                            foreach=[None, True, False])),
    "rmsprop": (O.RMSprop, dict(lr=[0.0, 1e-2], alpha=[0.9999, 0.99, 0.0], eps=[1e-30, 1e-8],
                                weight_decay=[0.0, 0.1], momentum=[0.0, 0.5], centered=[False, True])),
    "adagrad": (O.Adagrad, dict(lr=[0.0, 0.1], lr_decay=[0.0, 0.01], weight_decay=[0.0, 0.1], eps=[1e-30, 1e-10])),
    "adadelta": (O.Adadelta, dict(lr=[0.0, 1.0], rho=[0.9999, 0.9, 0.0], eps=[1e-30, 1e-6],
                                  weight_decay=[0.0, 0.1])),
    "adamax": (O.Adamax, dict(lr=[0.0, 1e-2], betas=[(0.0, 0.9999), (0.9, 0.999)], eps=[1e-30, 1e-8, 0.0],
                              weight_decay=[0.0, 0.1])),
    "nadam": (O.NAdam, dict(lr=[0.0, 1e-2], betas=[(0.0, 0.9999), (0.9, 0.999), (0.9999, 0.0)],
                            eps=[1e-30, 1e-8], weight_decay=[0.0, 0.1], decoupled_weight_decay=[False, True])),
    "radam": (O.RAdam, dict(lr=[0.0, 1e-2], betas=[(0.0, 0.9999), (0.9, 0.999)], eps=[1e-30, 1e-8],
                            weight_decay=[0.0, 0.1], decoupled_weight_decay=[False, True])),
    "asgd": (O.ASGD, dict(lr=[0.0, 1e-2], t0=[1, 1e6], weight_decay=[0.0, 0.1])),
    "rprop": (O.Rprop, dict(lr=[0.0, 1e-2], etas=[(0.5, 1.2), (0.1, 2.0)], step_sizes=[(1e-6, 50.0)])),
}
SPARSE_OK = ("sgd", "adagrad")  # torch.optim's optimizers that take sparse gradients (and SparseAdam)

SCHEDULES = {
    "none": None,
    "warmup_from_0": lambda opt: O.lr_scheduler.LambdaLR(opt, lambda s: s / 2.0),  # lr 0 at the first step
    "step": lambda opt: O.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5),
    "cosine": lambda opt: O.lr_scheduler.CosineAnnealingLR(opt, T_max=2),  # reaches eta_min 0
    "onecycle": lambda opt: O.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=8, cycle_momentum=False),
}


class Case:
    """One random training program (everything drawn from ``seed``)."""

    def __init__(self, seed: int):
        r = random.Random(seed)
        self.seed = seed
        self.steps = r.choice([2, 3, 4])
        self.batch = r.choice([2, 4, 5])
        self.mode = r.choice(["traced", "captured"])
        self.d = r.choice([4, 6, 8])
        self.tokens = r.random() < 0.4
        self.sparse = self.tokens and r.random() < 0.3
        self.vocab, self.length = 7, 3
        self.padding_idx = r.choice([None, None, 0]) if self.tokens else None
        self.blocks = []
        for _ in range(r.randint(1, 4)):
            kind = r.choice(["linear", "layernorm", "batchnorm", "dropout", "act", "conv", "residual"])
            self.blocks.append((kind, r.choice(list(ACTIVATIONS)), r.choice([1, 2]), r.choice([1, 3])))
        if self.batch == 2 and any(k == "batchnorm" for k, *_ in self.blocks):
            self.batch = 4  # BatchNorm over 2 rows gives +-1 whatever they hold: a flat function
        self.loss = r.choice(["cross_entropy", "mse"])
        self.classes = r.choice([2, 3])
        self.label_smoothing = r.choice([0.0, 0.0, 0.1])
        names = SPARSE_OK if self.sparse else list(OPTIMIZERS)
        self.optimizer = r.choice(names)
        cls, space = OPTIMIZERS[self.optimizer]
        self.hyper = {k: r.choice(v) for k, v in space.items()}
        if self.optimizer == "sgd" and self.hyper["nesterov"] and (self.hyper["momentum"] == 0
                                                                   or self.hyper["dampening"] != 0):
            self.hyper["nesterov"] = False  # eager refuses nesterov without momentum or with dampening
        if self.sparse:  # what eager refuses for sparse gradients: weight decay, their norm
            self.hyper["weight_decay"] = 0.0
        self.schedule = r.choice(list(SCHEDULES))
        self.clip = r.choice([None, None, 1.0, 0.0]) if not self.sparse else None
        # gradients overwritten after backward: (step, kind), kind one of zero, nan, inf
        self.poison = [(s, r.choice(["zero", "nan", "inf", "neg_inf"])) for s in range(self.steps) if r.random() < 0.25]
        self.poison_param = r.random()

    def describe(self) -> str:
        blocks = ", ".join(k if k not in ("act", "residual") else f"{k}:{a}" for k, a, _, _ in self.blocks)
        return (f"seed {self.seed}: {self.mode}, {self.steps} steps, batch {self.batch}, "
                f"{'sparse ' if self.sparse else ''}{'tokens' if self.tokens else 'features'} d={self.d} "
                f"[{blocks}] {self.loss}, {self.optimizer}({self.hyper}), schedule {self.schedule}, "
                f"clip {self.clip}, poison {self.poison}")

    # -- building (on the CPU, seeded; the lazy copy is moved from an identical copy) --

    def model(self) -> Model:
        torch.manual_seed(self.seed)
        d = self.d
        first = Tokens(self.vocab, d, self.sparse, self.padding_idx) if self.tokens else torch.nn.Linear(5, d)
        body = []
        for kind, act, channels, kernel in self.blocks:
            if kind == "linear":
                body.append(torch.nn.Linear(d, d))
            elif kind == "layernorm":
                body.append(torch.nn.LayerNorm(d))
            elif kind == "batchnorm":
                # After a smooth activation. What comes right before BatchNorm must not be flat:
                # a bias there (or a ReLU zero in all but one row) has a gradient that is 0 only
                # up to rounding, and Adam's family divides it by its own size, so rounding
                # noise of 1e-7 becomes a step of up to +-lr (or NaN at eps 0), different on
                # either side. (A batch of 2 is flat for every feature: see __init__.)
                body.append(ACTIVATIONS["tanh" if act == "relu" else act]())
                body.append(torch.nn.BatchNorm1d(d))
            elif kind == "dropout":
                body.append(torch.nn.Dropout(0.0))
            elif kind == "act":
                body.append(ACTIVATIONS[act]())
            elif kind == "conv":
                body.append(Conv(d, channels, kernel))
            else:
                body.append(Residual(torch.nn.Sequential(torch.nn.Linear(d, d), ACTIVATIONS[act]())))
        out = self.classes if self.loss == "cross_entropy" else 2
        return Model(first, body, torch.nn.Linear(d, out), torch.nn.Linear(2, 2))

    def data(self):
        g = torch.Generator().manual_seed(1000 + self.seed)
        batches = []
        for _ in range(self.steps):
            if self.tokens:
                x = torch.randint(0, self.vocab, (self.batch, self.length), generator=g)
            else:
                x = torch.randn(self.batch, 5, generator=g) * 2
            if self.loss == "cross_entropy":
                y = torch.randint(0, self.classes, (self.batch,), generator=g)
            else:
                y = torch.randn(self.batch, 2, generator=g)
            batches.append((x, y))
        return batches

    def poison_masks(self, model: Model):
        """Per step: (index of the parameter, fill mask, fill value) or None; made on the CPU."""
        params = [p for n, p in model.named_parameters() if not n.startswith("unused")]
        if self.sparse:  # a sparse gradient is not overwritten in place
            params = params[1:]
        i = int(self.poison_param * len(params))
        shape = params[i].shape
        plan = {}
        for step, kind in self.poison:
            if kind == "zero":
                mask = torch.ones(shape, dtype=torch.bool)
                value = torch.zeros(shape)
            else:
                mask = torch.zeros(shape, dtype=torch.bool).view(-1)
                mask[0] = True
                mask = mask.view(shape)
                value = torch.full(shape, {"nan": math.nan, "inf": math.inf, "neg_inf": -math.inf}[kind])
            plan[step] = (i, mask, value)
        return plan


# --- running ------------------------------------------------------------------------


def train(case: Case, device, mode: str):
    """Run the case's steps on ``device``; a list, per step, of (loss, {name: tensor}) on the
    CPU, then the exception that stopped it (or None)."""
    import lazycore.torch as ltorch

    lazy = device.type == "lazy"
    model = case.model().to(device)
    model.train()
    cls, _ = OPTIMIZERS[case.optimizer]
    hyper = {k: v for k, v in case.hyper.items() if not (k == "foreach" and v is None)}
    params = list(model.parameters())
    opt = cls(params, **hyper)
    make_sched = SCHEDULES[case.schedule]
    sched = make_sched(opt) if make_sched else None
    plan = {s: (i, m.to(device), v.to(device)) for s, (i, m, v) in case.poison_masks(model).items()}
    trained = [p for n, p in model.named_parameters() if not n.startswith("unused")][1 if case.sparse else 0:]
    batches = [(x.to(device), y.to(device)) for x, y in case.data()]

    def step(x, y, *poison):
        opt.zero_grad()
        out = model(x)
        if case.loss == "cross_entropy":
            loss = F.cross_entropy(out, y, label_smoothing=case.label_smoothing)
        else:
            loss = F.mse_loss(out, y)
        loss.backward()
        if poison:
            i, mask, value = poison
            g = trained[i].grad
            g.copy_(torch.where(mask, value, g))
        if case.clip is not None:
            torch.nn.utils.clip_grad_norm_(trained, case.clip)
        opt.step()
        return loss.detach()

    fn = ltorch.capture(step) if lazy and mode == "captured" else step
    seen = []
    try:
        for s in range(case.steps):
            x, y = batches[s]
            poison = () if s not in plan else (plan[s][0],) + plan[s][1:]
            if poison:
                loss = fn(x, y, *poison)
            else:
                loss = fn(x, y)
            if sched is not None:
                sched.step()
            if lazy:
                ltorch.mark_step()
            state = {n: t.detach().cpu().clone() for n, t in model.state_dict().items()}
            seen.append((loss.cpu().clone(), state))
    except Exception as e:  # noqa: BLE001  (compared with eager's)
        return seen, e
    return seen, None


def _compare(case: Case, step: int, what: str, got: torch.Tensor, want: torch.Tensor):
    if got.dtype != want.dtype or got.shape != want.shape:
        raise Mismatch(f"{case.describe()}\nstep {step}, {what}: {got.dtype}{tuple(got.shape)} "
                       f"vs eager {want.dtype}{tuple(want.shape)}")
    if not want.is_floating_point():
        ok = torch.equal(got, want)
    else:
        ok = torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf()) \
            and torch.equal(got[got.isinf()], want[want.isinf()]) \
            and torch.allclose(got, want, rtol=1e-4, atol=1e-5, equal_nan=True)
    if not ok:
        raise Mismatch(f"{case.describe()}\nstep {step}, {what}:\n{got}\nvs eager\n{want}")


def run(seed: int, device=None) -> str:
    """Run training program ``seed`` on eager and on lazycore; "ok", or Mismatch."""
    import lazycore.torch as ltorch

    case = Case(seed)
    device = device or ltorch.device()
    want, err_w = train(case, torch.device("cpu"), case.mode)
    got, err_g = train(case, device, case.mode)
    if (err_w is None) != (err_g is None) or (err_w is not None and not isinstance(err_g, type(err_w))):
        trace = "".join(traceback.format_exception(err_g)) if err_g is not None else ""
        raise Mismatch(f"{case.describe()}\neager raised {err_w!r} after {len(want)} steps, "
                       f"lazycore raised {err_g!r} after {len(got)} steps\n{trace}")
    if len(got) != len(want):
        raise Mismatch(f"{case.describe()}\n{len(got)} steps ran, eager ran {len(want)}")
    for s, ((loss_g, state_g), (loss_w, state_w)) in enumerate(zip(got, want)):
        _compare(case, s, "loss", loss_g, loss_w)
        for name in state_w:
            _compare(case, s, name, state_g[name], state_w[name])
    return "ok"


def main(argv) -> int:
    budget = int(argv[0]) if argv else 100
    start = int(argv[1]) if len(argv) > 1 else 0
    import warnings

    failures = []
    t0 = time.time()
    for seed in range(start, start + budget):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                run(seed)
            except Mismatch as e:
                failures.append((seed, str(e)))
    took = time.time() - t0
    print(f"training programs: {budget - len(failures)} of {budget} (seeds {start}..{start + budget - 1}) "
          f"behave as eager; {took:.0f} s")
    for seed, text in failures:
        lines = text.splitlines()
        print(f"  seed {seed}: {lines[0]}\n      {' | '.join(lines[1:3])[:400]}")
    return 0 if not failures else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
