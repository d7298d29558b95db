"""The loops of test_hunt37_torch.py: transformers architectures no earlier hunt
trained (cases_hunt30.py and cases_hunt33/36.py list those that were; hunts
24-26 and tests/zoo the rest), run unchanged in hunt 27's shape (``loop(device,
each, dtype) -> (losses, state)``, cases_hunt27.py) and compared by its
``compare`` (losses, state, fallbacks, compiles and programs a step, a float64
referee on request).

Models, each a tiny random config (nothing downloaded) trained as transformers'
no-Trainer examples do (cases_hunt36's loop: AdamW with decay groups, a warm-up
schedule, clipping at 1.0): Qwen2-VL (a vision tower's patches merged into the
token sequence, 3-d multimodal rotary positions), LLaVA (a CLIP vision tower
and projector in front of a Llama), Zamba2 and Bamba (Mamba-2 layers beside
shared or interleaved attention), xLSTM (matrix-memory LSTM blocks), RT-DETR
(a ResNet backbone, deformable attention, the Hungarian matcher's losses),
SpeechT5 text-to-speech (a spectrogram decoder with a post-net and a stop
token loss), TimesFM (patched time-series decoding with a quantile loss),
MusicGen's decoder (four codebooks summed into one stream), UperNet over a
ConvNeXt backbone (semantic segmentation with an auxiliary head).
``python tests/consumers/cases_hunt37.py [names]`` prints the table.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "zoo"))

from cases_hunt27 import registry  # noqa: E402 (after the path)
from cases_hunt36 import _causal_batch, _hf, _hf_loop  # noqa: E402

STEPS = 4
WARMUP = 2
VOCAB = 48
CASES, case = registry()

_TEXT = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2)


@case
def qwen2_vl_image_text_cosine(device, each, dtype=torch.float32):
    """Qwen2-VL: an image's 4x4 patches through a one-block vision tower, merged
    2x2 into the text's image tokens, multimodal rotary positions (time, height,
    width sections), a causal LM loss on the text."""
    import transformers

    image_token = 40

    def build():
        cfg = transformers.Qwen2VLConfig(
            text_config=dict(**_TEXT, head_dim=8, rope_parameters=dict(rope_type="default", rope_theta=10000.0,
                                                                        mrope_section=[2, 1, 1])),
            vision_config=dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=4,
                               spatial_merge_size=2, temporal_patch_size=2, in_channels=3),
            image_token_id=image_token, vision_start_token_id=41, vision_end_token_id=42, video_token_id=43)
        return transformers.Qwen2VLForConditionalGeneration(cfg)

    def batch(g):
        ids = torch.randint(3, 40, (2, 14), generator=g)
        ids[:, 1] = 41
        ids[:, 2:6] = image_token  # a 16x16 image: 4x4 patches, 2x2 tokens after the merge
        ids[:, 6] = 42
        labels = ids.masked_fill(ids >= 40, -100)
        pixels = torch.randn(2 * 16, 3 * 2 * 4 * 4, generator=g)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels,
                "mm_token_type_ids": (ids == image_token).long(),
                "pixel_values": pixels, "image_grid_thw": torch.tensor([[1, 4, 4], [1, 4, 4]])}

    return _hf_loop(device, each, dtype, build, batch)


@case
def llava_image_text_linear(device, each, dtype=torch.float32):
    """LLaVA: a CLIP vision tower's patch features (the penultimate layer, the
    class token dropped) through a two-layer GELU projector into a Llama's image
    tokens."""
    import transformers

    image_token = 40

    def build():
        cfg = transformers.LlavaConfig(
            vision_config=transformers.CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                                        num_attention_heads=4, image_size=16, patch_size=4),
            text_config=transformers.LlamaConfig(**_TEXT), image_token_index=image_token,
            vision_feature_layer=-2, vision_feature_select_strategy="default", projector_hidden_act="gelu")
        return transformers.LlavaForConditionalGeneration(cfg)

    def batch(g):
        ids = torch.randint(3, 40, (2, 24), generator=g)
        ids[:, 1:17] = image_token  # 16 patches of a 16x16 image
        labels = ids.masked_fill(ids == image_token, -100)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels,
                "pixel_values": torch.randn(2, 3, 16, 16, generator=g)}

    return _hf_loop(device, each, dtype, build, batch, schedule="linear")


@case
def zamba2_causal_lm_cosine(device, each, dtype=torch.float32):
    """Zamba2: Mamba-2 layers with a shared attention block (its LoRA adapters
    per use) between them, a left-padded batch."""
    build = _hf("Zamba2Config", "Zamba2ForCausalLM", vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                layers_block_type=["mamba", "hybrid"], num_attention_heads=4, num_key_value_heads=4,
                attention_head_dim=16, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_ngroups=1,
                mamba_headdim=8, n_mamba_heads=8, intermediate_size=64, num_mem_blocks=1, use_shared_attention_adapter=True,
                adapter_rank=4, use_mem_rope=True, max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
                eos_token_id=2, chunk_size=8)
    return _hf_loop(device, each, dtype, build, _causal_batch)


@case
def bamba_causal_lm_linear(device, each, dtype=torch.float32):
    """Bamba: a Mamba-2 layer then an attention layer, RMS norms, SwiGLU."""
    build = _hf("BambaConfig", "BambaForCausalLM", **_TEXT, attn_layer_indices=[1], mamba_n_heads=4,
                mamba_d_head=16, mamba_n_groups=1, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=8)
    return _hf_loop(device, each, dtype, build, lambda g: _causal_batch(g, padded=False), schedule="linear")


@case
def speecht5_text_to_speech_linear(device, each, dtype=torch.float32):
    """SpeechT5 text-to-speech: a text encoder, a speech decoder prenet fed the
    shifted mel frames and a speaker embedding, reduction factor 2, a
    convolutional post-net; L1 on the spectrogram before and after the post-net
    plus the stop token's binary cross entropy."""
    build = _hf("SpeechT5Config", "SpeechT5ForTextToSpeech", vocab_size=VOCAB, hidden_size=32,
                encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
                encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=8, reduction_factor=2,
                speech_decoder_prenet_units=16, speech_decoder_prenet_layers=2, speech_decoder_prenet_dropout=0.0,
                speaker_embedding_dim=16, speech_decoder_postnet_layers=2, speech_decoder_postnet_units=16,
                speech_decoder_postnet_kernel=5, speech_decoder_postnet_dropout=0.0, hidden_dropout=0.0,
                attention_dropout=0.0, activation_dropout=0.0, positional_dropout=0.0, layerdrop=0.0,
                feat_proj_dropout=0.0, max_text_positions=64, max_speech_positions=64, pad_token_id=0,
                bos_token_id=1, eos_token_id=2, decoder_start_token_id=2, use_guided_attention_loss=False)

    def batch(g):
        ids = torch.randint(3, VOCAB, (2, 10), generator=g)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                "labels": torch.randn(2, 12, 8, generator=g),
                "speaker_embeddings": torch.randn(2, 16, generator=g)}

    return _hf_loop(device, each, dtype, build, batch, schedule="linear")


