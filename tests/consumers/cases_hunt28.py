"""The cases of test_hunt28_torch.py: pieces of real PyTorch training code
nobody here wrote (torchvision.transforms.v2 on batched tensors, torchvision's
box losses and ops, torch.distributions, timm's losses and gradient clipping),
each a function ``fn(device) -> dict`` of named tensors that builds its inputs
on the CPU from ``torch.manual_seed(0)``, moves them to ``device``, runs the
library's code unchanged (a forward and, where the library trains through it,
a backward) and returns what a training step would use: outputs and
gradients.

:func:`compare` runs a case on eager CPU and on the lazy device from the same
seed (the transforms' parameters are drawn from the CPU generator, so both
runs draw the same crops, angles and orders) and measures: the largest
difference (for integer and uint8 results the most levels apart), fallbacks
and programs.
``python tests/consumers/cases_hunt28.py [names]`` prints the table.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))

from cases_hunt27 import registry  # noqa: E402 (after the path)

CASES, case = registry()


def _images(dtype=torch.uint8, n=2, c=3, h=24, w=20, seed=1):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.uint8:
        return torch.randint(0, 256, (n, c, h, w), generator=g, dtype=torch.uint8)
    return torch.rand(n, c, h, w, generator=g).to(dtype)


# --- torchvision.transforms.v2 on batched tensors ------------------------------------------------


def _v2_case(name, make, dtype=torch.uint8, repeats=3, **kw):
    def fn(device):
        from torchvision.transforms import v2

        torch.manual_seed(0)
        t = make(v2)
        x = _images(dtype, **kw).to(device)
        return {f"out{i}": t(x) for i in range(repeats)}

    fn.__name__ = name
    return case(fn)


def _v2_cases():
    for dtype, tag in ((torch.uint8, "u8"), (torch.float32, "f32")):
        _v2_case(f"v2_random_resized_crop_{tag}", lambda v2: v2.RandomResizedCrop(16, antialias=True), dtype)
        _v2_case(f"v2_color_jitter_{tag}", lambda v2: v2.ColorJitter(0.4, 0.4, 0.4, 0.1), dtype)
        _v2_case(f"v2_rand_augment_{tag}", lambda v2: v2.RandAugment(num_ops=2, magnitude=9), dtype, repeats=6)
        _v2_case(f"v2_trivial_augment_{tag}", lambda v2: v2.TrivialAugmentWide(), dtype, repeats=6)
        _v2_case(f"v2_auto_augment_{tag}", lambda v2: v2.AutoAugment(), dtype, repeats=6)
        _v2_case(f"v2_random_erasing_{tag}", lambda v2: v2.RandomErasing(p=1.0, value=0), dtype)
        _v2_case(f"v2_gaussian_blur_{tag}", lambda v2: v2.GaussianBlur(5, sigma=(0.1, 2.0)), dtype)
        _v2_case(f"v2_random_affine_{tag}", lambda v2: v2.RandomAffine(20, (0.1, 0.1), (0.8, 1.2), 10), dtype)
        _v2_case(f"v2_random_rotation_{tag}", lambda v2: v2.RandomRotation(30), dtype)
        _v2_case(f"v2_random_perspective_{tag}", lambda v2: v2.RandomPerspective(p=1.0), dtype)
        _v2_case(f"v2_elastic_{tag}", lambda v2: v2.ElasticTransform(alpha=20.0, sigma=2.0), dtype, repeats=1)
        _v2_case(f"v2_photometric_distort_{tag}", lambda v2: v2.RandomPhotometricDistort(p=1.0), dtype)
        _v2_case(f"v2_equalize_{tag}", lambda v2: v2.RandomEqualize(p=1.0), dtype, repeats=1)
        _v2_case(f"v2_autocontrast_sharpness_{tag}", lambda v2: v2.Compose(
            [v2.RandomAutocontrast(p=1.0), v2.RandomAdjustSharpness(2.0, p=1.0)]), dtype, repeats=1)
        _v2_case(f"v2_posterize_solarize_invert_{tag}", lambda v2: v2.Compose(
            [v2.RandomPosterize(3, p=1.0), v2.RandomSolarize(100 if dtype == torch.uint8 else 0.4, p=1.0),
             v2.RandomInvert(p=1.0), v2.RandomGrayscale(p=1.0)]), dtype, repeats=1)
    _v2_case("v2_train_pipeline_u8", lambda v2: v2.Compose([
        v2.RandomResizedCrop(16, antialias=True), v2.RandomHorizontalFlip(), v2.TrivialAugmentWide(),
        v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        v2.RandomErasing(p=1.0)]), torch.uint8, repeats=4)


_v2_cases()


# --- torchvision's box losses and ops ------------------------------------------------------------


def _xyxy(g, n, size=1.0):
    xy = torch.rand(n, 2, generator=g) * size
    wh = torch.rand(n, 2, generator=g) * size / 2 + 0.05 * size
    return torch.cat([xy, xy + wh], 1)


def _grad_case(name, fn_of):
    """A case whose leaves (CPU-made, moved, ``requires_grad_``) go through
    ``fn_of(*leaves) -> tensor``; returns the value and the leaves' gradients
    under a fixed non-uniform seed."""

    def fn(device):
        leaves, call = fn_of()
        leaves = [x.to(device).requires_grad_() for x in leaves]
        out = call(*leaves)
        seed = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape).to(device)
        (out * seed).sum().backward()
        res = {"out": out.detach()}
        res.update({f"grad{i}": x.grad for i, x in enumerate(leaves)})
        return res

    fn.__name__ = name
    return case(fn)


def _box_loss(kind, reduction):
    def fn_of():
        from torchvision import ops

        g = torch.Generator().manual_seed(0)
        a, b = _xyxy(g, 12), _xyxy(g, 12)
        b[3] = a[3]  # a perfect match
        b[5] = a[5] + 2.0  # no overlap
        f = {"giou": ops.generalized_box_iou_loss, "diou": ops.distance_box_iou_loss,
             "ciou": ops.complete_box_iou_loss}[kind]
        return [a, b], lambda p, q: f(p, q, reduction=reduction).reshape(-1)

    return fn_of


for _kind in ("giou", "diou", "ciou"):
    for _red in ("none", "mean"):
        _grad_case(f"tv_{_kind}_loss_{_red}", _box_loss(_kind, _red))


def _pairwise(kind):
    def fn_of():
        from torchvision import ops

        g = torch.Generator().manual_seed(0)
        a, b = _xyxy(g, 7, 10.0), _xyxy(g, 5, 10.0)
        f = {"iou": ops.box_iou, "giou": ops.generalized_box_iou, "diou": ops.distance_box_iou,
             "ciou": ops.complete_box_iou}[kind]
        return [a, b], f

    return fn_of


for _kind in ("iou", "giou", "diou", "ciou"):
    _grad_case(f"tv_pairwise_{_kind}", _pairwise(_kind))


def _focal(reduction):
    def fn_of():
        from torchvision import ops

        g = torch.Generator().manual_seed(0)
        logits = torch.randn(6, 5, generator=g) * 3
        target = (torch.rand(6, 5, generator=g) > 0.7).float()
        return [logits], lambda x: ops.sigmoid_focal_loss(x, target.to(x.device), alpha=0.25, gamma=2.0,
                                                          reduction=reduction).reshape(-1)

    return fn_of


_grad_case("tv_sigmoid_focal_loss_sum", _focal("sum"))


def _rois(g, n=6, batch=2, size=12.0):
    return torch.cat([torch.randint(0, batch, (n, 1), generator=g).float(), _xyxy(g, n, size)], 1)


def _roi_op(kind):
    def fn_of():
        from torchvision import ops

        g = torch.Generator().manual_seed(0)
        channels = 8 if kind.startswith("ps") else 3
        feat = torch.randn(2, channels, 12, 12, generator=g)
        rois = _rois(g)
        f = {"roi_pool": lambda x: ops.roi_pool(x, rois.to(x.device), (2, 2), 1.0),
             "ps_roi_pool": lambda x: ops.ps_roi_pool(x, rois.to(x.device), (2, 2), 1.0),
             "ps_roi_align": lambda x: ops.ps_roi_align(x, rois.to(x.device), (2, 2), 1.0, 2),
             "roi_align_adaptive": lambda x: ops.roi_align(x, rois.to(x.device), (3, 3), 0.5, -1, True)}[kind]
        return [feat], f

    return fn_of


for _kind in ("roi_pool", "ps_roi_pool", "ps_roi_align", "roi_align_adaptive"):
    _grad_case(f"tv_{_kind}", _roi_op(_kind))


def _deform():
    from torchvision import ops

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 7, 7, generator=g)
    offset = torch.randn(2, 2 * 9, 7, 7, generator=g) * 1.5
    mask = torch.rand(2, 9, 7, 7, generator=g)
    w = torch.randn(6, 4, 3, 3, generator=g) * 0.2
    b = torch.randn(6, generator=g)
    return [x, offset, mask, w, b], lambda *t: ops.deform_conv2d(t[0], t[1], t[3], t[4], padding=1, mask=t[2])


_grad_case("tv_deform_conv2d", _deform)


@case
def tv_box_utils(device):
    from torchvision import ops

    g = torch.Generator().manual_seed(0)
    boxes = _xyxy(g, 20, 30.0)
    boxes[4, 2:] = boxes[4, :2] + 0.1  # small
    scores = torch.rand(20, generator=g)
    idxs = torch.randint(0, 3, (20,), generator=g)
    masks = torch.zeros(3, 16, 16, dtype=torch.bool)
    masks[0, 2:5, 3:9] = True
    masks[1, 10:, :4] = True
    masks[2, 7, 7] = True
    boxes, scores, idxs, masks = (t.to(device) for t in (boxes, scores, idxs, masks))
    return {"batched_nms": ops.batched_nms(boxes, scores, idxs, 0.3),
            "clip": ops.clip_boxes_to_image(boxes, (20, 25)),
            "small": ops.remove_small_boxes(boxes, 1.0),
            "cxcywh": ops.box_convert(boxes, "xyxy", "cxcywh"),
            "xywh": ops.box_convert(ops.box_convert(boxes, "xyxy", "xywh"), "xywh", "xyxy"),
            "area": ops.box_area(boxes), "masks_to_boxes": ops.masks_to_boxes(masks)}


@case
def tv_fpn_frozen_bn_train(device):
    """torchvision's FeaturePyramidNetwork over a frozen-batch-norm backbone piece, forward and backward."""
    from collections import OrderedDict

    from torchvision import ops

    torch.manual_seed(0)
    fpn = ops.FeaturePyramidNetwork([4, 8], 6, extra_blocks=ops.feature_pyramid_network.LastLevelMaxPool())
    bn = ops.FrozenBatchNorm2d(4)
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    se = ops.SqueezeExcitation(8, 4)
    fpn, bn, se = fpn.to(device), bn.to(device), se.to(device)
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(2, 4, 16, 16, generator=g).to(device), torch.randn(2, 8, 8, 8, generator=g).to(device)
    out = fpn(OrderedDict([("a", bn(a)), ("b", se(b))]))
    sum(o.square().mean() for o in out.values()).backward()
    res = {f"out_{k}": v.detach() for k, v in out.items()}
    res.update({f"grad_{k}": p.grad for k, p in list(fpn.named_parameters()) + list(se.named_parameters())})
    return res


