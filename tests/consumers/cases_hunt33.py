"""The loops of test_hunt33_torch.py: transformers architectures no earlier
hunt trained (cases_hunt30.py lists those that were; hunts 24-26 and tests/zoo
the rest), each a tiny random config (nothing downloaded) trained with a plain
AdamW loop, ``Trainer``-free, in hunt 27's shape (``loop(device, each, dtype)
-> (losses, state)``, cases_hunt27.py) and compared by its ``compare``
(losses, state, fallbacks, compiles and programs a step, a float64 referee on
request).

Models: Decision Transformer (offline RL: return-to-go, state and action
tokens interleaved into GPT-2, an MSE on the actions), PatchTST forecasting
(patches by ``unfold``, a per-channel std scaler, channel-independent heads),
Autoformer (series decomposition by moving averages, auto-correlation through
``rfft``/``irfft`` and a top-k of delays, a Student-t likelihood), ESM masked
language modelling (rotary, token dropout's rescaling), MobileBERT
pretraining (bottlenecks, ``NoNorm``, stacked feed-forwards, the
next-sentence head), Canine (hashed character embeddings, strided
downsampling and upsampling by convolution), Switch Transformers (top-1
routing under an expert capacity, the router's z-loss and balance loss),
Reformer (reversible layers whose backward recomputes the forward, chunked
local attention, axial positions), Jamba (Mamba layers beside attention and
top-2 experts), RecurrentGemma (the RG-LRU recurrence, a temporal
convolution, local attention), VideoMAE pretraining (tube masking, the
normalized-pixel loss), an ``EncoderDecoderModel`` (a BERT encoder and a BERT
decoder with added cross-attention, labels shifted by the wrapper), a
``VisionEncoderDecoderModel`` (ViT into GPT-2, image captioning), BitNet
(ternary absmean weights and int8 absmax activations through straight-through
estimators), Qwen3-Next (gated DeltaNet's chunked rule beside gated attention,
experts), Bamba (Mamba-2's chunked scan), Nystromformer (landmark attention
through an iterative pseudo-inverse), a Wav2Vec2-Conformer with relative
positions under CTC, and LED (Longformer's sliding-window attention with a
global token, seq2seq).
``python tests/consumers/cases_hunt33.py [names]`` prints the table.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "zoo"))

from cases_hunt27 import registry  # noqa: E402 (after the path)

from cases_hunt31t import _state  # noqa: E402  (a loop's state, as hunt 31t's)

STEPS = 4
WARMUP = 2
CASES, case = registry()


def _hf_loop(build, batches, *, lr=2e-3, loss_of=lambda out: out.loss):
    """The loop every model here runs: ``build()`` from ``torch.manual_seed(0)``
    on the CPU, AdamW, ``clip_grad_norm_(1.0)``, one batch a step from
    ``batches(generator)`` (a dict of CPU tensors moved to the device), the
    model's own loss from its labels."""

    def loop(device, each, dtype=torch.float32):
        torch.manual_seed(0)
        model = build().to(dtype).to(device)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-2)
        g = torch.Generator().manual_seed(1)
        losses = []
        for _ in range(STEPS):
            batch = {k: (v.to(dtype) if v.is_floating_point() else v).to(device) for k, v in batches(g).items()}
            loss = loss_of(model(**batch))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.detach())
            each()
        return losses, _state(model)

    return loop


def _config(name, **kw):
    import transformers

    return getattr(transformers, name)(**kw)


def _model(name, config):
    import transformers

    return getattr(transformers, name)(config)


def _tokens(vocab, batch=2, seq=12, low=0):
    def batches(g):
        ids = torch.randint(low, vocab, (batch, seq), generator=g)
        return {"input_ids": ids, "labels": ids}

    return batches


def _masked_tokens(vocab, mask_id, batch=2, seq=12, low=4, **extra):
    def batches(g):
        ids = torch.randint(low, vocab, (batch, seq), generator=g)
        labels = torch.full_like(ids, -100)
        pick = torch.rand(batch, seq, generator=g) < 0.3
        pick[:, 1] = True
        labels[pick] = ids[pick]
        out = {"input_ids": ids.masked_fill(pick, mask_id), "labels": labels}
        out.update({k: f(g) for k, f in extra.items()})
        return out

    return batches


# --- offline RL and time series -----------------------------------------------------------------


def _decision_transformer():
    return _model("DecisionTransformerModel",
                  _config("DecisionTransformerConfig", state_dim=6, act_dim=3, hidden_size=32, max_ep_len=64,
                          n_layer=2, n_head=2, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                          bos_token_id=0, eos_token_id=0))


