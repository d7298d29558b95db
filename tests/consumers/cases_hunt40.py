"""Hunt 40's loops: transformers models no earlier hunt trained, run unchanged
in hunt 27's shape (``loop(device, each, dtype) -> (losses, state)``,
cases_hunt27.py) and compared by its ``compare``.

LayoutLMv3 (token classification over words with 2-d boxes and an image's
patches: 1-d and 2-d relative position biases), CLAP (an HTSAT Swin over a
mel spectrogram folded into an image, a RoBERTa text tower, the contrastive
loss), X-CLIP (frame-wise CLIP, cross-frame message tokens, a multi-frame
integration transformer and video-conditioned text prompts), DAB-DETR
(anchor boxes as queries refined layer by layer, the Hungarian matcher),
MGP-STR (a ViT's tokens pooled by three A^3 modules into character, BPE and
wordpiece predictions), ZoeDepth (a BEiT backbone, DPT neck, metric bins
attracted layer by layer), OneFormer, DonutSwin as a VisionEncoderDecoder's
encoder, FLAVA, BridgeTower, UDOP, DAC and Grounding DINO. (OmDet-Turbo not
tried: its detection model raises "Training is not implemented yet" for
labels, and no user loss was written for it.)
``python tests/consumers/cases_hunt40.py [names]`` prints the table.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "zoo"))

from cases_hunt27 import registry  # noqa: E402 (after the path)
from cases_hunt36 import _hf_loop  # noqa: E402
from cases_hunt37 import VOCAB, detection_batch  # noqa: E402
from cases_hunt38 import _user_loop  # noqa: E402

STEPS = 4
WARMUP = 2
CASES, case = registry()


def _with_loss(cls):
    """``cls`` whose forward always asks for its contrastive loss
    (``return_loss=True``), so that hunt 36's loop, which moves every batch
    entry to the device, takes it as it takes any model with a loss."""
    return type(cls.__name__, (cls,), {"forward": lambda self, **kw: cls.forward(self, **kw, return_loss=True)})


@case
def layoutlmv3_token_cls_linear(device, each, dtype=torch.float32):
    """LayoutLMv3 token classification: 10 words with their boxes (0-1000
    coordinates), a 32 x 32 image's 16 patches after them, 1-d and 2-d
    relative position biases (bucketed from the positions and the boxes'
    corners), cross entropy over 5 labels on the words."""
    import transformers

    def build():
        cfg = transformers.LayoutLMv3Config(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                            intermediate_size=64, hidden_dropout_prob=0.0,
                                            attention_probs_dropout_prob=0.0, max_position_embeddings=64,
                                            coordinate_size=6, shape_size=4, rel_pos_bins=8, max_rel_pos=16,
                                            rel_2d_pos_bins=16, max_rel_2d_pos=64, input_size=32, patch_size=8,
                                            num_labels=5, pad_token_id=0)
        return transformers.LayoutLMv3ForTokenClassification(cfg)

    def batch(g):
        ids = torch.randint(3, VOCAB, (2, 10), generator=g)
        corner = torch.randint(0, 800, (2, 10, 2), generator=g)
        size = torch.randint(10, 200, (2, 10, 2), generator=g)
        bbox = torch.cat([corner, corner + size], -1)
        mask = torch.ones_like(ids)
        mask[1, -3:] = 0
        labels = torch.randint(0, 5, (2, 10), generator=g).masked_fill(mask == 0, -100)
        return {"input_ids": ids, "bbox": bbox, "attention_mask": mask, "labels": labels,
                "pixel_values": torch.randn(2, 3, 32, 32, generator=g)}

    return _hf_loop(device, each, dtype, build, batch, schedule="linear")


@case
def clap_contrastive_cosine(device, each, dtype=torch.float32):
    """CLAP: 48 frames of a 16-bin mel spectrogram (batch-normed per bin,
    bicubic-stretched to 64 frames, folded into a 32 x 32 image) through a
    two-stage HTSAT Swin; a RoBERTa text tower; projections and the
    symmetric contrastive loss (``return_loss=True``)."""
    import transformers

    def build():
        text = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=64,
                    projection_dim=16, pad_token_id=1)
        audio = dict(window_size=4, num_mel_bins=16, spec_size=32, patch_size=4, patch_stride=(4, 4), hidden_size=64,
                     patch_embeds_hidden_size=32, depths=[1, 1], num_attention_heads=[2, 4], projection_dim=16,
                     hidden_dropout_prob=0.0, drop_path_rate=0.0, mlp_ratio=2.0, num_classes=4)
        return _with_loss(transformers.ClapModel)(transformers.ClapConfig(text_config=text, audio_config=audio,
                                                                          projection_dim=16))

    def batch(g):
        ids = torch.randint(3, VOCAB, (3, 8), generator=g)
        mask = torch.ones_like(ids)
        mask[2, -2:] = 0
        ids = ids.masked_fill(mask == 0, 1)
        return {"input_ids": ids, "attention_mask": mask, "input_features": torch.randn(3, 1, 48, 16, generator=g)}

    return _hf_loop(device, each, dtype, build, batch)


@case
def xclip_video_text_linear(device, each, dtype=torch.float32):
    """X-CLIP: 4 frames of 32 x 32 through a CLIP vision tower with
    cross-frame message tokens, the multi-frame integration transformer,
    video-specific prompts attending over the frames' patches, a CLIP text
    tower; the symmetric contrastive loss (``return_loss=True``)."""
    import transformers

    def build():
        text = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                    max_position_embeddings=16)
        vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      mit_hidden_size=32, mit_intermediate_size=64, mit_num_hidden_layers=1, mit_num_attention_heads=4,
                      image_size=32, patch_size=8, num_frames=4)
        cfg = transformers.XCLIPConfig(text_config=text, vision_config=vision, projection_dim=32, prompt_layers=1,
                                       prompt_num_attention_heads=4)
        return _with_loss(transformers.XCLIPModel)(cfg)

    def batch(g):
        ids = torch.randint(3, VOCAB, (2, 8), generator=g)
        ids[:, -1] = VOCAB - 1  # the end token (the highest id: CLIP pools at the argmax)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                "pixel_values": torch.randn(2, 4, 3, 32, 32, generator=g)}

    return _hf_loop(device, each, dtype, build, batch, schedule="linear")


@case
def dab_detr_detection_linear(device, each, dtype=torch.float32):
    """DAB-DETR: a ResNet backbone, 4-d anchor boxes as the decoder's queries
    (sine embeddings, width/height-modulated attention), refined in each of
    two layers; the Hungarian matcher (scipy on the host), focal, L1 and
    GIoU losses with auxiliary losses."""
    import transformers

    def build():
        backbone = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic",
                                             out_features=["stage2"])
        cfg = transformers.DabDetrConfig(backbone_config=backbone, hidden_size=32, encoder_layers=1, decoder_layers=2,
                                         encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                                         decoder_ffn_dim=64, num_queries=10, num_labels=3, dropout=0.0,
                                         auxiliary_loss=True)
        return transformers.DabDetrForObjectDetection(cfg)

    return _hf_loop(device, each, dtype, build, detection_batch, schedule="linear", lr=1e-3)


@case
def mgp_str_text_recognition(device, each, dtype=torch.float32):
    """MGP-STR: a ViT over 16 x 32 word crops, three A^3 modules pooling its
    tokens into 8 character, BPE and wordpiece slots; a user's loss (the
    three heads' cross entropies summed, as its paper trains it)."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.MgpstrConfig(image_size=[16, 32], patch_size=4, max_token_length=8, num_character_labels=12,
                                    num_bpe_labels=20, num_wordpiece_labels=24, hidden_size=32, num_hidden_layers=2,
                                    num_attention_heads=4, mlp_ratio=2.0)
    model = transformers.MgpstrForSceneTextRecognition(cfg)

    def loss(model, x, chars, bpe, wp):
        c, b, w = model(pixel_values=x).logits
        ce = torch.nn.functional.cross_entropy
        return ce(c.flatten(0, 1), chars.flatten()) + ce(b.flatten(0, 1), bpe.flatten()) + ce(w.flatten(0, 1), wp.flatten())

    def batch(g):
        return (torch.randn(2, 3, 16, 32, generator=g), torch.randint(0, 12, (2, 8), generator=g),
                torch.randint(0, 20, (2, 8), generator=g), torch.randint(0, 24, (2, 8), generator=g))

    return _user_loop(device, each, dtype, model, loss, batch)


