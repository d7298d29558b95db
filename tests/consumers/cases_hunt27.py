"""The loops of test_hunt27_torch.py: users' own PyTorch training code, each a
function ``loop(device, each, dtype)`` that builds its model from
``torch.manual_seed(0)`` on the CPU, moves it to ``device``, trains it
``STEPS`` steps on batches drawn from a CPU generator, calls ``each()`` after
every step (``mark_step`` on the lazy device) and returns ``(losses, state)``:
the step losses and a dict of tensors to compare (the model's state dict and
whatever else the loop keeps: a scaler's scale, a scheduler's learning rate).

:func:`compare` runs a loop on eager CPU and on the lazy device (and, asked,
in float64 on the CPU: the referee where the two float32 runs part) and
measures what the earlier hunts measure: loss and state differences,
fallbacks, compiles and programs per step (``test_hunt26_torch._counts``).
Random draws a loop needs (REINFORCE's actions, PPO's rollout) come from the
CPU generator as data, as a replay buffer holds them: draws on the lazy
device come from its own generator, not eager's.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "zoo"))

STEPS = 4
WARMUP = 2
def registry():
    """A hunt's loops by name and the decorator that registers a loop under
    its function's name (every hunt's ``CASES, case = registry()``)."""
    cases: dict = {}

    def case(fn):
        cases[fn.__name__] = fn
        return fn

    return cases, case


CASES, case = registry()


def _data(g, dtype, *shapes_and_kinds):
    return [torch.randn(*s, generator=g).to(dtype) for s in shapes_and_kinds]


def _state(*modules, **extra):
    out = {}
    for i, m in enumerate(modules):
        out.update({f"{i}.{k}": v for k, v in m.state_dict().items()})
    out.update(extra)
    return out


def _mlp(din=16, hidden=32, dout=4):
    return nn.Sequential(nn.Linear(din, hidden), nn.GELU(), nn.Linear(hidden, dout))


def _cls_batches(dtype, n=STEPS, batch=8, din=16, classes=4, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, din, generator=g).to(dtype), torch.randint(0, classes, (batch,), generator=g))
            for _ in range(n)]


def _to(device, *xs):
    return [x.to(device) for x in xs]


# --- training loops ---------------------------------------------------------------------------


@case
def grad_accumulation_nadam(device, each, dtype=torch.float32):
    """Two micro-batches a step, each loss divided by the count, ``set_to_none``."""
    torch.manual_seed(0)
    model = _mlp().to(dtype).to(device)
    opt = torch.optim.NAdam(model.parameters(), lr=1e-2, weight_decay=1e-2)
    losses = []
    batches = _cls_batches(dtype, n=2 * STEPS)
    for i in range(STEPS):
        total = 0.0
        for x, y in batches[2 * i:2 * i + 2]:
            x, y = _to(device, x, y)
            loss = F.cross_entropy(model(x), y) / 2
            loss.backward()
            total = total + loss.detach()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(total)
        each()
    return losses, _state(model)


@case
def autocast_bf16_grad_scaler_rmsprop(device, each, dtype=torch.float32):
    """``torch.autocast`` to bfloat16 on the data's device, ``GradScaler``,
    ``unscale_`` then ``clip_grad_value_``, RMSprop with momentum."""
    torch.manual_seed(0)
    model = _mlp().to(dtype).to(device)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-2, momentum=0.5, centered=True)
    scaler = torch.amp.GradScaler(device.type, init_scale=2.0 ** 8, growth_interval=2)
    losses = []
    for x, y in _cls_batches(dtype):
        x, y = _to(device, x, y)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_value_(model.parameters(), 0.05)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        losses.append(loss.detach().float())
        each()
    return losses, _state(model, scale=torch.tensor(scaler.get_scale()))


@case
def clip_value_adagrad_exponential(device, each, dtype=torch.float32):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.SiLU(), nn.LayerNorm(32), nn.Linear(32, 4)).to(dtype).to(device)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05, lr_decay=0.01, weight_decay=1e-3,
                              initial_accumulator_value=0.1)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.7)
    losses = []
    for x, y in _cls_batches(dtype):
        x, y = _to(device, x, y)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), clip_value=0.02)
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(loss.detach())
        each()
    return losses, _state(model)


class _TiedLM(nn.Module):
    """A small language model whose output layer is its embedding, tied by hand."""

    def __init__(self, vocab=40, dim=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.mix = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        h = self.emb(ids)
        h = h + torch.tanh(self.mix(h.cumsum(1) / torch.arange(1, ids.shape[1] + 1, device=ids.device)[:, None]))
        return self.head(self.norm(h))


def _tokens(n=STEPS, batch=4, length=10, vocab=40, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (batch, length + 1), generator=g) for _ in range(n)]


@case
def tied_by_hand_adamax(device, each, dtype=torch.float32):
    torch.manual_seed(0)
    model = _TiedLM().to(dtype).to(device)
    assert model.head.weight is model.emb.weight
    opt = torch.optim.Adamax(model.parameters(), lr=1e-2)
    losses = []
    for ids in _tokens():
        ids = ids.to(device)
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
        each()
    assert model.head.weight is model.emb.weight
    return losses, _state(model)


def _orthogonal(kind):
    from torch.nn.utils import parametrizations as P

    def build():
        if kind == "householder":  # a tall weight: the Householder map (torch.linalg.householder_product)
            a = P.orthogonal(nn.Linear(16, 24))
        else:
            a = P.orthogonal(nn.Linear(16, 16), orthogonal_map=kind)
        return nn.Sequential(a, nn.Tanh(), nn.Linear(a.out_features, 4))

    return build


def _orthogonal_loop(kind):
    def loop(device, each, dtype=torch.float32):
        torch.manual_seed(0)
        model = _orthogonal(kind)().to(dtype).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        losses = []
        for x, y in _cls_batches(dtype):
            x, y = _to(device, x, y)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.detach())
            each()
        w = model[0].weight.detach()
        return losses, _state(model, orthogonal_weight=w)

    loop.__name__ = f"orthogonal_{kind}"
    return loop


for _kind in ("matrix_exp", "cayley", "householder"):
    case(_orthogonal_loop(_kind))


@case
def func_jacobian_penalty_radam(device, each, dtype=torch.float32):
    """A contractive penalty: ``vmap(jacrev(f))`` of the encoder at each input,
    its squared norm added to the loss and trained through (double backward)."""
    from torch.func import functional_call, jacrev, vmap

    torch.manual_seed(0)
    enc = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).to(dtype).to(device)
    dec = nn.Linear(4, 8).to(dtype).to(device)
    params = list(enc.parameters()) + list(dec.parameters())
    opt = torch.optim.RAdam(params, lr=1e-2, decoupled_weight_decay=True, weight_decay=1e-2)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(6, 8, generator=g).to(dtype).to(device)
        p = dict(enc.named_parameters())

        def f(xi):
            return functional_call(enc, p, (xi,))

        jac = vmap(jacrev(f))(x)  # (6, 4, 8)
        loss = F.mse_loss(dec(enc(x)), x) + 0.1 * jac.pow(2).sum((1, 2)).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
        each()
    return losses, _state(enc, dec)


@case
def func_ensemble_vmap_adam(device, each, dtype=torch.float32):
    """Model ensembling as torch.func's tutorial writes it: ``stack_module_state``,
    ``vmap`` of ``functional_call`` over the stacked parameters, which Adam trains."""
    from torch.func import functional_call, stack_module_state, vmap

    torch.manual_seed(0)
    models = [_mlp().to(dtype) for _ in range(3)]
    params, buffers = stack_module_state(models)
    params = {k: v.to(device).detach().requires_grad_() for k, v in params.items()}
    base = _mlp().to("meta")
    opt = torch.optim.Adam(list(params.values()), lr=1e-2)

    def one(p, x):
        return functional_call(base, (p, {}), (x,))

    losses = []
    for x, y in _cls_batches(dtype):
        x, y = _to(device, x, y)
        out = vmap(one, in_dims=(0, None))(params, x)  # (3, batch, classes)
        loss = F.cross_entropy(out.reshape(-1, 4), y.repeat(3))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
        each()
    return losses, {k: v.detach() for k, v in params.items()}


class _PackedLSTM(nn.Module):
    def __init__(self, vocab=30, dim=8, hidden=12, classes=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, padding_idx=0)
        self.rnn = nn.LSTM(dim, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.out = nn.Linear(2 * hidden, classes)

    def forward(self, ids, lengths):
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

        packed = pack_padded_sequence(self.emb(ids), lengths, batch_first=True, enforce_sorted=False)
        out, (h, c) = self.rnn(packed)
        padded, _ = pad_packed_sequence(out, batch_first=True)
        mask = (torch.arange(padded.shape[1], device=ids.device)[None, :] < lengths.to(ids.device)[:, None])
        pooled = (padded * mask[..., None]).sum(1) / lengths.to(ids.device)[:, None]
        return self.out(pooled + torch.cat([h[-2], h[-1]], -1))


@case
def lstm_packed_plateau(device, each, dtype=torch.float32):
    """A bidirectional 2-layer LSTM over ``pack_padded_sequence`` (unsorted
    lengths), ``ReduceLROnPlateau`` stepped on the loss (a host read)."""
    torch.manual_seed(0)
    model = _PackedLSTM().to(dtype).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, amsgrad=True)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0, threshold=0.5)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        lengths = torch.tensor([7, 3, 5, 1])
        ids = torch.randint(1, 30, (4, 7), generator=g)
        ids[torch.arange(7)[None, :] >= lengths[:, None]] = 0
        y = torch.randint(0, 3, (4,), generator=g)
        loss = F.cross_entropy(model(ids.to(device), lengths), y.to(device))
        loss.backward()
        opt.step()
        opt.zero_grad()
        sched.step(loss)
        losses.append(loss.detach())
        each()
    return losses, _state(model, lr=torch.tensor(opt.param_groups[0]["lr"]))


class _Decoder(nn.Module):
    """A pre-norm decoder with a causal target and padded memory, cross
    attention with ``kdim``/``vdim`` and per-head weights read out."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.dec = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(16))
        self.cross = nn.MultiheadAttention(16, 2, kdim=12, vdim=10, batch_first=True)
        self.out = nn.Linear(16, 4)

    def forward(self, tgt, memory, side, kpm):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device)
        h = self.dec(tgt, memory, tgt_mask=mask, tgt_is_causal=True, memory_key_padding_mask=kpm)
        k, v = side[..., :12], side[..., 12:22]
        a, w = self.cross(h, k, v, need_weights=True, average_attn_weights=False)
        return self.out(h + a), w


