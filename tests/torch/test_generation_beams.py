"""Beam search (``generate(num_beams=...)``) on the lazy device compiles a
bounded number of programs with the default cache (issue 40 item 3), and
gives eager's tokens.

Before: the default cache grew every token, and transformers' beam
bookkeeping wrote each token at ``topk_running_sequences[:, :, cur_len]``
(and its beam at ``cur_len - decoder_prompt_len``), the length baked into
the token's graph: a program per token (tiny GPT-2, 2 beams, 8 tokens: 14
programs, 16 tokens about 22). Now the default cache decodes with a static
one (beam reordering, ``index_select`` on the batch x beam dimension, works
on it as on eager's) and the length is a program parameter
(frontends/torch/generation.py ``_wrap_top_k``)."""

import os

import pytest
import torch

import lazycore.torch as ltorch

transformers = pytest.importorskip("transformers")

from _generation_models import gpt2 as _gpt2, programs as _programs, prompts as _prompts  # noqa: E402

FULL = os.environ.get("LAZYCORE_TEST_FULL") == "1"
full_only = pytest.mark.skipif(not FULL, reason="a model run: LAZYCORE_TEST_FULL=1")


def _cold_and_warm(make, ids, mask, n, beams):
    """Programs of a cold and of a warm ``generate(num_beams=beams)`` call of
    ``n`` new tokens, each checked against eager's tokens on the same weights."""
    eager, lazy = make(), make().to(ltorch.device())
    dev = ltorch.device()
    kw = dict(max_new_tokens=n, do_sample=False, num_beams=beams)
    counts = []
    with torch.no_grad():
        want = eager.generate(ids, attention_mask=mask, **kw)
        for _ in range(2):
            before = _programs()
            got = lazy.generate(ids.to(dev), attention_mask=mask.to(dev), **kw).cpu()
            counts.append(_programs() - before)
            assert torch.equal(got, want), (got, want)
    return counts


def test_two_beams_default_cache(clean_runtime):
    # two setup reads, the prompt with the first token, the decoding token
    # (three: its first call's donations, then the reorder's column as a
    # parameter), the final cut and the result's. A program per token before
    # (8 tokens: 14); 13 with the model's ids the growing view of
    # transformers' running sequences, 10 with the reorder's index its
    # running beam indices' column (a slice the scalar policy baked until it varied)
    ids, mask = _prompts((5, 8))
    cold, warm = _cold_and_warm(_gpt2, ids, mask, 12, 2)
    assert cold <= 8, cold
    assert warm == 0


@full_only
@pytest.mark.parametrize("n", [32, 64])
def test_four_beams_long(clean_runtime, n):
    ids, mask = _prompts((5, 8))
    # 10 for 32 tokens and for 64: bounded, not a program per token
    cold, warm = _cold_and_warm(_gpt2, ids, mask, n, 4)
    assert cold <= 10, cold
    assert warm == 0


def _t5():
    from _generation_models import VOCAB

    torch.manual_seed(0)
    cfg = transformers.T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                                decoder_start_token_id=0, pad_token_id=0, eos_token_id=None)
    return transformers.T5ForConditionalGeneration(cfg).eval()


@full_only
@pytest.mark.parametrize("beams", [2, 4])
def test_encoder_decoder_beams(clean_runtime, beams):
    # tiny T5, 16 tokens: 21 programs for 12 tokens before (2 beams)
    ids, mask = _prompts((5, 8))
    cold, warm = _cold_and_warm(_t5, ids, mask, 16, beams)
    assert cold <= 8, cold
    assert warm == 0