@case
def zoedepth_metric_l1(device, each, dtype=torch.float32):
    """ZoeDepth: a 4-layer BEiT backbone (relative position bias), the DPT
    neck and relative-depth head, the metric head's 16 softplus bins moved by
    attractors at each scale; the user's L1 loss to a metric depth map."""
    import transformers

    torch.manual_seed(0)
    backbone = transformers.BeitConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=4,
                                       num_attention_heads=4, intermediate_size=64, use_relative_position_bias=True,
                                       reshape_hidden_states=False, drop_path_rate=0.0,
                                       out_features=["stage1", "stage2", "stage3", "stage4"])
    cfg = transformers.ZoeDepthConfig(backbone_config=backbone, neck_hidden_sizes=[8, 16, 32, 32], fusion_hidden_size=16,
                                      num_relative_features=8, bottleneck_features=16, num_attractors=[4, 4, 2, 1],
                                      bin_embedding_dim=16,
                                      bin_configurations=[{"n_bins": 16, "min_depth": 0.001, "max_depth": 10.0}])
    model = transformers.ZoeDepthForDepthEstimation(cfg)

    def l1(model, x, depth):
        return torch.nn.functional.l1_loss(model(pixel_values=x).predicted_depth, depth)

    def batch(g):
        return torch.randn(2, 3, 32, 32, generator=g), 0.5 + 4 * torch.rand(2, 64, 64, generator=g)  # (2x the input)

    return _user_loop(device, each, dtype, model, l1, batch)