@case
def decision_transformer_actions_adamw(device, each, dtype=torch.float32):
    """The Decision Transformer's training step as transformers' example
    writes it: states, actions, returns-to-go and timesteps interleaved into
    GPT-2, the predicted actions (``tanh``) under an MSE masked by the
    attention mask (left padding in the second trajectory)."""
    torch.manual_seed(0)
    model = _decision_transformer().to(dtype).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        b, t = 3, 5
        states = torch.randn(b, t, 6, generator=g).to(dtype).to(device)
        actions = (torch.rand(b, t, 3, generator=g) * 2 - 1).to(dtype).to(device)
        rewards = torch.rand(b, t, 1, generator=g)
        rtg = rewards.flip(1).cumsum(1).flip(1).to(dtype).to(device)
        steps = (torch.arange(t)[None] + torch.randint(0, 40, (b, 1), generator=g)).to(device)
        mask = torch.ones(b, t, dtype=torch.long)
        mask[1, :2] = 0
        mask = mask.to(device)
        _, action_preds, _ = model(states=states, actions=actions, rewards=rewards.to(dtype).to(device),
                                   returns_to_go=rtg, timesteps=steps, attention_mask=mask, return_dict=False)
        keep = mask.reshape(-1) > 0
        loss = torch.mean((action_preds.reshape(-1, 3)[keep] - actions.reshape(-1, 3)[keep]) ** 2)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
        each()
    return losses, _state(model)


def _series(context, prediction, channels):
    def batches(g):
        t = torch.arange(context + prediction, dtype=torch.float32)
        phase = torch.rand(2, 1, channels, generator=g) * 6
        x = torch.sin(t[None, :, None] / 3 + phase) * (1 + torch.arange(channels)) + 0.1 * torch.randn(
            2, context + prediction, channels, generator=g)
        return {"past_values": x[:, :context], "future_values": x[:, context:]}

    return batches


case_patchtst = _hf_loop(
    lambda: _model("PatchTSTForPrediction",
                   _config("PatchTSTConfig", num_input_channels=3, context_length=24, prediction_length=6,
                           patch_length=4, patch_stride=4, num_hidden_layers=2, d_model=32, num_attention_heads=4,
                           ffn_dim=64, scaling="std", loss="mse")),
    _series(24, 6, 3), lr=1e-3)
CASES["patchtst_forecast_std_scaler"] = case_patchtst


def _autoformer_batches(g, context=16, prediction=4, lags=(1, 2, 3)):
    past = context + max(lags)
    t = torch.arange(past + prediction, dtype=torch.float32)
    x = torch.sin(t[None] / 2 + torch.rand(2, 1, generator=g) * 6) + 0.1 * torch.randn(2, past + prediction,
                                                                                          generator=g) + 2
    feats = torch.stack([t / 10, (t % 5) / 5], -1)[None].expand(2, -1, -1)
    return {"past_values": x[:, :past], "past_time_features": feats[:, :past],
            "past_observed_mask": torch.ones(2, past), "future_values": x[:, past:],
            "future_time_features": feats[:, past:]}


CASES["autoformer_student_t_nll"] = _hf_loop(
    lambda: _model("AutoformerForPrediction",
                   _config("AutoformerConfig", prediction_length=4, context_length=16, lags_sequence=[1, 2, 3],
                           num_time_features=2, d_model=16, encoder_layers=1, decoder_layers=1,
                           encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                           decoder_ffn_dim=32, dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0,
                           attention_dropout=0.0, activation_dropout=0.0, label_length=4, moving_average=5,
                           autocorrelation_factor=2)),
    _autoformer_batches, lr=1e-3)


# --- encoders -------------------------------------------------------------------------------------

CASES["esm_mlm_rotary_token_dropout"] = _hf_loop(
    lambda: _model("EsmForMaskedLM",
                   _config("EsmConfig", vocab_size=33, mask_token_id=32, pad_token_id=1, hidden_size=32,
                           num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=64,
                           position_embedding_type="rotary", token_dropout=True, emb_layer_norm_before=False)),
    _masked_tokens(33, 32, low=4))

CASES["mobilebert_pretraining_nsp"] = _hf_loop(
    lambda: _model("MobileBertForPreTraining",
                   _config("MobileBertConfig", vocab_size=64, hidden_size=32, embedding_size=16,
                           num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                           intra_bottleneck_size=16, num_feedforward_networks=2, max_position_embeddings=32,
                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)),
    _masked_tokens(64, 3, token_type_ids=lambda g: (torch.arange(12) >= 6).long()[None].repeat(2, 1),
                   next_sentence_label=lambda g: torch.randint(0, 2, (2,), generator=g)))


def _canine_batches(g):
    ids = torch.randint(32, 200, (2, 16), generator=g)
    return {"input_ids": ids, "labels": torch.randint(0, 3, (2,), generator=g)}