@case
def transformer_decoder_onecycle_sgd(device, each, dtype=torch.float32):
    torch.manual_seed(0)
    model = _Decoder().to(dtype).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.2, total_steps=STEPS + 1)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        tgt, memory, side = _data(g, dtype, (2, 5, 16), (2, 6, 16), (2, 6, 22))
        kpm = torch.zeros(2, 6, dtype=torch.bool)
        kpm[1, -2:] = True
        y = torch.randint(0, 4, (2, 5), generator=g)
        out, w = model(*_to(device, tgt, memory, side, kpm))
        loss = F.cross_entropy(out.flatten(0, 1), y.to(device).flatten()) + 0.1 * w.pow(2).mean()
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(loss.detach())
        each()
    return losses, _state(model)


class _CTCModel(nn.Module):
    def __init__(self, feats=8, hidden=16, vocab=6):
        super().__init__()
        self.conv = nn.Conv1d(feats, hidden, 3, padding=1)
        self.rnn = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x):
        h = F.relu(self.conv(x.transpose(1, 2))).transpose(1, 2)
        h, _ = self.rnn(h)
        return self.out(h).log_softmax(-1).transpose(0, 1)  # (T, N, C)


@case
def ctc_conv_gru_adadelta(device, each, dtype=torch.float32):
    torch.manual_seed(0)
    model = _CTCModel().to(dtype).to(device)
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0, rho=0.9)
    ctc = nn.CTCLoss(blank=0, zero_infinity=True)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(3, 12, 8, generator=g).to(dtype)
        targets = torch.randint(1, 6, (3, 5), generator=g)
        in_lens, tgt_lens = torch.tensor([12, 10, 7]), torch.tensor([5, 3, 4])
        loss = ctc(model(x.to(device)), targets.to(device), in_lens.to(device), tgt_lens.to(device))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
        each()
    return losses, _state(model)


