"""The loops of test_hunt31t_torch.py: PyTorch user patterns no earlier hunt ran
(cases_hunt27/28/29/30/30v, test_hunt24-26, test_user_loops, tests/torch), in
hunt 27's shape (``loop(device, each, dtype) -> (losses, state)``,
cases_hunt27.py) and compared by its ``compare`` (losses, state, fallbacks,
compiles and programs a step, a float64 referee on request).

Patterns: a spatial transformer (``affine_grid`` into ``grid_sample``), a
multi-resolution STFT loss and an ``istft`` round trip (vocoders), a focal
frequency loss (``fft2``), WGAN-GP's gradient penalty
(``autograd.grad(create_graph=True)``), MAML's inner step through
``torch.func.functional_call``, a Chamfer loss and prototypical networks
(``torch.cdist``), a VQ-VAE codebook (``cdist`` + ``argmin``, straight-through),
a RealNVP flow with an invertible 1x1 map (``linalg.slogdet``) under a
``distributions.Normal`` prior, a Gaussian-process marginal likelihood
(``linalg.cholesky``, ``cholesky_solve``), attention written with
``F.scaled_dot_product_attention`` (boolean mask, ``is_causal``), a U-Net
whose decoder uses ``F.interpolate``'s bilinear/bicubic/nearest-exact modes, a
bidirectional ``nn.RNN`` with gradient accumulation and ``clip_grad_norm_``,
a spectral-norm regularizer (``linalg.matrix_norm(ord=2)``, ``svdvals``), a
patch denoiser through ``F.unfold``/``F.fold``, ordinal regression on
``torch.bucketize``'d targets, a ridge-regression head through ``linalg.solve``
(MetaOptNet) and a clip model with trilinear and area resampling.
``python tests/consumers/cases_hunt31t.py [names]`` prints the table.
"""

from __future__ import annotations

import math
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


def _step(opt, loss):
    loss.backward()
    opt.step()
    opt.zero_grad()


# --- vision: a spatial transformer, a U-Net's upsampling -----------------------------------------


