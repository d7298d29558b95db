"""Greedy generate() of models with sliding-window attention layers on the
lazy device (issue 40 item 3): eager's tokens, one program run per token,
and a number of compiled programs that does not grow with the tokens.

A sliding-window layer (transformers' ``StaticSlidingWindowLayer``: every
layer of Mistral, every other one of GPT-OSS) is no layer a captured
decoding step takes, so the tokens are traced op by op. The greedy driver
(frontends/torch/generation.py ``_greedy``) skipped its per-token barrier
whenever the decoding call was the captured step's object, captured or not:
a whole call's tokens ran as one program (12 tokens of the tiny Mistral:
~5,000 nodes, 16 s to compile at load 15), and a call of another length was
another such program.

The prompt (3 positions) is shorter than the window (4), so the tokens go
through the cache's three phases: filling (an ``index_copy_`` at the filled
length), full (a roll), and the mask's ``kv_offset`` (a Python int) moving
from 0 to 1, 2, ...: the prompt, the filling token and the full cache's
graph compile; every later token and a second call compile nothing. The
full cache compiled two or three graphs more before (tests/torch/
test_int_arguments.py has them in small): the offset, an int of the
recording's key, was baked at 1 and promoted a token later, and its
parameter was one node with another int of equal value (the cache's
``roll(-1)`` at offset 1, the window's 4 at offset 4), a program with one
parameter fewer.

A window of 8 and a prompt of 6 compiled one program more (4): the cache's
``index_copy_`` bound (transformers' cache_utils.py:607) holds the window's
8, met by the filling token's padded walk while the ids were 7 long, before
the token's ``cat`` made them 8; the next token (8 long from the start) read
it as the ids' size parameter. Padding now learns such a number where it
meets it (tests/torch/test_size_literal_before_append.py has it in small).
"""

import pytest
import torch

import lazycore
import lazycore.torch as ltorch

transformers = pytest.importorskip("transformers")

from _bits import FULL  # noqa: E402
from _generation_models import VOCAB, programs as _programs, prompts as _prompts  # noqa: E402

_TOKENS = dict(bos_token_id=0, eos_token_id=None, pad_token_id=0)


def _ready(model):
    model = model.eval()
    model.generation_config.eos_token_id = None  # random weights: an end token would cut calls short
    model.generation_config.pad_token_id = 0
    return model


def _mistral(window):
    torch.manual_seed(0)
    cfg = transformers.MistralConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                     sliding_window=window, **_TOKENS)
    return _ready(transformers.MistralForCausalLM(cfg))


def _gpt_oss(window):
    torch.manual_seed(0)
    cfg = transformers.GptOssConfig(vocab_size=VOCAB, max_position_embeddings=128, hidden_size=64,
                                    intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                    num_key_value_heads=2, head_dim=16, num_local_experts=4, num_experts_per_tok=2,
                                    sliding_window=window, layer_types=["sliding_attention", "full_attention"],
                                    **_TOKENS)
    return _ready(transformers.GptOssForCausalLM(cfg))


_N = 12


_LONG = pytest.mark.skipif(not FULL, reason="~1 min a case: LAZYCORE_TEST_FULL=1 (CI runs mistral-static)")


@pytest.mark.parametrize("window, prompt", [(4, 3), pytest.param(8, 6, marks=_LONG)], ids=["w4p3", "w8p6"])
@pytest.mark.parametrize("cache", [pytest.param("default", marks=_LONG), "static"])
@pytest.mark.parametrize("make", [_mistral, pytest.param(_gpt_oss, marks=_LONG)], ids=["mistral", "gpt-oss"])
def test_sliding_window_tokens_one_program_each(clean_runtime, make, cache, window, prompt):
    eager, lazy = make(window), make(window).to(ltorch.device())
    ids, mask = _prompts((prompt,))
    dev = ltorch.device()
    kw = dict(max_new_tokens=_N, do_sample=False)
    if cache == "static":
        kw["cache_implementation"] = "static"
    with torch.no_grad():
        want = eager.generate(ids, attention_mask=mask, **kw)
        calls = []
        for _ in range(2):
            before, runs = _programs(), lazycore.metrics.counters()["executions"]
            got = lazy.generate(ids.to(dev), attention_mask=mask.to(dev), **kw).cpu()
            calls.append((_programs() - before, lazycore.metrics.counters()["executions"] - runs))
            assert torch.equal(got, want), (got, want)
    (first, runs), (second, _) = calls
    # the prompt and every later token a program run of its own (the last
    # token's argmax runs with the ids' read): before, 1 for the whole call
    assert runs >= _N, calls
    # the prompt, the filling token, the full cache's graph (before: 5,
    # whatever the number of tokens; 4 at window 8, prompt 6); a second
    # call compiles nothing
    assert first <= 3 and second == 0, calls
