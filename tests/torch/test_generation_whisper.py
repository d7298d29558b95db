"""Whisper's generate() on the lazy device (issue 40 item 3): a bounded
number of programs for the whole call with the default cache, eager's tokens.

A tiny random Whisper's 6 tokens compiled 13 programs: the encoder and the
first token; the second token (its decoder cache holds one position, which
no bucket pads); the third (a cache of two met the batch and head counts of
2 in the padded graph: another variant); the fourth; and 7 small programs
of Whisper's post-processing, which reads each row's last token, counts its
pad tokens and takes ``tolist()`` of it, then the caller's own read. Now the
default cache decodes with a static one where nobody sees it (as for
decoder-only models), and generate()'s ids come back with a host copy, so
those reads run no program: 4 programs, then 0 in a warm call.
"""

import copy

import pytest
import torch

import lazycore
import lazycore.torch as ltorch

transformers = pytest.importorskip("transformers")

from _generation_models import programs as _programs  # noqa: E402


def _whisper():
    cfg = transformers.WhisperConfig(
        vocab_size=60, d_model=16, encoder_layers=1, decoder_layers=2, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, num_mel_bins=8, max_source_positions=8,
        max_target_positions=16, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
        suppress_tokens=None, begin_suppress_tokens=None)
    torch.manual_seed(3)
    return transformers.WhisperForConditionalGeneration(cfg).eval()


def _features(seed):
    return torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(seed))


def test_whisper_generate_compiles_four_programs_and_reads_nothing_after(clean_runtime):
    model = _whisper()
    eager = copy.deepcopy(model)
    dev = ltorch.device()
    lazy = model.to(dev)
    kw = dict(max_new_tokens=6, do_sample=False, num_beams=1)
    with torch.no_grad():
        for seed in (9, 10):  # a cold call, then a warm one on other audio
            want = eager.generate(input_features=_features(seed), **kw)
            before, reads = _programs(), lazycore.metrics.counters().get("host_reads", 0)
            got = lazy.generate(input_features=_features(seed).to(dev), **kw).cpu()
            assert torch.equal(got, want), (got, want)
            # the encoder and first token, the second token, the replayed later
            # tokens (was 13 cold: 2 per first tokens, 2 variants, 7 reads)
            assert _programs() - before <= (4 if seed == 9 else 0)
            # Whisper's post-processing reads (2 per row, a tolist per row) and ours
            assert lazycore.metrics.counters()["host_reads"] - reads >= 7