class _STN(nn.Module):
    """PyTorch's spatial transformer tutorial (widths cut): a localization net
    regresses a 2x3 affine matrix (initialized to the identity), ``affine_grid``
    and ``grid_sample`` warp the input, a classifier follows."""

    def __init__(self):
        super().__init__()
        self.loc = nn.Sequential(nn.Conv2d(1, 4, 5), nn.MaxPool2d(2), nn.ReLU(), nn.Conv2d(4, 6, 3), nn.ReLU())
        self.fc_loc = nn.Sequential(nn.Linear(6 * 2 * 2, 16), nn.ReLU(), nn.Linear(16, 6))
        self.fc_loc[2].weight.data.mul_(0.1)
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))
        self.cls = nn.Sequential(nn.Conv2d(1, 6, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                                 nn.Linear(24, 5))

    def forward(self, x):
        xs = F.adaptive_max_pool2d(self.loc(x), 2)
        theta = self.fc_loc(xs.flatten(1)).view(-1, 2, 3)
        grid = F.affine_grid(theta, x.size(), align_corners=False)
        return self.cls(F.grid_sample(x, grid, align_corners=False))


@case
def stn_affine_grid_sgd(device, each, dtype=torch.float32):
    torch.manual_seed(0)
    model = _STN().to(dtype).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(4, 1, 14, 14, generator=g).to(dtype).to(device)
        y = torch.randint(0, 5, (4,), generator=g).to(device)
        loss = F.nll_loss(F.log_softmax(model(x), 1), y)
        _step(opt, loss)
        losses.append(loss.detach())
        each()
    return losses, _state(model)


class _UNet(nn.Module):
    """A two-level U-Net whose decoder upsamples with the modes users pick:
    bilinear with corners aligned, bicubic, nearest-exact to the skip's size."""

    def __init__(self):
        super().__init__()
        self.e1 = nn.Sequential(nn.Conv2d(2, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU())
        self.e2 = nn.Sequential(nn.Conv2d(6, 8, 3, stride=2, padding=1), nn.ReLU())
        self.e3 = nn.Sequential(nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU())
        self.d2 = nn.Conv2d(16, 6, 3, padding=1)
        self.d1 = nn.Conv2d(12, 4, 3, padding=1)
        self.head = nn.Conv2d(4 + 4, 1, 1)

    def forward(self, x):
        h1 = self.e1(x)
        h2 = self.e2(h1)
        h3 = self.e3(h2)
        u2 = F.interpolate(h3, size=h2.shape[-2:], mode="bilinear", align_corners=True)
        h = F.relu(self.d2(torch.cat([u2, h2], 1)))
        u1 = F.interpolate(h, scale_factor=2, mode="bicubic", align_corners=False)
        h = F.relu(self.d1(torch.cat([u1, h1], 1)))
        side = F.interpolate(h3[:, :4], size=x.shape[-2:], mode="nearest-exact")
        return self.head(torch.cat([h, side], 1))


@case
def unet_interpolate_modes_adamw(device, each, dtype=torch.float32):
    """Binary segmentation: ``binary_cross_entropy_with_logits`` plus a soft
    Dice loss, AdamW, a cosine schedule."""
    torch.manual_seed(0)
    model = _UNet().to(dtype).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=STEPS)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(2, 2, 12, 12, generator=g).to(dtype).to(device)
        m = (torch.rand(2, 1, 12, 12, generator=g) > 0.5).to(dtype).to(device)
        logits = model(x)
        p = logits.sigmoid()
        dice = 1 - (2 * (p * m).sum((1, 2, 3)) + 1) / (p.sum((1, 2, 3)) + m.sum((1, 2, 3)) + 1)
        loss = F.binary_cross_entropy_with_logits(logits, m) + dice.mean()
        _step(opt, loss)
        sched.step()
        losses.append(loss.detach())
        each()
    return losses, _state(model)


# --- audio and spectra: STFT and FFT losses -------------------------------------------------------


def _stft_mag(x, fft, hop, win):
    window = torch.hann_window(win, device=x.device, dtype=x.dtype)
    s = torch.stft(x, fft, hop, win, window, return_complex=True)
    return torch.clamp(s.real ** 2 + s.imag ** 2, min=1e-7).sqrt().transpose(2, 1)


def _multi_resolution_stft(x, y, resolutions=((32, 8, 16), (64, 16, 32), (16, 4, 8))):
    """ParallelWaveGAN's MultiResolutionSTFTLoss: spectral convergence and log
    STFT magnitude L1, averaged over resolutions."""
    sc = mag = 0.0
    for fft, hop, win in resolutions:
        xm, ym = _stft_mag(x, fft, hop, win), _stft_mag(y, fft, hop, win)
        sc = sc + torch.norm(ym - xm, p="fro") / torch.norm(ym, p="fro")
        mag = mag + F.l1_loss(torch.log(ym), torch.log(xm))
    return sc / len(resolutions), mag / len(resolutions)


class _TinyVocoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose1d(8, 8, 8, stride=4, padding=2)
        self.body = nn.Sequential(nn.LeakyReLU(0.2), nn.Conv1d(8, 8, 7, padding=3, dilation=1),
                                  nn.LeakyReLU(0.2), nn.Conv1d(8, 8, 3, padding=3, dilation=3), nn.LeakyReLU(0.2))
        self.out = nn.Conv1d(8, 1, 7, padding=3)

    def forward(self, mel):
        h = self.up(mel)
        return torch.tanh(self.out(h + self.body(h))).squeeze(1)


@case
def vocoder_multires_stft_adam(device, each, dtype=torch.float32):
    """A vocoder trained on the multi-resolution STFT loss plus an ``istft``
    round trip of its output (reconstruction through the inverse transform)."""
    torch.manual_seed(0)
    model = _TinyVocoder().to(dtype).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.5, 0.9))
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        mel = torch.randn(2, 8, 32, generator=g).to(dtype).to(device)
        wav = (torch.rand(2, 128, generator=g) * 2 - 1).to(dtype).to(device)
        fake = model(mel)
        sc, mag = _multi_resolution_stft(fake, wav)
        window = torch.hann_window(32, device=device, dtype=dtype)
        spec = torch.stft(fake, 32, 8, 32, window, return_complex=True)
        back = torch.istft(spec, 32, 8, 32, window, length=fake.shape[-1])
        loss = sc + mag + F.mse_loss(back, wav)
        _step(opt, loss)
        losses.append(loss.detach())
        each()
    return losses, _state(model)


