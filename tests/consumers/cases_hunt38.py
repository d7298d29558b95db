"""The loops of test_hunt38_torch.py: transformers architectures no earlier hunt
trained (cases_hunt30/33/36/37.py list those that were; hunts 24-26 and
tests/zoo the rest), run unchanged in hunt 27's shape (``loop(device, each,
dtype) -> (losses, state)``, cases_hunt27.py) and compared by its ``compare``
(losses, state, fallbacks, compiles and programs a step, a float64 referee on
request).

Models, each a tiny random config (nothing downloaded) trained as transformers'
no-Trainer examples do (cases_hunt36's loop: AdamW with decay groups, a warm-up
schedule, clipping at 1.0): PaliGemma (a SigLIP tower, a prefix-LM mask from
``token_type_ids``), Falcon-H1 (Mamba-2 and attention in parallel, muP
multipliers), Jamba (Mamba layers, attention, a mixture of experts),
RecurrentGemma (the RG-LRU recurrence beside local attention), DiffLlama
(differential attention), DBRX (fused experts), Funnel (pooled encoder,
upsampled decoder), BigBird (block-sparse attention with random blocks),
PatchTSMixer classification, DPT depth estimation under a scale-invariant
loss, DINOv3's ViT (2-d rotary, register tokens) under a linear probe, SAM's
mask decoder fine-tuned from box prompts (dice + binary cross entropy),
Deformable DETR (multi-scale deformable attention, the Hungarian matcher),
T5Gemma, Idefics3 (SmolVLM) and GLM-4-MoE.
``python tests/consumers/cases_hunt38.py [names]`` prints the table.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "zoo"))

from cases_hunt27 import _state, registry  # noqa: E402 (after the path)
from cases_hunt36 import _causal_batch, _hf, _hf_loop, _moved  # noqa: E402
from cases_hunt37 import _TEXT, VOCAB, detection_batch  # noqa: E402

STEPS = 4
WARMUP = 2
CASES, case = registry()

def _unpadded(g):
    return _causal_batch(g, padded=False)


def _masked_lm_batch(g, seq=16):
    ids = torch.randint(3, VOCAB, (2, seq), generator=g)
    labels = torch.full_like(ids, -100)
    pick = torch.rand(2, seq, generator=g) < 0.3
    labels[pick] = ids[pick]
    ids = ids.masked_fill(pick, 3)  # the mask token
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


@case
def paligemma_prefix_lm_cosine(device, each, dtype=torch.float32):
    """PaliGemma: a SigLIP tower's patches projected into a Gemma's image
    tokens, a bidirectional prefix (image and prompt, ``token_type_ids`` 0)
    before the causal suffix (1), the loss on the suffix."""
    import transformers

    image_token = 40

    def build():
        cfg = transformers.PaliGemmaConfig(
            vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                               image_size=16, patch_size=4, projection_dim=32),
            text_config=dict(model_type="gemma", **_TEXT, head_dim=8),
            image_token_index=image_token, projection_dim=32, hidden_size=32, vocab_size=VOCAB)
        return transformers.PaliGemmaForConditionalGeneration(cfg)

    def batch(g):
        ids = torch.randint(3, 40, (2, 24), generator=g)
        ids[:, :16] = image_token  # 16 patches of a 16x16 image
        kinds = torch.zeros_like(ids)
        kinds[:, 20:] = 1  # the suffix the model learns to write
        labels = ids.masked_fill(kinds == 0, -100)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": kinds,
                "labels": labels, "pixel_values": torch.randn(2, 3, 16, 16, generator=g)}

    return _hf_loop(device, each, dtype, build, batch)


@case
def falcon_h1_causal_lm_linear(device, each, dtype=torch.float32):
    """Falcon-H1: each layer a Mamba-2 mixer and attention side by side, muP
    multipliers on the embeddings, the mixers' outputs and the logits."""
    build = _hf("FalconH1Config", "FalconH1ForCausalLM", **_TEXT, head_dim=8, mamba_d_ssm=32, mamba_n_heads=4,
                mamba_d_head=8, mamba_n_groups=1, mamba_d_state=8, mamba_d_conv=4, mamba_expand=1,
                mamba_chunk_size=8, mamba_norm_before_gate=False, mamba_rms_norm=True)
    return _hf_loop(device, each, dtype, build, _unpadded, schedule="linear")