@case
def oneformer_swin_linear(device, each, dtype=torch.float32):
    """OneFormer in training mode on a 4-stage Swin: the task token ("the
    task is ...", as ids) through an MLP, a CLIP-style text mapper (64 wide: a
    head per 64; the queries as wide, as its learned contexts join them; the
    pixel decoder too, as transformers keeps its input projections in a plain
    list that never moves to the device when they differ) over 6
    class texts plus 2 learned contexts, a deformable-attention pixel decoder,
    8 queries in a task-conditioned masked-attention decoder; the Hungarian
    matcher on 64 sampled points, mask, dice, class and query-text contrastive
    losses (auxiliary too)."""
    import transformers
    from cases_hunt39 import _masks_batch, cpu_draws

    def build():
        backbone = transformers.SwinConfig(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1, 1, 1],
                                           num_heads=[1, 2, 2, 4], window_size=4, drop_path_rate=0.0,
                                           out_features=["stage1", "stage2", "stage3", "stage4"])
        cfg = transformers.OneFormerConfig(backbone_config=backbone, num_queries=8, train_num_points=64,
                                           is_training=True, task_seq_len=8, text_encoder_width=64,
                                           text_encoder_context_length=8, text_encoder_num_layers=1,
                                           text_encoder_vocab_size=VOCAB, text_encoder_proj_layers=2,
                                           text_encoder_n_ctx=2, conv_dim=64, mask_dim=64, hidden_dim=64,
                                           encoder_feedforward_dim=64, encoder_layers=1, decoder_layers=3,
                                           num_attention_heads=4, dropout=0.0, dim_feedforward=64,
                                           query_dec_layers=1, num_labels=3, common_stride=4)
        return transformers.OneFormerForUniversalSegmentation(cfg)

    def batch(g):
        b = _masks_batch(g)
        b["task_inputs"] = torch.randint(3, VOCAB, (2, 8), generator=g)
        b["text_inputs"] = torch.randint(3, VOCAB, (2, 6, 8), generator=g)
        return b

    with cpu_draws(dtype):
        return _hf_loop(device, each, dtype, build, batch, schedule="linear", lr=1e-3)