@case
def focal_frequency_fft2_adam(device, each, dtype=torch.float32):
    """An autoencoder trained on pixel MSE plus the focal frequency loss (Jiang
    et al.): ``fft2(norm="ortho")`` of both images, the squared spectral
    distance weighted by its own detached, normalized magnitude."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.ReLU(),
                          nn.ConvTranspose2d(8, 1, 4, stride=2, padding=1)).to(dtype).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        x = torch.rand(3, 1, 16, 16, generator=g).to(dtype).to(device)
        r = model(x)
        fr, fx = torch.fft.fft2(r, norm="ortho"), torch.fft.fft2(x, norm="ortho")
        d = torch.view_as_real(fr) - torch.view_as_real(fx)
        dist = d[..., 0] ** 2 + d[..., 1] ** 2
        w = dist.detach().sqrt()
        w = w / w.amax(dim=(-2, -1), keepdim=True)
        w = torch.nan_to_num(w, nan=0.0).clamp(0, 1)
        shifted = torch.fft.fftshift(torch.fft.rfft2(r).abs(), dim=-2)
        loss = F.mse_loss(r, x) + (w * dist).mean() + 1e-3 * shifted.mean()
        _step(opt, loss)
        losses.append(loss.detach())
        each()
    return losses, _state(model)


# --- higher-order gradients: WGAN-GP, MAML -----------------------------------------------------------


@case
def wgan_gp_gradient_penalty(device, each, dtype=torch.float32):
    """WGAN-GP (Gulrajani et al.): the critic's loss adds ``10 * (||grad||-1)^2``
    at interpolates, the gradient from ``autograd.grad(create_graph=True)``;
    Adam(0.5, 0.9) for both, two critic steps a generator step."""
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8)).to(dtype).to(device)
    critic = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1)).to(dtype).to(device)
    og = torch.optim.Adam(gen.parameters(), lr=1e-3, betas=(0.5, 0.9))
    oc = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.5, 0.9))
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        for _ in range(2):
            real = (torch.randn(6, 8, generator=g) + 1).to(dtype).to(device)
            z = torch.randn(6, 4, generator=g).to(dtype).to(device)
            alpha = torch.rand(6, 1, generator=g).to(dtype).to(device)
            fake = gen(z).detach()
            mid = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
            grad, = torch.autograd.grad(critic(mid), mid, grad_outputs=torch.ones(6, 1, dtype=dtype, device=device),
                                        create_graph=True, retain_graph=True)
            gp = ((grad.norm(2, dim=1) - 1) ** 2).mean()
            lc = critic(fake).mean() - critic(real).mean() + 10 * gp
            oc.zero_grad()
            lc.backward()
            oc.step()
        z = torch.randn(6, 4, generator=g).to(dtype).to(device)
        lg = -critic(gen(z)).mean()
        og.zero_grad()
        lg.backward()
        og.step()
        losses.append(lc.detach() + lg.detach())
        each()
    return losses, _state(gen, critic)


@case
def maml_functional_call_inner_sgd(device, each, dtype=torch.float32):
    """MAML on sine regression (Finn et al., as learn2learn-free code writes
    it): per task one inner SGD step on the support set through
    ``torch.func.functional_call`` with ``create_graph=True``, the query loss
    of the adapted weights averaged over tasks, Adam on the meta-parameters."""
    from torch.func import functional_call

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1))
    model = model.to(dtype).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        meta = 0.0
        for _ in range(3):
            amp, phase = torch.rand(2, generator=g) * torch.tensor([4.5, math.pi]) + torch.tensor([0.5, 0.0])
            xs = (torch.rand(5, 1, generator=g) * 10 - 5)
            xq = (torch.rand(5, 1, generator=g) * 10 - 5)
            ys, yq = amp * torch.sin(xs - phase), amp * torch.sin(xq - phase)
            xs, ys, xq, yq = (t.to(dtype).to(device) for t in (xs, ys, xq, yq))
            params = dict(model.named_parameters())
            inner = F.mse_loss(functional_call(model, params, (xs,)), ys)
            grads = torch.autograd.grad(inner, list(params.values()), create_graph=True)
            fast = {k: v - 0.01 * gr for (k, v), gr in zip(params.items(), grads)}
            meta = meta + F.mse_loss(functional_call(model, fast, (xq,)), yq)
        meta = meta / 3
        _step(opt, meta)
        losses.append(meta.detach())
        each()
    return losses, _state(model)


# --- distances: Chamfer, prototypes, a VQ codebook --------------------------------------------------


@case
def chamfer_cdist_point_autoencoder(device, each, dtype=torch.float32):
    """A PointNet-style autoencoder (shared MLP, max pool, an MLP decoder to a
    point set) trained on the Chamfer distance from ``torch.cdist``."""
    torch.manual_seed(0)
    enc = nn.Sequential(nn.Conv1d(3, 16, 1), nn.ReLU(), nn.Conv1d(16, 16, 1)).to(dtype).to(device)
    dec = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 12 * 3)).to(dtype).to(device)
    opt = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=3e-3)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        pts = torch.randn(3, 10, 3, generator=g).to(dtype).to(device)
        code = enc(pts.transpose(1, 2)).amax(-1)
        rec = dec(code).view(3, 12, 3)
        d = torch.cdist(pts, rec) ** 2
        loss = d.min(2).values.mean() + d.min(1).values.mean()
        _step(opt, loss)
        losses.append(loss.detach())
        each()
    return losses, _state(enc, dec)


@case
def protonet_cdist_episodes(device, each, dtype=torch.float32):
    """Prototypical networks (Snell et al.): class prototypes are the support
    embeddings' means, the logits the negative squared ``cdist`` to them."""
    torch.manual_seed(0)
    emb = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                        nn.Flatten()).to(dtype).to(device)
    opt = torch.optim.Adam(emb.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    g = torch.Generator().manual_seed(1)
    ways, shots, queries = 3, 2, 3
    losses, accs = [], []
    for _ in range(STEPS):
        x = torch.randn(ways * (shots + queries), 1, 8, 8, generator=g).to(dtype).to(device)
        z = emb(x).view(ways, shots + queries, -1)
        protos = z[:, :shots].mean(1)
        q = z[:, shots:].reshape(ways * queries, -1)
        logits = -torch.cdist(q, protos).pow(2)
        y = torch.arange(ways, device=device).repeat_interleave(queries)
        loss = F.cross_entropy(logits, y)
        _step(opt, loss)
        sched.step()
        accs.append((logits.argmax(1) == y).to(dtype).mean())
        losses.append(loss.detach())
        each()
    return losses, _state(emb, acc=torch.stack(accs))


class _VQ(nn.Module):
    """VQ-VAE's quantizer (van den Oord et al.; the common PyTorch port): the
    nearest code by ``cdist``/``argmin``, codebook and commitment losses, the
    straight-through estimator."""

    def __init__(self, codes=8, dim=4, beta=0.25):
        super().__init__()
        self.codebook = nn.Embedding(codes, dim)
        self.codebook.weight.data.uniform_(-1 / codes, 1 / codes)
        self.beta = beta

    def forward(self, z):
        flat = z.permute(0, 2, 3, 1).reshape(-1, z.shape[1])
        idx = torch.cdist(flat, self.codebook.weight).argmin(1)
        q = self.codebook(idx).view(z.shape[0], z.shape[2], z.shape[3], -1).permute(0, 3, 1, 2)
        loss = F.mse_loss(q, z.detach()) + self.beta * F.mse_loss(z, q.detach())
        q = z + (q - z).detach()
        usage = torch.bincount(idx, minlength=self.codebook.num_embeddings).to(z.dtype) / idx.numel()
        return q, loss, -(usage * (usage + 1e-10).log()).sum().exp()


@case
def vq_vae_codebook_straight_through(device, each, dtype=torch.float32):
    torch.manual_seed(0)
    enc = nn.Sequential(nn.Conv2d(1, 8, 4, 2, 1), nn.ReLU(), nn.Conv2d(8, 4, 1)).to(dtype).to(device)
    vq = _VQ().to(dtype).to(device)
    dec = nn.Sequential(nn.ConvTranspose2d(4, 8, 4, 2, 1), nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1))
    dec = dec.to(dtype).to(device)
    opt = torch.optim.Adam([*enc.parameters(), *vq.parameters(), *dec.parameters()], lr=2e-3)
    g = torch.Generator().manual_seed(1)
    losses, perplexity = [], []
    for _ in range(STEPS):
        x = torch.rand(4, 1, 8, 8, generator=g).to(dtype).to(device)
        q, vq_loss, ppl = vq(enc(x))
        loss = F.mse_loss(dec(q), x) + vq_loss
        _step(opt, loss)
        losses.append(loss.detach())
        perplexity.append(ppl.detach())
        each()
    return losses, _state(enc, vq, dec, perplexity=torch.stack(perplexity))