class _Bags(nn.Module):
    def __init__(self, sparse, mode="sum"):
        super().__init__()
        self.bag = nn.EmbeddingBag(50, 8, mode=mode, sparse=sparse)
        self.head = nn.Linear(8, 3)

    def forward(self, ids, offsets, weights=None):
        return self.head(self.bag(ids, offsets, per_sample_weights=weights))


def _bag_batches(n=STEPS, seed=1):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        ids = torch.randint(0, 50, (12,), generator=g)
        offsets = torch.tensor([0, 3, 3, 8])  # one empty bag
        out.append((ids, offsets, torch.rand(12, generator=g), torch.randint(0, 3, (4,), generator=g)))
    return out


@case
def embedding_bag_weighted_asgd(device, each, dtype=torch.float32):
    torch.manual_seed(0)
    model = _Bags(sparse=False).to(dtype).to(device)
    opt = torch.optim.ASGD(model.parameters(), lr=0.05, t0=2)
    losses = []
    for ids, offsets, w, y in _bag_batches():
        loss = F.cross_entropy(model(*_to(device, ids, offsets, w.to(dtype))), y.to(device))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
        each()
    return losses, _state(model, **{f"ax{i}": opt.state[p]["ax"] for i, p in enumerate(model.parameters())})


@case
def embedding_bag_sparse_adam(device, each, dtype=torch.float32):
    """``EmbeddingBag(sparse=True)`` trained by ``SparseAdam``, the head by Adam
    (PyTorch's recipe for large embedding tables)."""
    torch.manual_seed(0)
    model = _Bags(sparse=True, mode="mean").to(dtype).to(device)
    sparse = torch.optim.SparseAdam(list(model.bag.parameters()), lr=1e-2)
    dense = torch.optim.Adam(model.head.parameters(), lr=1e-2)
    losses = []
    for ids, offsets, _, y in _bag_batches():
        loss = F.cross_entropy(model(*_to(device, ids, offsets)), y.to(device))
        loss.backward()
        sparse.step()
        dense.step()
        sparse.zero_grad()
        dense.zero_grad()
        losses.append(loss.detach())
        each()
    return losses, _state(model)


class _ActorCritic(nn.Module):
    def __init__(self, obs=6, actions=3):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs, 32), nn.Tanh())
        self.pi = nn.Linear(32, actions)
        self.mu = nn.Linear(32, 2)
        self.log_std = nn.Parameter(torch.full((2,), -0.5))
        self.v = nn.Linear(32, 1)

    def forward(self, obs):
        from torch.distributions import Categorical, Independent, Normal

        h = self.body(obs)
        return (Categorical(logits=self.pi(h)), Independent(Normal(self.mu(h), self.log_std.exp()), 1),
                self.v(h).squeeze(-1))


