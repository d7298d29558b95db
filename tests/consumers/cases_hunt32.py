"""The loops of test_hunt32_torch.py: PyTorch user patterns no earlier hunt ran
(cases_hunt27/28/29/30/30v/31t, test_hunt24-26, tests/torch), in hunt 27's
shape (``loop(device, each, dtype) -> (losses, state)``, cases_hunt27.py) and
compared by its ``compare`` (losses, state, fallbacks, compiles and programs a
step, a float64 referee on request).

Patterns: ``F.scaled_dot_product_attention`` with ``enable_gqa=True`` (grouped
key/value heads, an additive float mask, then ``is_causal``), an
``nn.MultiheadAttention`` with ``add_bias_kv``, ``add_zero_attn``, separate
``kdim``/``vdim``, sequence-first tensors, a ``key_padding_mask`` and its
per-head weights in the loss, a DDPM noise-prediction step through a
``GroupNorm``/``SiLU`` residual block with a sinusoidal time embedding
(``alphas_cumprod`` gathered by timestep), a custom
``torch.nn.utils.parametrize`` parametrization read under
``parametrize.cached()``, DP-SGD (per-sample gradients by
``torch.func.vmap(grad(...))`` over ``functional_call``, per-sample clipping,
Gaussian noise as data), transformers' ``gradient_checkpointing_enable()``
with ``use_reentrant=True`` inside ``torch.autocast(..., torch.bfloat16)``, and
timm's ``set_grad_checkpointing()`` under the same autocast.
``GENERATE`` lists ``generate()`` options no hunt ran: prompt lookup decoding
(``prompt_lookup_num_tokens``) and assisted decoding with a tiny draft model
(``assistant_model``). ``python tests/consumers/cases_hunt32.py [names]``
prints the table.
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

from cases_hunt27 import registry  # noqa: E402 (after the path)

from cases_hunt31t import _state, _step  # noqa: E402  (a loop's state and one optimizer step, as hunt 31t's)

STEPS = 4
WARMUP = 2
CASES, case = registry()


# --- attention: grouped key/value heads, MultiheadAttention's rarer options -----------------------


class _GQABlock(nn.Module):
    """Llama-style grouped-query attention written by a user: 4 query heads
    share 2 key/value heads through SDPA's ``enable_gqa`` (no
    ``repeat_interleave``)."""

    def __init__(self, dim=32, heads=4, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.q = nn.Linear(dim, dim, bias=False)
        self.kv = nn.Linear(dim, 2 * kv_heads * self.hd, bias=False)
        self.o = nn.Linear(dim, dim)
        self.norm = nn.RMSNorm(dim)

    def forward(self, x, mask=None, causal=False):
        b, t, _ = x.shape
        h = self.norm(x)
        q = self.q(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k, v = self.kv(h).view(b, t, 2, self.kv_heads, self.hd).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, is_causal=causal,
                                           enable_gqa=True)
        return x + self.o(a.transpose(1, 2).reshape(b, t, -1))


@case
def sdpa_gqa_float_mask_adamw(device, each, dtype=torch.float32):
    """A grouped-query LM: the first block takes an additive float mask (a
    causal band with ALiBi-like slopes, ``-inf`` above the diagonal), the second
    ``is_causal=True``; AdamW."""
    torch.manual_seed(0)
    emb = nn.Embedding(30, 32)
    blocks = nn.ModuleList([_GQABlock(), _GQABlock()])
    head = nn.Linear(32, 30)
    model = nn.ModuleList([emb, blocks, head]).to(dtype).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(1)
    t = 8
    pos = torch.arange(t)
    bias = -(pos[:, None] - pos[None, :]).clamp(min=0).to(dtype) * torch.tensor([0.5, 0.25, 0.125, 0.0625],
                                                                                dtype=dtype)[:, None, None]
    mask = bias.masked_fill(pos[None, :] > pos[:, None], float("-inf")).to(device)
    losses = []
    for _ in range(STEPS):
        ids = torch.randint(0, 30, (3, t + 1), generator=g).to(device)
        h = emb(ids[:, :-1])
        h = blocks[0](h, mask=mask)
        h = blocks[1](h, causal=True)
        loss = F.cross_entropy(head(h).flatten(0, 1), ids[:, 1:].flatten())
        _step(opt, loss)
        losses.append(loss.detach())
        each()
    return losses, _state(model)


@case
def mha_bias_kv_zero_attn_padding(device, each, dtype=torch.float32):
    """A cross-attention pooler on sequence-first tensors: ``add_bias_kv`` and
    ``add_zero_attn`` (the key/value rows users add so an all-padded row still
    attends somewhere), ``kdim``/``vdim`` unlike ``embed_dim``, a boolean
    ``key_padding_mask``, the per-head weights (``average_attn_weights=False``)
    in an entropy penalty; Adam."""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 4, kdim=12, vdim=10, add_bias_kv=True, add_zero_attn=True)
    head = nn.Linear(16, 3)
    mha, head = mha.to(dtype).to(device), head.to(dtype).to(device)
    opt = torch.optim.Adam([*mha.parameters(), *head.parameters()], lr=5e-3)
    g = torch.Generator().manual_seed(1)
    losses = []
    for i in range(STEPS):
        q = torch.randn(2, 4, 16, generator=g).to(dtype).to(device)     # (L, N, E)
        k = torch.randn(7, 4, 12, generator=g).to(dtype).to(device)
        v = torch.randn(7, 4, 10, generator=g).to(dtype).to(device)
        lengths = torch.tensor([7, 5, 2, 0 if i % 2 else 3])
        pad = (torch.arange(7)[None, :] >= lengths[:, None]).to(device)
        y = torch.randint(0, 3, (4,), generator=g).to(device)
        a, w = mha(q, k, v, key_padding_mask=pad, need_weights=True, average_attn_weights=False)
        entropy = -(w * torch.log(w + 1e-6)).sum(-1).mean()
        loss = F.cross_entropy(head(a.mean(0)), y) + 0.01 * entropy
        _step(opt, loss)
        losses.append(loss.detach())
        each()
    return losses, _state(mha, head)


# --- diffusion: GroupNorm residual blocks, a DDPM noise-prediction step -------------------------


def _timestep_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class _ResBlock(nn.Module):
    """diffusers' ResnetBlock2D, narrowed: GroupNorm, SiLU, conv, the time
    embedding added per channel, GroupNorm, SiLU, conv, a 1x1 shortcut."""

    def __init__(self, cin, cout, tdim, groups=4):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(groups, cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.t = nn.Linear(tdim, cout)
        self.n2, self.c2 = nn.GroupNorm(groups, cout, eps=1e-6), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.c1(F.silu(self.n1(x)))
        h = h + self.t(F.silu(temb))[:, :, None, None]
        h = self.c2(F.silu(self.n2(h)))
        return self.skip(x) + h


class _TinyDiffusion(nn.Module):
    def __init__(self):
        super().__init__()
        self.tmlp = nn.Sequential(nn.Linear(16, 32), nn.SiLU(), nn.Linear(32, 32))
        self.inp = nn.Conv2d(3, 8, 3, padding=1)
        self.r1 = _ResBlock(8, 16, 32)
        self.down = nn.Conv2d(16, 16, 3, stride=2, padding=1)
        self.r2 = _ResBlock(16, 16, 32)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.r3 = _ResBlock(32, 8, 32)
        self.out = nn.Sequential(nn.GroupNorm(4, 8), nn.SiLU(), nn.Conv2d(8, 3, 3, padding=1))

    def forward(self, x, t):
        temb = self.tmlp(_timestep_embedding(t, 16).to(x.dtype))
        h1 = self.r1(self.inp(x), temb)
        h2 = self.r2(self.down(h1), temb)
        return self.out(self.r3(torch.cat([self.up(h2), h1], 1), temb))


@case
def ddpm_groupnorm_unet_adamw(device, each, dtype=torch.float32):
    """DDPM's training step as diffusers' examples write it: timesteps and
    noise drawn on the host, ``alphas_cumprod[t]`` gathered on the device,
    ``sqrt(a) * x0 + sqrt(1 - a) * noise``, MSE on the noise; AdamW and
    ``clip_grad_norm_``."""
    torch.manual_seed(0)
    model = _TinyDiffusion().to(dtype).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    betas = torch.linspace(1e-4, 0.02, 100, dtype=torch.float64)
    alphas_cumprod = torch.cumprod(1 - betas, 0).to(dtype).to(device)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        x0 = torch.randn(2, 3, 8, 8, generator=g).to(dtype).to(device)
        noise = torch.randn(2, 3, 8, 8, generator=g).to(dtype).to(device)
        t = torch.randint(0, 100, (2,), generator=g).to(device)
        a = alphas_cumprod[t][:, None, None, None]
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        loss = F.mse_loss(model(xt, t), noise)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())
        each()
    return losses, _state(model)


# --- parametrizations, per-sample gradients -----------------------------------------------------


class _Symmetric(nn.Module):
    def forward(self, w):
        return w.triu() + w.triu(1).transpose(-1, -2)


class _PositiveScale(nn.Module):
    def forward(self, s):
        return F.softplus(s)

    def right_inverse(self, s):
        return torch.log(torch.expm1(s))


@case
def parametrize_symmetric_cached_sgd(device, each, dtype=torch.float32):
    """PyTorch's parametrizations tutorial: a symmetric weight and a
    softplus-positive bias (with ``right_inverse``) registered by
    ``parametrize.register_parametrization``, the weight used twice in a step
    under ``parametrize.cached()``; SGD with Nesterov momentum."""
    from torch.nn.utils import parametrize

    torch.manual_seed(0)
    layer = nn.Linear(12, 12)
    with torch.no_grad():
        layer.bias.copy_(torch.rand(12) + 0.1)
    parametrize.register_parametrization(layer, "weight", _Symmetric())
    parametrize.register_parametrization(layer, "bias", _PositiveScale())
    head = nn.Linear(12, 3)
    model = nn.ModuleList([layer, head]).to(dtype).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(6, 12, generator=g).to(dtype).to(device)
        y = torch.randint(0, 3, (6,), generator=g).to(device)
        with parametrize.cached():
            h = torch.tanh(layer(torch.tanh(layer(x))))
        loss = F.cross_entropy(head(h), y)
        _step(opt, loss)
        losses.append(loss.detach())
        each()
    return losses, _state(model)


@case
def dp_sgd_vmap_grad_clip(device, each, dtype=torch.float32):
    """DP-SGD as Opacus' functorch path writes it: per-sample gradients by
    ``vmap(grad(loss))`` over ``functional_call``, each clipped to norm 1 by
    its own factor, summed, Gaussian noise (drawn on the host) added, the mean
    written into ``.grad`` and a plain optimizer step."""
    from torch.func import functional_call, grad, vmap

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 16), nn.ELU(), nn.Linear(16, 3)).to(dtype).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    g = torch.Generator().manual_seed(1)

    def sample_loss(params, buffers, x, y):
        return F.cross_entropy(functional_call(model, (params, buffers), (x[None],)), y[None])

    losses = []
    for _ in range(STEPS):
        x = torch.randn(8, 10, generator=g).to(dtype).to(device)
        y = torch.randint(0, 3, (8,), generator=g).to(device)
        params = {k: v.detach() for k, v in model.named_parameters()}
        buffers = {k: v.detach() for k, v in model.named_buffers()}
        per = vmap(grad(sample_loss), in_dims=(None, None, 0, 0))(params, buffers, x, y)
        norms = torch.stack([p.flatten(1).norm(dim=1) for p in per.values()], 1).norm(dim=1)
        factor = (1.0 / (norms + 1e-6)).clamp(max=1.0)
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g).to(dtype).to(device) * 0.1
            p.grad = (torch.einsum("i,i...->...", factor, per[name]) + noise) / x.shape[0]
        opt.step()
        opt.zero_grad()
        with torch.no_grad():
            losses.append(F.cross_entropy(model(x), y))
        each()
    return losses, _state(model)


# --- transformers / timm: activation checkpointing under bfloat16 autocast -----------------------


def _llama(**extra):
    import transformers

    kw = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=32, bos_token_id=0, eos_token_id=1, pad_token_id=0)
    config = transformers.LlamaConfig(**{**kw, **extra})
    return transformers.LlamaForCausalLM(config)


@case
def hf_llama_checkpoint_reentrant_autocast(device, each, dtype=torch.float32):
    """``gradient_checkpointing_enable(use_reentrant=True)`` (the reentrant
    ``CheckpointFunction``: each decoder layer rerun in the backward) inside
    ``torch.autocast(device.type, torch.bfloat16)``; the loss from ``labels``
    with padding set to -100; AdamW."""
    torch.manual_seed(0)
    model = _llama().to(dtype).to(device)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        ids = torch.randint(2, 64, (2, 10), generator=g)
        mask = torch.ones_like(ids)
        mask[1, 7:] = 0
        labels = ids.masked_fill(mask == 0, -100)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            out = model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device))
        _step(opt, out.loss)
        losses.append(out.loss.detach().float())
        each()
    return losses, _state(model)


@case
def timm_vit_grad_checkpointing_autocast(device, each, dtype=torch.float32):
    """timm's ``set_grad_checkpointing()`` (its blocks through
    ``checkpoint_seq``) on a tiny ViT, the step under bfloat16 autocast, label
    smoothing; SGD."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, embed_dim=32,
                              depth=2, num_heads=2, num_classes=5).to(dtype).to(device)
    model.set_grad_checkpointing(True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(2, 3, 32, 32, generator=g).to(dtype).to(device)
        y = torch.randint(0, 5, (2,), generator=g).to(device)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        _step(opt, loss)
        losses.append(loss.detach().float())
        each()
    return losses, _state(model)


def compare(name, referee=False):
    """Run loop ``name`` on eager CPU and on the lazy device as hunt 27's
    ``compare`` does: a cases_hunt27.Outcome, with the two runs' final states
    (CPU tensors) as ``lazy_state`` and ``eager_state``."""
    import cases_hunt27

    return cases_hunt27.compare(name, referee, cases=CASES)


# --- generate(): prompt lookup and assisted decoding ----------------------------------------------


def _prompt(g):
    # a prompt that repeats itself, so prompt lookup finds n-gram candidates
    ids = torch.randint(2, 64, (1, 6), generator=g)
    return torch.cat([ids, ids[:, :4], ids], 1)


# name -> generate() keywords (greedy decoding: eager's tokens are expected)
GENERATE = {
    "llama-prompt-lookup": dict(prompt_lookup_num_tokens=3),
    "llama-assisted-draft": dict(assistant="draft"),
}


def generate_case(name, calls=2, new_tokens=8):
    """Run :data:`GENERATE`'s ``name`` on a tiny Llama (and, for assisted
    decoding, a one-layer Llama draft): ``(lazy tokens per call, eager tokens,
    compiles per call, programs per call, fallbacks)``."""
    import copy

    import lazycore.torch as ltorch
    from lazycore.observe import metrics
    from test_hunt26_torch import _counts

    kw = dict(GENERATE[name])
    torch.manual_seed(0)
    eager = _llama().eval()
    ids = _prompt(torch.Generator().manual_seed(2))
    lazy = copy.deepcopy(eager).to(ltorch.device())
    draft = lazy_draft = None
    if kw.pop("assistant", None):
        torch.manual_seed(1)
        draft = _llama(num_hidden_layers=1).eval()
        lazy_draft = copy.deepcopy(draft).to(ltorch.device())
    kw = {"max_new_tokens": new_tokens, "do_sample": False, **kw}
    with torch.no_grad():
        want = eager.generate(input_ids=ids, attention_mask=torch.ones_like(ids), assistant_model=draft, **kw)
        ltorch.mark_step(wait=True)
        metrics.reset()
        got, compiles, programs = [], [], []
        for _ in range(calls):
            c0, e0 = _counts()
            d = ids.to(ltorch.device())
            got.append(lazy.generate(input_ids=d, attention_mask=torch.ones_like(d), assistant_model=lazy_draft,
                                     **kw).cpu())
            c1, e1 = _counts()
            compiles.append(c1 - c0)
            programs.append(e1 - e0)
    return got, want, compiles, programs, metrics.fallbacks()


def generate_line(name):
    got, want, compiles, programs, fallbacks = generate_case(name)
    same = [torch.equal(g, want) for g in got]
    return f"{name:28s} eager's tokens {same} compiles {compiles} programs {programs} fallbacks {dict(fallbacks)}"


if __name__ == "__main__":  # python tests/consumers/cases_hunt32.py [names...]: a table
    import time
    import traceback

    from cases_hunt27 import Outcome

    for n in sys.argv[1:] or [*CASES, *GENERATE]:
        for m in ([n] if n in CASES or n in GENERATE else [k for k in [*CASES, *GENERATE] if n in k]):
            t0 = time.time()
            try:
                line = generate_line(m) if m in GENERATE else compare(m, referee=True).line()
                print(line, f"{time.time() - t0:.0f}s", flush=True)
            except Exception as e:  # noqa: BLE001 (a table row)
                print(Outcome(m, [], [], 0, 0, "", 0, {}, [], [], error=f"{type(e).__name__}: {e}"[:300]).line(),
                      flush=True)
                traceback.print_exc(limit=-3)
