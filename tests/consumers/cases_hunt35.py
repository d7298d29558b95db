"""The loops of test_hunt35_torch.py: PyTorch code nobody here ran (hunts 24-34,
tests/zoo, test_user_loops.py, tests/torch list what was), run unchanged in
hunt 27's shape (``loop(device, each, dtype) -> (losses, state)``,
cases_hunt27.py) and compared by its ``compare`` (losses, state, fallbacks,
compiles and programs a step, a float64 referee on request).

Patterns: quantization-aware training with ``torch.ao.quantization``'s eager
mode (``fuse_modules_qat``, ``prepare_qat`` under the x86 QAT qconfig: the
fused ``FusedMovingAvgObsFakeQuantize`` observers; under the version-0
qconfig: ``FakeQuantize`` with moving-average min/max observers, per-channel
symmetric weights), ``torch.autograd.functional`` (a Newton step on a
logistic regression by ``hessian``, a Hutchinson Hessian-trace penalty by
``hvp`` with create_graph, ``jacobian`` with ``vectorize=True``), a
physics-informed network whose residual is ``torch.func``'s ``hessian`` and
``jacfwd`` (forward-mode over reverse-mode) of ``functional_call`` under
``vmap``, trained through, einops on torch tensors (``rearrange``,
``reduce``, ``repeat``, ``pack``/``unpack``, ``einsum`` and the
``einops.layers.torch`` ``Rearrange``/``Reduce``/``EinMix`` layers), and a
``GradScaler`` loop with gradient accumulation that meets an overflowing
micro-batch (the step skipped, the scale backed off) with ``unscale_`` and
``clip_grad_norm_``. :func:`threads` runs two loops in threads at once; :func:`adam_beside_dual_level`
steps Adam while another thread holds a forward-mode AD level.
``python tests/consumers/cases_hunt35.py [names]`` prints the table.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "zoo"))

from cases_hunt27 import _state, registry  # noqa: E402 (after the path)

STEPS = 4
WARMUP = 2
CASES, case = registry()


def _to(device, *xs):
    return [x.to(device) for x in xs]


# --- quantization-aware training -------------------------------------------------------------------


class _QatNet(nn.Module):
    """The shape of PyTorch's eager-mode QAT tutorial: stubs around conv-bn-relu
    blocks and a linear head."""

    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.relu2 = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        x = self.quant(x)
        x = self.relu1(self.bn1(self.conv1(x)))
        x = self.relu2(self.conv2(x))
        x = self.fc(torch.flatten(self.pool(x), 1))
        return self.dequant(x)


def _qat_loop(qconfig):
    def loop(device, each, dtype=torch.float32):
        import torch.ao.quantization as tq

        torch.manual_seed(0)
        model = _QatNet().to(dtype)
        model.train()
        model = tq.fuse_modules_qat(model, [["conv1", "bn1", "relu1"], ["conv2", "relu2"]])
        model.qconfig = qconfig()
        tq.prepare_qat(model, inplace=True)
        model = model.to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        g = torch.Generator().manual_seed(1)
        losses = []
        for step in range(STEPS):
            x = torch.rand(4, 3, 8, 8, generator=g).to(dtype)
            y = torch.randint(0, 4, (4,), generator=g)
            x, y = _to(device, x, y)
            if step == STEPS - 1:  # the tutorial's last epochs: observers and batch norm statistics frozen
                model.apply(tq.disable_observer)
                model.apply(nn.intrinsic.qat.freeze_bn_stats)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.detach())
            each()
        return losses, _state(model)

    return loop


def _qconfig_x86():
    import torch.ao.quantization as tq

    return tq.get_default_qat_qconfig("x86")


def _qconfig_v0():
    import torch.ao.quantization as tq

    return tq.get_default_qat_qconfig("fbgemm", version=0)


CASES["qat_fused_fake_quant_x86"] = _qat_loop(_qconfig_x86)
CASES["qat_fake_quant_observers_v0"] = _qat_loop(_qconfig_v0)
CASES["qat_fused_fake_quant_x86"].__name__ = "qat_fused_fake_quant_x86"
CASES["qat_fake_quant_observers_v0"].__name__ = "qat_fake_quant_observers_v0"


# --- torch.autograd.functional --------------------------------------------------------------------


@case
def autograd_functional_newton_logistic(device, each, dtype=torch.float32):
    """Newton's method on an L2-regularized logistic regression: the Hessian by
    ``torch.autograd.functional.hessian``, the gradient by ``jacobian``, the
    step by ``linalg.solve``; the parameters are a plain tensor."""
    from torch.autograd.functional import hessian, jacobian

    g = torch.Generator().manual_seed(1)
    X = torch.randn(32, 5, generator=g).to(dtype)
    w_true = torch.randn(5, generator=g).to(dtype)
    y = (X @ w_true + 0.3 * torch.randn(32, generator=g).to(dtype) > 0).to(dtype)
    X, y = _to(device, X, y)
    w = torch.zeros(5, dtype=dtype, device=device)

    def nll(w):
        return F.binary_cross_entropy_with_logits(X @ w, y) + 0.05 * w.pow(2).sum()

    losses = []
    for _ in range(STEPS):
        grad = jacobian(nll, w, vectorize=True)
        H = hessian(nll, w)
        w = w - torch.linalg.solve(H, grad)
        losses.append(nll(w).detach())
        each()
    return losses, {"w": w}


@case
def autograd_functional_hutchinson_trace_adam(device, each, dtype=torch.float32):
    """A flatness regularizer: Hutchinson's estimate of the Hessian's trace
    (``torch.autograd.functional.hvp`` with ``create_graph=True``, Rademacher
    probes drawn on the CPU) added to the loss and trained through."""
    from torch.autograd.functional import hvp
    from torch.func import functional_call

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3)).to(dtype).to(device)
    names = [n for n, _ in model.named_parameters()]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(8, 6, generator=g).to(dtype)
        t = torch.randint(0, 3, (8,), generator=g)
        probes = [(torch.randint(0, 2, p.shape, generator=g) * 2 - 1).to(dtype) for p in model.parameters()]
        x, t = _to(device, x, t)
        probes = _to(device, *probes)
        params = tuple(model.parameters())

        def task(*ps):
            return F.cross_entropy(functional_call(model, dict(zip(names, ps)), (x,)), t)

        loss, hv = hvp(task, params, tuple(probes), create_graph=True)
        trace = sum((v * h).sum() for v, h in zip(probes, hv))
        total = loss + 1e-2 * trace
        total.backward()
        opt.step()
        opt.zero_grad()
        losses.append(total.detach())
        each()
    return losses, _state(model)


# --- torch.func forward mode ----------------------------------------------------------------------


@case
def pinn_func_hessian_jacfwd_adam(device, each, dtype=torch.float32):
    """A physics-informed network for the 2-D Poisson equation ``-Laplace(u) = f``
    as torch.func's users write it: ``vmap(hessian(u))`` (``jacfwd(jacrev)``) of
    ``functional_call`` at collocation points for the residual, ``vmap(jacfwd(u))``
    for a Neumann boundary term, Adam on the parameters through both."""
    from torch.func import functional_call, hessian, jacfwd, vmap

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1))
    net = net.to(dtype).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=5e-3)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        inner = torch.rand(16, 2, generator=g).to(dtype)
        edge = torch.rand(8, 2, generator=g).to(dtype)
        edge[:, 0] = 0.0
        inner, edge = _to(device, inner, edge)
        params = dict(net.named_parameters())

        def u(p, xy):
            return functional_call(net, p, (xy,)).squeeze(-1)

        H = vmap(hessian(u, argnums=1), in_dims=(None, 0))(params, inner)  # (16, 2, 2)
        lap = H.diagonal(dim1=-2, dim2=-1).sum(-1)
        f = 2 * torch.pi ** 2 * torch.sin(torch.pi * inner[:, 0]) * torch.sin(torch.pi * inner[:, 1])
        du = vmap(jacfwd(u, argnums=1), in_dims=(None, 0))(params, edge)  # (8, 2)
        loss = (-lap - f).pow(2).mean() + (du[:, 0] - torch.pi * torch.sin(torch.pi * edge[:, 1])).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
        each()
    return losses, _state(net)


# --- einops on torch tensors ------------------------------------------------------------------------


class _EinopsMixer(nn.Module):
    """A patch mixer written with einops: ``Rearrange`` into patches, an ``EinMix``
    token mix, ``einops.einsum`` channel attention, ``pack``/``unpack`` of a
    class token, ``repeat`` and ``reduce`` pooling."""

    def __init__(self, dim=16, patches=16, classes=4):
        super().__init__()
        from einops.layers.torch import EinMix, Rearrange, Reduce

        self.to_patches = Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=2, p2=2)
        self.embed = nn.Linear(12, dim)
        self.token_mix = EinMix("b t c -> b s c", weight_shape="t s", bias_shape="s", t=patches, s=patches)
        self.cls = nn.Parameter(torch.randn(dim) * 0.02)
        # no bias: a key bias adds q.b to every score of a row, which softmax ignores (its gradient is 0
        # in exact arithmetic, AdamW moved it by lr-sized steps in each run's rounding: eager float32
        # itself ended 2.0e-2 from float64 there, lazycore 4.4e-2 from eager, losses within 2.3e-7)
        self.qk = nn.Linear(dim, 2 * dim, bias=False)
        self.norm = nn.LayerNorm(dim)
        self.pool = Reduce("b t c -> b c", "mean")
        self.head = nn.Linear(2 * dim, classes)

    def forward(self, x):
        from einops import einsum, pack, rearrange, reduce, repeat, unpack

        t = self.embed(self.to_patches(x))
        t = t + self.token_mix(self.norm(t))
        cls = repeat(self.cls, "c -> b c", b=t.shape[0])
        packed, ps = pack([cls, t], "b * c")
        q, k = rearrange(self.qk(packed), "b t (two c) -> two b t c", two=2)
        attn = einsum(q, k, "b i c, b j c -> b i j").softmax(-1)
        mixed = einsum(attn, packed, "b i j, b j c -> b i c")
        cls_out, tokens = unpack(mixed, ps, "b * c")
        peak = reduce(tokens, "b t c -> b c", "max")
        return self.head(torch.cat([cls_out + self.pool(tokens), peak], -1))


@case
def einops_mixer_adamw(device, each, dtype=torch.float32):
    torch.manual_seed(0)
    model = _EinopsMixer().to(dtype).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(4, 3, 8, 8, generator=g).to(dtype)
        y = torch.randint(0, 4, (4,), generator=g)
        x, y = _to(device, x, y)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
        each()
    return losses, _state(model)


# --- a GradScaler loop that overflows ---------------------------------------------------------------


@case
def grad_scaler_overflow_accumulate_clip(device, each, dtype=torch.float32):
    """Gradient accumulation (2 micro-batches a step) under ``GradScaler``,
    ``unscale_`` then ``clip_grad_norm_``; the second step's second micro-batch
    holds an overflowing value (a corrupt record), so the scaler finds an
    inf, skips that step and backs its scale off; later steps grow it back
    (``growth_interval=1``)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to(dtype).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler(device.type, init_scale=2.0 ** 12, growth_interval=1)
    g = torch.Generator().manual_seed(1)
    losses = []
    for step in range(STEPS):
        total = 0.0
        for micro in range(2):
            x = torch.randn(6, 8, generator=g).to(dtype)
            y = torch.randint(0, 3, (6,), generator=g)
            if step == 1 and micro == 1:
                x[0, 0] = 3e38
            x, y = _to(device, x, y)
            loss = F.cross_entropy(model(x), y) / 2
            scaler.scale(loss).backward()
            total = total + loss.detach()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        losses.append(torch.nan_to_num(total, nan=-1.0, posinf=-2.0))
        each()
    return losses, _state(model, scale=torch.tensor(scaler.get_scale()), step=torch.tensor(
        float(opt.state[next(model.parameters())]["step"])))