# --- likelihoods: a flow, a Gaussian process --------------------------------------------------------


class _Coupling(nn.Module):
    def __init__(self, dim, mask):
        super().__init__()
        self.register_buffer("mask", mask)
        self.net = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, 2 * dim))
        nn.init.zeros_(self.net[2].weight)
        nn.init.zeros_(self.net[2].bias)
        self.net[2].weight.data.normal_(0, 1e-2)

    def forward(self, x):
        s, t = self.net(x * self.mask).chunk(2, -1)
        s = torch.tanh(s) * (1 - self.mask)
        return x * self.mask + (1 - self.mask) * (x * s.exp() + t), s.sum(-1)


class _Inv1x1(nn.Module):
    """Glow's invertible linear map, its log-determinant by ``slogdet``."""

    def __init__(self, dim):
        super().__init__()
        w = torch.linalg.qr(torch.randn(dim, dim))[0]
        self.weight = nn.Parameter(w)

    def forward(self, x):
        return x @ self.weight.T, torch.linalg.slogdet(self.weight)[1].expand(x.shape[0])


@case
def realnvp_glow_slogdet_normal(device, each, dtype=torch.float32):
    """A RealNVP/Glow flow on 4-d data: affine couplings and invertible 1x1
    maps, the negative log-likelihood under ``distributions.Normal``."""
    from torch.distributions import Independent, Normal

    torch.manual_seed(0)
    m = torch.tensor([1.0, 0, 1, 0])
    layers = nn.ModuleList([_Coupling(4, m), _Inv1x1(4), _Coupling(4, 1 - m), _Inv1x1(4), _Coupling(4, m)])
    layers = layers.to(dtype).to(device)
    opt = torch.optim.Adam(layers.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(16, 4, generator=g)
        x = torch.cat([x[:, :2], x[:, 2:] * 0.5 + x[:, :2] ** 2], 1).to(dtype).to(device)
        logdet = torch.zeros(16, dtype=dtype, device=device)
        for layer in layers:
            x, ld = layer(x)
            logdet = logdet + ld
        prior = Independent(Normal(torch.zeros(4, dtype=dtype, device=device),
                                   torch.ones(4, dtype=dtype, device=device)), 1)
        loss = -(prior.log_prob(x) + logdet).mean()
        _step(opt, loss)
        losses.append(loss.detach())
        each()
    return losses, _state(layers)


@case
def gp_cholesky_marginal_likelihood(device, each, dtype=torch.float32):
    """Exact GP regression as GPyTorch-free code writes it: an RBF kernel over
    ``cdist``, softplus-positive hyperparameters, the negative log marginal
    likelihood through ``linalg.cholesky``/``cholesky_solve`` and the
    Cholesky diagonal's log; the predictive mean on test points."""
    torch.manual_seed(0)
    raw = nn.ParameterDict({k: nn.Parameter(torch.tensor(v)) for k, v in
                            (("length", 0.0), ("scale", 0.5), ("noise", -2.0))}).to(dtype).to(device)
    opt = torch.optim.Adam(raw.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(20, 2, generator=g) * 4).to(dtype)
    y = (torch.sin(x[:, 0]) * torch.cos(x[:, 1]) + 0.1 * torch.randn(20, generator=g).to(dtype))
    xt = (torch.rand(5, 2, generator=g) * 4).to(dtype).to(device)
    x, y = x.to(device), y.to(device)
    losses, means = [], []
    for _ in range(STEPS):
        ls, sf, sn = (F.softplus(raw[k]) for k in ("length", "scale", "noise"))
        k = sf * torch.exp(-0.5 * torch.cdist(x / ls, x / ls).pow(2))
        k = k + (sn + 1e-4) * torch.eye(20, dtype=dtype, device=device)
        chol = torch.linalg.cholesky(k)
        alpha = torch.cholesky_solve(y[:, None], chol)
        nll = 0.5 * (y[:, None] * alpha).sum() + chol.diagonal().log().sum() + 10 * math.log(2 * math.pi)
        _step(opt, nll)
        kt = sf.detach() * torch.exp(-0.5 * torch.cdist(xt / ls.detach(), x / ls.detach()).pow(2))
        means.append((kt @ alpha.detach()).squeeze(1))
        losses.append(nll.detach())
        each()
    return losses, _state(raw, mean=torch.stack(means))


# --- sequences: SDPA attention, a vanilla RNN ----------------------------------------------------------


class _SDPABlock(nn.Module):
    """A decoder block written on ``F.scaled_dot_product_attention`` as
    nanoGPT-style code writes it; the padding mask a boolean ``attn_mask``
    merged with the causal one, or ``is_causal=True`` where nothing is padded."""

    def __init__(self, dim=16, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim))

    def forward(self, x, keep=None):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, 2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if keep is None:
            a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=True)
        else:
            causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            mask = causal[None, None] & keep[:, None, None, :]
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, scale=0.3)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


