"""Users' own training and sampling loops on the lazy device (issue 39): the
shapes of loop that PyTorch's tutorials and papers' reference code write
(a GAN's two optimizers, CLIP's clamped temperature, a diffusion sampler
indexing its schedule by the step number), cut down to a few tiny layers.

Each loop is run on eager CPU and on the lazy device with a ``mark_step()``
per iteration. The values must be eager's. The program counts are what a
loop that marks its own steps should get: one program an iteration, and a
bounded number of compiles in a sampling loop. Where lazycore does not do
that yet the test is a strict xfail whose reason names the module and the
cause, so the fix shows as an XPASS.
"""

from __future__ import annotations

import math
import random
import warnings

import pytest
import torch

import lazycore.torch as ltorch
from lazycore.observe import metrics
from lazycore.trace.capture import CaptureWarning

pytestmark = pytest.mark.usefixtures("clean_runtime", "fresh_cutter")

STEPS = 5


@pytest.fixture
def dev():
    return ltorch.device()


def _counted(loop, steps):
    """Run ``loop(i)`` for each step, a ``mark_step()`` after it: (programs, compiles) per step."""
    programs, compiles = [], []
    for i in range(steps):
        c = metrics.counters()
        e0, k0 = c.get("executions", 0), c.get("compiles", 0)
        loop(i)
        ltorch.mark_step()
        c = metrics.counters()
        programs.append(c.get("executions", 0) - e0)
        compiles.append(c.get("compiles", 0) - k0)
    return programs, compiles


# --- a GAN: two models, two optimizers, one mark_step an iteration -----------------------------


def _gan(device):
    """Train a generator and a discriminator in turn (DCGAN's loop: D on real and
    detached fake, then G through D), each with its own optimizer."""
    torch.manual_seed(0)
    gen, disc = torch.nn.Linear(3, 4), torch.nn.Linear(4, 1)
    gen.to(device), disc.to(device)
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-2, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=1e-2, betas=(0.5, 0.999))
    crit = torch.nn.BCEWithLogitsLoss()
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(8, 4, generator=g).to(device), torch.randn(8, 3, generator=g).to(device))
            for _ in range(STEPS)]
    losses = []

    def step(i):
        real, noise = data[i]
        ones, zeros = torch.ones(8, device=device), torch.zeros(8, device=device)
        opt_d.zero_grad(set_to_none=True)
        fake = gen(noise)
        loss_d = crit(disc(real).view(-1), ones) + crit(disc(fake.detach()).view(-1), zeros)
        loss_d.backward()
        opt_d.step()
        opt_g.zero_grad(set_to_none=True)
        loss_g = crit(disc(fake).view(-1), ones)
        loss_g.backward()
        opt_g.step()
        losses.append((loss_d.detach(), loss_g.detach()))

    return step, losses, (gen, disc)


def _run_gan(device, lazy):
    step, losses, models = _gan(device)
    counts = _counted(step, STEPS) if lazy else [step(i) for i in range(STEPS)]
    values = [float(v) for pair in losses for v in pair]
    params = [p.detach().cpu() for m in models for p in m.parameters()]
    return values, params, counts


def test_a_gan_loop_gives_eager_values(dev):
    eager_losses, eager_params, _ = _run_gan("cpu", False)
    losses, params, _ = _run_gan(dev, True)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(eager_losses), rtol=1e-5, atol=1e-6)
    for p, e in zip(params, eager_params):
        torch.testing.assert_close(p, e, rtol=1e-5, atol=1e-6)


def test_a_gan_loop_runs_one_program_an_iteration(dev):
    _, _, (programs, compiles) = _run_gan(dev, True)
    assert programs[2:] == [1] * (STEPS - 2), programs
    assert sum(compiles[2:]) == 0, compiles


# --- CLIP: a learnable temperature clamped after the optimizer step ---------------------------


CEILING = 2.0


def _clip(device):
    """open_clip's loop: a symmetric cross-entropy over a logits matrix scaled by
    ``logit_scale.exp()``, and ``logit_scale.clamp_(0, CEILING)`` after each step
    (open_clip's ceiling is log(100); here one under the start, so it binds)."""
    torch.manual_seed(0)
    img, txt = torch.nn.Linear(6, 4).to(device), torch.nn.Linear(5, 4).to(device)
    scale = torch.nn.Parameter(torch.tensor(math.log(1 / 0.07)).to(device))
    opt = torch.optim.AdamW([*img.parameters(), *txt.parameters(), scale], lr=0.5)
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(8, 6, generator=g).to(device), torch.randn(8, 5, generator=g).to(device))
            for _ in range(STEPS)]
    labels = torch.arange(8, device=device)
    losses = []

    def step(i):
        a, b = data[i]
        za = torch.nn.functional.normalize(img(a), dim=-1)
        zb = torch.nn.functional.normalize(txt(b), dim=-1)
        logits = scale.exp() * za @ zb.t()
        loss = (torch.nn.functional.cross_entropy(logits, labels)
                + torch.nn.functional.cross_entropy(logits.t(), labels)) / 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            scale.clamp_(0, CEILING)
        losses.append(loss.detach())

    return step, losses, (img, txt, scale)