@case
def timesfm_forecast_cosine(device, each, dtype=torch.float32):
    """TimesFM: a context of 64 points in patches of 8 (masked, instance
    normalised), a residual-block input projection, a causal decoder, a
    horizon of 16 with quantile heads; its MSE-plus-quantile loss."""
    build = _hf("TimesFmConfig", "TimesFmModelForPrediction", patch_length=8, context_length=64,
                horizon_length=16, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, head_dim=8, quantiles=[0.1, 0.5, 0.9], attention_dropout=0.0)

    def batch(g):
        t = torch.linspace(0, 6, 80)
        series = torch.sin(t * (1 + torch.rand(2, 1, generator=g))) + 0.1 * torch.randn(2, 80, generator=g)
        return {"past_values": series[:, :64], "freq": torch.tensor([0, 1]), "future_values": series[:, 64:]}

    return _hf_loop(device, each, dtype, build, batch)


@case
def musicgen_codebooks_linear(device, each, dtype=torch.float32):
    """MusicGen's decoder: four codebooks' embeddings summed into one stream,
    sinusoidal positions, a head per codebook, cross entropy over all four."""
    build = _hf("MusicgenDecoderConfig", "MusicgenForCausalLM", vocab_size=VOCAB, hidden_size=32,
                num_hidden_layers=2, num_attention_heads=4, ffn_dim=64, num_codebooks=4,
                max_position_embeddings=64, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                layerdrop=0.0, pad_token_id=VOCAB, bos_token_id=VOCAB)

    def batch(g):
        codes = torch.randint(0, VOCAB, (2 * 4, 12), generator=g)  # (batch x codebooks, frames)
        return {"input_ids": codes, "labels": torch.randint(0, VOCAB, (2, 12, 4), generator=g)}

    return _hf_loop(device, each, dtype, build, batch, schedule="linear")


