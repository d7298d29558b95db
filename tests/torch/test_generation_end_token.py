"""Greedy generate() with an end token on the lazy device (issue 40 item 3,
per-token host cost).

transformers' ``_sample`` pads the new token of every finished row with the
pad token, flags the rows that made an end token, and reads
``unfinished_sequences.max() == 0`` after every token: a wait for each
token's program. The greedy loop (frontends/torch/generation.py ``_greedy``)
pads and flags in the replayed step, reads the flags every ``_STOP_EVERY``
tokens, and cuts the ids made past eager's stop on the host: eager's tokens
and eager's length, with an end token met by some rows, by all rows (at
different tokens) or by none. These tests count reads, never time.
"""

import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from lazycore.frontends.torch import generation

transformers = pytest.importorskip("transformers")

from _bits import BY_HAND  # noqa: E402
from _generation_models import LENGTHS, gpt2 as _gpt2, programs as _programs, prompts as _prompts  # noqa: E402

N = 12


def _generate(model, ids, mask, n, ends=None):
    model.generation_config.eos_token_id = ends
    with torch.no_grad():
        return model.generate(ids, attention_mask=mask, max_new_tokens=n, do_sample=False,
                              cache_implementation="static")


def _lazy(model, ids, mask, n, ends):
    """``(tokens on the host, host reads, programs)`` of a lazy generate() call."""
    dev = ltorch.device()
    before = lazycore.metrics.counters()["transfers_to_host"], _programs()
    out = _generate(model, ids.to(dev), mask.to(dev), n, ends).cpu()
    return out, lazycore.metrics.counters()["transfers_to_host"] - before[0], _programs() - before[1]


def _ends(new: torch.Tensor):
    """``(late, ends)`` for greedy tokens ``new`` (rows, new tokens): an end
    token one row first makes after a different token (the tiny model's
    rows repeat a token, one changes mid-way), and that token with the
    first tokens of the rows that do not meet it before."""
    for r in range(new.shape[0]):
        for j in range(1, new.shape[1]):
            if int(new[r, j]) not in new[r, :j].tolist():
                late = int(new[r, j])
                early = {int(t) for t in new[:, 0] if int(t) not in new[r, :j + 1].tolist()}
                return late, [late, *sorted(early)]
    raise AssertionError(f"no row's greedy tokens change: {new}")


@pytest.fixture(scope="module")
def tokens():
    eager = _gpt2()
    ids, mask = _prompts(LENGTHS)
    free = _generate(eager, ids, mask, N)
    return ids, mask, free[:, ids.shape[1]:]


# CI: test_end_token_and_pad_given_as_lists takes the same path (row 0 ends at its first token, padded in the step)
@BY_HAND
def test_some_rows_end(clean_runtime, tokens):
    # the rows that make the end token are padded from the next token on;
    # the others run to max_new_tokens: eager's full length
    ids, mask, new = tokens
    late, _ = _ends(new)
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    want = _generate(eager, ids, mask, N, late)
    assert want.shape[-1] == ids.shape[-1] + N
    assert (want[:, ids.shape[-1]:] == eager.generation_config.pad_token_id).any()  # (a row padded)
    got, _, _ = _lazy(lazy, ids, mask, N, late)
    assert torch.equal(got, want)


def test_all_rows_end_at_different_tokens(clean_runtime, tokens):
    # every row ends, the last of them mid-way: eager stops there, shorter
    # than max_new_tokens; the lazy loop made tokens past it and cuts them
    ids, mask, new = tokens
    _, ends = _ends(new)
    rows = [i for i in range(new.shape[0]) if any(int(t) in ends for t in new[i])]
    ids, mask = ids[rows], mask[rows]
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    want = _generate(eager, ids, mask, N, ends)
    assert ids.shape[-1] + 1 < want.shape[-1] < ids.shape[-1] + N
    for _ in range(2):  # (the second call replays every step)
        got, _, programs = _lazy(lazy, ids, mask, N, ends)
        assert torch.equal(got, want)
    assert programs == 0


def test_end_token_read_every_few_tokens(clean_runtime, tokens):
    # an end token no row makes: every token made, the flags read every
    # _STOP_EVERY tokens (_sample read them every token: 16 reads more for
    # 24 tokens than for 8)
    ids, mask, new = tokens
    never = next(t for t in range(1, 128) if t not in new.tolist() and t != 0)
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    reads = {}
    for n in (24, 8, 24):  # (the first call compiles)
        want = _generate(eager, ids, mask, n, never)
        got, reads[n], programs = _lazy(lazy, ids, mask, n, never)
        assert torch.equal(got, want)
    assert programs == 0
    assert reads[24] - reads[8] == 16 // generation._STOP_EVERY, reads


def test_end_token_and_pad_given_as_lists(clean_runtime, tokens):
    # several end tokens, the pad token one of them (transformers' default
    # when no pad token is set is the first end token)
    ids, mask, new = tokens
    late, ends = _ends(new)
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    for m in (eager, lazy):
        m.generation_config.pad_token_id = late
    want = _generate(eager, ids, mask, N, [late, int(new[0, 0])])
    got, _, _ = _lazy(lazy, ids, mask, N, [late, int(new[0, 0])])
    assert torch.equal(got, want)