CASES["canine_hashed_chars_classify"] = _hf_loop(
    lambda: _model("CanineForSequenceClassification",
                   _config("CanineConfig", hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                           max_position_embeddings=64, downsampling_rate=4, upsampling_kernel_size=2,
                           num_hash_functions=4, num_hash_buckets=128, local_transformer_stride=8, num_labels=3)),
    _canine_batches)


# --- sparse experts, reversible layers, recurrences -------------------------------------------------


def _seq2seq_tokens(vocab):
    def batches(g):
        return {"input_ids": torch.randint(2, vocab, (2, 10), generator=g),
                "labels": torch.randint(2, vocab, (2, 6), generator=g)}

    return batches


CASES["switch_top1_capacity_router_losses"] = _hf_loop(
    lambda: _model("SwitchTransformersForConditionalGeneration",
                   _config("SwitchTransformersConfig", vocab_size=64, d_model=32, d_kv=8, d_ff=64,
                           expert_capacity=6, num_layers=2, num_sparse_encoder_layers=1, num_decoder_layers=2,
                           num_sparse_decoder_layers=1, num_heads=4, num_experts=4, router_jitter_noise=0.0,
                           dropout_rate=0.0, decoder_start_token_id=0)),
    _seq2seq_tokens(64))

CASES["reformer_reversible_local_axial"] = _hf_loop(
    lambda: _model("ReformerModelWithLMHead",
                   _config("ReformerConfig", vocab_size=48, attention_head_size=8, attn_layers=["local", "local"],
                           axial_pos_shape=[4, 4], axial_pos_embds_dim=[8, 24], hidden_size=32, feed_forward_size=64,
                           num_attention_heads=2, local_attn_chunk_length=4, local_num_chunks_before=1,
                           max_position_embeddings=16, is_decoder=True, hidden_dropout_prob=0.0,
                           local_attention_probs_dropout_prob=0.0, lsh_attention_probs_dropout_prob=0.0,
                           pad_token_id=0, eos_token_id=1)),
    _tokens(48, seq=16))

CASES["jamba_mamba_attention_moe"] = _hf_loop(
    lambda: _model("JambaForCausalLM",
                   _config("JambaConfig", vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                           expert_layer_period=2, expert_layer_offset=1, attn_layer_period=2, attn_layer_offset=1,
                           use_mamba_kernels=False, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2,
                           max_position_embeddings=64, output_router_logits=True, router_aux_loss_coef=0.01)),
    _tokens(64))

CASES["recurrent_gemma_rglru_local_attention"] = _hf_loop(
    lambda: _model("RecurrentGemmaForCausalLM",
                   _config("RecurrentGemmaConfig", num_hidden_layers=3, vocab_size=64, hidden_size=32,
                           intermediate_size=64, num_attention_heads=4, lru_width=32, attention_window_size=8,
                           conv1d_width=4, block_types=["recurrent", "recurrent", "attention"])),
    _tokens(64))


# --- video, encoder-decoder wrappers --------------------------------------------------------------


