"""transformers' greedy generate() on the lazy device: eager's tokens, and the
growing sequence (ids, mask, DynamicCache) padded to buckets so tokens of one
bucket share a program (frontends/torch/generation.py, runtime/padding.py's
append and tail-slice rules)."""

import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from lazycore.ir.config import settings

transformers = pytest.importorskip("transformers")

from _bits import BY_HAND  # noqa: E402


def _programs():
    c = lazycore.metrics.counters()
    return c["compiles"] + c.get("disk_cache_hits", 0)


def _gpt2():
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=128)
    return transformers.GPT2LMHeadModel(cfg).eval()


def _llama():
    cfg = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                                   max_position_embeddings=128)
    return transformers.LlamaForCausalLM(cfg).eval()


def test_append_and_tail_slice_share_a_program():
    """torch.cat along a marked dimension and x[:, -1:] of it: one program per bucket."""
    dev = ltorch.device()
    torch.manual_seed(0)
    x = torch.randn(2, 5, 3)
    lx = ltorch.dynamic(x.to(dev), 1)
    programs = []
    for _ in range(11):  # 6..16: buckets 8 and 16
        new = torch.randn(2, 1, 3)
        x, lx = torch.cat([x, new], 1), torch.cat([lx, new.to(dev)], 1)
        want = x[:, -1:] * 2 + x.sum(1, keepdim=True)
        got = lx[:, -1:] * 2 + lx.sum(1, keepdim=True)
        before = _programs()
        ltorch.mark_step()
        programs.append(_programs() - before)
        torch.testing.assert_close(got.cpu(), want)
        assert torch.equal(lx.cpu(), x)
    # 6, 7, 8 share one (the second compile is the donation variant), 9..16 another
    assert sum(programs) <= 4, programs


def _generate(make, ids, mask, n, cache):
    torch.manual_seed(0)
    model = make()
    kw = dict(max_new_tokens=n, do_sample=False, pad_token_id=0)
    if cache != "dynamic":
        kw["cache_implementation"] = cache
    if mask is not None:
        kw_cpu, kw_lazy = {"attention_mask": mask}, {"attention_mask": mask.to(ltorch.device())}
    else:
        kw_cpu = kw_lazy = {}
    want = model.generate(ids, **kw, **kw_cpu)
    model.to(ltorch.device())
    before, tokens = _programs(), lazycore.metrics.counters()["generated_tokens"]
    got = model.generate(ids.to(ltorch.device()), **kw, **kw_lazy)
    # lazycore.metrics counts the new tokens (compiles per generated token)
    assert lazycore.metrics.counters()["generated_tokens"] - tokens == got.shape[-1] - ids.shape[-1]
    return got.cpu(), want, _programs() - before


@pytest.mark.parametrize("cache", ["dynamic", "static"])
@pytest.mark.parametrize("make", [_gpt2, _llama], ids=["gpt2", "llama"])
def test_greedy_one_prompt_eager_tokens_few_programs(make, cache):
    torch.manual_seed(1)
    ids = torch.randint(1, 128, (1, 5))
    got, want, programs = _generate(make, ids, None, 24, cache)
    assert torch.equal(got, want)
    # before: a program per token (24 + 5 for the setup and the prompt). Now
    # the setup's small programs and the prompt's (about 5), then decoding:
    # the first token's, its donation variant, the last token's (the length
    # criterion's True), and a length equal to another dimension (16, the
    # head dimension) at most once
    assert programs <= 10, programs


# CI: test_static_cache[8-prompts] (gpt2), test_llama_decoding_replays (llama) take the same path
@BY_HAND
@pytest.mark.parametrize("make", [_gpt2, _llama], ids=["gpt2", "llama"])
def test_greedy_two_prompts_left_padded_eager_tokens(make):
    torch.manual_seed(2)
    ids = torch.randint(1, 128, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.long)
    ids[1, :3], mask[1, :3] = 0, 0
    got, want, programs = _generate(make, ids, mask, 16, "static")
    assert torch.equal(got, want)
    assert programs <= 10, programs


# CI: test_left_padded_prompts_default_cache[default-cache], test_default_cache_decodes_with_a_static_one take the path
@BY_HAND
def test_greedy_two_prompts_left_padded_default_cache_eager_tokens():
    """A default cache with left-padded prompts: the padding mask's lookup at
    every key position (a gather along the padded length, its index clamped
    to the valid length) keeps eager's tokens (programs per call:
    tests/torch/test_generation_programs.py)."""
    torch.manual_seed(3)
    ids = torch.randint(1, 128, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.long)
    ids[1, :3], mask[1, :3] = 0, 0
    got, want, _ = _generate(_gpt2, ids, mask, 12, "dynamic")
    assert torch.equal(got, want)
