"""The loops of test_hunt41_torch.py: transformers architectures nobody here
trained (hunts 24-40, tests/zoo and tests/torch list what was), each a tiny
random config (nothing downloaded) trained as transformers' no-Trainer examples
do (cases_hunt36.py's loop: AdamW with decay groups, a warm-up schedule,
clipping), in hunt 27's shape and compared by its ``compare``. ``python
tests/consumers/cases_hunt41.py [names]`` prints the table.

Models: DeepSeek-V2 (multi-head latent attention, a routed MoE with shared
experts), Cohere2 (sliding-window layers between global ones, parallel
attention and MLP), Exaone4 (q/k norms, sliding windows), ERNIE 4.5, Granite
MoE (granite's multipliers, top-k experts), OLMo 3, Seed-OSS, Doge (dynamic
mask attention), VaultGemma, Hunyuan dense, MiniCPM3 (latent attention),
Apertus (xIELU activation), Arcee, LFM2-MoE (short convolutions beside
attention), Afmoe, Dots1, ModernBERT's decoder, FalconMamba (a selective scan).
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "zoo"))

from cases_hunt27 import registry  # noqa: E402 (after the path)
from cases_hunt36 import _LM, STEPS, WARMUP, _causal_batch, _hf, _hf_loop  # noqa: E402,F401

CASES, case = registry()

_SMALL = {**_LM, "num_hidden_layers": 2}


def _lm(name, schedule="cosine", **kw):
    """A causal LM case of ``name`` (its Config and ForCausalLM classes) with ``kw`` over the tiny config."""
    def loop(device, each, dtype=torch.float32):
        build = _hf(f"{name}Config", f"{name}ForCausalLM", **{**_SMALL, **kw})
        return _hf_loop(device, each, dtype, build, _causal_batch, schedule=schedule)

    loop.__name__ = loop.__qualname__ = name.lower() + "_causal_lm"
    loop.__doc__ = f"{name}ForCausalLM, a left-padded batch."
    return case(loop)


_lm("DeepseekV2", num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=16, qk_rope_head_dim=4, qk_nope_head_dim=4,
    v_head_dim=8, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=16,
    first_k_dense_replace=1, n_group=1, topk_group=1, attention_dropout=0.0)
_lm("Cohere2", num_key_value_heads=2, sliding_window=4, layer_types=["sliding_attention", "full_attention"],
    attention_dropout=0.0)
_lm("Exaone4", num_key_value_heads=2, head_dim=8, sliding_window=4,
    layer_types=["sliding_attention", "full_attention"], attention_dropout=0.0)
_lm("Ernie4_5", num_key_value_heads=2, head_dim=8)
_lm("GraniteMoe", num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, embedding_multiplier=2.0,
    logits_scaling=4.0, residual_multiplier=0.5, attention_multiplier=0.25, attention_dropout=0.0)
_lm("Olmo3", num_key_value_heads=2, sliding_window=4, layer_types=["sliding_attention", "full_attention"],
    attention_dropout=0.0)
_lm("SeedOss", num_key_value_heads=2, head_dim=8, attention_dropout=0.0, residual_dropout=0.0)
_lm("Doge", num_key_value_heads=2, keep_window_size=4, attention_dropout=0.0)
_lm("VaultGemma", num_key_value_heads=2, head_dim=8, attention_dropout=0.0)
_lm("HunYuanDenseV1", num_key_value_heads=2, head_dim=8, attention_dropout=0.0)
_lm("MiniCPM3", num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=16, qk_rope_head_dim=4, qk_nope_head_dim=4,
    v_head_dim=8, attention_dropout=0.0)
_lm("Apertus", num_key_value_heads=2, attention_dropout=0.0)
_lm("Arcee", num_key_value_heads=2, attention_dropout=0.0)
_lm("Lfm2Moe", num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
    num_dense_layers=1, layer_types=["conv", "full_attention"])
_lm("Afmoe", num_key_value_heads=2, head_dim=8, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
    num_dense_layers=1, num_shared_experts=1, attention_dropout=0.0)
_lm("Dots1", num_key_value_heads=2, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
    moe_intermediate_size=16, first_k_dense_replace=1, attention_dropout=0.0)
_lm("ModernBertDecoder", num_hidden_layers=2, intermediate_size=64, attention_dropout=0.0, mlp_dropout=0.0,
    embedding_dropout=0.0)
_lm("FalconMamba", state_size=4, expand=2, conv_kernel=3, time_step_rank=4, use_mambapy=True)


def compare(name, referee=False, elements=False):
    """Run loop ``name`` on eager CPU and on the lazy device as hunt 27's
    ``compare`` does: a cases_hunt27.Outcome."""
    import cases_hunt27

    return cases_hunt27.compare(name, referee, cases=CASES, elements=elements)


if __name__ == "__main__":  # python tests/consumers/cases_hunt41.py [names...]: a table
    from cases_hunt27 import print_table

    print_table(compare, CASES, sys.argv[1:])