def _videomae_batches(g, frames=4, size=16, patch=8, tubelet=2):
    tokens = (frames // tubelet) * (size // patch) ** 2
    mask = torch.zeros(2, tokens, dtype=torch.bool)
    mask[:, torch.randperm(tokens, generator=g)[: tokens * 3 // 4]] = True  # tube masking: a frame pattern per batch
    return {"pixel_values": torch.randn(2, frames, 3, size, size, generator=g), "bool_masked_pos": mask}


CASES["videomae_pretraining_norm_pix"] = _hf_loop(
    lambda: _model("VideoMAEForPreTraining",
                   _config("VideoMAEConfig", image_size=16, patch_size=8, num_frames=4, tubelet_size=2, hidden_size=32,
                           num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                           decoder_num_attention_heads=2, decoder_hidden_size=16, decoder_num_hidden_layers=1,
                           decoder_intermediate_size=32, norm_pix_loss=True)),
    _videomae_batches)


def _bert2bert():
    import transformers

    kw = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
              max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    enc = transformers.BertConfig(**kw)
    dec = transformers.BertConfig(**kw, is_decoder=True, add_cross_attention=True)
    config = transformers.EncoderDecoderConfig.from_encoder_decoder_configs(enc, dec)
    config.decoder_start_token_id, config.pad_token_id = 2, 0
    return transformers.EncoderDecoderModel(config=config)


CASES["bert2bert_encoder_decoder_labels"] = _hf_loop(_bert2bert, _seq2seq_tokens(64))


def _vit2gpt2():
    import transformers

    enc = transformers.ViTConfig(image_size=16, patch_size=8, hidden_size=32, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=64, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0)
    dec = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=1, n_head=2, resid_pdrop=0.0,
                                  embd_pdrop=0.0, attn_pdrop=0.0, add_cross_attention=True, is_decoder=True,
                                  bos_token_id=1, eos_token_id=1)
    config = transformers.VisionEncoderDecoderConfig.from_encoder_decoder_configs(enc, dec)
    config.decoder_start_token_id, config.pad_token_id = 1, 0
    return transformers.VisionEncoderDecoderModel(config=config)


def _captions(g):
    return {"pixel_values": torch.randn(2, 3, 16, 16, generator=g),
            "labels": torch.randint(2, 64, (2, 7), generator=g)}


CASES["vit2gpt2_captioning"] = _hf_loop(_vit2gpt2, _captions)



# --- a second round: quantized, linear-recurrent and windowed layers ------------------------------

_LM = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
           num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0, bos_token_id=0, eos_token_id=0)

CASES["bitnet_ternary_weights_ste"] = _hf_loop(  # absmean ternary weights, absmax int8 activations, ReLU^2
    lambda: _model("BitNetForCausalLM", _config("BitNetConfig", **_LM)), _tokens(64))

CASES["qwen3_next_gated_deltanet_moe"] = _hf_loop(  # gated DeltaNet (chunked torch rule) beside gated attention
    lambda: _model("Qwen3NextForCausalLM",
                   _config("Qwen3NextConfig", **{**_LM, "num_hidden_layers": 2}, head_dim=8, linear_conv_kernel_dim=4,
                           linear_key_head_dim=8, linear_value_head_dim=8, linear_num_key_heads=2,
                           linear_num_value_heads=4, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                           shared_expert_intermediate_size=16, layer_types=["linear_attention", "full_attention"])),
    _tokens(64))

CASES["bamba_mamba2_chunked_scan"] = _hf_loop(  # Mamba-2's chunked selective scan (torch path) beside attention
    lambda: _model("BambaForCausalLM",
                   _config("BambaConfig", **_LM, attn_layer_indices=[1], mamba_n_heads=4, mamba_d_head=16,
                           mamba_n_groups=1, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=4)),
    _tokens(64))

CASES["nystromformer_landmarks_pinv"] = _hf_loop(  # landmark attention through an iterative pseudo-inverse
    lambda: _model("NystromformerForMaskedLM",
                   _config("NystromformerConfig", vocab_size=64, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=4, intermediate_size=64, hidden_dropout_prob=0.0,
                           attention_probs_dropout_prob=0.0, max_position_embeddings=64, segment_means_seq_len=16,
                           num_landmarks=4, conv_kernel_size=3)),
    _masked_tokens(64, 3, seq=16))


def _ctc_audio(g):
    return {"input_values": torch.randn(2, 800, generator=g), "labels": torch.randint(1, 24, (2, 6), generator=g)}


CASES["wav2vec2_conformer_rel_pos_ctc"] = _hf_loop(  # conformer blocks with relative positions, CTC
    lambda: _model("Wav2Vec2ConformerForCTC",
                   _config("Wav2Vec2ConformerConfig", vocab_size=24, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 4),
                           conv_kernel=(10, 4), num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2,
                           conv_depthwise_kernel_size=3, position_embeddings_type="relative", hidden_dropout=0.0,
                           activation_dropout=0.0, attention_dropout=0.0, feat_proj_dropout=0.0, final_dropout=0.0,
                           layerdrop=0.0, conformer_conv_dropout=0.0, apply_spec_augment=False,
                           ctc_loss_reduction="mean", pad_token_id=0)),
    _ctc_audio)

CASES["led_sliding_global_seq2seq"] = _hf_loop(  # Longformer's sliding-window encoder with a global token
    lambda: _model("LEDForConditionalGeneration",
                   _config("LEDConfig", vocab_size=64, max_encoder_position_embeddings=64,
                           max_decoder_position_embeddings=32, encoder_layers=1, decoder_layers=1,
                           encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                           decoder_ffn_dim=64, d_model=32, dropout=0.0, attention_window=4)),
    lambda g: {"input_ids": torch.randint(3, 64, (2, 16), generator=g),
               "global_attention_mask": (torch.arange(16) == 0).long()[None].repeat(2, 1),
               "labels": torch.randint(3, 64, (2, 6), generator=g)})


def compare(name, referee=False):
    """Run loop ``name`` on eager CPU and on the lazy device as hunt 27's
    ``compare`` does: a cases_hunt27.Outcome."""
    import cases_hunt27

    return cases_hunt27.compare(name, referee, cases=CASES)


if __name__ == "__main__":  # python tests/consumers/cases_hunt33.py [names...]: a table
    from cases_hunt27 import print_table

    print_table(compare, CASES, sys.argv[1:])
