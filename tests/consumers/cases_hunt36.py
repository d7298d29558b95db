"""The loops of test_hunt36_torch.py: PyTorch code nobody here ran (hunts 24-35,
tests/zoo and tests/torch list what was), run unchanged in hunt 27's shape
(``loop(device, each, dtype) -> (losses, state)``, cases_hunt27.py) and
compared by its ``compare`` (losses, state, fallbacks, compiles and programs
a step, a float64 referee on request).

Models: transformers architectures no earlier hunt trained, each a tiny random
config (nothing downloaded), trained as transformers' examples do (AdamW with
weight decay, ``get_cosine_schedule_with_warmup`` / ``get_linear_schedule_with_warmup``,
``clip_grad_norm_(1.0)``): SqueezeBERT (grouped 1-d convolutions in place of
the linear layers) for sequence classification, XGLM (sinusoidal positions
from the padding mask), Nemotron (squared-ReLU MLP, ``LayerNorm1P``, partial
rotary), Persimmon (q/k layer norms, partial rotary, squared ReLU), CvT
(convolutional token embeddings and convolutional q/k/v projections, a class
token in the last stage), JetMoE (mixture of attention heads and of MLP
experts with a router's auxiliary loss), Helium (Llama-shaped with its own
RMS norm and rotary); and timm's PP-LCNet under timm's LAMB, cosine
scheduler and label-smoothing loss. ``python tests/consumers/cases_hunt36.py [names]`` prints the table.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "zoo"))

from cases_hunt27 import _state, registry  # noqa: E402 (after the path)

STEPS = 4
WARMUP = 2
VOCAB = 48
CASES, case = registry()


def _to(device, *xs):
    return [x.to(device) for x in xs]


def _moved(x, device, dtype):
    """A batch's tensors on ``device``, floats in ``dtype``, through the lists
    and dicts a detection model's labels come in."""
    if isinstance(x, dict):
        return {k: _moved(v, device, dtype) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_moved(v, device, dtype) for v in x)
    return (x.to(dtype) if x.is_floating_point() else x).to(device)


def _hf_loop(device, each, dtype, build, batch, schedule="cosine", lr=3e-3):
    """transformers' no-Trainer example loop: AdamW with weight decay except on
    biases and norms, a warm-up schedule, clipping at 1.0, one step a batch."""
    import transformers

    torch.manual_seed(0)
    model = build().to(dtype).to(device)
    model.train()
    no_decay = ("bias", "norm", "ln")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n.lower() for k in no_decay)],
         "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(k in n.lower() for k in no_decay)],
         "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=lr)
    make = (transformers.get_cosine_schedule_with_warmup if schedule == "cosine"
            else transformers.get_linear_schedule_with_warmup)
    sched = make(opt, num_warmup_steps=1, num_training_steps=STEPS + 1)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        inputs = _moved(batch(g), device, dtype)
        out = model(**inputs)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(out.loss.detach())
        each()
    return losses, _state(model)


def _causal_batch(g, batch=2, seq=12, padded=True):
    ids = torch.randint(1, VOCAB, (batch, seq), generator=g)
    mask = torch.ones_like(ids)
    if padded:  # the second row left-padded by 3, as a tokenizer with padding_side="left" gives
        mask[1, :3] = 0
        ids[1, :3] = 0
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _hf(config, model, **kw):
    def build():
        import transformers

        return getattr(transformers, model)(getattr(transformers, config)(**kw))

    return build


_LM = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
           max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2)


@case
def squeezebert_seqcls_linear(device, each, dtype=torch.float32):
    """SqueezeBERT: grouped 1-d convolutions for q/k/v and the feed-forward, a
    pooled [CLS] head, cross entropy over 3 labels, a linear warm-up schedule."""
    build = _hf("SqueezeBertConfig", "SqueezeBertForSequenceClassification", vocab_size=VOCAB, hidden_size=32,
                embedding_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                q_groups=2, k_groups=2, v_groups=2, post_attention_groups=2, intermediate_groups=4,
                output_groups=4, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                max_position_embeddings=64, num_labels=3, pad_token_id=0)

    def batch(g):
        b = _causal_batch(g, padded=False)
        b["attention_mask"][1, -4:] = 0  # right padding, as BERT tokenizers pad
        b["labels"] = torch.randint(0, 3, (2,), generator=g)
        return b

    return _hf_loop(device, each, dtype, build, batch, schedule="linear")