@case
def upernet_convnext_segmentation_cosine(device, each, dtype=torch.float32):
    """UperNet: a three-stage ConvNeXt backbone, the pyramid pooling module and
    FPN fusion, an auxiliary FCN head on the third stage, bilinear upsampling to the labels and
    cross entropy ignoring 255."""
    import transformers

    def build():
        backbone = transformers.ConvNextConfig(num_channels=3, num_stages=3, hidden_sizes=[16, 24, 32],
                                               depths=[1, 1, 1], out_features=["stage1", "stage2", "stage3"],
                                               drop_path_rate=0.0)
        cfg = transformers.UperNetConfig(backbone_config=backbone, hidden_size=16, auxiliary_channels=16,
                                         auxiliary_in_channels=32, num_labels=5, pool_scales=[1, 2],
                                         use_auxiliary_head=True, auxiliary_loss_weight=0.4)
        return transformers.UperNetForSemanticSegmentation(cfg)

    def batch(g):
        labels = torch.randint(0, 5, (2, 32, 32), generator=g)
        labels[:, :4] = 255
        return {"pixel_values": torch.randn(2, 3, 32, 32, generator=g), "labels": labels}

    return _hf_loop(device, each, dtype, build, batch)


def detection_batch(g):
    """Two 64-pixel images with 2 and 3 boxes of 3 classes (centre, size;
    normalised), as DETR-family models take their labels."""
    labels = []
    for n in (2, 3):
        centre = 0.25 + 0.5 * torch.rand(n, 2, generator=g)
        size = 0.1 + 0.3 * torch.rand(n, 2, generator=g)
        labels.append({"class_labels": torch.randint(0, 3, (n,), generator=g), "boxes": torch.cat([centre, size], 1)})
    return {"pixel_values": torch.randn(2, 3, 64, 64, generator=g), "labels": labels}


@case
def rt_detr_detection_linear(device, each, dtype=torch.float32):
    """RT-DETR: a ResNet backbone, a hybrid encoder, deformable attention in the
    decoder with denoising queries off, the Hungarian matcher (scipy's
    ``linear_sum_assignment`` on the host) and its varifocal, L1 and GIoU losses."""
    import transformers

    def build():
        backbone = transformers.RTDetrResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 48, 64],
                                                   depths=[1, 1, 1, 1], layer_type="basic",
                                                   out_features=["stage2", "stage3", "stage4"])
        cfg = transformers.RTDetrConfig(backbone_config=backbone, d_model=32, encoder_hidden_dim=32,
                                        encoder_in_channels=[32, 48, 64], encoder_ffn_dim=64, encoder_attention_heads=4,
                                        decoder_in_channels=[32, 32, 32],
                                        decoder_layers=2, decoder_ffn_dim=64, decoder_attention_heads=4,
                                        num_queries=10, num_labels=3, num_denoising=0, dropout=0.0,
                                        decoder_n_points=2, anchor_image_size=[64, 64], eval_size=None)
        return transformers.RTDetrForObjectDetection(cfg)

    return _hf_loop(device, each, dtype, build, detection_batch, schedule="linear", lr=1e-3)


def compare(name, referee=False, elements=False):
    """Run loop ``name`` on eager CPU and on the lazy device as hunt 27's
    ``compare`` does: a cases_hunt27.Outcome."""
    import cases_hunt27

    return cases_hunt27.compare(name, referee, cases=CASES, elements=elements)


if __name__ == "__main__":  # python tests/consumers/cases_hunt37.py [names...]: a table
    from cases_hunt27 import print_table

    print_table(compare, CASES, sys.argv[1:])