@case
def sdpa_masked_causal_lm(device, each, dtype=torch.float32):
    torch.manual_seed(0)
    emb = nn.Embedding(30, 16).to(dtype).to(device)
    blocks = nn.ModuleList([_SDPABlock(), _SDPABlock()]).to(dtype).to(device)
    head = nn.Linear(16, 30).to(dtype).to(device)
    params = [*emb.parameters(), *blocks.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=3e-3, weight_decay=0.1)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        ids = torch.randint(1, 30, (3, 9), generator=g)
        ids[1, 6:] = 0
        ids[2, 4:] = 0
        keep = (ids[:, :-1] != 0).to(device)
        ids = ids.to(device)
        h = emb(ids[:, :-1])
        h = blocks[1](blocks[0](h), keep)
        loss = F.cross_entropy(head(h).flatten(0, 1), ids[:, 1:].flatten(), ignore_index=0)
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())
        each()
    return losses, _state(emb, blocks, head)


@case
def rnn_bidirectional_accumulate_clip(device, each, dtype=torch.float32):
    """A two-layer bidirectional tanh ``nn.RNN`` tagger, two micro-batches a
    step (losses divided by the count), ``clip_grad_norm_`` with the returned
    norm logged, Adagrad."""
    torch.manual_seed(0)
    rnn = nn.RNN(6, 8, num_layers=2, bidirectional=True, batch_first=True).to(dtype).to(device)
    relu_rnn = nn.RNN(16, 8, nonlinearity="relu").to(dtype).to(device)
    head = nn.Linear(8, 3).to(dtype).to(device)
    params = [*rnn.parameters(), *relu_rnn.parameters(), *head.parameters()]
    opt = torch.optim.Adagrad(params, lr=0.05)
    g = torch.Generator().manual_seed(1)
    losses, norms = [], []
    for _ in range(STEPS):
        total = 0.0
        for _ in range(2):
            x = torch.randn(3, 7, 6, generator=g).to(dtype).to(device)
            y = torch.randint(0, 3, (3, 7), generator=g).to(device)
            h0 = torch.zeros(4, 3, 8, dtype=dtype, device=device)
            out, _ = rnn(x, h0)
            out, _ = relu_rnn(out.transpose(0, 1))
            loss = F.cross_entropy(head(out).reshape(-1, 3), y.T.reshape(-1)) / 2
            loss.backward()
            total = total + loss.detach()
        norms.append(nn.utils.clip_grad_norm_(params, max_norm=0.5))
        opt.step()
        opt.zero_grad()
        losses.append(total)
        each()
    return losses, _state(rnn, relu_rnn, head, norm=torch.stack(norms))