@case
def jamba_causal_lm_cosine(device, each, dtype=torch.float32):
    """Jamba: a Mamba layer and an attention layer, the second's MLP a top-2 of
    4 experts with the router's auxiliary loss."""
    build = _hf("JambaConfig", "JambaForCausalLM", **_TEXT, attn_layer_period=2, attn_layer_offset=1,
                expert_layer_period=2, expert_layer_offset=1, num_experts=4, num_experts_per_tok=2,
                mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=4, use_mamba_kernels=False,
                output_router_logits=True, router_aux_loss_coef=0.01)
    return _hf_loop(device, each, dtype, build, _unpadded)


@case
def recurrent_gemma_causal_lm_linear(device, each, dtype=torch.float32):
    """RecurrentGemma: a recurrent block (a causal convolution into the RG-LRU's
    gated linear recurrence) then a local-attention block."""
    build = _hf("RecurrentGemmaConfig", "RecurrentGemmaForCausalLM", vocab_size=VOCAB, hidden_size=32,
                intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                lru_width=32, attention_window_size=8, conv1d_width=4, block_types=["recurrent", "attention"],
                logits_soft_cap=30.0, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return _hf_loop(device, each, dtype, build, _unpadded, schedule="linear")


@case
def diffllama_causal_lm_cosine(device, each, dtype=torch.float32):
    """DiffLlama: differential attention (two softmax maps, the second scaled
    by a learned lambda and subtracted), a group norm over heads."""
    build = _hf("DiffLlamaConfig", "DiffLlamaForCausalLM", **_TEXT, head_dim=8, attention_dropout=0.0)
    return _hf_loop(device, each, dtype, build, _causal_batch)


@case
def dbrx_causal_lm_linear(device, each, dtype=torch.float32):
    """DBRX: clipped fused qkv, a top-2 of 4 experts whose weights are one fused
    parameter per projection, the router's auxiliary loss."""
    build = _hf("DbrxConfig", "DbrxForCausalLM", d_model=32, n_heads=4, n_layers=2, max_seq_len=64,
                vocab_size=VOCAB, attn_config=dict(kv_n_heads=2, clip_qkv=8.0, rope_theta=10000.0),
                ffn_config=dict(ffn_hidden_size=32, moe_num_experts=4, moe_top_k=2, moe_loss_weight=0.01),
                output_router_logits=True, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return _hf_loop(device, each, dtype, build, _unpadded, schedule="linear")


@case
def funnel_masked_lm_cosine(device, each, dtype=torch.float32):
    """Funnel Transformer: blocks that pool the sequence by 2 (the first
    token kept apart), relative attention with its own position terms, an
    upsampling decoder back to every token for the masked LM head."""
    build = _hf("FunnelConfig", "FunnelForMaskedLM", vocab_size=VOCAB, block_sizes=[1, 1], block_repeats=[1, 1],
                num_decoder_layers=1, d_model=32, n_head=4, d_head=8, d_inner=64, hidden_dropout=0.0,
                attention_dropout=0.0, activation_dropout=0.0, max_position_embeddings=64, pad_token_id=0)
    return _hf_loop(device, each, dtype, build, _masked_lm_batch)


@case
def big_bird_masked_lm_linear(device, each, dtype=torch.float32):
    """BigBird: block-sparse attention (sliding, global and random blocks; the
    random blocks drawn by NumPy on the host each forward, seeded alike for
    both runs) over 64 tokens in blocks of 4."""
    import numpy as np

    build = _hf("BigBirdConfig", "BigBirdForMaskedLM", vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                num_attention_heads=4, intermediate_size=64, max_position_embeddings=128,
                attention_type="block_sparse", block_size=4, num_random_blocks=2, hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0, pad_token_id=0)
    np.random.seed(0)
    return _hf_loop(device, each, dtype, build, lambda g: _masked_lm_batch(g, seq=64), schedule="linear")


@case
def patchtsmixer_classification_cosine(device, each, dtype=torch.float32):
    """PatchTSMixer: patches of a 3-channel series mixed across patches,
    features and channels by MLPs with gated attention, a linear head over
    4 classes, cross entropy."""
    build = _hf("PatchTSMixerConfig", "PatchTSMixerForTimeSeriesClassification", context_length=32,
                patch_length=8, patch_stride=8, num_input_channels=3, d_model=16, num_layers=2,
                expansion_factor=2, dropout=0.0, head_dropout=0.0, mode="mix_channel", gated_attn=True,
                self_attn=False, num_targets=4, scaling="std")

    def batch(g):
        return {"past_values": torch.randn(2, 32, 3, generator=g), "target_values": torch.randint(0, 4, (2,),
                                                                                                  generator=g)}

    return _hf_loop(device, each, dtype, build, batch)


def _user_loop(device, each, dtype, model, loss_fn, batch, lr=1e-3):
    """A user's own loop around a model transformers gives no loss for: AdamW,
    a linear warm-up, clipping at 1.0."""
    import transformers

    model = model.to(dtype).to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = transformers.get_linear_schedule_with_warmup(opt, num_warmup_steps=1, num_training_steps=STEPS + 1)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        inputs = _moved(batch(g), device, dtype)
        loss = loss_fn(model, *inputs)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(loss.detach())
        each()
    return losses, _state(model)


def silog(model, x, depth):
    """The scale-invariant log loss users write for a depth model's map
    (transformers computes none)."""
    pred = model(pixel_values=x).predicted_depth
    d = torch.log(pred.clamp(min=1e-3)) - torch.log(depth)
    return torch.sqrt((d ** 2).mean() - 0.85 * d.mean() ** 2)


@case
def dpt_depth_silog(device, each, dtype=torch.float32):
    """DPT depth estimation: a ViT's reassembled features fused at four scales,
    the depth head's upsampled map under the scale-invariant log loss users
    write for it (transformers computes none)."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.DPTConfig(hidden_size=32, num_hidden_layers=4, num_attention_heads=4, intermediate_size=64,
                                 image_size=32, patch_size=8, backbone_out_indices=[0, 1, 2, 3],
                                 neck_hidden_sizes=[8, 16, 16, 32], fusion_hidden_size=16, head_in_index=-1,
                                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = transformers.DPTForDepthEstimation(cfg)

    def batch(g):
        return torch.randn(2, 3, 32, 32, generator=g), 0.5 + torch.rand(2, 64, 64, generator=g)  # (2x the input)

    return _user_loop(device, each, dtype, model, silog, batch)


@case
def dinov3_linear_probe(device, each, dtype=torch.float32):
    """DINOv3's ViT: 2-d rotary positions on the patches, register tokens,
    layer scale; its pooled class token into a linear probe (the whole model
    trained), cross entropy. The rotary positions' random rescaling in training
    (``pos_embed_rescale``, 2.0 by default) is off: each device draws it from its
    own generator, as dropout's masks."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.DINOv3ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=64, image_size=32, patch_size=8, num_register_tokens=2,
                                       drop_path_rate=0.0, pos_embed_rescale=None)
    model = torch.nn.ModuleDict({"vit": transformers.DINOv3ViTModel(cfg), "head": torch.nn.Linear(32, 5)})

    def loss_fn(model, x, y):
        return torch.nn.functional.cross_entropy(model["head"](model["vit"](pixel_values=x).pooler_output), y)

    def batch(g):
        return torch.randn(2, 3, 32, 32, generator=g), torch.randint(0, 5, (2,), generator=g)

    return _user_loop(device, each, dtype, model, loss_fn, batch)


@case
def sam_box_prompt_dice(device, each, dtype=torch.float32):
    """SAM fine-tuned as its tutorials do: the image encoder and prompt encoder
    frozen, the mask decoder trained from box prompts on one mask per image
    (``multimask_output=False``), dice plus binary cross entropy on the low
    resolution masks."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.SamConfig(
        vision_config=dict(hidden_size=32, output_channels=16, num_hidden_layers=2, num_attention_heads=4,
                           mlp_dim=64, image_size=64, patch_size=8, window_size=2, global_attn_indexes=[1],
                           num_pos_feats=8),
        prompt_encoder_config=dict(hidden_size=16, image_size=64, patch_size=8, mask_input_channels=4),
        mask_decoder_config=dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, mlp_dim=32,
                                 iou_head_hidden_dim=16))
    model = transformers.SamModel(cfg)
    for name, p in model.named_parameters():
        if name.startswith(("vision_encoder", "prompt_encoder")):
            p.requires_grad_(False)

    def loss_fn(model, x, boxes, target):
        out = model(pixel_values=x, input_boxes=boxes, multimask_output=False)
        logits = out.pred_masks.squeeze(1).squeeze(1)  # (batch, 32, 32): 4x the embedding grid
        prob = logits.sigmoid()
        dice = 1 - (2 * (prob * target).sum((1, 2)) + 1) / (prob.sum((1, 2)) + target.sum((1, 2)) + 1)
        return dice.mean() + torch.nn.functional.binary_cross_entropy_with_logits(logits, target)

    def batch(g):
        lo = torch.randint(4, 24, (2, 2), generator=g).float()
        boxes = torch.cat([lo, lo + 24], 1)[:, None, :]  # (batch, 1 box, xyxy) in 64-pixel coordinates
        target = torch.zeros(2, 32, 32)
        for i in range(2):
            x0, y0 = (lo[i] / 2).long().tolist()
            target[i, y0:y0 + 12, x0:x0 + 12] = 1
        return torch.randn(2, 3, 64, 64, generator=g), boxes, target

    return _user_loop(device, each, dtype, model, loss_fn, batch)


@case
def deformable_detr_detection_linear(device, each, dtype=torch.float32):
    """Deformable DETR: a ResNet backbone's two scales, multi-scale deformable
    attention (``grid_sample`` at learned offsets) in encoder and decoder, the
    Hungarian matcher (scipy on the host), focal, L1 and GIoU losses."""
    import transformers

    def build():
        backbone = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 48], depths=[1, 1, 1],
                                             layer_type="basic", out_features=["stage2", "stage3"])
        cfg = transformers.DeformableDetrConfig(backbone_config=backbone, use_timm_backbone=False,
                                                use_pretrained_backbone=False, d_model=32, encoder_layers=1,
                                                decoder_layers=2, encoder_attention_heads=4,
                                                decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                                num_queries=10, num_feature_levels=2, encoder_n_points=2,
                                                decoder_n_points=2, num_labels=3, dropout=0.0,
                                                auxiliary_loss=True)
        return transformers.DeformableDetrForObjectDetection(cfg)

    return _hf_loop(device, each, dtype, build, detection_batch, schedule="linear", lr=1e-3)


@case
def t5gemma_seq2seq_linear(device, each, dtype=torch.float32):
    """T5Gemma: Gemma-2 layers (alternating sliding and full attention) as an
    encoder and a decoder with cross attention, seq2seq cross entropy."""
    import transformers

    def build():
        enc = dict(**_TEXT, head_dim=8, sliding_window=8, layer_types=["sliding_attention", "full_attention"])
        cfg = transformers.T5GemmaConfig(encoder=enc, decoder=dict(enc), vocab_size=VOCAB, pad_token_id=0,
                                         bos_token_id=1, eos_token_id=2, dropout_rate=0.0, attention_dropout=0.0)
        return transformers.T5GemmaForConditionalGeneration(cfg)

    def batch(g):
        ids = torch.randint(3, VOCAB, (2, 12), generator=g)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                "labels": torch.randint(3, VOCAB, (2, 8), generator=g)}

    return _hf_loop(device, each, dtype, build, batch, schedule="linear")


@case
def idefics3_image_text_cosine(device, each, dtype=torch.float32):
    """Idefics3 (SmolVLM): a SigLIP tower's patches pixel-shuffled by 2 into a
    Llama's image tokens, images as (batch, images, channels, height, width)."""
    import transformers

    image_token = 40

    def build():
        cfg = transformers.Idefics3Config(
            vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                               image_size=16, patch_size=4),
            text_config=dict(model_type="llama", **_TEXT), image_token_id=image_token, scale_factor=2,
            vocab_size=VOCAB)
        return transformers.Idefics3ForConditionalGeneration(cfg)

    def batch(g):
        ids = torch.randint(3, 40, (2, 10), generator=g)
        ids[:, 1:5] = image_token  # 16 patches, pixel shuffle by 2: 4 tokens
        labels = ids.masked_fill(ids == image_token, -100)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels,
                "pixel_values": torch.randn(2, 1, 3, 16, 16, generator=g)}

    return _hf_loop(device, each, dtype, build, batch)


@case
def glm4_moe_causal_lm_cosine(device, each, dtype=torch.float32):
    """GLM-4-MoE: a dense first layer, then grouped top-2 of 4 routed experts
    beside a shared one, q/k norms, partial rotary."""
    build = _hf("Glm4MoeConfig", "Glm4MoeForCausalLM", **_TEXT, head_dim=8, moe_intermediate_size=32,
                n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1, n_group=1,
                topk_group=1, partial_rotary_factor=0.5, use_qk_norm=True)
    return _hf_loop(device, each, dtype, build, _causal_batch)


def compare(name, referee=False, elements=False):
    """Run loop ``name`` on eager CPU and on the lazy device as hunt 27's
    ``compare`` does: a cases_hunt27.Outcome."""
    import cases_hunt27

    return cases_hunt27.compare(name, referee, cases=CASES, elements=elements)


if __name__ == "__main__":  # python tests/consumers/cases_hunt38.py [names...]: a table
    from cases_hunt27 import print_table

    print_table(compare, CASES, sys.argv[1:])