def _rollouts(dtype, n=STEPS, batch=16, seed=1):
    """Observations, discrete and continuous actions, returns: drawn on the CPU (a replay buffer)."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, 6, generator=g).to(dtype), torch.randint(0, 3, (batch,), generator=g),
             torch.randn(batch, 2, generator=g).to(dtype), torch.randn(batch, generator=g).to(dtype))
            for _ in range(n)]


@case
def reinforce_categorical_normal(device, each, dtype=torch.float32):
    """REINFORCE with a baseline: ``-(log_prob * advantage)``, an entropy bonus."""
    torch.manual_seed(0)
    model = _ActorCritic().to(dtype).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for obs, a, u, ret in _rollouts(dtype):
        obs, a, u, ret = _to(device, obs, a, u, ret)
        cat, normal, v = model(obs)
        adv = (ret - v).detach()
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        logp = cat.log_prob(a) + normal.log_prob(u)
        loss = -(logp * adv).mean() - 0.01 * (cat.entropy() + normal.entropy()).mean() + F.mse_loss(v, ret)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
        each()
    return losses, _state(model)


@case
def ppo_clipped_update(device, each, dtype=torch.float32):
    """PPO's update: the rollout's log-probabilities under the policy before
    the update, the clipped ratio, a clipped value loss, ``clip_grad_norm_``."""
    torch.manual_seed(0)
    model = _ActorCritic().to(dtype).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, eps=1e-5)
    rollouts = _rollouts(dtype, n=1, batch=32)
    obs, a, u, ret = _to(device, *rollouts[0])
    with torch.no_grad():
        cat, normal, v_old = model(obs)
        logp_old = cat.log_prob(a) + normal.log_prob(u)
    adv = ret - v_old
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    losses = []
    for i in range(STEPS):
        idx = torch.arange(i % 2, 32, 2, device=device)  # two minibatches, alternating
        cat, normal, v = model(obs[idx])
        ratio = (cat.log_prob(a[idx]) + normal.log_prob(u[idx]) - logp_old[idx]).exp()
        surrogate = torch.min(ratio * adv[idx], torch.clamp(ratio, 0.8, 1.2) * adv[idx])
        v_clipped = v_old[idx] + (v - v_old[idx]).clamp(-0.2, 0.2)
        v_loss = torch.max((v - ret[idx]) ** 2, (v_clipped - ret[idx]) ** 2).mean()
        loss = -surrogate.mean() + 0.5 * v_loss - 0.01 * (cat.entropy() + normal.entropy()).mean()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
        each()
    return losses, _state(model)


@case
def sac_squashed_gaussian(device, each, dtype=torch.float32):
    """SAC's actor loss on buffer actions: a ``TransformedDistribution`` of a
    Normal through ``TanhTransform`` (its ``log_abs_det_jacobian``), a twin Q."""
    from torch.distributions import Normal, TanhTransform, TransformedDistribution

    torch.manual_seed(0)
    actor = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 4)).to(dtype).to(device)
    q = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2)).to(dtype).to(device)
    opt = torch.optim.Adam(list(actor.parameters()) + list(q.parameters()), lr=3e-3)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        obs = torch.randn(16, 6, generator=g).to(dtype).to(device)
        act = (torch.rand(16, 2, generator=g) * 1.8 - 0.9).to(dtype).to(device)
        mu, log_std = actor(obs).chunk(2, -1)
        dist = TransformedDistribution(Normal(mu, log_std.clamp(-5, 2).exp()), [TanhTransform(cache_size=1)])
        logp = dist.log_prob(act).sum(-1)
        q1, q2 = q(torch.cat([obs, act], -1)).unbind(-1)
        loss = (0.2 * logp - torch.min(q1, q2)).mean() + (q1 - 1.0).pow(2).mean() + (q2 - 1.0).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
        each()
    return losses, _state(actor, q)


def _two_views(dtype, n=STEPS, batch=8, seed=1):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = torch.randn(batch, 16, generator=g)
        out.append(((x + 0.1 * torch.randn(batch, 16, generator=g)).to(dtype),
                    (x + 0.1 * torch.randn(batch, 16, generator=g)).to(dtype)))
    return out


@case
def infonce_lars(device, each, dtype=torch.float32):
    """SimCLR's step: ``F.normalize``d projections, InfoNCE as cross-entropy both
    ways and as ``logsumexp``, a learned clamped temperature, timm's LARS."""
    import timm.optim

    torch.manual_seed(0)
    enc = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 8)).to(dtype).to(device)
    log_t = nn.Parameter(torch.tensor(math.log(1 / 0.1), dtype=dtype, device=device))
    opt = timm.optim.create_optimizer_v2([{"params": list(enc.parameters())}, {"params": [log_t]}], "lars",
                                         lr=0.1, weight_decay=1e-4, momentum=0.9)
    losses = []
    for a, b in _two_views(dtype):
        za, zb = F.normalize(enc(a.to(device)), dim=-1), F.normalize(enc(b.to(device)), dim=-1)
        logits = za @ zb.T * log_t.exp().clamp(max=100)
        labels = torch.arange(za.shape[0], device=device)
        ce = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2
        lse = (torch.logsumexp(logits, 1) - logits.diagonal()).mean()
        loss = ce + 0.5 * lse
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
        each()
    return losses, _state(enc, log_t=log_t.detach())


def _focal(logits, target, gamma=2.0, alpha=0.25):
    """The multi-class focal loss as users write it (log-softmax, gather, ``(1 - p) ** gamma``)."""
    logp = F.log_softmax(logits, -1).gather(1, target[:, None]).squeeze(1)
    return (-alpha * (1 - logp.exp()) ** gamma * logp).mean()


@case
def focal_label_smoothing_lion(device, each, dtype=torch.float32):
    """torchvision's ``sigmoid_focal_loss`` (multi-label), a hand-written
    multi-class focal loss and a label-smoothed cross entropy, timm's Lion."""
    import timm.optim
    from torchvision.ops import sigmoid_focal_loss

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).to(dtype).to(device)
    opt = timm.optim.create_optimizer_v2(model, "lion", lr=1e-3, weight_decay=1e-2)
    g = torch.Generator().manual_seed(1)
    losses = []
    for x, y in _cls_batches(dtype):
        multi = (torch.rand(8, 4, generator=g) < 0.3).to(dtype)
        x, y, multi = _to(device, x, y, multi)
        out = model(x)
        loss = (sigmoid_focal_loss(out[:, 4:], multi, reduction="mean") + _focal(out[:, :4], y)
                + F.cross_entropy(out[:, :4], y, label_smoothing=0.2))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
        each()
    return losses, _state(model)


@case
def lbfgs_strong_wolfe(device, each, dtype=torch.float32):
    """Full-batch logistic regression with ``LBFGS(line_search_fn="strong_wolfe")``
    and a closure (the line search reads the loss and directional derivatives)."""
    torch.manual_seed(0)
    model = nn.Linear(16, 4).to(dtype).to(device)
    opt = torch.optim.LBFGS(model.parameters(), lr=1, max_iter=4, history_size=3, line_search_fn="strong_wolfe")
    x, y = _to(device, *_cls_batches(dtype, n=1, batch=32)[0])
    losses = []
    for _ in range(STEPS):
        def closure():
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y) + 1e-3 * model.weight.pow(2).sum()
            loss.backward()
            return loss

        losses.append(opt.step(closure).detach())
        each()
    return losses, _state(model)