# --- torch.distributions ---------------------------------------------------------------------------


def _dist_case(name, make, samples):
    """``make(*leaves) -> distribution``: log_prob of CPU-drawn samples, entropy
    and mean where defined, and the leaves' gradients of their sum."""

    def fn_of():
        g = torch.Generator().manual_seed(0)
        leaves, value = samples(g)

        def call(*ps):
            d = make(*ps)
            parts = [d.log_prob(value.to(ps[0].device)).reshape(-1)]
            for attr in ("entropy", "mean"):
                try:
                    parts.append(getattr(d, attr)() if attr == "entropy" else d.mean)
                except NotImplementedError:
                    continue
                parts[-1] = parts[-1].reshape(-1)
            return torch.cat(parts)

        return leaves, call

    return _grad_case(name, fn_of)


def _dists():
    D = torch.distributions

    def mixture(g):
        logits, loc, scale = torch.randn(4, 3, generator=g), torch.randn(4, 3, 2, generator=g), \
            torch.rand(4, 3, 2, generator=g) + 0.3
        return [logits, loc, scale], torch.randn(4, 2, generator=g)

    _dist_case("dist_mixture_same_family", lambda lg, lc, sc: D.MixtureSameFamily(
        D.Categorical(logits=lg), D.Independent(D.Normal(lc, sc), 1)), mixture)

    def mvn(g):
        a = torch.randn(3, 3, generator=g)
        return [torch.randn(3, generator=g), a @ a.T + 3 * torch.eye(3)], torch.randn(5, 3, generator=g)

    _dist_case("dist_multivariate_normal", lambda m, c: D.MultivariateNormal(m, covariance_matrix=c), mvn)

    def lowrank(g):
        return [torch.randn(4, generator=g), torch.randn(4, 2, generator=g), torch.rand(4, generator=g) + 0.5], \
            torch.randn(6, 4, generator=g)

    _dist_case("dist_lowrank_mvn", lambda m, f, d: D.LowRankMultivariateNormal(m, f, d), lowrank)

    def positive(g, n=6):
        return [torch.rand(n, generator=g) * 3 + 0.5, torch.rand(n, generator=g) * 3 + 0.5], \
            torch.rand(n, generator=g) * 0.9 + 0.05

    _dist_case("dist_beta", lambda a, b: D.Beta(a, b), positive)
    _dist_case("dist_gamma", lambda a, b: D.Gamma(a, b), positive)
    _dist_case("dist_kumaraswamy", lambda a, b: D.Kumaraswamy(a, b), positive)
    _dist_case("dist_student_t", lambda df, s: D.StudentT(df + 2, torch.zeros_like(s), s),
               lambda g: (positive(g)[0], torch.randn(6, generator=g) * 2))
    _dist_case("dist_von_mises", lambda m, k: D.VonMises(m, k),
               lambda g: ([torch.randn(6, generator=g), torch.rand(6, generator=g) * 5 + 0.1],
                          torch.rand(6, generator=g) * 6 - 3))

    def simplex(g):
        return [torch.rand(3, 4, generator=g) * 2 + 0.5], torch.randn(3, 4, generator=g).softmax(-1)

    _dist_case("dist_dirichlet", lambda c: D.Dirichlet(c), simplex)

    def counts(g):
        return [torch.randn(5, generator=g)], torch.randint(0, 8, (5,), generator=g).float()

    _dist_case("dist_poisson", lambda r: D.Poisson(r.exp()), counts)
    _dist_case("dist_binomial", lambda lg: D.Binomial(10, logits=lg), counts)
    _dist_case("dist_negative_binomial", lambda lg: D.NegativeBinomial(3.0, logits=lg), counts)
    _dist_case("dist_geometric", lambda lg: D.Geometric(logits=lg), counts)
    _dist_case("dist_relaxed_bernoulli", lambda lg: D.RelaxedBernoulli(torch.tensor(0.5, device=lg.device),
                                                                         logits=lg),
               lambda g: ([torch.randn(5, generator=g)], torch.rand(5, generator=g) * 0.9 + 0.05))
    _dist_case("dist_one_hot_categorical", lambda lg: D.OneHotCategorical(logits=lg),
               lambda g: ([torch.randn(5, 4, generator=g)], F.one_hot(torch.randint(0, 4, (5,), generator=g), 4)
                          .float()))
    _dist_case("dist_transformed_logistic", lambda m, s: D.TransformedDistribution(
        D.Uniform(torch.zeros_like(m), torch.ones_like(m)),
        [D.transforms.SigmoidTransform().inv, D.transforms.AffineTransform(m, s)]),
        lambda g: ([torch.randn(5, generator=g), torch.rand(5, generator=g) + 0.5], torch.randn(5, generator=g)))
    _dist_case("dist_lkj_cholesky", lambda c: D.LKJCholesky(3, c.exp().sum()),
               lambda g: ([torch.randn(2, generator=g)], torch.linalg.cholesky(
                   torch.tensor([[1.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 1.0]]))))


