"""Programs a cold transformers generate() call compiles on the lazy device
(issue 40 item 3), and its tokens equal to eager's greedy tokens. A call
compiles the small reads of generate()'s setup, the prompt's program, and
the decoding's programs, which the bounds below count apart.

What compiled before (a tiny GPT-2, 16 to 24 new tokens):
- one prompt, default cache: every token a program of its own before the
  shape buckets; with them a first-token donation variant, a last-token
  variant (the max-length criterion's True folded) and a sequence length
  equal to the head dimension (16) each compiled one more, and the scalar
  policy promoted a constant of the second token's attention (it met the
  prompt's at one step-log position and line). Now one program decodes
  every token.
- eight left-padded prompts, default cache: one program per token (the
  padding mask's lookup at every key position refused the buckets); then
  the mask check transformers reads every token and the decoding step, two,
  and two mask checks in the prompt. Now the checks read nothing (the
  prompts' mask holds a zero, read once as data; the masks grown from it by
  torch.cat keep it): one program decodes.
- static cache, one and eight prompts: a donation variant, the second
  token (the cache's filled length, a CPU tensor, baked into the first
  token's program) and the last token (its attention mask as long as the
  cache, no pad) each compiled one more. Now one.
"""

import pytest
import torch

import lazycore
import lazycore.torch as ltorch

transformers = pytest.importorskip("transformers")

from _bits import BY_HAND  # noqa: E402
from _generation_models import (  # noqa: E402,F401
    LENGTHS, ONE_AND_MANY, VOCAB, gpt2 as _gpt2, programs as _programs, prompts as _prompts)


def _programs_of_call(make, lengths, n, cache, masked=True) -> int:
    """The programs a cold ``generate()`` call of ``n`` new tokens compiles
    (with the prompts' attention mask unless not ``masked``); its tokens
    checked against eager's."""
    eager, lazy = make(), make().to(ltorch.device())
    ids, mask = _prompts(lengths)
    dev = ltorch.device()
    kw = dict(max_new_tokens=n, do_sample=False)
    if cache == "static":
        kw["cache_implementation"] = "static"
    with torch.no_grad():
        want = eager.generate(ids, attention_mask=mask if masked else None, **kw)
        before, tokens = _programs(), lazycore.metrics.counters()["generated_tokens"]
        got = lazy.generate(ids.to(dev), attention_mask=mask.to(dev) if masked else None, **kw).cpu()
    programs = _programs() - before
    assert torch.equal(got, want), (got, want)
    assert got.shape[-1] == (1 if eager.config.is_encoder_decoder else ids.shape[-1]) + n  # (the decoder's start token)
    # lazycore.metrics counts the model calls on the lazy device: one per new token
    assert lazycore.metrics.counters()["generated_tokens"] - tokens == n
    return programs


# CI: test_static_cache[8-prompts], test_sixty_four_tokens_programs take default-as-static's path (a static cache)
@pytest.fixture(params=[pytest.param(True, marks=BY_HAND), False], ids=["default-as-static", "default-cache"])
def static_for_default(request, monkeypatch):
    """Both ways of asking for the default cache: a static one where nobody
    sees the cache (frontends/torch/generation.py), and the default cache
    itself in buckets."""
    from lazycore.ir.config import settings

    monkeypatch.setattr(settings, "generation_static_cache", request.param)
    return request.param


def test_one_prompt_default_cache(clean_runtime, static_for_default):
    # the setup's two small reads, the prompt, one program for 24 tokens
    # whose lengths 9..31 cross the head dimension (16); the scalar policy
    # keeps the prompt's and the decoding's numbers at one step-log position
    # and line apart (sdpa's scale 0.5, a decoding mask's 0.0), so the
    # second token promotes nothing and compiles no program of its own
    assert _programs_of_call(_gpt2, (8,), 24, "dynamic") <= 4


def test_left_padded_prompts_default_cache(clean_runtime, static_for_default):
    # generate()'s three setup reads of a batch of 8, the prompt, and the
    # decoding step; transformers' padding-mask checks (two in the prompt,
    # one every token) need no read: the prompts' mask holds a zero, as the
    # masks grown from it do
    assert _programs_of_call(_gpt2, LENGTHS, 16, "dynamic") <= 5