# torch.optim optimizers and lr_scheduler chains, each on the same MLP loop
def _sched_loop(name, make_opt, make_sched, plateau=False):
    def loop(device, each, dtype=torch.float32):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(dtype).to(device)
        opt = make_opt(model.parameters())
        sched = make_sched(opt)
        losses = []
        for x, y in _cls_batches(dtype):
            x, y = _to(device, x, y)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            sched.step(loss) if plateau else sched.step()
            opt.zero_grad()
            losses.append(loss.detach())
            each()
        return losses, _state(model, lr=torch.tensor(opt.param_groups[0]["lr"], dtype=torch.float64))

    loop.__name__ = name
    return case(loop)


O, S = torch.optim, torch.optim.lr_scheduler
_sched_loop("rprop_steplr", lambda p: O.Rprop(p, lr=0.01, etas=(0.4, 1.3)), lambda o: S.StepLR(o, 2, gamma=0.5))
_sched_loop("asgd_cycliclr", lambda p: O.ASGD(p, lr=0.05, t0=1, lambd=1e-3),
            lambda o: S.CyclicLR(o, 0.01, 0.1, step_size_up=2, cycle_momentum=False))
_sched_loop("sgd_cyclic_momentum", lambda p: O.SGD(p, lr=0.05, momentum=0.9),
            lambda o: S.CyclicLR(o, 0.01, 0.1, step_size_up=2, mode="triangular2"))
_sched_loop("nadam_sequential", lambda p: O.NAdam(p, lr=1e-2, momentum_decay=4e-3),
            lambda o: S.SequentialLR(o, [S.LinearLR(o, 0.1, total_iters=2), S.ExponentialLR(o, 0.9)], [2]))
_sched_loop("adamw_warm_restarts", lambda p: O.AdamW(p, lr=1e-2, amsgrad=True),
            lambda o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2, eta_min=1e-4))
_sched_loop("radam_polynomial", lambda p: O.RAdam(p, lr=1e-2), lambda o: S.PolynomialLR(o, total_iters=5, power=2.0))
_sched_loop("rmsprop_chained", lambda p: O.RMSprop(p, lr=1e-2, alpha=0.9, weight_decay=1e-3),
            lambda o: S.ChainedScheduler([S.ConstantLR(o, 0.5, total_iters=2), S.ExponentialLR(o, 0.9)]))
_sched_loop("adamax_lambda", lambda p: O.Adamax(p, lr=1e-2), lambda o: S.LambdaLR(o, lambda e: 1 / (1 + e)))
_sched_loop("sgd_plateau", lambda p: O.SGD(p, lr=0.1, momentum=0.5, dampening=0.1, weight_decay=1e-3),
            lambda o: S.ReduceLROnPlateau(o, factor=0.3, patience=0, threshold=0.2), plateau=True)


# timm's optimizers and schedulers (create_optimizer_v2 / create_scheduler_v2), per-update stepping
def _timm_loop(opt_name, sched_name, **kw):
    name = f"timm_{opt_name}_{sched_name}"

    def loop(device, each, dtype=torch.float32):
        import timm.optim
        import timm.scheduler

        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 4)).to(dtype).to(device)
        opt = timm.optim.create_optimizer_v2(model, opt_name, lr=1e-2, weight_decay=1e-2, **kw)
        # (timm's plateau scheduler steps per epoch only: an epoch of one update here)
        sched = timm.scheduler.create_scheduler_v2(opt, sched_name, num_epochs=STEPS + 2, warmup_epochs=1,
                                                   step_on_epochs=sched_name == "plateau", updates_per_epoch=1,
                                                   decay_milestones=[2],
                                                   patience_epochs=0, plateau_mode="min")[0]
        losses = []
        for i, (x, y) in enumerate(_cls_batches(dtype)):
            x, y = _to(device, x, y)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            if sched_name == "plateau":
                sched.step(i + 1, metric=float(loss))
            else:
                sched.step_update(num_updates=i + 1)
            losses.append(loss.detach())
            each()
        return losses, _state(model, lr=torch.tensor(opt.param_groups[0]["lr"], dtype=torch.float64))

    loop.__name__ = name
    return case(loop)


for _opt, _sched in [("lion", "cosine"), ("lamb", "poly"), ("adafactor", "tanh"), ("lars", "step"),
                     ("madgrad", "multistep"), ("adabelief", "plateau"), ("adan", "cosine"), ("adopt", "step"),
                     ("lookahead_adamw", "cosine"), ("novograd", "poly"), ("sgdp", "cosine"), ("adamp", "tanh"),
                     ("laprop", "cosine"), ("mars", "cosine"), ("muon", "cosine"), ("kron", "cosine"),
                     ("nadamw", "wsd"), ("adafactorbv", "cosine"), ("rmsproptf", "step")]:
    _timm_loop(_opt, _sched)


# --- generation's logits processors (what do_sample=True runs before its draw) ---------------------


