"""The loops of test_hunt39_torch.py: transformers models no earlier hunt trained,
run unchanged in hunt 27's shape (``loop(device, each, dtype) -> (losses,
state)``, cases_hunt27.py) and compared by its ``compare``.

Mask2Former (universal segmentation on a Swin backbone: Swin's window padding
after its layer norms, multi-scale deformable attention in the pixel decoder,
masked attention in the transformer decoder, the Hungarian matcher on points
sampled at random, the uncertainty-sampled mask losses). Its first step never
finished compiling before (LLVM's vectorizer on a layer norm's mean copied
into the window pad's loop; tests/torch/test_layer_norm_eager_bits.py).
Swin2SR super-resolution (Swin-v2 windows, pixel shuffle) under an L1 loss,
Conditional DETR (conditional spatial queries, the Hungarian matcher), GIT
(image-conditioned captioning) and Depth Anything (a DINOv2 backbone's
reassembled features, the scale-invariant log loss users write for it),
MaskFormer, Encodec, ViTPose, ViTMatte, Pix2Struct and OWLv2.
``python tests/consumers/cases_hunt39.py [names]`` prints the table.
"""

from __future__ import annotations

import contextlib
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "zoo"))

from cases_hunt27 import registry  # noqa: E402 (after the path)
from cases_hunt36 import _hf_loop  # noqa: E402
from cases_hunt37 import VOCAB, detection_batch  # noqa: E402
from cases_hunt38 import _user_loop, silog  # noqa: E402

STEPS = 4
WARMUP = 2
CASES, case = registry()


@contextlib.contextmanager
def cpu_draws(dtype):
    """``torch.rand``/``randn`` asked for on a device drawn from eager's CPU
    generator and moved there, in the eager run and the lazy one alike: a
    model's own random sampling (Mask2Former's points) then draws the same
    numbers on both, as a replay buffer's data would be. Without it the lazy
    device draws from its own generator, as a GPU does. Draws of the default
    type are float32's numbers in ``dtype`` (the loop's), so the float64
    referee samples the same points (transformers' float64 Mask2Former cannot
    run otherwise: its float32 points meet float64 masks in grid_sample)."""
    from torch.overrides import TorchFunctionMode

    class CpuDraws(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in (torch.rand, torch.randn) and kwargs.get("device") is not None:
                device = kwargs.pop("device")
                drawn = func(*args, **kwargs)
                return drawn.to(device, dtype if "dtype" not in kwargs else drawn.dtype)
            return func(*args, **kwargs)

    with CpuDraws():
        yield


def _masks_batch(g, size=64):
    """Two images with 2 and 3 square instances of 3 classes: Mask2Former's
    per-image ``mask_labels`` and ``class_labels`` lists."""
    masks, classes = [], []
    for n in (2, 3):
        m = torch.zeros(n, size, size)
        for i in range(n):
            y, x = torch.randint(0, size - 24, (2,), generator=g).tolist()
            m[i, y:y + 20, x:x + 20] = 1
        masks.append(m)
        classes.append(torch.randint(0, 3, (n,), generator=g))
    return {"pixel_values": torch.randn(2, 3, size, size, generator=g), "mask_labels": masks, "class_labels": classes}


@case
def mask2former_swin_linear(device, each, dtype=torch.float32):
    """Mask2Former on a 4-stage Swin (embedding 16, windows of 4, 64 x 64
    images), 8 queries, two decoder layers with auxiliary losses, 64 sampled
    points: transformers' segmentation fine-tuning loop."""
    import transformers

    def build():
        backbone = transformers.SwinConfig(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1, 1, 1],
                                           num_heads=[1, 2, 2, 4], window_size=4, drop_path_rate=0.0,
                                           out_features=["stage1", "stage2", "stage3", "stage4"])
        cfg = transformers.Mask2FormerConfig(backbone_config=backbone, feature_size=32, mask_feature_size=32,
                                             hidden_dim=32, encoder_feedforward_dim=64, dim_feedforward=64,
                                             encoder_layers=1, decoder_layers=2, num_attention_heads=4,
                                             num_queries=8, num_labels=3, train_num_points=64, common_stride=4,
                                             dropout=0.0, use_auxiliary_loss=True)
        return transformers.Mask2FormerForUniversalSegmentation(cfg)

    with cpu_draws(dtype):
        return _hf_loop(device, each, dtype, build, _masks_batch, schedule="linear", lr=1e-3)