_dists()


def _kl():
    def fn_of():
        D = torch.distributions
        g = torch.Generator().manual_seed(0)
        leaves = [torch.randn(4, generator=g), torch.rand(4, generator=g) + 0.5, torch.randn(4, generator=g),
                  torch.rand(4, generator=g) + 0.5]

        def call(a, b, c, d):
            pairs = [(D.Normal(a, b), D.Normal(c, d)), (D.Beta(b, d), D.Beta(d, b)), (D.Gamma(b, d), D.Gamma(d, b)),
                     (D.Categorical(logits=a), D.Categorical(logits=c)), (D.Bernoulli(logits=a), D.Bernoulli(logits=c)),
                     (D.Laplace(a, b), D.Laplace(c, d)), (D.Dirichlet(b), D.Dirichlet(d)),
                     (D.Exponential(b), D.Gamma(d, b)), (D.Uniform(a - b, a + b), D.Normal(c, d)),
                     (D.Poisson(b), D.Poisson(d))]
            return torch.cat([D.kl_divergence(p, q).reshape(-1) for p, q in pairs])

        return leaves, call

    return _grad_case("dist_kl_divergence_pairs", fn_of)


_kl()


@case
def vae_normal_rsample_kl(device):
    """A VAE step as users write it: ``Normal(mu, std).rsample()`` is
    ``mu + std * eps`` with eps from the device's generator, so the noise is
    handed in (CPU-drawn) through ``torch.randn_like`` replaced by nothing:
    the reparameterization written out, ``kl_divergence`` to the prior and a
    Bernoulli likelihood of the decoded logits."""
    D = torch.distributions
    torch.manual_seed(0)
    enc, dec = nn.Linear(12, 8).to(device), nn.Linear(4, 12).to(device)
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(6, 12, generator=g) > 0.5).float().to(device)
    eps = torch.randn(6, 4, generator=g).to(device)
    mu, logvar = enc(x).chunk(2, -1)
    q = D.Normal(mu, (0.5 * logvar).exp())
    z = q.loc + q.scale * eps
    prior = D.Normal(torch.zeros_like(mu), torch.ones_like(mu))
    loss = -D.Bernoulli(logits=dec(z)).log_prob(x).sum(-1).mean() + D.kl_divergence(q, prior).sum(-1).mean()
    loss.backward()
    return {"loss": loss.detach(), **{f"enc.{k}": p.grad for k, p in enc.named_parameters()},
            **{f"dec.{k}": p.grad for k, p in dec.named_parameters()}}


