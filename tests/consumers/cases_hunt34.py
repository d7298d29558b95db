"""The loops of test_hunt34_torch.py: timm and torchvision vision models no
earlier hunt and not the zoo trained (cases_hunt30v.py, tests/zoo/zoo_models.py,
test_hunt25/26_torch.py and test_vision_audio_models.py list those that were),
each a tiny random config (nothing downloaded, 32x32 images, a batch of 2)
trained in cases_hunt30v's classification loop (``_classify``: dropout and
drop path off, cross entropy, auxiliary and distillation heads each adding a
loss) with the optimizer its library's examples use (timm's
``create_optimizer_v2`` and cosine schedule with a warm-up for timm, SGD with
momentum or AdamW for torchvision) and compared by hunt 27's ``compare``
(losses, state, fallbacks, compiles and programs a step).

Models: ConvMixer (patch convolution, depthwise 5x5 residual mixing, batch
norm), MLP-Mixer (token- and channel-mixing MLPs over transposes), ResMLP
(``Affine`` norms, layer scale), gMLP (the spatial gating unit's token
projection of half the channels), CaiT (talking-heads attention, layer scale,
class attention over the frozen patch tokens), XCiT (cross-covariance
attention over the channels, local patch interaction by depthwise
convolutions and batch norm, Fourier positional encoding, class attention),
PVT-v2 (spatial-reduction attention: keys and values from a strided
convolution, a depthwise convolution in its MLP), EdgeNeXt (convolution
encoders with depthwise kernels, split depthwise transposed attention with
channel-group splits), ConvFormer (MetaFormer with separable convolutions and
StarReLU), MambaOut (gated CNN blocks: a depthwise 7x7 on a channel split),
Sequencer2D (bidirectional LSTMs along rows and columns), ViT with relative
position MLP biases (timm's ``vit_relpos``), torchvision's MobileNetV2 in
train mode (inverted residuals, ReLU6, batch norm), torchvision's
``VisionTransformer`` (its class token, its encoder's learned positions) and
torchvision's FCOS detector on a tiny backbone (focal, GIoU and centerness
losses).
``python tests/consumers/cases_hunt34.py [names]`` prints the table.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "zoo"))

import cases_hunt30v  # noqa: E402  (its classification loop and optimizers)
from cases_hunt30v import _classify  # noqa: E402

STEPS, WARMUP = cases_hunt30v.STEPS, cases_hunt30v.WARMUP

CASES: dict = {}


def _add(name, build, **kw):
    def loop(device, each, dtype=torch.float32):
        return _classify(build, device, each, dtype, **{"size": 32, **kw})

    loop.__name__ = name
    CASES[name] = loop


def _timm(name, **kw):
    """``timm.create_model`` with the arguments given taking precedence over
    the registered variant's (they become the model's own config)."""

    def build():
        import timm

        return timm.create_model(name, pretrained=False, num_classes=10, drop_rate=0.0, **kw)

    return build


def _cls(path, **kw):
    """A timm model class built directly (its registered variants fix the
    widths and depths that a tiny config changes)."""

    def build():
        import importlib

        module, name = path.rsplit(".", 1)
        return getattr(importlib.import_module(module), name)(num_classes=10, **kw)

    return build


def _mixer(**kw):
    def build():
        from timm.models.mlp_mixer import MlpMixer

        return MlpMixer(num_classes=10, img_size=32, patch_size=8, num_blocks=2, embed_dim=32, **kw)

    return build


def _resmlp():
    from timm.models.mlp_mixer import Affine, ResBlock

    return _mixer(mlp_ratio=4, block_layer=ResBlock, norm_layer=Affine)()


def _gmlp():
    from timm.layers import GatedMlp
    from timm.models.mlp_mixer import SpatialGatingBlock

    return _mixer(mlp_ratio=6, block_layer=SpatialGatingBlock, mlp_layer=GatedMlp)()


def _convformer():
    from timm.models.metaformer import LayerNorm2dNoBias, MetaFormer, SepConv

    return MetaFormer(num_classes=10, depths=(1, 1, 1, 1), dims=(16, 24, 32, 48), token_mixers=SepConv,
                      norm_layers=LayerNorm2dNoBias)


def _tv(name, **kw):
    def build():
        import torchvision

        return torchvision.models.get_model(name, weights=None, num_classes=10, **kw)

    return build


def _tv_vit(layers=2, width=32, size=32):
    def build():
        import torchvision

        return torchvision.models.VisionTransformer(image_size=size, patch_size=8, num_layers=layers, num_heads=2,
                                                    hidden_dim=width, mlp_dim=2 * width, num_classes=10)

    return build


# --- timm: convolution and MLP mixers ------------------------------------------------------------------

_add("timm_convmixer", _cls("timm.models.convmixer.ConvMixer", dim=32, depth=2, kernel_size=5, patch_size=4),
     opt="adamw")
_add("timm_mlp_mixer", _mixer(), opt="adamw")
_add("timm_resmlp_affine", _resmlp, opt="lamb")
_add("timm_gmlp_spatial_gating", _gmlp, opt="adamw")
_add("timm_convformer_sepconv", _convformer, opt="adamw")
_add("timm_mambaout_gated_cnn", _timm("mambaout_femto", depths=(1, 1, 1, 1), dims=(16, 24, 32, 48)), opt="adamw")
_add("timm_sequencer2d_lstm", _timm("sequencer2d_s", layers=(1, 1, 1, 1), embed_dims=(16, 24, 24, 24),
                                    hidden_sizes=(8, 12, 12, 12), patch_sizes=(4, 2, 1, 1)), opt="adamw")

# --- timm: attention variants --------------------------------------------------------------------------

_add("timm_cait_talking_heads", _timm("cait_xxs24_224", img_size=32, patch_size=8, embed_dim=32, depth=2,
                                      num_heads=2, depth_token_only=1), opt="adamw")
_add("timm_xcit_cross_covariance", _timm("xcit_nano_12_p8_224", img_size=32, embed_dim=32, depth=2, num_heads=2,
                                         cls_attn_layers=1), opt="adamw")
_add("timm_pvt_v2_spatial_reduction", _timm("pvt_v2_b0", embed_dims=(8, 16, 32, 32), depths=(1, 1, 1, 1),
                                            num_heads=(1, 1, 2, 2)), opt="adamw")
_add("timm_edgenext_sdta", _timm("edgenext_xx_small", depths=(1, 1, 1, 1), dims=(16, 24, 32, 48),
                                 heads=(2, 2, 2, 2)), opt="adamw")
_add("timm_vit_relpos_mlp", _timm("vit_relpos_small_patch16_224", img_size=32, patch_size=8, embed_dim=32, depth=2,
                                  num_heads=2), opt="adamw")

# --- torchvision -----------------------------------------------------------------------------------------

_add("tv_mobilenet_v2_train", _tv("mobilenet_v2", width_mult=0.25), opt="sgd")
_add("tv_vit_tiny", _tv_vit(), opt="adamw", smoothing=0.11)
_add("tv_vit_one_layer_16px", _tv_vit(layers=1, width=16, size=16), size=16, opt="adamw", smoothing=0.11)  # CI's




def _fcos():
    """torchvision's FCOS (its GroupNorm heads cut to one conv block each) on
    a two-convolution backbone: one feature level, 16-pixel anchors."""
    import torch.nn as nn
    from torchvision.models.detection import FCOS
    from torchvision.models.detection.anchor_utils import AnchorGenerator

    backbone = nn.Sequential(nn.Conv2d(3, 8, 3, stride=4, padding=1), nn.ReLU(),
                             nn.Conv2d(8, 32, 3, stride=2, padding=1), nn.ReLU())
    backbone.out_channels = 32
    model = FCOS(backbone, num_classes=3, min_size=64, max_size=64,
                 anchor_generator=AnchorGenerator(sizes=((16,),), aspect_ratios=((1.0,),)),
                 image_mean=[0.5] * 3, image_std=[0.25] * 3)
    for head in (model.head.classification_head, model.head.regression_head):
        head.conv = nn.Sequential(*list(head.conv)[:3])
    return model


def tv_fcos_focal_giou(device, each, dtype=torch.float32):
    """FCOS trained as torchvision's detection references do (SGD, momentum,
    weight decay; the model's own loss dict summed): center sampling, the
    sigmoid focal loss, the generalized IoU loss of the foreground boxes and
    the centerness loss, two boxes an image."""
    torch.manual_seed(0)
    model = _fcos().to(dtype).to(device)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        images = [torch.rand(3, 64, 64, generator=g).to(dtype).to(device) for _ in range(2)]
        targets = []
        for _ in range(2):
            xy, wh = torch.rand(2, 2, generator=g) * 32, torch.rand(2, 2, generator=g) * 24 + 8
            targets.append({"boxes": torch.cat([xy, xy + wh], 1).to(dtype).to(device),
                            "labels": torch.randint(1, 3, (2,), generator=g).to(device)})
        loss = sum(model(images, targets).values())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        each()
    return losses, dict(model.state_dict())


CASES["tv_fcos_focal_giou"] = tv_fcos_focal_giou


def compare(name, referee=False, elements=False):
    """Run loop ``name`` on eager CPU and on the lazy device as hunt 27's
    ``compare`` does: a cases_hunt27.Outcome."""
    import cases_hunt27

    return cases_hunt27.compare(name, referee, cases=CASES, elements=elements)


if __name__ == "__main__":  # python tests/consumers/cases_hunt34.py [names...]: a table
    from cases_hunt27 import print_table

    print_table(compare, CASES, sys.argv[1:])