@case
def xglm_causal_lm_cosine(device, each, dtype=torch.float32):
    """XGLM: sinusoidal positions offset by the padding mask, scaled embeddings,
    pre-norm decoder layers, a left-padded batch."""
    build = _hf("XGLMConfig", "XGLMForCausalLM", vocab_size=VOCAB, d_model=32, ffn_dim=64, num_layers=2,
                attention_heads=4, max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
                activation_dropout=0.0, layerdrop=0.0, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return _hf_loop(device, each, dtype, build, _causal_batch)


@case
def nemotron_causal_lm_cosine(device, each, dtype=torch.float32):
    """Nemotron: squared-ReLU MLP without a gate, LayerNorm1P (weight + 1),
    partial rotary (half the head), grouped-query attention; one layer (a CI loop)."""
    build = _hf("NemotronConfig", "NemotronForCausalLM", **{**_LM, "num_hidden_layers": 1}, num_key_value_heads=2,
                partial_rotary_factor=0.5, attention_dropout=0.0)
    return _hf_loop(device, each, dtype, build, _causal_batch)


@case
def persimmon_causal_lm_cosine(device, each, dtype=torch.float32):
    """Persimmon: a fused qkv, q/k layer norms per head, partial rotary, squared ReLU."""
    build = _hf("PersimmonConfig", "PersimmonForCausalLM", **_LM, qk_layernorm=True, partial_rotary_factor=0.5,
                hidden_dropout=0.0, attention_dropout=0.0)
    return _hf_loop(device, each, dtype, build, _causal_batch)


@case
def cvt_image_cls_cosine(device, each, dtype=torch.float32):
    """CvT: overlapping convolutional patch embeddings, depthwise-convolution +
    batch-norm q/k/v projections (strided for k/v), a class token in the last stage (two layers there: CvtStage indexes its per-layer
    drop-path list by the stage)."""
    build = _hf("CvtConfig", "CvtForImageClassification", num_channels=3, patch_sizes=[7, 3], patch_stride=[4, 2],
                patch_padding=[2, 1], embed_dim=[16, 32], num_heads=[1, 2], depth=[1, 2], mlp_ratio=[2.0, 2.0],
                attention_drop_rate=[0.0, 0.0], drop_rate=[0.0, 0.0], drop_path_rate=[0.0, 0.0],
                qkv_bias=[True, True], cls_token=[False, True], qkv_projection_method=["dw_bn", "dw_bn"],
                kernel_qkv=[3, 3], padding_kv=[1, 1], stride_kv=[2, 2], padding_q=[1, 1], stride_q=[1, 1],
                num_labels=4)

    def batch(g):
        return {"pixel_values": torch.randn(2, 3, 32, 32, generator=g), "labels": torch.randint(0, 4, (2,), generator=g)}

    return _hf_loop(device, each, dtype, build, batch)


@case
def jetmoe_causal_lm_aux_cosine(device, each, dtype=torch.float32):
    """JetMoE: a mixture of attention experts (top-2 of 4 routed query/output
    projections) and of MLP experts, the routers' auxiliary loss in the loss."""
    build = _hf("JetMoeConfig", "JetMoeForCausalLM", vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                num_key_value_heads=2, kv_channels=8, intermediate_size=32, max_position_embeddings=64,
                num_local_experts=4, num_experts_per_tok=2, output_router_logits=True, aux_loss_coef=0.01,
                attention_dropout=0.0, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return _hf_loop(device, each, dtype, build, _causal_batch)


@case
def helium_causal_lm_linear(device, each, dtype=torch.float32):
    """Helium: Llama-shaped (SwiGLU, grouped-query attention) with its own RMS norm; one layer (a CI loop)."""
    build = _hf("HeliumConfig", "HeliumForCausalLM", **{**_LM, "num_hidden_layers": 1}, num_key_value_heads=2, head_dim=8,
                attention_dropout=0.0)
    return _hf_loop(device, each, dtype, build, _causal_batch, schedule="linear")


@case
def timm_lcnet_lamb_cosine_smoothing(device, each, dtype=torch.float32):
    """timm's training recipe pieces on PP-LCNet (depthwise separable blocks,
    hard-swish, squeeze-excite, batch norm): ``create_optimizer_v2`` (LAMB,
    no decay on norms and biases), ``CosineLRScheduler`` with a warm-up stepped
    per epoch as timm's train.py does, ``LabelSmoothingCrossEntropy``."""
    import timm
    from timm.loss import LabelSmoothingCrossEntropy
    from timm.optim import create_optimizer_v2
    from timm.scheduler import CosineLRScheduler

    torch.manual_seed(0)
    model = timm.create_model("lcnet_035", pretrained=False, num_classes=4).to(dtype).to(device)
    model.train()
    opt = create_optimizer_v2(model, opt="lamb", lr=1e-2, weight_decay=0.05)
    sched = CosineLRScheduler(opt, t_initial=STEPS, warmup_t=1, warmup_lr_init=1e-4)
    loss_fn = LabelSmoothingCrossEntropy(smoothing=0.1)
    g = torch.Generator().manual_seed(1)
    losses = []
    for epoch in range(STEPS):
        # 64 pixels, 8 images: at 32 pixels and 4 the last stage's batch norm (1x1 maps) normalizes over 4
        # values and both float32 runs were 6e-5 (eager) and 8e-5 (lazycore) from float64 there
        x = torch.randn(8, 3, 64, 64, generator=g).to(dtype)
        y = torch.randint(0, 4, (8,), generator=g)
        x, y = _to(device, x, y)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        sched.step(epoch + 1)
        losses.append(loss.detach())
        each()
    return losses, _state(model)


def compare(name, referee=False, elements=False):
    """Run loop ``name`` on eager CPU and on the lazy device as hunt 27's
    ``compare`` does: a cases_hunt27.Outcome."""
    import cases_hunt27

    return cases_hunt27.compare(name, referee, cases=CASES, elements=elements)


if __name__ == "__main__":  # python tests/consumers/cases_hunt36.py [names...]: a table
    from cases_hunt27 import print_table

    print_table(compare, CASES, sys.argv[1:])