@case
def donut_swin_bert_decoder_cosine(device, each, dtype=torch.float32):
    """Donut's recipe: a DonutSwin encoder (two stages over 32 x 64 document
    crops, windows of 4, patch merging) as a VisionEncoderDecoder's encoder,
    a 2-layer BERT decoder with cross attention over its patches (projected
    from 32 to 16 wide), the shifted-labels cross entropy."""
    import transformers

    def build():
        enc = transformers.DonutSwinModel(transformers.DonutSwinConfig(image_size=[32, 64], patch_size=4, embed_dim=16,
                                                                       depths=[1, 1], num_heads=[2, 4], window_size=4,
                                                                       drop_path_rate=0.0))
        dec = transformers.BertLMHeadModel(transformers.BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2,
                                                                   num_attention_heads=4, intermediate_size=32,
                                                                   hidden_dropout_prob=0.0,
                                                                   attention_probs_dropout_prob=0.0,
                                                                   max_position_embeddings=32, is_decoder=True,
                                                                   add_cross_attention=True, pad_token_id=0))
        model = transformers.VisionEncoderDecoderModel(encoder=enc, decoder=dec)
        model.config.decoder_start_token_id = 1
        model.config.pad_token_id = 0
        return model

    def batch(g):
        labels = torch.randint(3, VOCAB, (2, 8), generator=g)
        labels[1, -2:] = -100
        return {"pixel_values": torch.randn(2, 3, 32, 64, generator=g), "labels": labels}

    return _hf_loop(device, each, dtype, build, batch)

@case
def flava_pretraining_linear(device, each, dtype=torch.float32):
    """FLAVA pre-training: image and text towers run twice (plain, and with
    masked patches and masked words), the multimodal encoder over the masked
    pair; masked-image (given visual-token labels), masked-text, image-text
    matching and global contrastive losses. The matching labels pick the
    positive pairs by boolean indexing, as do the masked tokens."""
    import transformers

    def build():
        cfg = transformers.FlavaConfig(
            image_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                              image_size=32, patch_size=8, vocab_size=16),
            text_config=dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                             intermediate_size=64, max_position_embeddings=32, pad_token_id=0),
            multimodal_config=dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64),
            hidden_size=32, projection_dim=16, init_codebook=False)
        return transformers.FlavaForPreTraining(cfg)

    def batch(g):
        ids = torch.randint(5, VOCAB, (2, 8), generator=g)
        words = torch.zeros(2, 8, dtype=torch.bool)
        words[:, 2:4] = True
        patches = torch.rand(2, 16, generator=g) < 0.4
        patches[:, 0] = True
        return {"input_ids": ids, "input_ids_masked": ids.masked_fill(words, 4), "attention_mask": torch.ones_like(ids),
                "mlm_labels": ids.masked_fill(~words, -100), "pixel_values": torch.randn(2, 3, 32, 32, generator=g),
                "bool_masked_pos": patches, "mim_labels": torch.randint(0, 16, (2, 16), generator=g),
                "itm_labels": torch.tensor([1, 0]), "return_loss": torch.tensor(True)}

    return _hf_loop(device, each, dtype, build, batch, schedule="linear")


@case
def bridgetower_contrastive_cosine(device, each, dtype=torch.float32):
    """BridgeTower: a CLIP vision tower and a RoBERTa text tower whose layers
    feed the cross-modal layers through bridge (link tower) layer norms,
    co-attention both ways; the contrastive head's text, image and cross
    embeddings under its three-way contrastive loss (``return_loss=True``).
    64 wide throughout: its vision tower has a head per 64, and the towers'
    widths must be the cross-modal layers'."""
    import transformers

    def build():
        cfg = transformers.BridgeTowerConfig(
            text_config=dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                             intermediate_size=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                             max_position_embeddings=32),
            vision_config=dict(hidden_size=64, num_hidden_layers=2, patch_size=8, image_size=32),
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4)
        # (this transformers' BridgeTowerConfig lost the two fields its contrastive model reads)
        cfg.contrastive_hidden_size, cfg.logit_scale_init_value = 16, 2.6592
        return _with_loss(transformers.BridgeTowerForContrastiveLearning)(cfg)

    def batch(g):
        ids = torch.randint(3, VOCAB, (3, 8), generator=g)
        mask = torch.ones_like(ids)
        mask[1, -3:] = 0
        return {"input_ids": ids.masked_fill(mask == 0, 1), "attention_mask": mask,
                "pixel_values": torch.randn(3, 3, 32, 32, generator=g)}

    return _hf_loop(device, each, dtype, build, batch)