def logits_processors(device, seed=0):
    """transformers' warpers and processors, each on the same scores and ids,
    then chained as ``generate(do_sample=True, ...)`` chains them: name ->
    processed scores (and the softmax a sampler draws from)."""
    from transformers.generation import logits_process as lp

    g = torch.Generator().manual_seed(seed)
    vocab = 32
    ids = torch.randint(0, vocab, (3, 7), generator=g).to(device)
    scores = (torch.randn(3, vocab, generator=g) * 3).to(device)
    scores[1, 5] = scores[1, 7] = scores[1].max() + 1  # a tie at the top
    single = {
        "temperature": lp.TemperatureLogitsWarper(0.7),
        "top_k": lp.TopKLogitsWarper(5),
        "top_p": lp.TopPLogitsWarper(0.8),
        "min_p": lp.MinPLogitsWarper(0.1),
        "typical": lp.TypicalLogitsWarper(0.9),
        "epsilon": lp.EpsilonLogitsWarper(0.02),
        "eta": lp.EtaLogitsWarper(0.05, device=device),
        "top_h": lp.TopHLogitsWarper(0.6),
        "repetition": lp.RepetitionPenaltyLogitsProcessor(1.3),
        "encoder_repetition": lp.EncoderRepetitionPenaltyLogitsProcessor(1.2, encoder_input_ids=ids[:, :3]),
        "min_length": lp.MinLengthLogitsProcessor(10, eos_token_id=2, device=device),
        "exponential_decay": lp.ExponentialDecayLengthPenalty((4, 1.5), eos_token_id=2, input_ids_seq_length=3),
        "suppress": lp.SuppressTokensLogitsProcessor([3, 4], device=device),
        "inf_nan_remove": lp.InfNanRemoveLogitsProcessor(),
        "normalization": lp.LogitNormalization(),
    }
    out = {name: p(ids, scores.clone()) for name, p in single.items()}
    chain = lp.LogitsProcessorList([lp.RepetitionPenaltyLogitsProcessor(1.3), lp.TemperatureLogitsWarper(0.7),
                                    lp.TopKLogitsWarper(8), lp.TopPLogitsWarper(0.9)])
    out["chain"] = chain(ids, scores.clone())
    out["chain_probs"] = out["chain"].softmax(-1)
    return out


# --- transformers models not in the earlier hunts (zoo_harness.train: AdamW, linear warm-up) -----


def hf_specs():
    from zoo_models import _WIDTH, CLASSES, IMAGE, VOCAB, Spec, _causal, _hf, _images, _seq2seq

    drop = dict(dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)

    def images40(g):  # not the configured size: DINOv2 interpolates its position embeddings (bicubic)
        return _images(g, 40)

    def perceiver(g):
        return {"inputs": torch.randint(0, VOCAB, (2, 12), generator=g),
                "labels": torch.randint(0, CLASSES, (2,), generator=g)}

    def series(g):
        return {"past_values": torch.randn(2, 10, generator=g).abs() + 0.5,
                "past_time_features": torch.linspace(0, 1, 10).repeat(2, 1)[..., None],
                "past_observed_mask": torch.ones(2, 10),
                "future_values": torch.randn(2, 4, generator=g).abs() + 0.5,
                "future_time_features": torch.linspace(1, 1.4, 4).repeat(2, 1)[..., None]}

    return [
        Spec("marian", "transformers",
             _hf("MarianConfig", "MarianMTModel", vocab_size=VOCAB, d_model=32, encoder_layers=1, decoder_layers=1,
                 encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                 max_position_embeddings=64, pad_token_id=1, decoder_start_token_id=1, eos_token_id=0, **drop),
             _seq2seq),
        Spec("beit", "transformers",
             _hf("BeitConfig", "BeitForImageClassification", image_size=IMAGE, patch_size=8, hidden_size=32,
                 num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, use_relative_position_bias=True,
                 use_mean_pooling=True, layer_scale_init_value=0.1, drop_path_rate=0.0, num_labels=CLASSES,
                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), _images),
        Spec("dinov2", "transformers",
             _hf("Dinov2Config", "Dinov2ForImageClassification", image_size=IMAGE, patch_size=8, hidden_size=32,
                 num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2, layerscale_value=1.0, drop_path_rate=0.0,
                 num_labels=CLASSES, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), images40),
        Spec("perceiver", "transformers",
             _hf("PerceiverConfig", "PerceiverForSequenceClassification", num_latents=8, d_latents=32, d_model=32,
                 num_blocks=1, num_self_attends_per_block=1, num_self_attention_heads=2, num_cross_attention_heads=2,
                 vocab_size=VOCAB, max_position_embeddings=12, num_labels=CLASSES, attention_probs_dropout_prob=0.0),
             perceiver),
        Spec("mpt", "transformers",  # ALiBi
             _hf("MptConfig", "MptForCausalLM", d_model=64, n_heads=4, n_layers=2, expansion_ratio=2, max_seq_len=64,
                 vocab_size=VOCAB, resid_pdrop=0.0, emb_pdrop=0.0), _causal),
        Spec("gpt-bigcode", "transformers",  # multi-query attention
             _hf("GPTBigCodeConfig", "GPTBigCodeForCausalLM", vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=2,
                 n_head=4, multi_query=True, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                 eos_token_id=0), _causal,
             tied=(("lm_head.weight", "transformer.wte.weight"),)),
        Spec("starcoder2", "transformers",  # sliding window, biases
             _hf("Starcoder2Config", "Starcoder2ForCausalLM", vocab_size=VOCAB, max_position_embeddings=64, **_WIDTH,
                 num_key_value_heads=2, sliding_window=8, residual_dropout=0.0, embedding_dropout=0.0,
                 attention_dropout=0.0, bos_token_id=0, eos_token_id=0), _causal),
        Spec("olmo", "transformers",  # clipped q/k/v
             _hf("OlmoConfig", "OlmoForCausalLM", vocab_size=VOCAB, max_position_embeddings=64, **_WIDTH,
                 num_key_value_heads=2, clip_qkv=0.5, bos_token_id=0, eos_token_id=0, pad_token_id=1), _causal),
        Spec("time-series-transformer", "transformers",  # a Student-t likelihood (torch.distributions)
             _hf("TimeSeriesTransformerConfig", "TimeSeriesTransformerForPrediction", prediction_length=4,
                 context_length=8, lags_sequence=[1, 2], num_time_features=1, d_model=16, encoder_layers=1,
                 decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=16,
                 decoder_ffn_dim=16, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                 encoder_layerdrop=0.0, decoder_layerdrop=0.0), series),
    ]