@case
def maskformer_swin_linear(device, each, dtype=torch.float32):
    """MaskFormer on the same Swin: a DETR decoder's 8 queries over an FPN's
    mask features, the Hungarian matcher on the whole masks (no sampled
    points), dice and focal mask losses. (Its auxiliary losses are off:
    transformers' MaskFormer raises with them on and this decoder config.)"""
    import transformers

    def build():
        backbone = transformers.SwinConfig(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1, 1, 1],
                                           num_heads=[1, 2, 2, 4], window_size=4, drop_path_rate=0.0,
                                           out_features=["stage1", "stage2", "stage3", "stage4"])
        decoder = transformers.DetrConfig(d_model=32, encoder_layers=1, decoder_layers=2, encoder_attention_heads=4,
                                          decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                          num_queries=8, dropout=0.0)
        cfg = transformers.MaskFormerConfig(backbone_config=backbone, decoder_config=decoder, fpn_feature_size=32,
                                            mask_feature_size=32, num_labels=3, num_queries=8, use_auxiliary_loss=False)
        return transformers.MaskFormerForInstanceSegmentation(cfg)

    return _hf_loop(device, each, dtype, build, _masks_batch, schedule="linear", lr=1e-3)


@case
def swin2sr_upscale_l1(device, each, dtype=torch.float32):
    """Swin2SR x2 super-resolution: Swin-v2 blocks (scaled cosine attention,
    log-spaced relative positions) over 16 x 16 windows of 4, pixel shuffle;
    the L1 loss to a bicubic upscale, as its tutorials train it."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.Swin2SRConfig(image_size=16, patch_size=1, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                                     window_size=4, upscale=2, upsampler="pixelshuffle", drop_path_rate=0.0)
    model = transformers.Swin2SRForImageSuperResolution(cfg)

    def l1(model, x, target):
        return torch.nn.functional.l1_loss(model(pixel_values=x).reconstruction, target)

    def batch(g):
        x = torch.rand(2, 3, 16, 16, generator=g)
        return x, torch.nn.functional.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False)

    return _user_loop(device, each, dtype, model, l1, batch)


@case
def conditional_detr_linear(device, each, dtype=torch.float32):
    """Conditional DETR: a ResNet backbone, conditional spatial queries in two
    decoder layers with auxiliary losses, the Hungarian matcher (scipy on the
    host), focal, L1 and GIoU losses."""
    import transformers

    def build():
        backbone = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic",
                                             out_features=["stage2"])
        cfg = transformers.ConditionalDetrConfig(backbone_config=backbone, use_timm_backbone=False,
                                                 use_pretrained_backbone=False, d_model=32, encoder_layers=1,
                                                 decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                                                 encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=10, num_labels=3,
                                                 dropout=0.0, auxiliary_loss=True)
        return transformers.ConditionalDetrForObjectDetection(cfg)

    return _hf_loop(device, each, dtype, build, detection_batch, schedule="linear", lr=1e-3)


@case
def git_caption_cosine(device, each, dtype=torch.float32):
    """GIT: a CLIP-style vision tower's patches before the caption's tokens in
    one BERT-style decoder (image tokens bidirectional, text causal)."""
    import transformers

    def build():
        vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4, image_size=16,
                      patch_size=4)
        cfg = transformers.GitConfig(vision_config=vision, vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0, max_position_embeddings=64, pad_token_id=0,
                                     bos_token_id=1, eos_token_id=2)
        return transformers.GitForCausalLM(cfg)

    def batch(g):
        ids = torch.randint(3, VOCAB, (2, 10), generator=g)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids,
                "pixel_values": torch.randn(2, 3, 16, 16, generator=g)}

    return _hf_loop(device, each, dtype, build, batch)


@case
def depth_anything_silog(device, each, dtype=torch.float32):
    """Depth Anything: a DINOv2 backbone's four stages reassembled and fused,
    the relative-depth head, under the scale-invariant log loss."""
    import transformers

    torch.manual_seed(0)
    backbone = transformers.Dinov2Config(image_size=28, patch_size=14, hidden_size=32, num_hidden_layers=4,
                                         num_attention_heads=4, intermediate_size=64,
                                         out_features=["stage1", "stage2", "stage3", "stage4"],
                                         reshape_hidden_states=False)
    cfg = transformers.DepthAnythingConfig(backbone_config=backbone, reassemble_hidden_size=32,
                                           neck_hidden_sizes=[8, 16, 32, 32], fusion_hidden_size=16, head_hidden_size=8,
                                           patch_size=14)
    model = transformers.DepthAnythingForDepthEstimation(cfg)

    def batch(g):
        return torch.randn(2, 3, 28, 28, generator=g), 0.5 + torch.rand(2, 28, 28, generator=g)

    return _user_loop(device, each, dtype, model, silog, batch)


@case
def encodec_reconstruct_l1(device, each, dtype=torch.float32):
    """Encodec (weight-normed causal convolutions, an LSTM, a residual vector
    quantizer with its straight-through estimator) trained to reconstruct
    its input under L1, AdamW. Its convolutions work out their padding from
    0-d int64 buffers every call (tests/torch/test_upload_host_copies.py):
    17-19 programs a step before, one now. Its LSTM, unrolled over 32 frames,
    made each step's program compile in 1.5-3 minutes while its small products
    were multiply-add chains: 26 s as fenced dots (eager_loops.gemm_chain)."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.EncodecConfig(target_bandwidths=[1.5], sampling_rate=800, audio_channels=1, hidden_size=16,
                                     num_filters=4, num_residual_layers=1, upsampling_ratios=[4, 2], codebook_size=32,
                                     codebook_dim=16, num_lstm_layers=1)
    model = transformers.EncodecModel(cfg)

    def l1(model, x):
        return torch.nn.functional.l1_loss(model(input_values=x).audio_values[..., :x.shape[-1]], x)

    def batch(g):
        return (torch.randn(2, 1, 256, generator=g),)

    return _user_loop(device, each, dtype, model, l1, batch)