# --- timm's losses and gradient clipping -------------------------------------------------------------


def _timm_loss(kind):
    def fn_of():
        import timm.loss as L

        g = torch.Generator().manual_seed(0)
        logits = torch.randn(8, 5, generator=g) * 2
        target = torch.randint(0, 5, (8,), generator=g)
        multi = (torch.rand(8, 5, generator=g) > 0.6).float()
        f = {"label_smoothing": lambda x: L.LabelSmoothingCrossEntropy(0.1)(x, target.to(x.device)),
             "bce_smoothing": lambda x: L.BinaryCrossEntropy(smoothing=0.1, target_threshold=0.2)(
                 x, target.to(x.device)),
             "bce_pos_weight": lambda x: L.BinaryCrossEntropy(smoothing=0.0, pos_weight=torch.full(
                 (5,), 2.0, device=x.device), sum_classes=True)(x, target.to(x.device)),
             "asymmetric_multilabel": lambda x: L.AsymmetricLossMultiLabel(gamma_neg=4, gamma_pos=1, clip=0.05)(
                 x, multi.to(x.device)),
             "asymmetric_single": lambda x: L.AsymmetricLossSingleLabel(gamma_pos=1, gamma_neg=4, eps=0.1)(
                 x, target.to(x.device)),
             "jsd": lambda x: L.JsdCrossEntropy(num_splits=2, smoothing=0.1)(x, target[:4].to(x.device))}[kind]
        return [logits], lambda x: f(x).reshape(-1)

    return fn_of