# --- the driver -------------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    name: str
    eager_losses: list
    lazy_losses: list
    loss_rel: float
    state_diff: float
    worst: str
    fallbacks: int
    fallback_ops: dict
    compiles: list
    programs: list
    eager_f64: float | None = None  # eager's / lazycore's state distance from the float64 run
    lazy_f64: float | None = None
    eager_loss_f64: float | None = None  # eager's / lazycore's losses' largest relative distance from float64's
    lazy_loss_f64: float | None = None
    error: str | None = None
    branches: list | None = None  # the lazy run's host-read branch outcomes a step (HostBranches)
    eager_spread: float | None = None  # eager's losses at the other torch thread count: largest distance from its own

    def loss_bound(self, bound: float) -> float:
        """``bound``, or twice eager's own spread where that is larger: with
        ``elements``, the losses after the first update follow state the float64
        referee decides, and eager at 1 and at 2 torch threads (the same kernels,
        other split sums) already differs there (Swin-T on an Intel Xeon with
        AVX-512: 7.6e-6 at the third loss; lazycore 1.26e-5 from eager, the
        state passing the referee)."""
        return bound if self.eager_spread is None else max(bound, 2 * self.eager_spread)

    def line(self):
        if self.error:
            return f"{self.name:40s} ERROR {self.error}"
        f64 = "" if self.eager_f64 is None else (f" f64 eager {self.eager_f64:.1e} lazy {self.lazy_f64:.1e}"
                                                 f" (losses {self.eager_loss_f64:.1e} / {self.lazy_loss_f64:.1e})")
        return (f"{self.name:40s} loss {self.loss_rel:.1e} state {self.state_diff:.1e} ({self.worst}) "
                f"fallbacks {self.fallbacks} {dict(self.fallback_ops) if self.fallbacks else ''} "
                f"compiles {self.compiles} programs {self.programs}{f64}")


class HostBranches(torch.overrides.TorchFunctionMode):
    """The outcomes of ``if tensor:`` a step: a loop that branches on values it reads
    (timm's Kron picks a power-iteration side on ``value0 > value1``, SGDP/AdamP a
    projection on a cosine) runs a new program only in a step whose outcomes are new."""

    def __init__(self):
        super().__init__()
        self.steps = [[]]

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.Tensor.__bool__:
            self.steps[-1].append(out)
        return out

    def mark(self):
        self.steps.append([])


def compiles_on_seen_branches(out: Outcome, warmup: int) -> list:
    """Compiles after ``warmup`` in steps whose branch outcomes an earlier step after
    the first took (none is right: the same outcomes run the same programs; the first
    step's programs also make the optimizer's state, so its outcomes do not count)."""
    seen = {tuple(b) for b in out.branches[1:warmup]}
    late = []
    for c, b in zip(out.compiles[warmup:], out.branches[warmup:]):
        if tuple(b) in seen:
            late.append(c)
        seen.add(tuple(b))
    return late


def case_params(cases: dict, known: dict):
    """The names of ``cases`` as pytest parameters, those in ``known`` (name ->
    why it fails) strict expected failures: a hunt's known limits."""
    import pytest

    return [pytest.param(name, marks=[pytest.mark.xfail(reason=known[name], strict=True)] if name in known else [])
            for name in cases]


def check_outcome(out: Outcome, bounds: dict, warmup: int) -> None:
    """The hunts' bounds on one loop (tests/consumers/test_hunt3*_torch.py): losses and
    state within ``bounds``' ``loss`` / ``state`` (default 1e-5), no fallback, at most
    ``late`` compiles (0) and ``programs`` programs a step (1) after ``warmup`` steps;
    with ``referee`` / ``loss_referee``, the state / losses no further than that many
    times eager's from the float64 run's (``out`` compared with ``referee=True``);
    with ``new_branches``, a compile after the warm-up only in a step whose branch
    outcomes are new (:func:`compiles_on_seen_branches`; ``branches=True``)."""
    assert out.loss_rel < bounds.get("loss", 1e-5), (out.eager_losses, out.lazy_losses)
    assert out.state_diff < bounds.get("state", 1e-5), (out.worst, out.state_diff)
    if "referee" in bounds:
        assert out.lazy_f64 <= bounds["referee"] * out.eager_f64, (out.lazy_f64, out.eager_f64)
    if "loss_referee" in bounds:
        assert out.lazy_loss_f64 <= bounds["loss_referee"] * out.eager_loss_f64, (out.lazy_loss_f64,
                                                                                  out.eager_loss_f64)
    assert out.fallbacks == 0, out.fallback_ops
    if bounds.get("new_branches"):
        assert not any(compiles_on_seen_branches(out, warmup)), (out.compiles, out.branches)
    else:
        assert sum(out.compiles[warmup:]) <= bounds.get("late", 0), out.compiles
    assert max(out.programs[warmup:]) <= bounds.get("programs", 1), out.programs


