"""Greedy ``generate()`` of hybrid and vision-language transformers compiles a
bounded number of programs (issue 40) with eager's tokens.

Zamba2 and Falcon-H1 keep their attention's keys and values in a
``LinearAttentionAndFullAttentionLayer`` (a ``DynamicLayer`` beside the Mamba
state), which the generation wrapper did not mark: the keys grew a shape per
token, a compile per token (16 for 16 tokens). Qwen2-VL's
``mm_token_type_ids`` grows with the ids (``torch.cat`` of zeros per token)
and was not marked either: 16 compiles for 16 tokens. Now 2-3 each.
"""

import copy

import pytest
import torch

import lazycore.torch as ltorch

transformers = pytest.importorskip("transformers")

from _bits import BY_HAND  # noqa: E402
from _generation_models import programs  # noqa: E402 (tests/ is on the path)

_VOCAB = 48
_TEXT = dict(vocab_size=_VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=128, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def _zamba2():
    cfg = transformers.Zamba2Config(
        vocab_size=_VOCAB, hidden_size=32, num_hidden_layers=2, layers_block_type=["mamba", "hybrid"],
        num_attention_heads=4, num_key_value_heads=4, attention_head_dim=16, mamba_d_state=8, mamba_d_conv=4,
        mamba_expand=2, mamba_ngroups=1, mamba_headdim=8, n_mamba_heads=8, intermediate_size=64, num_mem_blocks=1,
        adapter_rank=4, max_position_embeddings=128, pad_token_id=0, bos_token_id=1, eos_token_id=2, chunk_size=8)
    ids = torch.randint(3, _VOCAB, (2, 7), generator=torch.Generator().manual_seed(1))
    return transformers.Zamba2ForCausalLM(cfg), dict(input_ids=ids, attention_mask=torch.ones_like(ids))


def _qwen2_vl():
    cfg = transformers.Qwen2VLConfig(
        text_config=dict(**_TEXT, head_dim=8, rope_parameters=dict(rope_type="default", rope_theta=10000.0,
                                                                    mrope_section=[2, 1, 1])),
        vision_config=dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=4,
                           spatial_merge_size=2, temporal_patch_size=2, in_channels=3),
        image_token_id=40, vision_start_token_id=41, vision_end_token_id=42, video_token_id=43)
    ids = torch.randint(3, 40, (1, 10), generator=torch.Generator().manual_seed(1))
    ids[:, 1], ids[:, 2:6], ids[:, 6] = 41, 40, 42  # a 16x16 image: 4 tokens after the 2x2 merge
    pixels = torch.randn(16, 96, generator=torch.Generator().manual_seed(2))
    return transformers.Qwen2VLForConditionalGeneration(cfg), dict(
        input_ids=ids, attention_mask=torch.ones_like(ids), mm_token_type_ids=(ids == 40).long(),
        pixel_values=pixels, image_grid_thw=torch.tensor([[1, 4, 4]]))


def _llava():
    cfg = transformers.LlavaConfig(
        vision_config=transformers.CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                                    num_attention_heads=4, image_size=16, patch_size=4),
        text_config=transformers.LlamaConfig(**_TEXT), image_token_index=40, vision_feature_layer=-2,
        vision_feature_select_strategy="default")
    ids = torch.randint(3, 40, (1, 20), generator=torch.Generator().manual_seed(1))
    ids[:, 1:17] = 40  # 16 patches of a 16x16 image
    pixels = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    return transformers.LlavaForConditionalGeneration(cfg), dict(input_ids=ids, attention_mask=torch.ones_like(ids),
                                                                 pixel_values=pixels)


@pytest.mark.parametrize("make,beams", [pytest.param(_zamba2, 1, id="zamba2", marks=BY_HAND),
                                        pytest.param(_qwen2_vl, 1, id="qwen2_vl"),
                                        pytest.param(_llava, 3, id="llava-beams")])
def test_generation_compiles_a_few_programs(make, beams, clean_runtime):
    """(LLaVA's beam search compiled a program per token, 13 for 12: its
    image features, ``mm_encoder_outputs``, which transformers hands the model
    in the prefill only, stopped the decoding step from being captured.)"""
    torch.manual_seed(0)
    model, inputs = make()
    model = model.eval()
    model.generation_config.eos_token_id = None  # random weights: an end token would cut the call short
    kw = dict(max_new_tokens=16 if beams == 1 else 12, do_sample=False, pad_token_id=0, num_beams=beams)
    want = model.generate(**inputs, **kw)
    dev = ltorch.device()
    lazy = copy.deepcopy(model).to(dev)
    before = programs()
    got = lazy.generate(**{k: v.to(dev) for k, v in inputs.items()}, **kw).cpu()
    assert torch.equal(got, want)
    assert programs() - before <= 3  # the prompt, the first decoding step, one bucket change (was 16)