# --- linear algebra in a loss ---------------------------------------------------------------------------


@case
def spectral_regularizer_svdvals(device, each, dtype=torch.float32):
    """A regression MLP whose loss adds each weight's spectral norm
    (``linalg.matrix_norm(ord=2)``), the nuclear norm of the first
    (``svdvals`` sum) and an orthogonality penalty ``||W W^T - I||_F``."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    model = model.to(dtype).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, nesterov=True)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(10, 6, generator=g).to(dtype).to(device)
        y = torch.randn(10, 2, generator=g).to(dtype).to(device)
        ws = [m.weight for m in model if isinstance(m, nn.Linear)]
        spec = sum(torch.linalg.matrix_norm(w, ord=2) for w in ws)
        nuc = torch.linalg.svdvals(ws[0]).sum()
        w1 = ws[1]
        orth = torch.linalg.matrix_norm(w1 @ w1.T - torch.eye(8, dtype=dtype, device=device))
        loss = F.smooth_l1_loss(model(x), y) + 1e-2 * spec + 1e-3 * nuc + 1e-2 * orth
        _step(opt, loss)
        losses.append(loss.detach())
        each()
    return losses, _state(model)


# --- patches and bins: fold/unfold, bucketize --------------------------------------------------------


@case
def unfold_fold_patch_denoiser(device, each, dtype=torch.float32):
    """Overlapping patches by ``F.unfold``, a per-patch MLP, back by ``F.fold``
    divided by the overlap count (``fold`` of ones): a patch-based denoiser."""
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(16, 24), nn.GELU(), nn.Linear(24, 16)).to(dtype).to(device)
    opt = torch.optim.RMSprop(mlp.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        clean = torch.rand(2, 1, 10, 10, generator=g).to(dtype)
        noisy = (clean + 0.1 * torch.randn(2, 1, 10, 10, generator=g).to(dtype)).to(device)
        clean = clean.to(device)
        cols = F.unfold(noisy, kernel_size=4, stride=2, padding=1)
        out = mlp(cols.transpose(1, 2)).transpose(1, 2)
        count = F.fold(torch.ones_like(cols), (10, 10), kernel_size=4, stride=2, padding=1)
        rec = F.fold(out, (10, 10), kernel_size=4, stride=2, padding=1) / count
        loss = F.l1_loss(rec, clean)
        _step(opt, loss)
        losses.append(loss.detach())
        each()
    return losses, _state(mlp)


@case
def bucketize_ordinal_regression(device, each, dtype=torch.float32):
    """Ordinal regression with continuous targets binned by ``torch.bucketize``
    (CORAL-style cumulative logits: ``label > k`` for each threshold), and an
    expected-value readout against the bins' centers."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 1)).to(dtype).to(device)
    bias = nn.Parameter(torch.zeros(4, dtype=dtype, device=device))
    opt = torch.optim.Adam([*model.parameters(), bias], lr=1e-2)
    edges = torch.tensor([-1.0, -0.3, 0.3, 1.0], dtype=dtype, device=device)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(12, 5, generator=g).to(dtype)
        y = (x[:, :2].sum(1) / 2 + 0.2 * torch.randn(12, generator=g).to(dtype)).to(device)
        x = x.to(device)
        label = torch.bucketize(y, edges, right=True)
        levels = (label[:, None] > torch.arange(4, device=device)).to(dtype)
        logits = model(x) + bias
        loss = F.binary_cross_entropy_with_logits(logits, levels)
        expected = torch.sigmoid(logits).sum(1)
        loss = loss + 0.1 * F.mse_loss(expected, label.to(dtype))
        _step(opt, loss)
        losses.append(loss.detach())
        each()
    return losses, _state(model, bias=bias.detach())