def check_refereed_outcome(out: Outcome, bounds: dict, warmup: int) -> None:
    """:func:`check_outcome` for a loop compared with ``elements=True``: its
    state held element by element to the float64 run (``out.refereed``)
    instead of to eager's at ``bounds``' ``state``; its losses within
    ``loss_bound`` (eager's own spread across thread counts allowed)."""
    print(out.name, out.refereed.moved())  # pytest -s
    assert out.loss_rel < out.loss_bound(bounds.get("loss", 1e-5)), (out.eager_losses, out.lazy_losses)
    out.refereed.check()
    check_outcome(out, dict(bounds, state=float("inf")), warmup)


def print_table(compare_one, cases, names) -> None:
    """A hunt's table by hand (``python tests/consumers/cases_huntNN.py [names...]``):
    a line per loop of ``cases`` whose name holds one of ``names`` (all without),
    ``compare_one(name, referee=...)`` each (REFEREE=1 adds the float64 run)."""
    import time
    import traceback

    for n in names or list(cases):
        for m in ([n] if n in cases else [k for k in cases if n in k]):
            t0 = time.time()
            try:
                print(compare_one(m, referee=os.environ.get("REFEREE") == "1").line(), f"{time.time() - t0:.0f}s",
                      flush=True)
            except Exception as e:  # noqa: BLE001 (a table row)
                print(Outcome(m, [], [], 0, 0, "", 0, {}, [], [], error=f"{type(e).__name__}: {e}"[:300]).line(),
                      flush=True)
                traceback.print_exc(limit=-3)


def _cpu_state(state):
    return {k: (v.detach().cpu() if torch.is_tensor(v) else torch.tensor(v)) for k, v in state.items()}


def compare(name, referee=False, cases=None, elements=False, branches=False):
    """Run loop ``name`` of ``cases`` (this file's by default) on eager CPU and
    on the lazy device: an :class:`Outcome`, with the two runs' final states
    (CPU tensors) as ``lazy_state`` and ``eager_state``. ``elements``: also
    the float64 run (``referee``), each run's first-step gradients, and
    zoo_harness.referee's element-by-element findings as ``refereed``.
    ``branches``: the lazy run's ``if tensor:`` outcomes a step as ``branches``
    (:class:`HostBranches`)."""
    import contextlib

    import lazycore.torch as ltorch
    from lazycore.observe import metrics
    from test_hunt26_torch import _counts
    from zoo_harness import FirstStepGrads, _rel, _state_diff
    from zoo_harness import referee as element_referee

    referee = referee or elements
    loop = (CASES if cases is None else cases)[name]
    cpu = torch.device("cpu")

    def capture(**kw):
        return FirstStepGrads(**kw) if elements else contextlib.nullcontext()

    with capture() as eager_cap:
        eager_losses, eager_state = loop(cpu, lambda: None)
    eager_losses, eager_state = [float(v) for v in eager_losses], _cpu_state(eager_state)
    ltorch.mark_step(wait=True)
    metrics.reset()
    marks = [_counts()]

    recorder = HostBranches() if branches else contextlib.nullcontext()

    def each():
        ltorch.mark_step()
        marks.append(_counts())
        if branches:
            recorder.mark()

    with capture() as lazy_cap, recorder:
        lazy_losses, lazy_state = loop(ltorch.device(), each)
        lazy_losses, lazy_state = [float(v.cpu()) for v in lazy_losses], _cpu_state(lazy_state)
        ltorch.mark_step(wait=True)
    c = metrics.counters()
    diff, worst = _state_diff(lazy_state, eager_state)
    out = Outcome(name, eager_losses, lazy_losses, max(_rel(a, b) for a, b in zip(lazy_losses, eager_losses)),
                  diff, worst, c.get("fallbacks", 0), metrics.fallbacks(),
                  [b[0] - a[0] for a, b in zip(marks, marks[1:])], [b[1] - a[1] for a, b in zip(marks, marks[1:])])
    out.lazy_state, out.eager_state = lazy_state, eager_state
    if branches:
        out.branches = recorder.steps[:len(out.compiles)]
    if referee:
        with capture(initial=True) as f64_cap:
            losses64, ref64 = loop(cpu, lambda: None, dtype=torch.float64)
        losses64 = [float(v) for v in losses64]
        out.eager_loss_f64 = max(_rel(a, b) for a, b in zip(eager_losses, losses64))
        out.lazy_loss_f64 = max(_rel(a, b) for a, b in zip(lazy_losses, losses64))
        ref = {k: v.to(eager_state[k].dtype) if v.is_floating_point() else v for k, v in _cpu_state(ref64).items()}
        out.eager_f64 = _state_diff(eager_state, ref)[0]
        out.lazy_f64 = _state_diff(lazy_state, ref)[0]
    if elements:
        threads = torch.get_num_threads()
        torch.set_num_threads(2 if threads == 1 else 1)
        try:
            spread_losses, _ = loop(cpu, lambda: None)
        finally:
            torch.set_num_threads(threads)
        out.eager_spread = max(_rel(float(a), b) for a, b in zip(spread_losses, eager_losses))
        out.refereed = element_referee(dict(state=lazy_state, grads=lazy_cap.grads),
                                       dict(state=eager_state, grads=eager_cap.grads),
                                       dict(state=_cpu_state(ref64), grads=f64_cap.grads, before=f64_cap.before))
    return out


if __name__ == "__main__":  # python tests/consumers/cases_hunt27.py [names...]: a table
    import traceback

    sys.path.insert(0, os.path.dirname(__file__))
    for n in sys.argv[1:] or list(CASES):
        try:
            print(compare(n, referee=True).line(), flush=True)
        except Exception as e:  # noqa: BLE001 (a table row)
            print(Outcome(n, [], [], 0, 0, "", 0, {}, [], [], error=f"{type(e).__name__}: {e}"[:300]).line(),
                  flush=True)
            traceback.print_exc(limit=-3)
