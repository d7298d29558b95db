"""Encoder-decoder beam search and beam sampling on the lazy device decode
each token after the first in one replay of a captured step
(frontends/torch/generation.py ``_beams``; issue 40 item 3).

Before: a tiny T5's beam search ran transformers' ``_beam_search`` (the
decoding step and the beams' bookkeeping traced op by op, a read of
whether beam search had stopped every token): 8-11 programs for a short
generation, none of its steps replayed. Beam sampling ran the same loop
(its continuations drawn from the lazy device's generator), a read every
token. Now T5's and BART's steps take the encoder's states and mask as
arguments and the cross-attention cache as it is (reordered as
transformers reorders it); beam sampling's draws are made in the captured
step, the generator's state a live tensor the step reads and updates.
These tests count programs, reads and replays, never time."""

import pytest
import torch

import lazycore
import lazycore.torch as ltorch

transformers = pytest.importorskip("transformers")

from _bits import MODEL_RUN  # noqa: E402
from _generation_models import VOCAB, gpt2 as _gpt2, programs as _programs, prompts as _prompts  # noqa: E402


def _t5():
    torch.manual_seed(0)
    cfg = transformers.T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                                decoder_start_token_id=0, pad_token_id=0, eos_token_id=None)
    return transformers.T5ForConditionalGeneration(cfg).eval()


def _bart():
    torch.manual_seed(0)
    cfg = transformers.BartConfig(vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2,
                                  encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                  decoder_ffn_dim=128, max_position_embeddings=128, pad_token_id=1, bos_token_id=0,
                                  eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=None)
    model = transformers.BartForConditionalGeneration(cfg).eval()
    config = model.generation_config
    config.eos_token_id = config.forced_eos_token_id = config.forced_bos_token_id = None  # (random weights)
    return model


def _cold_and_warm(make, n, beams, **extra):
    """``(cold programs, warm programs, (traced, replayed) steps)`` of two
    lazy ``generate(num_beams=beams)`` calls of ``n`` new tokens, each
    checked against eager's tokens on the same weights."""
    from lazycore.frontends.torch.generation import decoding_steps

    ids, mask = _prompts((5, 8))
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


@MODEL_RUN
@pytest.mark.parametrize("beams, n", [(2, 64), (4, 64)])
def test_t5_beams_long(clean_runtime, beams, n):
    # 16 tokens: test_generation_beams.py's test_encoder_decoder_beams (6 cold programs before, 3 now)
    cold, warm, steps = _cold_and_warm(_t5, n, beams)
    assert cold <= 4, cold
    assert warm == 0
    assert steps == (2, 2 * n - 4), steps


@MODEL_RUN
@pytest.mark.parametrize("beams", [2, 4])
def test_bart_beams(clean_runtime, beams):
    cold, warm, steps = _cold_and_warm(_bart, 16, beams)
    assert cold <= 4, cold
    assert warm == 0
    assert steps == (2, 28), steps


@MODEL_RUN
def test_t5_end_token(clean_runtime):
    # an end token some beams make: finished beams, pads, eager's length
    ids, mask = _prompts((5, 8))
    with torch.no_grad():
        out = _t5().generate(ids, attention_mask=mask, max_new_tokens=10, num_beams=2)
    eos = int(out[0, 3])
    cold, warm, steps = _cold_and_warm(_t5, 10, 2, eos_token_id=eos, early_stopping=True)
    assert warm == 0
    assert steps[1] > 0, steps


def _sampled(lazy, n, beams, loop: bool, seed: int = 0, **extra):
    """A beam sampling call's tokens, its programs and reads, and a draw
    from the lazy device's generator after it; ``loop``: by transformers'
    ``_beam_search`` (the reference: its draws on the lazy device)."""
    from lazycore.frontends.torch import generation

    ids, mask = _prompts((5, 8))
    dev = ltorch.device()
    saved = generation._BEAM_LOOP
    generation._BEAM_LOOP = not loop
    try:
        torch.manual_seed(seed)
        before = _programs(), lazycore.metrics.counters()["transfers_to_host"]
        with torch.no_grad():
            out = lazy.generate(ids.to(dev), attention_mask=mask.to(dev), max_new_tokens=n, do_sample=True,
                                num_beams=beams, **extra).cpu()
        counts = _programs() - before[0], lazycore.metrics.counters()["transfers_to_host"] - before[1]
        after = torch.rand(4, device=dev).cpu()
    finally:
        generation._BEAM_LOOP = saved
    return out, counts, after


@MODEL_RUN
def test_beam_sampling_replays(clean_runtime):
    # the draws transformers' loop makes on the lazy device, in one replay
    # per token: before, a read (a wait and a copy) every token
    from lazycore.frontends.torch.generation import decoding_steps

    lazy = _gpt2().to(ltorch.device())
    want, _, want_after = _sampled(lazy, 12, 2, loop=True)
    got, (cold, _), got_after = _sampled(lazy, 12, 2, loop=False)
    assert torch.equal(got, want), (got, want)
    assert torch.equal(got_after, want_after)  # the generator left where the loop leaves it
    assert int(got.min()) >= 0 and int(got.max()) < VOCAB
    traced, replayed = decoding_steps(lazy)
    assert replayed >= 8, (traced, replayed)
    again, (warm, reads), _ = _sampled(lazy, 12, 2, loop=False, seed=1)
    assert warm == 0
    assert reads <= 3, reads  # (setup reads and the result: no read per token; 14 before)


@MODEL_RUN
def test_beam_sampling_end_token(clean_runtime):
    # beams end at an end token: the step's draws after beam search stopped
    # (read every 8 tokens) leave the generator's state as it was
    lazy = _gpt2().to(ltorch.device())
    want, _, _ = _sampled(lazy, 24, 2, loop=True)
    eos = int(want[0, 8 + 3])
    want, _, want_after = _sampled(lazy, 24, 2, loop=True, eos_token_id=eos, pad_token_id=0, early_stopping=True)
    got, _, got_after = _sampled(lazy, 24, 2, loop=False, eos_token_id=eos, pad_token_id=0, early_stopping=True)
    assert torch.equal(got, want), (got, want)
    assert torch.equal(got_after, want_after)