def _run_clip(device, lazy):
    step, losses, (img, txt, scale) = _clip(device)
    counts = _counted(step, STEPS) if lazy else [step(i) for i in range(STEPS)]
    params = [p.detach().cpu() for p in (*img.parameters(), *txt.parameters(), scale)]
    return [float(v) for v in losses], params, counts


def test_a_clip_loop_with_a_clamped_temperature_gives_eager_values(dev):
    eager_losses, eager_params, _ = _run_clip("cpu", False)
    losses, params, _ = _run_clip(dev, True)
    # the start, log(1 / 0.07) = 2.66, is over the ceiling and AdamW's first step moves it by
    # about lr: the clamp binds at the first step whichever way it moved
    assert float(eager_params[-1]) <= CEILING
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(eager_losses), rtol=1e-5, atol=1e-6)
    for p, e in zip(params, eager_params):
        torch.testing.assert_close(p, e, rtol=1e-5, atol=1e-6)


def test_a_clip_loop_with_a_clamped_temperature_runs_one_program_an_iteration(dev):
    _, _, (programs, compiles) = _run_clip(dev, True)
    assert programs[2:] == [1] * (STEPS - 2), programs
    assert sum(compiles[2:]) == 0, compiles


# --- a diffusion sampler: the schedule indexed by the step number -----------------------------

T = 8


def _sampler(device):
    """DDPM's ancestral sampling loop, ``for t in reversed(range(T))`` with the
    schedule's tensors indexed by ``t`` (``alphas[t]``, as the DDPM reference
    code and diffusers' schedulers do), the noise predictor a small layer."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 4).to(device)
    betas = torch.linspace(1e-4, 0.02, T)
    alphas = (1 - betas).to(device)
    alphas_bar = torch.cumprod(1 - betas, 0).to(device)
    betas = betas.to(device)
    g = torch.Generator().manual_seed(1)
    noise = [torch.randn(2, 4, generator=g).to(device) for _ in range(T)]
    x = [torch.randn(2, 4, generator=g).to(device)]

    @torch.no_grad()
    def step(i):
        t = T - 1 - i
        eps = model(x[-1])
        mean = (x[-1] - betas[t] / (1 - alphas_bar[t]).sqrt() * eps) / alphas[t].sqrt()
        x.append(mean + betas[t].sqrt() * noise[t] if t > 0 else mean)

    return step, x


def test_a_diffusion_sampling_loop_gives_eager_values(dev):
    step, eager_x = _sampler("cpu")
    for i in range(T):
        step(i)
    step, x = _sampler(dev)
    _counted(step, T)
    torch.testing.assert_close(x[-1].cpu(), eager_x[-1], rtol=1e-6, atol=1e-6)


def test_a_diffusion_sampling_loop_compiles_a_bounded_number_of_programs(dev):
    step, _ = _sampler(dev)
    programs, compiles = _counted(step, T)
    assert programs == [1] * T, programs
    # the last step (t == 0) takes no noise: its graph is another; the rest share one
    # after at most the two a scalar policy place needs
    assert sum(compiles) <= 4, compiles


# --- seq2seq: a forward whose length changes from step to step ---------------------------------


def _varying_forward(device, extra):
    """A loop whose forward makes a different number of ops each step (random teacher
    forcing in a seq2seq decoder, early exits), then Adam: ``extra(i)`` ops more at step i."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(5, 4).to(device)
    losses = []

    def step(i):
        h = model(x)
        for _ in range(extra(i)):
            h = h.relu()
        loss = h.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())

    return step, losses, model


def _extra(i, rnd=random.Random(0), drawn={}):
    return drawn.setdefault(i, rnd.randrange(4))


def test_a_forward_of_varying_length_gives_eager_values(dev):
    step, eager_losses, eager = _varying_forward("cpu", _extra)
    for i in range(8):
        step(i)
    step, losses, model = _varying_forward(dev, _extra)
    _counted(step, 8)
    torch.testing.assert_close(torch.tensor([float(v) for v in losses]), torch.tensor(eager_losses))
    for p, e in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(p.detach().cpu(), e.detach())


def test_a_forward_of_varying_length_keeps_the_optimizer_replayed(dev):
    step, _, _ = _varying_forward(dev, _extra)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureWarning)
        _counted(step, 8)