@case
def udop_document_seq2seq_linear(device, each, dtype=torch.float32):
    """UDOP: a T5 encoder-decoder whose encoder takes the words with their
    boxes and a 32 x 32 page's patches (each word's embedding added to the
    patch under its box's centre), 1-d, horizontal and vertical relative
    biases; seq2seq cross entropy."""
    import transformers

    def build():
        # (the default 32 buckets: with others transformers' 1-d bias module, whose weight is the first
        # layer's, indexes past it)
        cfg = transformers.UdopConfig(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                                      dropout_rate=0.0, image_size=32, patch_size=8, pad_token_id=0, eos_token_id=1,
                                      decoder_start_token_id=0, max_2d_position_embeddings=64)
        return transformers.UdopForConditionalGeneration(cfg)

    def batch(g):
        ids = torch.randint(3, VOCAB, (2, 10), generator=g)
        corner = torch.rand(2, 10, 2, generator=g) * 0.8
        bbox = torch.cat([corner, corner + 0.05 + 0.1 * torch.rand(2, 10, 2, generator=g)], -1)
        mask = torch.ones_like(ids)
        mask[1, -2:] = 0
        labels = torch.randint(3, VOCAB, (2, 6), generator=g)
        labels[0, -1] = -100
        return {"input_ids": ids.masked_fill(mask == 0, 0), "bbox": bbox, "attention_mask": mask,
                "pixel_values": torch.randn(2, 3, 32, 32, generator=g), "labels": labels}

    return _hf_loop(device, each, dtype, build, batch, schedule="linear")


@case
def dac_reconstruct_l1(device, each, dtype=torch.float32):
    """DAC (descript audio codec): weight-normed convolutions with Snake
    activations, strided down 2 x 4, a residual vector quantizer of 2
    codebooks (factorised: projected to 4 wide, l2-normalised lookups, the
    straight-through estimator), transposed convolutions back; the user's L1
    reconstruction plus the model's commitment and codebook losses."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.DacConfig(encoder_hidden_size=8, downsampling_ratios=[2, 4], decoder_hidden_size=32,
                                 n_codebooks=2, codebook_size=16, codebook_dim=4, quantizer_dropout=0.0,
                                 hop_length=8)
    model = transformers.DacModel(cfg)

    def loss(model, x):
        out = model(input_values=x)
        return torch.nn.functional.l1_loss(out.audio_values[..., :x.shape[-1]], x[:, 0]) + out.loss.mean()

    def batch(g):
        return (torch.randn(2, 1, 256, generator=g),)

    return _user_loop(device, each, dtype, model, loss, batch)

@case
def grounding_dino_detection_linear(device, each, dtype=torch.float32):
    """Grounding DINO: a ResNet backbone and a BERT text tower, text-image
    feature enhancer layers (bi-directional cross attention), deformable
    attention, language-guided query selection (two-stage), a 2-layer
    decoder with text cross attention; the Hungarian matcher (scipy on the
    host), focal, L1 and GIoU losses over 3 "classes" that are the prompt's
    tokens."""
    import transformers

    def build():
        backbone = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 48], depths=[1, 1, 1],
                                             layer_type="basic", out_features=["stage2", "stage3"])
        text = dict(vocab_size=1040, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=32)
        cfg = transformers.GroundingDinoConfig(backbone_config=backbone, text_config=text, d_model=32,
                                               encoder_layers=1, decoder_layers=2, encoder_attention_heads=4,
                                               decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                               num_queries=10, num_feature_levels=3, encoder_n_points=2,
                                               decoder_n_points=2, dropout=0.0, fusion_droppath=0.0, max_text_len=16,
                                               disable_custom_kernels=True, auxiliary_loss=True)
        return transformers.GroundingDinoForObjectDetection(cfg)

    def batch(g):
        b = detection_batch(g)
        # "[CLS] a . b . c . [SEP]": 3 phrases of one token each, in BERT's ids (101, 102 and 1012 for '.':
        # the delimiters modeling_grounding_dino.py's label maps look for; hence a vocabulary of 1040)
        ids = torch.tensor([[101, 5, 1012, 6, 1012, 7, 1012, 102]] * 2)
        b.update(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids))
        return b

    return _hf_loop(device, each, dtype, build, batch, schedule="linear", lr=1e-3)


def compare(name, referee=False, elements=False):
    """Run loop ``name`` on eager CPU and on the lazy device as hunt 27's
    ``compare`` does: a cases_hunt27.Outcome."""
    import cases_hunt27

    return cases_hunt27.compare(name, referee, cases=CASES, elements=elements)


if __name__ == "__main__":  # python tests/consumers/cases_hunt40.py [names...]: a table
    from cases_hunt27 import print_table

    print_table(compare, CASES, sys.argv[1:])
