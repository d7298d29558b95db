"""Beam search (``generate(num_beams=...)``) on the lazy device compiles a
bounded number of programs with the default cache (issue 40 item 3), and
gives eager's tokens.

Before: the default cache grew every token, and transformers' beam
bookkeeping wrote each token at ``topk_running_sequences[:, :, cur_len]``
(and its beam at ``cur_len - decoder_prompt_len``), the length baked into
the token's graph: a program per token (tiny GPT-2, 2 beams, 8 tokens: 14
programs, 16 tokens about 22). Then the default cache decoded with a static
one and the length was a program parameter (8 programs for 12 or 16
tokens, 10 for 4 beams): transformers' loop still read whether beam search
had stopped every token (a barrier, a wait) and traced the model and the
bookkeeping op by op. Now beam search decodes in one captured step per
token (frontends/torch/generation.py ``_beams``): the model's step, the
bookkeeping with the length on the device, the cache's reorder; the stop
is a flag on the device, read every 8 tokens where an end token can stop
it early."""

import pytest
import torch

import lazycore
import lazycore.torch as ltorch

transformers = pytest.importorskip("transformers")

from _bits import BY_HAND, MODEL_RUN  # noqa: E402
from _generation_models import VOCAB, gpt2 as _gpt2, programs as _programs, prompts as _prompts  # noqa: E402


def _cold_and_warm(make, ids, mask, n, beams, **extra):
    """Programs of a cold and of a warm ``generate(num_beams=beams)`` call of
    ``n`` new tokens, each checked against eager's tokens on the same weights,
    and the lazy model's decoding steps ``(traced, replayed)``."""
    from lazycore.frontends.torch.generation import decoding_steps

    eager, lazy = make(), make().to(ltorch.device())
    dev = ltorch.device()
    kw = dict(max_new_tokens=n, do_sample=False, num_beams=beams, **extra)
    counts = []
    with torch.no_grad():
        want = eager.generate(ids, attention_mask=mask, **kw)
        for _ in range(2):
            before = _programs()
            got = lazy.generate(ids.to(dev), attention_mask=mask.to(dev), **kw).cpu()
            counts.append(_programs() - before)
            assert torch.equal(got, want), (got, want)
    return (*counts, decoding_steps(lazy))


# CI: test_end_token_ends_beams[default] (these prompts, 2 beams, cold and warm), llava-beams (a cold call's programs)
@BY_HAND
def test_two_beams_default_cache(clean_runtime):
    # two setup reads, the prompt with the first token, one decoding step
    # for every later token. A program per token before (8 tokens: 14);
    # 8 with transformers' loop, the length a parameter
    ids, mask = _prompts((5, 8))
    cold, warm, steps = _cold_and_warm(_gpt2, ids, mask, 12, 2)
    assert cold <= 4, cold
    assert warm == 0
    # two traced (recorded) steps, then every later token of both calls replays
    assert steps == (2, 9 + 11), steps


@MODEL_RUN
def test_static_cache_beams(clean_runtime):
    # the static cache asked for: the same two programs decode (the prompt's, the step's)
    ids, mask = _prompts((5, 8))
    cold, warm, _ = _cold_and_warm(_gpt2, ids, mask, 10, 3, cache_implementation="static")
    assert cold <= 4, cold
    assert warm == 0


def _eos_of(model, ids, mask, n, beams, at):
    """A token eager's beam search makes at new position ``at`` of its first
    row: an end token that ends some beams early."""
    with torch.no_grad():
        out = model.generate(ids, attention_mask=mask, max_new_tokens=n, do_sample=False, num_beams=beams)
    return int(out[0, ids.shape[1] + at])


@pytest.mark.parametrize("early, penalty", [(False, 1.0), pytest.param(True, 1.0, marks=BY_HAND),
                                            pytest.param("never", 0.7, marks=BY_HAND)],
                         ids=["default", "early", "never-penalty"])