@case
def vitpose_heatmaps_mse(device, each, dtype=torch.float32):
    """ViTPose: a plain ViT over 32 x 24 crops, its simple decoder's keypoint
    heatmaps under the mean squared error to target heatmaps."""
    import transformers

    torch.manual_seed(0)
    backbone = transformers.VitPoseBackboneConfig(image_size=[32, 24], patch_size=[8, 8], hidden_size=32,
                                                  num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2, out_indices=[2])
    model = transformers.VitPoseForPoseEstimation(transformers.VitPoseConfig(backbone_config=backbone, num_labels=5))

    def mse(model, x, target):
        return torch.nn.functional.mse_loss(model(pixel_values=x).heatmaps, target)

    def batch(g):
        return torch.randn(2, 3, 32, 24, generator=g), torch.rand(2, 5, 16, 12, generator=g)

    return _user_loop(device, each, dtype, model, mse, batch)


@case
def vitmatte_alpha_l1(device, each, dtype=torch.float32):
    """ViTMatte: a ViTDet backbone over image and trimap (4 channels), the
    detail-capture decoder's conv stream and fusion blocks (convolutions under
    batch norm), the alpha matte under L1."""
    import transformers

    torch.manual_seed(0)
    backbone = transformers.VitDetConfig(image_size=64, patch_size=16, num_channels=4, hidden_size=32,
                                         num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2, out_features=["stage2"])
    cfg = transformers.VitMatteConfig(backbone_config=backbone, hidden_size=32, convstream_hidden_sizes=[8, 16, 32],
                                      fusion_hidden_sizes=[32, 16, 8, 8])
    model = transformers.VitMatteForImageMatting(cfg)

    def l1(model, x, alpha):
        return torch.nn.functional.l1_loss(model(pixel_values=x).alphas, alpha)

    def batch(g):
        return torch.randn(2, 4, 64, 64, generator=g), torch.rand(2, 1, 64, 64, generator=g)

    return _user_loop(device, each, dtype, model, l1, batch)