@case
def ridge_head_linalg_solve(device, each, dtype=torch.float32):
    """MetaOptNet/R2-D2's differentiable ridge-regression head: per episode the
    head's weights are ``linalg.solve(X^T X + lam I, X^T Y)`` of the support
    embeddings, the query logits ``Xq W``; the embedding learns through the solve."""
    torch.manual_seed(0)
    emb = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 8)).to(dtype).to(device)
    log_lam = nn.Parameter(torch.tensor(0.0, dtype=dtype, device=device))
    opt = torch.optim.Adam([*emb.parameters(), log_lam], lr=3e-3)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        xs, xq = torch.randn(9, 6, generator=g).to(dtype).to(device), torch.randn(6, 6, generator=g).to(dtype).to(device)
        ys, yq = torch.arange(3).repeat(3).to(device), torch.arange(3).repeat(2).to(device)
        s, q = emb(xs), emb(xq)
        a = s.T @ s + log_lam.exp() * torch.eye(8, dtype=dtype, device=device)
        w = torch.linalg.solve(a, s.T @ F.one_hot(ys, 3).to(dtype))
        loss = F.cross_entropy(q @ w * 5, yq)
        _step(opt, loss)
        losses.append(loss.detach())
        each()
    return losses, _state(emb, lam=log_lam.detach())


