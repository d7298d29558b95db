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
    # setup reads, the prompt, the per-token reads (the cache reorder's
    # length check, the early-stop heuristic: each compiled twice, the scalar
    # policy then takes their numbers as parameters), the decoding step
    # (twice: its first call's donations) and the last token; the final cut.
    # A program per token before: 18 for 12 tokens
    ids, mask = _prompts((5, 8))
    cold, warm = _cold_and_warm(_gpt2, ids, mask, 12, 2)
    assert cold <= 13, cold
    assert warm == 0


@full_only
@pytest.mark.parametrize("n", [32, 64])
def test_four_beams_long(clean_runtime, n):
    ids, mask = _prompts((5, 8))
    cold, warm = _cold_and_warm(_gpt2, ids, mask, n, 4)
    assert cold <= 14, cold
    assert warm == 0
