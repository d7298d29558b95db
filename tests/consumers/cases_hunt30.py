"""The models of test_hunt30_torch.py: transformers architectures no earlier
hunt trained (hunts 24-29 and tests/zoo ran GPT-2, BERT, Llama, Mistral, T5,
ViT, DistilBERT, RoBERTa, Mixtral, Qwen2/Qwen2-MoE/Qwen3, BART, Gemma 1-3,
Phi/Phi3, GPT-NeoX, Falcon, OPT, BLOOM, GPT-J, DeBERTa-v2, ALBERT, ELECTRA,
CLIP, SigLIP, Swin/Swin-V2, ConvNeXt/V2, Wav2Vec2, HuBERT, WavLM, Whisper,
Mamba/Mamba2, RWKV, OLMo/OLMoE, ModernBERT, MPT, StarCoder2, Pegasus, mBART,
Marian, BEiT, DINOv2, Perceiver...), each a tiny random config (2 layers,
width 64, nothing downloaded) trained as tests/zoo/zoo_harness.py trains:
AdamW, transformers' linear warm-up from 0, ``clip_grad_norm_(1.0)``,
``mark_step()`` each step, against an eager deep copy.

``python tests/consumers/cases_hunt30.py [names]`` prints the table
(loss / state difference, fallbacks, compiles and programs a step).
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "zoo"))

from zoo_models import (CLASSES, IMAGE, SEQ, VOCAB, _WIDTH, Spec, _causal, _hf, _images,  # noqa: E402
                        _images_for_bn, _masked, _seq2seq)

_TOKENS = dict(bos_token_id=0, eos_token_id=0, pad_token_id=0)
_DENSE = dict(vocab_size=VOCAB, max_position_embeddings=64, **_WIDTH)


def _speech_seq2seq(g, frames=24, features=16):
    return {"input_features": torch.randn(2, frames, features, generator=g),
            "labels": torch.randint(2, VOCAB, (2, SEQ // 2), generator=g)}


def _audio_ctc(g):
    return {"input_values": torch.randn(2, 800, generator=g), "labels": torch.randint(1, 24, (2, 6), generator=g)}


def _spectrogram(g):
    return {"input_values": torch.randn(2, 32, 16, generator=g), "labels": torch.randint(0, CLASSES, (2,),
                                                                                        generator=g)}


def specs():
    return [
        # --- decoder-only ---
        Spec("codegen", "transformers",  # GPT-J's rotary on a slice, a fused qkv split in its own order
             _hf("CodeGenConfig", "CodeGenForCausalLM", vocab_size=VOCAB, n_positions=64, n_ctx=64, n_embd=64,
                 n_layer=2, n_head=4, rotary_dim=8, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                 bos_token_id=0, eos_token_id=0), _causal),
        Spec("stablelm", "transformers",  # partial rotary, q/k per-head layer norms, biased qkv
             _hf("StableLmConfig", "StableLmForCausalLM", **_DENSE, num_key_value_heads=2, partial_rotary_factor=0.25,
                 use_qkv_bias=True, qk_layernorm=True, hidden_dropout=0.0, attention_dropout=0.0, **_TOKENS), _causal),
        Spec("gpt-neo", "transformers",  # alternating global and local (windowed) attention, tied head
             _hf("GPTNeoConfig", "GPTNeoForCausalLM", vocab_size=VOCAB, max_position_embeddings=64, hidden_size=64,
                 num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]], window_size=4,
                 intermediate_size=128, embed_dropout=0.0, attention_dropout=0.0, resid_dropout=0.0,
                 bos_token_id=0, eos_token_id=0), _causal,
             tied=(("lm_head.weight", "transformer.wte.weight"),)),
        Spec("cohere", "transformers",  # parallel attention/MLP, bias-free layer norm, logit scale, tied head
             _hf("CohereConfig", "CohereForCausalLM", **_DENSE, num_key_value_heads=2, logit_scale=0.25,
                 use_qk_norm=True, **_TOKENS), _causal, tied=(("lm_head.weight", "model.embed_tokens.weight"),)),
        Spec("granite", "transformers",  # embedding, residual, attention and logit multipliers
             _hf("GraniteConfig", "GraniteForCausalLM", **_DENSE, num_key_value_heads=2, embedding_multiplier=2.0,
                 residual_multiplier=0.5, attention_multiplier=0.2, logits_scaling=4.0, **_TOKENS), _causal),
        Spec("olmo2", "transformers",  # post-norms, q/k RMS norms over all heads
             _hf("Olmo2Config", "Olmo2ForCausalLM", **_DENSE, num_key_value_heads=2, **_TOKENS), _causal),
        Spec("smollm3", "transformers",  # every other layer without rotary (NoPE)
             _hf("SmolLM3Config", "SmolLM3ForCausalLM", **_DENSE, num_key_value_heads=2, no_rope_layer_interval=2,
                 **_TOKENS), _causal),
        Spec("qwen3-moe", "transformers",  # top-2 of 4 experts, q/k norms, the router's auxiliary loss
             _hf("Qwen3MoeConfig", "Qwen3MoeForCausalLM", **_DENSE, num_key_value_heads=2, head_dim=16, num_experts=4,
                 num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1, output_router_logits=True,
                 router_aux_loss_coef=0.01, **_TOKENS), _causal),
        Spec("deepseek-v3", "transformers",  # multi-head latent attention, grouped top-k routing, shared expert
             _hf("DeepseekV3Config", "DeepseekV3ForCausalLM", vocab_size=VOCAB, max_position_embeddings=64,
                 hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1, n_routed_experts=4,
                 num_experts_per_tok=2, n_group=2, topk_group=1, first_k_dense_replace=1, q_lora_rank=32,
                 kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, **_TOKENS), _causal),
        Spec("gpt-oss", "transformers",  # attention sinks, sliding and full layers, clamped SwiGLU experts
             _hf("GptOssConfig", "GptOssForCausalLM", vocab_size=VOCAB, max_position_embeddings=64, hidden_size=64,
                 intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                 num_local_experts=4, num_experts_per_tok=2, sliding_window=8,
                 layer_types=["sliding_attention", "full_attention"], **_TOKENS), _causal),
        Spec("lfm2", "transformers",  # a gated short convolution layer beside attention
             _hf("Lfm2Config", "Lfm2ForCausalLM", vocab_size=VOCAB, max_position_embeddings=64, hidden_size=64,
                 intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 layer_types=["conv", "full_attention"], conv_L_cache=3, block_auto_adjust_ff_dim=False, **_TOKENS),
             _causal),
        Spec("biogpt", "transformers",  # scaled embeddings, learned positions from the mask's cumsum
             _hf("BioGptConfig", "BioGptForCausalLM", **_DENSE, hidden_dropout_prob=0.0,
                 attention_probs_dropout_prob=0.0, layerdrop=0.0, **_TOKENS), _causal),
        Spec("xlnet", "transformers",  # two-stream relative attention, tied head
             _hf("XLNetConfig", "XLNetLMHeadModel", vocab_size=VOCAB, d_model=64, n_layer=2, n_head=4, d_inner=128,
                 dropout=0.0, mem_len=None, bos_token_id=0, eos_token_id=0, pad_token_id=0), _causal,
             tied=(("lm_loss.weight", "transformer.word_embedding.weight"),)),
        # --- encoders ---
        Spec("roformer", "transformers",  # rotary position in an encoder
             _hf("RoFormerConfig", "RoFormerForMaskedLM", **_DENSE, embedding_size=64, hidden_dropout_prob=0.0,
                 attention_probs_dropout_prob=0.0), _masked),
        Spec("mpnet", "transformers",  # relative position buckets
             _hf("MPNetConfig", "MPNetForMaskedLM", **_DENSE, hidden_dropout_prob=0.0,
                 attention_probs_dropout_prob=0.0, pad_token_id=1), _masked),
        Spec("convbert", "transformers",  # span-based dynamic convolution heads
             _hf("ConvBertConfig", "ConvBertForMaskedLM", **_DENSE, embedding_size=64, head_ratio=2,
                 conv_kernel_size=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), _masked),
        Spec("fnet", "transformers",  # Fourier mixing (a complex FFT over tokens and features)
             _hf("FNetConfig", "FNetForMaskedLM", vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                 intermediate_size=128, max_position_embeddings=64, hidden_dropout_prob=0.0,
                 use_tpu_fourier_optimizations=False), _masked),
        # --- encoder-decoders ---
        Spec("umt5", "transformers",  # per-layer relative attention biases
             _hf("UMT5Config", "UMT5ForConditionalGeneration", vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128,
                 num_layers=2, num_decoder_layers=2, num_heads=4, dropout_rate=0.0, decoder_start_token_id=0,
                 pad_token_id=0, eos_token_id=1), _seq2seq),
        Spec("longt5", "transformers",  # transient-global local attention
             _hf("LongT5Config", "LongT5ForConditionalGeneration", vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128,
                 num_layers=2, num_decoder_layers=2, num_heads=4, dropout_rate=0.0, decoder_start_token_id=0,
                 pad_token_id=0, eos_token_id=1, encoder_attention_type="transient-global", local_radius=4,
                 global_block_size=4), _seq2seq),
        Spec("m2m100", "transformers",  # sinusoidal positions from the padding mask's cumsum
             _hf("M2M100Config", "M2M100ForConditionalGeneration", vocab_size=VOCAB, d_model=64, encoder_layers=2,
                 decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                 decoder_ffn_dim=128, max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
                 activation_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0, pad_token_id=1,
                 bos_token_id=0, eos_token_id=3, decoder_start_token_id=2), _seq2seq),
        Spec("speech2text", "transformers",  # a strided 1-d convolution subsampler over filter banks
             _hf("Speech2TextConfig", "Speech2TextForConditionalGeneration", vocab_size=VOCAB, d_model=64,
                 encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                 encoder_ffn_dim=128, decoder_ffn_dim=128, max_source_positions=64, max_target_positions=64,
                 num_conv_layers=2, conv_kernel_sizes=[5, 5], conv_channels=32, input_feat_per_channel=16,
                 input_channels=1, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                 encoder_layerdrop=0.0, decoder_layerdrop=0.0, pad_token_id=1, bos_token_id=0, eos_token_id=3,
                 decoder_start_token_id=2), _speech_seq2seq),
        # --- vision and audio ---
        Spec("deit", "transformers",  # ViT with a distillation token
             _hf("DeiTConfig", "DeiTForImageClassification", image_size=IMAGE, patch_size=8, num_labels=CLASSES,
                 **_WIDTH, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), _images),
        Spec("levit", "transformers",  # convolution stem, attention-bias tables indexed by offsets, batch norm
             _hf("LevitConfig", "LevitForImageClassification", image_size=2 * IMAGE, num_labels=CLASSES,
                 hidden_sizes=[32, 48, 64], num_attention_heads=[1, 2, 2], depths=[1, 1, 1], key_dim=[8, 8, 8],
                 drop_path_rate=0), _images_for_bn),
        Spec("poolformer", "transformers",  # average pooling as the token mixer, group norm
             _hf("PoolFormerConfig", "PoolFormerForImageClassification", num_labels=CLASSES, hidden_sizes=[16, 32],
                 depths=[1, 1], num_encoder_blocks=2, patch_sizes=[7, 3], strides=[4, 2], padding=[2, 1],
                 drop_path_rate=0.0), _images),
        Spec("bit", "transformers",  # weight-standardized convolutions, group norm
             _hf("BitConfig", "BitForImageClassification", num_labels=CLASSES, embedding_size=32,
                 hidden_sizes=[32, 64], depths=[1, 1], num_groups=8, layer_type="preactivation",
                 global_padding="SAME"), _images),
        Spec("focalnet", "transformers",  # focal modulation: depthwise convolutions and gates
             _hf("FocalNetConfig", "FocalNetForImageClassification", image_size=IMAGE, patch_size=4, embed_dim=16,
                 depths=[1, 1], focal_levels=[2, 2], focal_windows=[3, 3], num_labels=CLASSES, drop_path_rate=0.0,
                 hidden_dropout_prob=0.0), _images),
        Spec("hiera", "transformers",  # mask-unit attention, unrolled token order
             _hf("HieraConfig", "HieraForImageClassification", image_size=[IMAGE, IMAGE], patch_size=[3, 3],
                 patch_stride=[2, 2], patch_padding=[1, 1], embed_dim=16, num_heads=[1, 2], depths=[1, 1],
                 masked_unit_size=[4, 4], query_stride=[2, 2], num_query_pool=1, num_labels=CLASSES,
                 drop_path_rate=0.0), _images),
        Spec("sew", "transformers",  # squeezed wav2vec: pooled and upsampled context
             _hf("SEWConfig", "SEWForCTC", vocab_size=24, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                 squeeze_factor=2, num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                 hidden_dropout=0.0, activation_dropout=0.0, attention_dropout=0.0, feat_proj_dropout=0.0,
                 final_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0, pad_token_id=0, ctc_loss_reduction="mean"),
             _audio_ctc),
        Spec("ast", "transformers",  # audio spectrogram transformer: overlapping patches of a spectrogram
             _hf("ASTConfig", "ASTForAudioClassification", hidden_size=32, num_hidden_layers=2,
                 num_attention_heads=2, intermediate_size=64, patch_size=8, frequency_stride=4, time_stride=4,
                 max_length=32, num_mel_bins=16, num_labels=CLASSES, hidden_dropout_prob=0.0,
                 attention_probs_dropout_prob=0.0), _spectrogram),
    ]


def by_name():
    return {s.name: s for s in specs()}


def line(r):
    """One table row of a zoo_harness.Result."""
    return (f"{r.name:14s} loss {r.loss_rel:.1e} state {r.param_diff:.1e} ({r.param_worst}) fallbacks {r.fallbacks} "
            f"{dict(r.fallback_ops) if r.fallbacks else ''} compiles {r.compiles} programs {r.programs} "
            f"tied {r.tied}")


# --- generation beyond greedy ---------------------------------------------------------------------


def _whisper():
    import transformers

    return transformers.WhisperForConditionalGeneration(transformers.WhisperConfig(
        vocab_size=60, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=37, decoder_ffn_dim=37, num_mel_bins=16, max_source_positions=20,
        max_target_positions=32, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
        suppress_tokens=None, begin_suppress_tokens=None))


def _gen_model(name):
    """``(model, inputs)``: a zoo / this hunt's model in eval mode (seeded init)
    and its prompt (``input_ids`` and ``attention_mask``, or Whisper's features)."""
    import zoo_models

    torch.manual_seed(0)
    if name == "whisper":
        model = _whisper()
        inputs = {"input_features": torch.randn(2, 16, 40, generator=torch.Generator().manual_seed(9))}
    else:
        spec = zoo_models.BY_NAME.get(name) or by_name()[name]
        model = spec.build()
        ids = spec.batch(torch.Generator().manual_seed(2))["input_ids"][:, :6]
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    return model.eval(), inputs


# name -> (model, generate() keywords, whether eager's tokens are expected: sampling draws from the lazy
# device's own generator, so a sampled case is checked for one sequence per seed instead)
GENERATE = {
    "gpt2-sample-topk-topp-temp": ("gpt2", dict(do_sample=True, top_k=20, top_p=0.9, temperature=0.7), False),
    "llama-sample-static": ("llama", dict(do_sample=True, top_p=0.8, cache_implementation="static"), False),
    "llama-beam2-penalty": ("llama", dict(num_beams=2, repetition_penalty=1.3), True),
    "llama-beam2-static": ("llama", dict(num_beams=2, cache_implementation="static"), True),
    "qwen2-penalty-static": ("qwen2", dict(repetition_penalty=1.2, cache_implementation="static"), True),
    "t5-beam2": ("t5", dict(num_beams=2), True),
    "t5-sample": ("t5", dict(do_sample=True, top_k=10), False),
    "bart-beam2-penalty": ("bart", dict(num_beams=2, repetition_penalty=1.3, no_repeat_ngram_size=2), True),
    "whisper-beam2": ("whisper", dict(num_beams=2), True),
    "whisper-sample": ("whisper", dict(do_sample=True, top_k=10, temperature=0.8), False),
    "whisper-static": ("whisper", dict(cache_implementation="static"), True),
    "cohere-greedy": ("cohere", dict(), True),
    "olmo2-beam2": ("olmo2", dict(num_beams=2), True),
    "deepseek-v3-greedy-static": ("deepseek-v3", dict(cache_implementation="static"), True),
    "gpt-oss-greedy": ("gpt-oss", dict(), True),
}


def generate_case(name, calls=2, new_tokens=6):
    """Run :data:`GENERATE`'s ``name``: ``(lazy tokens per call, eager tokens,
    compiles per call, programs per call, fallbacks)``; each call after
    ``torch.manual_seed(5)``."""
    import copy

    import lazycore.torch as ltorch
    from lazycore.observe import metrics
    from test_hunt26_torch import _counts

    model_name, kw, _ = GENERATE[name]
    eager, inputs = _gen_model(model_name)
    lazy = copy.deepcopy(eager).to(ltorch.device())
    kw = {"max_new_tokens": new_tokens, "do_sample": False, **kw}
    with torch.no_grad():
        torch.manual_seed(5)
        want = eager.generate(**inputs, **kw)
        ltorch.mark_step(wait=True)
        metrics.reset()
        got, compiles, programs = [], [], []
        for _ in range(calls):
            c0, e0 = _counts()
            torch.manual_seed(5)
            got.append(lazy.generate(**{k: v.to(ltorch.device()) for k, v in inputs.items()}, **kw).cpu())
            c1, e1 = _counts()
            compiles.append(c1 - c0)
            programs.append(e1 - e0)
    return got, want, compiles, programs, metrics.fallbacks()


def generate_line(name):
    got, want, compiles, programs, fallbacks = generate_case(name)
    same = [torch.equal(g, want) for g in got]
    repeat = all(torch.equal(g, got[0]) for g in got)
    return (f"{name:28s} eager's tokens {same} one per seed {repeat} compiles {compiles} programs {programs} "
            f"fallbacks {dict(fallbacks)}")


if __name__ == "__main__":  # python tests/consumers/cases_hunt30.py [names...]: a table
    import traceback

    import zoo_harness

    table = by_name()
    for n in sys.argv[1:] or list(table):
        try:
            print(generate_line(n) if n in GENERATE else line(zoo_harness.train(table[n])), flush=True)
        except Exception as e:  # noqa: BLE001 (a table row)
            print(f"{n:14s} ERROR {type(e).__name__}: {e}"[:400], flush=True)
            traceback.print_exc(limit=-4)
