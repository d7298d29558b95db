"""The loops of test_hunt29_torch.py: PyTorch code nobody here wrote, run
unchanged, in the shape of hunt 27's loops (``loop(device, each, dtype) ->
(losses, state)``, cases_hunt27.py): PyTorch's own examples (super-resolution,
fast neural style, the word language model, actor-critic, a siamese network,
graph attention), ``torch.nn.utils`` (pruning, parametrizations, spectral and
weight norm, rnn padding and packing, ``parameters_to_vector``,
``fuse_conv_bn_eval``, ``swa_utils``), losses and layers no earlier hunt ran
in a training loop.

:func:`compare` is hunt 27's comparison (losses, state, fallbacks, compiles
and programs a step, a float64 referee on request) over this module's loops. ``python tests/consumers/cases_hunt29.py [names]`` prints the table.
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


def _images(g, dtype, n=4, c=3, h=12, w=12):
    return torch.rand(n, c, h, w, generator=g).to(dtype)


# --- PyTorch's examples ---------------------------------------------------------------------------


class _SuperResolution(nn.Module):
    """examples/super_resolution/model.py (widths cut): convolutions into
    ``PixelShuffle``, orthogonal init."""

    def __init__(self, upscale=2):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 16, 5, 1, 2)
        self.conv2 = nn.Conv2d(16, 16, 3, 1, 1)
        self.conv3 = nn.Conv2d(16, 8, 3, 1, 1)
        self.conv4 = nn.Conv2d(8, upscale ** 2, 3, 1, 1)
        self.pixel_shuffle = nn.PixelShuffle(upscale)
        nn.init.orthogonal_(self.conv1.weight, nn.init.calculate_gain("relu"))
        nn.init.orthogonal_(self.conv2.weight, nn.init.calculate_gain("relu"))
        nn.init.orthogonal_(self.conv3.weight, nn.init.calculate_gain("relu"))
        nn.init.orthogonal_(self.conv4.weight)

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))


@case
def example_super_resolution(device, each, dtype=torch.float32):
    """MSE against the high-resolution image, Adam, PSNR as the example logs it
    (``10 * log10(1 / mse)``), ``PixelUnshuffle`` of the target as a check."""
    torch.manual_seed(0)
    model = _SuperResolution().to(dtype).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    losses, psnrs = [], []
    for _ in range(STEPS):
        hi = torch.rand(4, 1, 16, 16, generator=g).to(dtype).to(device)
        lo = F.avg_pool2d(hi, 2)
        mse = F.mse_loss(model(lo), hi)
        mse.backward()
        opt.step()
        opt.zero_grad()
        psnrs.append(10 * torch.log10(1 / mse.detach()))
        losses.append(mse.detach() + F.pixel_unshuffle(hi, 2).mean() * 0)
        each()
    return losses, _state(model, psnr=torch.stack(psnrs))


class _ConvLayer(nn.Module):
    def __init__(self, cin, cout, k, stride):
        super().__init__()
        self.pad = nn.ReflectionPad2d(k // 2)
        self.conv = nn.Conv2d(cin, cout, k, stride)

    def forward(self, x):
        return self.conv(self.pad(x))


class _Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1, self.in1 = _ConvLayer(c, c, 3, 1), nn.InstanceNorm2d(c, affine=True)
        self.conv2, self.in2 = _ConvLayer(c, c, 3, 1), nn.InstanceNorm2d(c, affine=True)

    def forward(self, x):
        return x + self.in2(self.conv2(F.relu(self.in1(self.conv1(x)))))


class _Upsample(nn.Module):
    def __init__(self, cin, cout, k, upsample):
        super().__init__()
        self.upsample = upsample
        self.conv = _ConvLayer(cin, cout, k, 1)

    def forward(self, x):
        return self.conv(F.interpolate(x, mode="nearest", scale_factor=self.upsample))


class _TransformerNet(nn.Module):
    """examples/fast_neural_style/neural_style/transformer_net.py (widths cut)."""

    def __init__(self):
        super().__init__()
        self.conv1, self.in1 = _ConvLayer(3, 8, 5, 1), nn.InstanceNorm2d(8, affine=True)
        self.conv2, self.in2 = _ConvLayer(8, 16, 3, 2), nn.InstanceNorm2d(16, affine=True)
        self.res = nn.Sequential(_Residual(16), _Residual(16))
        self.up, self.in3 = _Upsample(16, 8, 3, 2), nn.InstanceNorm2d(8, affine=True)
        self.out = _ConvLayer(8, 3, 5, 1)

    def forward(self, x):
        y = F.relu(self.in1(self.conv1(x)))
        y = F.relu(self.in2(self.conv2(y)))
        y = self.res(y)
        y = F.relu(self.in3(self.up(y)))
        return self.out(y)


def _gram(y):
    b, ch, h, w = y.size()
    features = y.view(b, ch, w * h)
    return features.bmm(features.transpose(1, 2)) / (ch * h * w)


@case
def example_fast_neural_style(device, each, dtype=torch.float32):
    """The example's training step: a frozen feature net (a VGG cut to two
    stages), content loss on one stage, style loss on the Gram matrices of
    both, ``normalize_batch`` (ImageNet mean/std as ``new_tensor``), Adam."""
    torch.manual_seed(0)
    net = _TransformerNet().to(dtype).to(device)
    vgg = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, padding=1),
                        nn.ReLU()).to(dtype).to(device)
    for p in vgg.parameters():
        p.requires_grad_(False)
    opt = torch.optim.Adam(net.parameters(), 1e-3)
    g = torch.Generator().manual_seed(1)
    style = (_images(g, dtype, n=1) * 255).repeat(2, 1, 1, 1).to(device)

    def normalize_batch(batch):
        mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
        std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
        return (batch / 255.0 - mean) / std

    def features(x):
        a = vgg[:2](x)
        return a, vgg[2:](a)

    gram_style = [_gram(f) for f in features(normalize_batch(style))]
    losses = []
    for _ in range(STEPS):
        x = _images(g, dtype, n=2).to(device) * 255
        y = normalize_batch(net(x))
        fy, fx = features(y), features(normalize_batch(x))
        content = 1e5 * F.mse_loss(fy[1], fx[1])
        style_loss = 0.0
        for ft_y, gm_s in zip(fy, gram_style):
            style_loss = style_loss + F.mse_loss(_gram(ft_y), gm_s[:x.shape[0], :, :])
        loss = content + 1e10 * style_loss / 1e8
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
        each()
    return losses, _state(net)


class _WordTransformer(nn.Module):
    """examples/word_language_model/model.py TransformerModel (sizes cut):
    a sinusoidal position buffer, a causal float mask, log_softmax."""

    def __init__(self, ntoken=50, ninp=16, nhead=2, nhid=32, nlayers=2):
        super().__init__()
        pe = torch.zeros(64, ninp)
        position = torch.arange(0, 64, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, ninp, 2).float() * (-math.log(10000.0) / ninp))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))
        layer = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        nn.init.uniform_(self.input_emb.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    @staticmethod
    def _generate_square_subsequent_mask(sz):
        return torch.log(torch.tril(torch.ones(sz, sz)))

    def forward(self, src):
        mask = self._generate_square_subsequent_mask(len(src)).to(src.device)
        src = self.input_emb(src) * math.sqrt(self.ninp)
        src = src + self.pe[:src.size(0), :]
        output = self.encoder(src, mask=mask)
        return F.log_softmax(self.decoder(output), dim=-1)


class _WordRNN(nn.Module):
    """examples/word_language_model/model.py RNNModel (LSTM, tied), with the
    hidden state carried between batches and detached (``repackage_hidden``)."""

    def __init__(self, ntoken=50, ninp=16, nlayers=2):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, ninp, nlayers, dropout=0.0)
        self.decoder = nn.Linear(ninp, ntoken)
        self.decoder.weight = self.encoder.weight
        self.nlayers, self.nhid = nlayers, ninp

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.encoder(x), hidden)
        return F.log_softmax(self.decoder(out), dim=-1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))


def _corpus(g, n=STEPS, bptt=6, bsz=3, ntoken=50):
    data = torch.randint(0, ntoken, (n * bptt + 1, bsz), generator=g)
    return [(data[i * bptt:(i + 1) * bptt], data[i * bptt + 1:(i + 1) * bptt + 1].reshape(-1)) for i in range(n)]


def _word_lm(kind):
    def loop(device, each, dtype=torch.float32):
        """The example's ``train()``: NLL of log-softmax, ``clip_grad_norm_(0.25)``,
        the update written by hand (``p.data.add_(p.grad, alpha=-lr)``)."""
        torch.manual_seed(0)
        model = (_WordTransformer() if kind == "transformer" else _WordRNN()).to(dtype).to(device)
        lr = 5.0 if kind == "lstm" else 1.0
        g = torch.Generator().manual_seed(1)
        hidden = model.init_hidden(3) if kind == "lstm" else None
        losses = []
        for data, targets in _corpus(g):
            data, targets = data.to(device), targets.to(device)
            model.zero_grad()
            if kind == "lstm":
                hidden = tuple(h.detach() for h in hidden)
                output, hidden = model(data, hidden)
            else:
                output = model(data)
            loss = F.nll_loss(output.view(-1, 50), targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            losses.append(loss.detach())
            each()
        return losses, _state(model)

    loop.__name__ = f"example_word_lm_{kind}"
    return case(loop)


_word_lm("transformer")
_word_lm("lstm")


class _Policy(nn.Module):
    """examples/reinforcement_learning/actor_critic.py: shared layer, action and value heads."""

    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(4, 32)
        self.action_head = nn.Linear(32, 2)
        self.value_head = nn.Linear(32, 1)

    def forward(self, x):
        x = F.relu(self.affine1(x))
        return F.softmax(self.action_head(x), dim=-1), self.value_head(x)


@case
def example_actor_critic(device, each, dtype=torch.float32):
    """``finish_episode``: discounted returns computed in Python, normalized by
    ``returns.std() + eps``, ``Categorical(probs).log_prob`` of the (CPU-drawn)
    actions, ``smooth_l1_loss`` for the critic, the losses stacked and summed."""
    torch.manual_seed(0)
    model = _Policy().to(dtype).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-2)
    eps = float(torch.finfo(torch.float32).eps)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        states = torch.randn(7, 4, generator=g).to(dtype)
        actions = torch.randint(0, 2, (7,), generator=g)
        rewards = torch.rand(7, generator=g).tolist()
        saved = []
        for s, a in zip(states, actions):
            probs, value = model(s.to(device))
            m = torch.distributions.Categorical(probs)
            saved.append((m.log_prob(a.to(device)), value))
        R, returns = 0, []
        for r in rewards[::-1]:
            R = r + 0.99 * R
            returns.insert(0, R)
        returns = torch.tensor(returns, dtype=dtype).to(device)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        policy_losses, value_losses = [], []
        for (log_prob, value), R in zip(saved, returns):
            advantage = R - value.detach()[0]  # the example's value.item(), without a read per element
            policy_losses.append(-log_prob * advantage)
            value_losses.append(F.smooth_l1_loss(value, R.reshape(1)))
        opt.zero_grad()
        loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        each()
    return losses, _state(model)


class _Siamese(nn.Module):
    """examples/siamese_network/main.py (a small CNN in place of its ResNet-18):
    both images through one tower, features concatenated, a sigmoid head."""

    def __init__(self):
        super().__init__()
        self.tower = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                   nn.MaxPool2d(2), nn.Conv2d(8, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d((1, 1)))
        self.fc = nn.Sequential(nn.Linear(16, 16), nn.ReLU(inplace=True), nn.Linear(16, 1))
        self.sigmoid = nn.Sigmoid()

    def forward(self, a, b):
        fa, fb = self.tower(a).view(a.size(0), -1), self.tower(b).view(b.size(0), -1)
        return self.sigmoid(self.fc(torch.cat((fa, fb), 1)))


@case
def example_siamese_bce_triplet(device, each, dtype=torch.float32):
    """The siamese example's BCELoss on pair similarity and Adadelta with
    StepLR, plus the metric-learning losses users put on such towers:
    TripletMarginLoss, TripletMarginWithDistanceLoss (cosine),
    CosineEmbeddingLoss, MarginRankingLoss."""
    torch.manual_seed(0)
    model = _Siamese().to(dtype).to(device)
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
    triplet = nn.TripletMarginLoss(margin=1.0, p=2, swap=True)
    cos_triplet = nn.TripletMarginWithDistanceLoss(distance_function=lambda a, b: 1 - F.cosine_similarity(a, b),
                                                   margin=0.5)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        a, b, c = (torch.rand(4, 1, 10, 10, generator=g).to(dtype).to(device) for _ in range(3))
        same = (torch.rand(4, generator=g) > 0.5).to(dtype).to(device)
        out = model(a, b).squeeze()
        fa, fb, fc = (model.tower(t).flatten(1) for t in (a, b, c))
        loss = (nn.BCELoss()(out, same) + triplet(fa, fb, fc) + cos_triplet(fa, fb, fc)
                + nn.CosineEmbeddingLoss(margin=0.2)(fa, fb, same * 2 - 1)
                + nn.MarginRankingLoss(margin=0.1)(fa.sum(1), fb.sum(1), same * 2 - 1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.detach())
        each()
    return losses, _state(model)


class _GATLayer(nn.Module):
    """examples/gat/main.py GraphAttentionLayer (concat heads, LeakyReLU scores,
    -inf outside the adjacency, softmax, ELU)."""

    def __init__(self, cin, cout, heads, concat=True, leaky=0.2):
        super().__init__()
        self.n_heads, self.concat = heads, concat
        self.n_hidden = cout // heads if concat else cout
        self.W = nn.Parameter(torch.empty(size=(cin, self.n_hidden * heads)))
        self.a = nn.Parameter(torch.empty(size=(heads, 2 * self.n_hidden, 1)))
        self.leakyrelu = nn.LeakyReLU(leaky)
        self.softmax = nn.Softmax(dim=1)
        nn.init.xavier_normal_(self.W)
        nn.init.xavier_normal_(self.a)

    def forward(self, h, adj_mat):
        n_nodes = h.shape[0]
        h_transformed = torch.mm(h, self.W)
        h_transformed = h_transformed.view(n_nodes, self.n_heads, self.n_hidden).permute(1, 0, 2)
        source_scores = torch.matmul(h_transformed, self.a[:, :self.n_hidden, :])
        target_scores = torch.matmul(h_transformed, self.a[:, self.n_hidden:, :])
        e = self.leakyrelu(source_scores + target_scores.mT)
        connectivity_mask = -9e16 * torch.ones_like(e)
        e = torch.where(adj_mat > 0, e, connectivity_mask)
        attention = self.softmax(e)
        h_prime = torch.matmul(attention, h_transformed)
        if self.concat:
            return h_prime.permute(1, 0, 2).contiguous().view(n_nodes, self.n_heads * self.n_hidden)
        return h_prime.mean(dim=0)


@case
def example_gat(device, each, dtype=torch.float32):
    """The GAT example's loop: two attention layers, ELU, log_softmax, NLL over
    the training nodes (an index tensor), Adam with weight decay."""
    torch.manual_seed(0)
    l1, l2 = _GATLayer(12, 16, 4), _GATLayer(16, 3, 1, concat=False)
    model = nn.ModuleList([l1, l2]).to(dtype).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=5e-4)
    g = torch.Generator().manual_seed(1)
    feats = torch.randn(20, 12, generator=g).to(dtype).to(device)
    adj = ((torch.rand(20, 20, generator=g) > 0.7) | torch.eye(20, dtype=torch.bool)).float().to(device)
    labels = torch.randint(0, 3, (20,), generator=g).to(device)
    idx_train = torch.arange(0, 12).to(device)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        out = F.log_softmax(l2(F.elu(l1(feats, adj)), adj), dim=1)
        loss = F.nll_loss(out[idx_train], labels[idx_train])
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        each()
    return losses, _state(model)


# --- torch.nn.utils -------------------------------------------------------------------------------


@case
def nn_utils_prune_iterative(device, each, dtype=torch.float32):
    """``torch.nn.utils.prune``: L1 unstructured on a convolution, Ln structured
    on a linear's rows, a global L1 over both, pruned again after two steps
    (masks combine through ``PruningContainer``), ``prune.remove`` at the end;
    SGD with momentum and nesterov. The masks are computed where the weights
    are (topk of the importance scores)."""
    from torch.nn.utils import prune

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 16), nn.ReLU(),
                          nn.Linear(16, 4)).to(dtype).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    prune.l1_unstructured(model[0], "weight", amount=0.3)
    prune.ln_structured(model[3], "weight", amount=0.25, n=2, dim=0)
    g = torch.Generator().manual_seed(1)
    losses = []
    for step in range(STEPS):
        if step == 2:
            prune.global_unstructured([(model[0], "weight"), (model[3], "weight"), (model[5], "weight")],
                                      pruning_method=prune.L1Unstructured, amount=0.2)
        x, y = torch.randn(4, 3, 8, 8, generator=g).to(dtype).to(device), torch.randint(0, 4, (4,), generator=g)
        loss = F.cross_entropy(model(x), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        each()
    for m in (model[0], model[3], model[5]):
        prune.remove(m, "weight")
    return losses, _state(model)


@case
def nn_utils_spectral_weight_norm_gan(device, each, dtype=torch.float32):
    """A discriminator with ``parametrizations.spectral_norm`` (a power
    iteration a training forward, its ``_u``/``_v`` updated in place) and a
    generator with ``parametrizations.weight_norm`` and the old
    ``nn.utils.spectral_norm`` hook; the hinge loss, Adam with betas (0, 0.9),
    two discriminator steps a generator step."""
    from torch.nn.utils import parametrizations as P

    torch.manual_seed(0)
    D = nn.Sequential(P.spectral_norm(nn.Conv2d(3, 8, 4, 2, 1)), nn.LeakyReLU(0.2),
                      P.spectral_norm(nn.Conv2d(8, 16, 4, 2, 1), n_power_iterations=2), nn.LeakyReLU(0.2),
                      nn.Flatten(), P.spectral_norm(nn.Linear(16 * 2 * 2, 1))).to(dtype).to(device)
    G = nn.Sequential(P.weight_norm(nn.Linear(8, 16 * 2 * 2)), nn.Unflatten(1, (16, 2, 2)), nn.ReLU(),
                      nn.utils.spectral_norm(nn.ConvTranspose2d(16, 8, 4, 2, 1)), nn.ReLU(),
                      P.weight_norm(nn.ConvTranspose2d(8, 3, 4, 2, 1), dim=1), nn.Tanh()).to(dtype).to(device)
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.0, 0.9))
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-4, betas=(0.0, 0.9))
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        for _ in range(2):
            real = (torch.rand(4, 3, 8, 8, generator=g) * 2 - 1).to(dtype).to(device)
            z = torch.randn(4, 8, generator=g).to(dtype).to(device)
            d_loss = F.relu(1 - D(real)).mean() + F.relu(1 + D(G(z).detach())).mean()
            opt_d.zero_grad()
            d_loss.backward()
            opt_d.step()
        z = torch.randn(4, 8, generator=g).to(dtype).to(device)
        g_loss = -D(G(z)).mean()
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        losses.append(d_loss.detach() + g_loss.detach())
        each()
    return losses, _state(D, G)


class _Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)


class _MatrixExpPos(nn.Module):
    def forward(self, X):
        return X @ X.mT + 1e-3 * torch.eye(X.shape[-1], device=X.device, dtype=X.dtype)


@case
def nn_utils_parametrize_custom_cached(device, each, dtype=torch.float32):
    """``parametrize.register_parametrization`` with the tutorial's Symmetric
    and a chained positive-definite map, ``parametrize.cached()`` around a
    forward that reads the weight twice, ``right_inverse`` on assignment,
    RMSprop."""
    from torch.nn.utils import parametrize

    torch.manual_seed(0)
    lin = nn.Linear(6, 6)
    parametrize.register_parametrization(lin, "weight", _Symmetric())
    parametrize.register_parametrization(lin, "weight", _MatrixExpPos())
    head = nn.Linear(6, 2)
    model = nn.ModuleList([lin, head]).to(dtype).to(device)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(5, 6, generator=g).to(dtype).to(device)
        with parametrize.cached():
            h = torch.tanh(lin(x)) + x @ lin.weight.diagonal().diag()
        loss = head(h).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        each()
    return losses, _state(model, weight=lin.weight.detach())


@case
def nn_utils_rnn_pad_pack(device, each, dtype=torch.float32):
    """Variable-length sequences as users batch them: ``pad_sequence``,
    ``pack_sequence(enforce_sorted=False)`` into a GRU, ``pad_packed_sequence``
    with ``total_length``, ``unpad_sequence`` / ``unpack_sequence`` back, a
    per-token loss with ``ignore_index``; AdamW."""
    from torch.nn.utils import rnn

    torch.manual_seed(0)
    emb, gru, out = nn.Embedding(20, 8, padding_idx=0), nn.GRU(8, 12, batch_first=True), nn.Linear(12, 20)
    model = nn.ModuleList([emb, gru, out]).to(dtype).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        lengths = [5, 2, 7, 4]
        seqs = [torch.randint(1, 20, (n,), generator=g).to(device) for n in lengths]
        targets = rnn.pad_sequence([torch.randint(0, 20, (n,), generator=g).to(device) for n in lengths],
                                   batch_first=True, padding_value=-100)
        packed = rnn.pack_sequence([emb(s) for s in seqs], enforce_sorted=False)
        h, _ = gru(packed)
        padded, lens = rnn.pad_packed_sequence(h, batch_first=True, total_length=8)
        pieces = rnn.unpad_sequence(padded, lens, batch_first=True)
        unpacked = rnn.unpack_sequence(h)
        logits = out(padded[:, :7])
        loss = (F.cross_entropy(logits.reshape(-1, 20), targets.reshape(-1), ignore_index=-100)
                + sum(p.square().mean() for p in pieces) * 0.1 + sum(u.mean() for u in unpacked) * 0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        each()
    return losses, _state(model)


@case
def nn_utils_vector_fuse_swa(device, each, dtype=torch.float32):
    """``parameters_to_vector`` / ``vector_to_parameters`` (a flat update as
    natural-gradient and evolution-strategy code writes it), ``AveragedModel``
    with ``get_ema_multi_avg_fn`` and an SWA average, ``SWALR``, ``update_bn``
    over a loader, ``fuse_conv_bn_eval`` of the averaged model at the end."""
    from torch.nn.utils import parameters_to_vector, vector_to_parameters
    from torch.optim import swa_utils

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 6, 3), nn.BatchNorm2d(6), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(6, 3)).to(dtype).to(device)
    ema = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9))
    swa = swa_utils.AveragedModel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=2, anneal_strategy="cos")
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(4, 3, 6, 6, generator=g).to(dtype), torch.randint(0, 3, (4,), generator=g))
               for _ in range(STEPS)]
    losses = []
    for x, y in batches:
        loss = F.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        flat = parameters_to_vector(model.parameters())
        grads = parameters_to_vector([p.grad for p in model.parameters()])
        vector_to_parameters(flat - 0.01 * grads / (grads.norm() + 1e-8), model.parameters())
        opt.step()
        sched.step()
        ema.update_parameters(model)
        swa.update_parameters(model)
        losses.append(loss.detach())
        each()
    swa_utils.update_bn([x.to(device) for x, _ in batches], swa)
    swa.eval()
    fused = torch.nn.utils.fuse_conv_bn_eval(swa.module[0], swa.module[1])
    return losses, _state(model, ema, swa, fused, lr=torch.tensor(opt.param_groups[0]["lr"]))


# --- losses and layers no earlier hunt trained through -------------------------------------------


class _Layers(nn.Module):
    def __init__(self):
        super().__init__()
        self.bil = nn.Bilinear(6, 5, 8)
        self.glu = nn.GLU()
        self.conv = nn.Conv1d(4, 8, 3, padding=1, padding_mode="circular")
        self.lp = nn.LPPool1d(2, 2)
        self.lrn = nn.LocalResponseNorm(3)
        self.fold_in = nn.Conv2d(2, 4, 3, padding=1)
        self.amax = nn.AdaptiveMaxPool2d((2, 3))
        self.cell = nn.LSTMCell(8, 6)
        self.rcell = nn.RNNCell(6, 6, nonlinearity="relu")
        self.gcell = nn.GRUCell(6, 6)
        self.head = nn.Linear(4 + 6 + 4 * 2 * 3 + 8, 5)

    def forward(self, a, b, seq, img):
        x = self.glu(self.bil(a, b))  # (n, 4)
        s = self.lp(self.conv(seq))  # (n, 8, L/2)
        s = self.lrn(s.unsqueeze(-1)).squeeze(-1)
        h, c = torch.zeros(a.shape[0], 6, device=a.device, dtype=a.dtype), torch.zeros_like(
            a[:, :6])
        for t in range(s.shape[-1]):
            h, c = self.cell(s[..., t], (h, c))
            h = self.gcell(self.rcell(h), h)
        cols = F.unfold(img, kernel_size=2, stride=2)  # (n, 2*4, L)
        img2 = F.fold(cols * 1.5, img.shape[-2:], kernel_size=2, stride=2)
        m = self.amax(F.pixel_shuffle(self.fold_in(img2).repeat(1, 1, 1, 1), 1))
        ch = F.channel_shuffle(self.fold_in(img2), 2).mean((2, 3))
        return self.head(torch.cat([x, h, m.flatten(1), ch.repeat(1, 2)], 1))


@case
def layers_and_losses_zoo(device, each, dtype=torch.float32):
    """Bilinear, GLU, circular padding, LPPool1d, LocalResponseNorm,
    LSTMCell/RNNCell/GRUCell unrolled, unfold/fold, AdaptiveMaxPool2d,
    channel_shuffle; losses: MultiMarginLoss, MultiLabelSoftMarginLoss,
    PoissonNLLLoss, GaussianNLLLoss, KLDivLoss(log_target), HuberLoss,
    SoftMarginLoss, HingeEmbeddingLoss; Adamax."""
    torch.manual_seed(0)
    model = _Layers().to(dtype).to(device)
    opt = torch.optim.Adamax(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        a, b = torch.randn(3, 6, generator=g), torch.randn(3, 5, generator=g)
        seq, img = torch.randn(3, 4, 8, generator=g), torch.randn(3, 2, 6, 6, generator=g)
        y = torch.randint(0, 5, (3,), generator=g)
        multi = (torch.rand(3, 5, generator=g) > 0.5).float()
        a, b, seq, img, multi = (t.to(dtype).to(device) for t in (a, b, seq, img, multi))
        y = y.to(device)
        out = model(a, b, seq, img)
        var = F.softplus(out) + 0.1
        loss = (nn.MultiMarginLoss(p=1, margin=0.5)(out, y) + nn.MultiLabelSoftMarginLoss()(out, multi)
                + nn.PoissonNLLLoss(log_input=True, full=True)(out, multi * 3)
                + nn.GaussianNLLLoss(full=True)(out, multi, var)
                + nn.KLDivLoss(reduction="batchmean", log_target=True)(F.log_softmax(out, 1),
                                                                      F.log_softmax(multi, 1))
                + nn.HuberLoss(delta=0.5)(out, multi) + nn.SoftMarginLoss()(out, multi * 2 - 1)
                + nn.HingeEmbeddingLoss(margin=1.0)(out, multi * 2 - 1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        each()
    return losses, _state(model)


# --- the driver -------------------------------------------------------------------------------


def compare(name, referee=False, elements=False):
    """Run loop ``name`` on eager CPU and on the lazy device as hunt 27's
    ``compare`` does: a cases_hunt27.Outcome, with the two runs' final states
    (CPU tensors) as ``lazy_state`` and ``eager_state``; ``elements``: also
    the float64 referee's findings, as ``refereed``."""
    import cases_hunt27

    return cases_hunt27.compare(name, referee, cases=CASES, elements=elements)


if __name__ == "__main__":  # python tests/consumers/cases_hunt29.py [names...]: a table
    import traceback

    from cases_hunt27 import Outcome

    for n in sys.argv[1:] or list(CASES):
        for m in ([n] if n in CASES else [k for k in CASES if n in k]):
            try:
                print(compare(m, referee=True).line(), flush=True)
            except Exception as e:  # noqa: BLE001 (a table row)
                print(Outcome(m, [], [], 0, 0, "", 0, {}, [], [], error=f"{type(e).__name__}: {e}"[:300]).line(),
                      flush=True)
                traceback.print_exc(limit=-3)