for _kind in ("label_smoothing", "bce_smoothing", "bce_pos_weight", "asymmetric_multilabel", "asymmetric_single",
              "jsd"):
    _grad_case(f"timm_loss_{_kind}", _timm_loss(_kind))


def _clip_case(mode, value, norm_type=2.0):
    def fn(device):
        from timm.utils import dispatch_clip_grad

        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 4 * 4, 4)).to(device)
        g = torch.Generator().manual_seed(1)
        x, y = torch.randn(4, 3, 6, 6, generator=g).to(device), torch.randint(0, 4, (4,), generator=g).to(device)
        F.cross_entropy(model(x), y).mul(50).backward()
        dispatch_clip_grad(model.parameters(), value, mode=mode, norm_type=norm_type)
        return {k: p.grad for k, p in model.named_parameters()}

    fn.__name__ = f"timm_clip_{mode}" + ("" if norm_type == 2.0 else f"_{norm_type}")
    return case(fn)


_clip_case("agc", 0.01)
_clip_case("norm", 0.5)
_clip_case("norm", 0.5, norm_type=float("inf"))
_clip_case("value", 0.01)


# --- transformers models the earlier hunts did not reach (tests/zoo's harness) ---------------------


def hf_specs():
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "zoo"))
    from zoo_models import _WIDTH, IMAGE, VOCAB, Spec, _causal, _hf, _masked

    tokens = dict(bos_token_id=0, eos_token_id=0, pad_token_id=1)

    def speech(g):
        return {"input_values": torch.randn(2, 800, generator=g), "labels": torch.randint(2, 12, (2, 6), generator=g)}

    def siglip_batch(g):
        return {"input_ids": torch.randint(0, VOCAB, (2, 12), generator=g),
                "pixel_values": torch.randn(2, 3, IMAGE, IMAGE, generator=g), "return_loss": torch.tensor(True)}

    audio = dict(vocab_size=12, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
                 conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
                 num_conv_pos_embedding_groups=2, feat_extract_norm="group", mask_time_prob=0.0, layerdrop=0.0,
                 hidden_dropout=0.0, activation_dropout=0.0, attention_dropout=0.0, feat_proj_dropout=0.0,
                 final_dropout=0.0, ctc_loss_reduction="mean", pad_token_id=0)
    return [
        Spec("modernbert", "transformers",  # local (sliding) and global layers, two rotary bases, tied decoder
             _hf("ModernBertConfig", "ModernBertForMaskedLM", vocab_size=VOCAB, max_position_embeddings=64,
                 **_WIDTH, global_attn_every_n_layers=2, local_attention=4, pad_token_id=1, eos_token_id=2,
                 bos_token_id=3, cls_token_id=3, sep_token_id=2), _masked,
             tied=(("decoder.weight", "model.embeddings.tok_embeddings.weight"),)),
        Spec("qwen3", "transformers",  # q/k RMS norms, grouped-query attention
             _hf("Qwen3Config", "Qwen3ForCausalLM", vocab_size=VOCAB, max_position_embeddings=64, **_WIDTH,
                 num_key_value_heads=2, head_dim=16, **tokens), _causal),
        Spec("gemma3", "transformers",  # sliding and global layers, q/k norms, soft-capping off
             _hf("Gemma3TextConfig", "Gemma3ForCausalLM", vocab_size=VOCAB, max_position_embeddings=64, **_WIDTH,
                 num_key_value_heads=2, head_dim=16, sliding_window=4, layer_types=["sliding_attention",
                                                                                      "full_attention"],
                 **tokens), _causal, tied=(("lm_head.weight", "model.embed_tokens.weight"),)),
        Spec("olmoe", "transformers",  # top-2 of 4 experts, load-balancing loss
             _hf("OlmoeConfig", "OlmoeForCausalLM", vocab_size=VOCAB, max_position_embeddings=64, **_WIDTH,
                 num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, output_router_logits=True,
                 **tokens), _causal),
        Spec("hubert", "transformers", _hf("HubertConfig", "HubertForCTC", **audio), speech),
        Spec("wavlm", "transformers",  # gated relative position bias
             _hf("WavLMConfig", "WavLMForCTC", **audio, num_buckets=16, max_bucket_distance=40), speech),
        Spec("siglip", "transformers",  # the sigmoid contrastive loss
             _hf("SiglipConfig", "SiglipModel",
                 text_config=dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=64, max_position_embeddings=16),
                 vision_config=dict(image_size=IMAGE, patch_size=8, hidden_size=32, num_hidden_layers=2,
                                    num_attention_heads=4, intermediate_size=64)), siglip_batch),
        Spec("rwkv", "transformers",  # the WKV recurrence in Python on the CPU path
             _hf("RwkvConfig", "RwkvForCausalLM", vocab_size=VOCAB, context_length=16, hidden_size=32,
                 num_hidden_layers=2, attention_hidden_size=32, intermediate_size=64, bos_token_id=0,
                 eos_token_id=0), _causal),
        Spec("mamba2", "transformers",  # the chunked selective scan (torch_forward)
             _hf("Mamba2Config", "Mamba2ForCausalLM", vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                 num_heads=4, head_dim=16, state_size=8, n_groups=1, chunk_size=4, expand=2, bos_token_id=0,
                 eos_token_id=0, pad_token_id=1), _causal),
    ]