THREADED = ("autograd_functional_hutchinson_trace_adam", "autocast_bf16_grad_scaler_rmsprop")
"""The loops :func:`threads` runs at once: this module's hvp loop and hunt 27's autocast/GradScaler loop.
(This module's PINN beside them failed now and then: see :func:`adam_beside_dual_level`.)"""


def threads(names=THREADED):
    """The loops ``names`` (this module's or hunt 27's), each in a thread of its own on the lazy device at the same time (torch.func's transform stack and
    autocast's state are per thread; the pending graph and ``mark_step`` are the device's),
    against each run alone on eager CPU: name -> (largest relative loss difference, state
    difference, where), and the errors the threads raised."""
    import threading
    import traceback

    import cases_hunt27
    import lazycore.torch as ltorch
    from zoo_harness import _rel, _state_diff

    loops = {k: CASES[k] if k in CASES else cases_hunt27.CASES[k] for k in names}
    eager = {k: f(torch.device("cpu"), lambda: None) for k, f in loops.items()}
    lazy, errors = {}, []

    def work(k, stepped):
        def each():
            ltorch.mark_step()
            stepped.set()

        try:
            losses, state = loops[k](ltorch.device(), each)
            lazy[k] = [float(v.cpu()) for v in losses], cases_hunt27._cpu_state(state)
        except Exception:  # noqa: BLE001 (reported with its thread)
            errors.append((k, traceback.format_exc()))
        finally:
            stepped.set()

    # Each loop seeds torch's global generator and initialises its model from it, which is the
    # process's, not the thread's (in eager too): two set-ups at once drew each other's numbers
    # (a third of runs ended 0.2-0.8 from eager's losses). So a loop starts once the one before has
    # stepped; the rest of their steps run at once.
    running = []
    for k in loops:
        stepped = threading.Event()
        running.append(threading.Thread(target=work, args=(k, stepped)))
        running[-1].start()
        stepped.wait(timeout=600)
    for t in running:
        t.join()
    out = {}
    for k, (losses, state) in lazy.items():
        eager_losses, eager_state = eager[k]
        out[k] = (max(_rel(a, float(b)) for a, b in zip(losses, eager_losses)),
                  *_state_diff(state, cases_hunt27._cpu_state(eager_state)))
    return out, errors


