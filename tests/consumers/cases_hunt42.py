"""The loops of test_hunt42_torch.py: transformers causal LMs no earlier hunt
trained (hunts 24-41, tests/zoo and tests/torch list what was), each a tiny
random config (nothing downloaded) trained as hunt 41's are (cases_hunt36.py's
loop: AdamW with decay groups, a warm-up schedule, clipping), compared by hunt
27's ``compare``. ``python tests/consumers/cases_hunt42.py [names]`` prints the
table.

Models: Llama 4's text model (chunked attention, layers without rotary
embeddings, a routed expert beside a shared one), Hunyuan MoE, ERNIE 4.5 MoE,
Ministral (sliding-window layers), MiniMax-M2, GLM-4 MoE (grouped routing,
shared experts) and LongCat-Flash (latent attention, identity "zero" experts
routed beside the others, two attention blocks a layer).

Not here: Phi-3.5-MoE (``Phimoe``), whose router samples its experts while
training (``sparsemixer``'s ``exponential_()`` draws), and the lazy device's
random numbers are its own generator's, as CUDA's are (docs/guides/torch.md).
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


def _lm(name, model=None, **kw):
    """A causal LM case of ``name`` (its Config class; its ForCausalLM class, or ``model``) over the tiny config."""
    def loop(device, each, dtype=torch.float32):
        build = _hf(f"{name}Config", model or f"{name}ForCausalLM", **{**_SMALL, **kw})
        return _hf_loop(device, each, dtype, build, _causal_batch, schedule="cosine")

    loop.__name__ = loop.__qualname__ = name.lower() + "_causal_lm"
    loop.__doc__ = f"{model or name + 'ForCausalLM'}, a left-padded batch."
    return case(loop)


_lm("Llama4Text", model="Llama4ForCausalLM", num_key_value_heads=2, head_dim=8, num_local_experts=4,
    num_experts_per_tok=1, intermediate_size_mlp=64, interleave_moe_layer_step=1, attention_chunk_size=4,
    no_rope_layers=[1, 0], attention_dropout=0.0)
_lm("HunYuanMoEV1", num_key_value_heads=2, head_dim=8, num_experts=4, moe_topk=2, attention_dropout=0.0)
_lm("Ernie4_5_Moe", num_key_value_heads=2, head_dim=8, moe_num_experts=4, moe_k=2, moe_intermediate_size=16,
    moe_layer_start_index=1)
_lm("Ministral", num_key_value_heads=2, head_dim=8, sliding_window=4,
    layer_types=["sliding_attention", "full_attention"], attention_dropout=0.0)
_lm("MiniMaxM2", num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=2,
    attention_dropout=0.0)
_lm("Glm4Moe", num_key_value_heads=2, head_dim=8, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
    moe_intermediate_size=16, first_k_dense_replace=1, n_group=1, topk_group=1, attention_dropout=0.0)
_lm("LongcatFlash", num_layers=2, num_key_value_heads=4, head_dim=4, qk_head_dim=8, kv_lora_rank=16, q_lora_rank=16,
    qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8, n_routed_experts=4, moe_topk=2, zero_expert_num=1,
    expert_ffn_hidden_size=16, ffn_hidden_size=64, attention_dropout=0.0)


def compare(name, referee=False, elements=False):
    """Run loop ``name`` on eager CPU and on the lazy device as hunt 27's
    ``compare`` does: a cases_hunt27.Outcome."""
    import cases_hunt27

    return cases_hunt27.compare(name, referee, cases=CASES, elements=elements)


if __name__ == "__main__":  # python tests/consumers/cases_hunt42.py [names...]: a table
    from cases_hunt27 import print_table

    print_table(compare, CASES, sys.argv[1:])