# --- the driver -------------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    name: str
    diff: float
    worst: str
    fallbacks: int
    fallback_ops: dict
    programs: int
    error: str | None = None

    def line(self):
        if self.error:
            return f"{self.name:36s} ERROR {self.error}"
        return (f"{self.name:36s} diff {self.diff:.1e} ({self.worst}) fallbacks {self.fallbacks} "
                f"{dict(self.fallback_ops) if self.fallbacks else ''} programs {self.programs}")


def _diff(got, want):
    if got.shape != want.shape:
        return math.inf
    if want.dtype == torch.bool:
        return 0.0 if torch.equal(got, want) else math.inf
    if not want.is_floating_point():  # integers (uint8 images): the most levels apart
        return float((got.long() - want.long()).abs().max()) if want.numel() else 0.0
    if not want.numel():
        return 0.0
    d = (got.double() - want.double()).abs() / want.double().abs().clamp(min=1.0)
    d = torch.where(got.isnan() & want.isnan(), 0.0, d)
    return d.nan_to_num(nan=math.inf).max().item()


def compare(name):
    """Run case ``name`` on eager CPU and on the lazy device: an :class:`Outcome`."""
    import lazycore.torch as ltorch
    from lazycore.observe import metrics

    fn = CASES[name]
    want = {k: v.detach() for k, v in fn(torch.device("cpu")).items()}
    ltorch.mark_step(wait=True)
    metrics.reset()
    got = fn(ltorch.device())
    ltorch.mark_step()  # the case's step, then its reads
    got = {k: v.detach().cpu() for k, v in got.items()}
    ltorch.mark_step(wait=True)
    c = metrics.counters()
    diff, worst = 0.0, ""
    for k, w in want.items():
        d = _diff(got[k], w)
        if d > diff or not worst:
            diff, worst = max(d, diff), k
    return Outcome(name, diff, worst, c.get("fallbacks", 0), metrics.fallbacks(),
                   c.get("executions", 0) + c.get("stack_executions", 0))


if __name__ == "__main__":  # python tests/consumers/cases_hunt28.py [names...]: a table
    import sys
    import traceback

    for n in sys.argv[1:] or list(CASES):
        if n not in CASES:
            matched = [k for k in CASES if n in k]
        else:
            matched = [n]
        for m in matched:
            try:
                print(compare(m).line(), flush=True)
            except Exception as e:  # noqa: BLE001 (a table row)
                print(Outcome(m, 0, "", 0, {}, 0, error=f"{type(e).__name__}: {e}"[:300]).line(), flush=True)
                traceback.print_exc(limit=-3)