def test_end_token_ends_beams(clean_runtime, early, penalty):
    # some beams end at an end token (finished beams kept by their
    # length-penalised scores, the early-stop heuristic, a pad token
    # after them): eager's ids and eager's length, for early_stopping
    # False, True and "never" with a length penalty
    ids, mask = _prompts((5, 8))
    eos = _eos_of(_gpt2(), ids, mask, 10, 2, 2)
    cold, warm, steps = _cold_and_warm(_gpt2, ids, mask, 10, 2, eos_token_id=eos, pad_token_id=0,
                                       early_stopping=early, length_penalty=penalty)
    assert warm == 0
    assert steps[1] > 0, steps  # (decoded by the captured step, not transformers' loop)


@MODEL_RUN
def test_returned_sequences(clean_runtime):
    ids, mask = _prompts((5, 8))
    cold, warm, _ = _cold_and_warm(_gpt2, ids, mask, 6, 3, num_return_sequences=2)
    assert warm == 0


@MODEL_RUN
def test_decoding_step_replays(clean_runtime):
    # every token after the first two (recorded) replays the captured step
    from lazycore.frontends.torch.generation import decoding_steps

    ids, mask = _prompts((5, 8))
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    dev = ltorch.device()
    with torch.no_grad():
        want = eager.generate(ids, attention_mask=mask, max_new_tokens=12, num_beams=2)
        got = lazy.generate(ids.to(dev), attention_mask=mask.to(dev), max_new_tokens=12, num_beams=2).cpu()
    assert torch.equal(got, want)
    traced, replayed = decoding_steps(lazy)
    assert traced == 2 and replayed == 9, (traced, replayed)


@MODEL_RUN
def test_beam_sampling_bounded(clean_runtime):
    # beam sampling (the draws are the lazy device's own generator's, not
    # eager's) wrote the sampled token at the length baked in until the
    # scalar policy made it a parameter: cold calls compiled 10 programs
    # for 12 tokens, 12 for 24; then 6 for either in transformers' loop;
    # now the captured beam step (test_generation_beams_seq2seq.py)
    lazy = _gpt2().to(ltorch.device())
    ids, mask = _prompts((5, 8))
    dev = ltorch.device()

    def sample(n):
        before = _programs()
        with torch.no_grad():
            out = lazy.generate(ids.to(dev), attention_mask=mask.to(dev), max_new_tokens=n, do_sample=True,
                                num_beams=2).cpu()
        assert out.shape == (2, 8 + n) and int(out.min()) >= 0 and int(out.max()) < VOCAB
        return _programs() - before

    torch.manual_seed(0)
    cold = sample(24)
    assert cold <= 4, cold
    assert sample(24) == 0


@MODEL_RUN
@pytest.mark.parametrize("n", [32, 64])
def test_four_beams_long(clean_runtime, n):
    ids, mask = _prompts((5, 8))
    # 10 for 32 tokens and for 64 with transformers' loop; bounded, not a program per token
    cold, warm, _ = _cold_and_warm(_gpt2, ids, mask, n, 4)
    assert cold <= 4, cold
    assert warm == 0


def _t5():
    torch.manual_seed(0)
    cfg = transformers.T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                                decoder_start_token_id=0, pad_token_id=0, eos_token_id=None)
    return transformers.T5ForConditionalGeneration(cfg).eval()


@MODEL_RUN
@pytest.mark.parametrize("beams", [2, 4])
def test_encoder_decoder_beams(clean_runtime, beams):
    # tiny T5, 16 tokens: 21 programs for 12 tokens before (2 beams), then
    # 6-8 with transformers' loop; now the captured beam step (more cases:
    # test_generation_beams_seq2seq.py): the prompt's programs and the step's
    ids, mask = _prompts((5, 8))
    cold, warm, steps = _cold_and_warm(_t5, ids, mask, 16, beams)
    assert cold <= 4, cold
    assert warm == 0
    assert steps == (2, 13 + 15), steps  # (two recorded, every later token of both calls replayed)