@pytest.mark.parametrize("lengths", ONE_AND_MANY)
def test_static_cache(clean_runtime, lengths):
    # the setup's small reads (2 for one prompt, 3 for a batch of 8), the
    # prompt, and one program for every later token; the prompt's check of
    # its padded mask (transformers' fast_all of its first positions) reads
    # nothing
    assert _programs_of_call(_gpt2, lengths, 16, "static") <= (2 if len(lengths) == 1 else 3) + 2


def _t5():
    torch.manual_seed(0)
    cfg = transformers.T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                                decoder_start_token_id=0, pad_token_id=0, eos_token_id=None)
    model = transformers.T5ForConditionalGeneration(cfg).eval()
    model.generation_config.eos_token_id = None
    return model


@pytest.mark.parametrize("cache", [pytest.param("dynamic", marks=BY_HAND), "static"])
def test_encoder_decoder(clean_runtime, cache):
    # one prompt, no attention mask (generate()'s setup then reads nothing):
    # the encoder, the decoder's first token, then decoding: one program with
    # the static cache; with the default one the second token's too (the
    # first token's cache holds one position, which no bucket pads) and one
    # where the decoder's length is the encoder's (8)
    assert _programs_of_call(_t5, (8,), 16, cache, masked=False) <= (5 if cache == "dynamic" else 3)


@pytest.mark.parametrize("cache", ["static", pytest.param("dynamic", marks=BY_HAND)])
def test_other_prompt_length_decodes_with_programs_made(clean_runtime, cache):
    # transformers keeps a static cache as long as the longest call's before
    # it; the growing sequence is padded to that length, not each call's own
    # max_length, so a prompt of another length compiles its prompt's
    # programs (its setup reads and prefill, as a call of one new token
    # does) and no decoding program. It compiled one per new length before.
    # (asked for the default cache: a static one too, where nobody sees it)
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    dev = ltorch.device()
    kw = dict(do_sample=False, **({"cache_implementation": "static"} if cache == "static" else {}))

    def generate(model, length, n, on=None):
        ids, mask = _prompts((length,))
        if on is not None:
            ids, mask = ids.to(on), mask.to(on)
        with torch.no_grad():
            return model.generate(ids, attention_mask=mask, max_new_tokens=n, **kw).cpu()

    for length in (12, 8):  # the longest first: the cache's length from here on
        assert torch.equal(generate(lazy, length, 8, dev), generate(eager, length, 8))
    generate(lazy, 10, 1, dev)  # the new prompt's own programs
    before = _programs()
    assert torch.equal(generate(lazy, 10, 8, dev), generate(eager, 10, 8))
    assert _programs() == before


# CI: test_sampled_tokens_are_eagers (its second sampling call compiles nothing) takes the same path
@BY_HAND
def test_a_second_sampling_call_compiles_nothing(clean_runtime):
    # the lazy device's random state is a handle that the first draw made;
    # made at the first call's first token it came after that call's own
    # tensors among the barrier's outputs, and before a later call's, so
    # the second call's prompt and decoding programs took their parameters
    # in another order and compiled again (2 programs). It is made before
    # a sampling call's tensors now. Sampled tokens are lazycore's own
    # (eager draws other numbers), so the calls are compared with each other.
    lazy = _gpt2().to(ltorch.device())
    ids, mask = _prompts((8,))
    dev = ltorch.device()

    def sample():
        with torch.no_grad():
            return lazy.generate(ids.to(dev), attention_mask=mask.to(dev), max_new_tokens=8, do_sample=True).cpu()

    torch.manual_seed(0)
    first = sample()
    before = _programs()
    second = sample()
    assert _programs() == before
    assert second.shape == first.shape and not torch.equal(second, first)  # the stream moved on
    torch.manual_seed(0)
    assert torch.equal(sample(), first)  # reseeded: the first call's draws again
    assert _programs() == before