@case
def pix2struct_caption_cosine(device, each, dtype=torch.float32):
    """Pix2Struct: variable-resolution patches (their row and column ids in
    the first two features) into a T5-style encoder-decoder, seq2seq cross
    entropy."""
    import transformers

    def build():
        vision = dict(hidden_size=32, patch_embed_hidden_size=16 * 16 * 3, d_ff=64, d_kv=8, num_attention_heads=4,
                      num_hidden_layers=1, seq_len=16, dropout_rate=0.0, attention_dropout=0.0)
        text = dict(vocab_size=VOCAB, hidden_size=32, d_ff=64, d_kv=8, num_heads=4, num_layers=2, dropout_rate=0.0,
                    attention_dropout=0.0, pad_token_id=0, decoder_start_token_id=0)
        return transformers.Pix2StructForConditionalGeneration(transformers.Pix2StructConfig(vision_config=vision,
                                                                                             text_config=text))

    def batch(g):
        patches = torch.randn(2, 16, 2 + 16 * 16 * 3, generator=g)
        patches[:, :, 0] = torch.arange(16).div(4, rounding_mode="floor").float() + 1  # rows
        patches[:, :, 1] = torch.arange(16).remainder(4).float() + 1  # columns
        return {"flattened_patches": patches, "attention_mask": torch.ones(2, 16),
                "labels": torch.randint(3, VOCAB, (2, 8), generator=g)}

    return _hf_loop(device, each, dtype, build, batch)


@case
def owlv2_open_vocabulary_detection(device, each, dtype=torch.float32):
    """OWLv2: CLIP towers, per-patch boxes and class embeddings matched to
    text queries; a user's loss (binary cross entropy of the query logits to
    targets, plus the boxes' mean size) as open-vocabulary fine-tuning does."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.Owlv2Config(
        text_config=dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=4, max_position_embeddings=16),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                           image_size=32, patch_size=8),
        projection_dim=32)
    model = transformers.Owlv2ForObjectDetection(cfg)

    def loss(model, ids, mask, x, target):
        out = model(input_ids=ids, attention_mask=mask, pixel_values=x)
        return torch.nn.functional.binary_cross_entropy_with_logits(out.logits, target) + out.pred_boxes.abs().mean()

    def batch(g):  # one image, two text queries; 16 patches
        ids = torch.randint(3, VOCAB, (2, 6), generator=g)
        return ids, torch.ones_like(ids), torch.randn(1, 3, 32, 32, generator=g), torch.rand(1, 16, 2, generator=g).round()

    return _user_loop(device, each, dtype, model, loss, batch)


def compare(name, referee=False, elements=False):
    """Run loop ``name`` on eager CPU and on the lazy device as hunt 27's
    ``compare`` does: a cases_hunt27.Outcome."""
    import cases_hunt27

    return cases_hunt27.compare(name, referee, cases=CASES, elements=elements)


if __name__ == "__main__":  # python tests/consumers/cases_hunt39.py [names...]: a table
    from cases_hunt27 import print_table

    print_table(compare, CASES, sys.argv[1:])
