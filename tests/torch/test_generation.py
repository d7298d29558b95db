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


@pytest.mark.parametrize("make", [_gpt2, _llama], ids=["gpt2", "llama"])
def test_greedy_default_cache_eager_tokens_in_buckets(make):
    torch.manual_seed(0)
    model = make()
    ids = torch.randint(1, 128, (1, 5))
    kw = dict(max_new_tokens=16, do_sample=False, pad_token_id=0)
    want = model.generate(ids, **kw)
    model.to(ltorch.device())
    before = _programs()
    got = model.generate(ids.to(ltorch.device()), **kw)
    programs = _programs() - before
    assert torch.equal(got.cpu(), want)
    # before the buckets: one program per token (16 decoding programs + 5 setup);
    # now per bucket of the length (8, 16, 32) and its crossings
    assert programs <= 15, programs