def adam_beside_dual_level(device):
    """Two Adam steps of a linear layer on ``device`` while another thread is inside
    ``torch.autograd.forward_ad.dual_level()`` (as torch.func's ``jacfwd``/``jvp`` are): the
    last weight, or the error the steps raised. The dual level is the process's
    (``forward_ad._current_level``), not the thread's."""
    import threading

    import torch.autograd.forward_ad as fwAD

    import lazycore.torch as ltorch

    inside, done = threading.Event(), threading.Event()

    def hold():
        with fwAD.dual_level():
            inside.set()
            done.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    inside.wait()
    try:
        torch.manual_seed(0)
        model = nn.Linear(4, 2).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for _ in range(2):
            model(torch.ones(3, 4).to(device)).sum().backward()
            opt.step()
            opt.zero_grad()
            if device.type != "cpu":
                ltorch.mark_step()
        return model.weight.detach().cpu()
    finally:
        done.set()
        holder.join()


def compare(name, referee=False, elements=False):
    """Run loop ``name`` on eager CPU and on the lazy device as hunt 27's
    ``compare`` does: a cases_hunt27.Outcome."""
    import cases_hunt27

    return cases_hunt27.compare(name, referee, cases=CASES, elements=elements)


if __name__ == "__main__":  # python tests/consumers/cases_hunt35.py [names...]: a table
    from cases_hunt27 import print_table

    print_table(compare, CASES, sys.argv[1:])