@case
def video_trilinear_area_sgd(device, each, dtype=torch.float32):
    """A 3-d convolution clip model: ``F.interpolate`` trilinear up the time axis
    and ``mode="area"`` down in space, ``Conv3d``, global pooling, SGD."""
    torch.manual_seed(0)
    conv = nn.Sequential(nn.Conv3d(2, 6, 3, padding=1), nn.ReLU(), nn.Conv3d(6, 6, 3, stride=2, padding=1))
    conv = conv.to(dtype).to(device)
    head = nn.Linear(6, 3).to(dtype).to(device)
    opt = torch.optim.SGD([*conv.parameters(), *head.parameters()], lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        clip = torch.randn(2, 2, 3, 10, 10, generator=g).to(dtype).to(device)
        y = torch.randint(0, 3, (2,), generator=g).to(device)
        x = F.interpolate(clip, size=(6, 10, 10), mode="trilinear", align_corners=False)
        x = F.interpolate(x, size=(6, 5, 5), mode="area")
        loss = F.cross_entropy(head(conv(x).mean((2, 3, 4))), y)
        _step(opt, loss)
        losses.append(loss.detach())
        each()
    return losses, _state(conv, head)


def compare(name, referee=False):
    """Run loop ``name`` on eager CPU and on the lazy device as hunt 27's
    ``compare`` does: a cases_hunt27.Outcome, with the two runs' final states
    (CPU tensors) as ``lazy_state`` and ``eager_state``."""
    import cases_hunt27

    return cases_hunt27.compare(name, referee, cases=CASES)


if __name__ == "__main__":  # python tests/consumers/cases_hunt31t.py [names...]: a table
    import time
    import traceback

    from cases_hunt27 import Outcome

    for n in sys.argv[1:] or list(CASES):
        for m in ([n] if n in CASES else [k for k in CASES if n in k]):
            t0 = time.time()
            try:
                print(compare(m, referee=True).line(), f"{time.time() - t0:.0f}s", flush=True)
            except Exception as e:  # noqa: BLE001 (a table row)
                print(Outcome(m, [], [], 0, 0, "", 0, {}, [], [], error=f"{type(e).__name__}: {e}"[:300]).line(),
                      flush=True)
                traceback.print_exc(limit=-3)
